"""A guard on the suite itself (an AST scan of tests/, the tests' helpers and the plugin's
tests): the weaknesses audits of the suite found do not come back. Each rule is a function
over parsed modules, run on the suite and on probes of what it must catch (the second half of
this file), so a rule that stops catching fails here too.

The rules: each test checks something (an assert that can fail, `pytest.raises`, or a helper
that raises when its check fails); no assertion is swallowed (no `suppress` or `raises` of any
exception, however spelt; no broad `except` that neither raises nor keeps what it caught); a
daemon thread, however made, is one whose death or silence was reviewed; no upper bound on a
clock, however named (a `join(N)` with `is_alive` included), outside the reviewed ones and
`sooner_than`; nothing is skipped or expected to fail outside tests/kind (and under CI nothing
may be: tests/conftest.py); a golden file is never written under CI.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
HELPERS = TESTS.parent / "clusters" / "helpers"  # the tests' helpers that benchmarks use too
PLUGIN_TESTS = TESTS.parent / "plugin" / "tests"  # the kubectl plugin's own (Python 3.10 on)
BENCHMARK_TESTS = TESTS.parent / "benchmarks" / "test_compare.py"

Module = tuple[str, ast.Module]  # (its path from tests/ or the helpers' parent, its tree)
Function = ast.FunctionDef | ast.AsyncFunctionDef

# Helpers that raise when what they check does not hold: functions called by their bare name
# (clusters/helpers/waiting.py, the builtin `compile`, which raises SyntaxError, and a
# module's own helpers that check), and methods called on anything (tests/support's
# MultiKueue.wait_until, clusters/helpers' wait_condition and wait_healthy), plus
# `pytest.raises`. A name shared with a call that checks nothing (Condition.wait_for,
# asyncio.wait_for, re.compile, Event.wait) never counts as a check.
CHECKING_FUNCTIONS = {"wait_for", "stays_false", "sooner_than", "compile"}
CHECKING_METHODS = {"wait_until", "wait_condition", "wait_healthy"}
BROAD = {"Exception", "BaseException", "AssertionError"}

# Daemon threads in tests, reviewed: (file, function) -> why a dead or stuck thread fails the
# test rather than letting a check pass without it. (A thread's exception is an error of the
# test besides: pyproject.toml's filterwarnings.)
REVIEWED_DAEMONS = {
    (
        "bed/test_client.py",
        "test_a_watch_hands_over_each_event_as_it_comes_and_ends_with_the_server",
    ): ("the test reads each event off a queue with a timeout: a dead watch fails it"),
    (
        "bed/test_client.py",
        "test_a_paused_stream_holds_up_no_other_stream_of_the_shared_connection",
    ): ('each thread\'s last act is recorded ("ended", "read") and asserted or waited for'),
    ("bed/test_leader.py", "_within"): "joined; the test fails while it is alive",
    ("conftest.py", "silent_server"): "a loopback server the tests talk to, not an observer",
    (
        "e2e/test_progress.py",
        "test_a_chatty_pod_costs_one_write_per_interval_and_its_last_report_is_kept",
    ): ("what it sees is waited for with wait_for, which fails on a dead watcher"),
    ("local/test_serving.py", "__init__"): "the attacker's connections, not an observer",
    ("local/test_transfers.py", "_in_thread"): (
        "joined with a bound; each test then checks what the thread left, or that it ended"
    ),
    (
        "local/test_transport.py",
        "test_a_request_without_a_timeout_ends_when_its_answer_stops_coming",
    ): ("joined; the test fails while it is alive and reads what it recorded"),
    ("real/test_real_nodes.py", "test_dispatcher_failover_keeps_creates_working"): (
        "the creator records what stopped it, and the test asserts it did not stop early"
    ),
    ("real/test_upgrade.py", "flight"): "Flight.failure and Flight.looked, checked by _ran_once",
    ("real/test_upgrade.py", "_during"): "Flight.failure, checked as the creator is joined",
    ("helpers/kube.py", "workloads_seen"): "its failure is asserted as the block ends",
    ("helpers/waiting.py", "http_server"): "a loopback server the test talks to",
}

CLOCKS = {"monotonic", "perf_counter", "process_time", "thread_time", "time"}
CLOCKS |= {f"{c}_ns" for c in CLOCKS} | {"now", "utcnow"}

# Upper bounds on a clock left in tests, reviewed: (file, function) -> why it is not a speed.
REVIEWED_CLOCK_BOUNDS = {
    ("real/test_upgrade.py", "_ran_once"): (
        "a liveness check: the Job watcher looks every second; 10 s without a look is a dead"
        " or stuck watcher, which would make 'ran once' pass without looking"
    ),
    ("bed/test_leader.py", "_within"): (
        "the lease's retry period and the write budget are what the tests check (14 s against"
        " a budget of a few seconds); a call still waiting past them is the bug"
    ),
    (
        "local/test_transport.py",
        "test_a_request_without_a_timeout_ends_when_its_answer_stops_coming",
    ): ("15 s against libcurl's low-speed limit of 1 s here; without it the call never ends"),
    ("real/test_real_nodes.py", "test_dispatcher_failover_keeps_creates_working"): (
        "told to stop, the creator ends within one create's 5 s retry; 30 s without ending is"
        " a stuck creator, whose record of refusals would be cut short"
    ),
    ("real/test_upgrade.py", "_during"): (
        "the same for the upgrade's creator: told to stop, it ends within one create"
    ),
    ("helpers/kube.py", "workloads_seen"): (
        "told to stop, the watch ends within its own 2 s timeout; 10 s without ending is a"
        " stuck watch, whose record of what it saw would be cut short"
    ),
}

# Where skips are allowed: the kind path, which `./run test` deselects (`./run kind` runs it).
MAY_SKIP = ("kind/",)


def _modules() -> list[Module]:
    roots = [(TESTS, TESTS), (HELPERS, HELPERS.parent), (PLUGIN_TESTS, PLUGIN_TESTS)]
    found = [
        (path.relative_to(base).as_posix(), ast.parse(path.read_text(), str(path)))
        for root, base in roots
        for path in sorted(root.rglob("*.py"))
    ]
    found.append(("benchmarks/test_compare.py", ast.parse(BENCHMARK_TESTS.read_text())))
    return found


def _name(node: ast.AST) -> str:
    """The last part of a dotted name (`pytest.raises` -> raises), else ""."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function, not those of the functions and lambdas defined inside it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


def _called(node: ast.AST) -> set[str]:
    """The checks `node` calls: functions by bare name (`f`), methods as `.m`, and
    `pytest.raises`."""
    names = set()
    for n in _own_nodes(node):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name):
                names.add(n.func.id)
            elif isinstance(n.func, ast.Attribute):
                receiver = _name(n.func.value)
                names.add(
                    "pytest.raises" if (receiver, n.func.attr) == ("pytest", "raises") else ""
                )
                names.add(f".{n.func.attr}")
    return names - {""}


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _truthy_constant(node: ast.AST) -> bool:
    """An assert's test that cannot be false: a truthy constant, `not` of a falsy one, an
    `or` holding one, a non-empty tuple (`assert (x, "msg")`), `x == x`, `len(x) >= 0`."""
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return isinstance(node.operand, ast.Constant) and not node.operand.value
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return any(_truthy_constant(v) for v in node.values)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, op, right = node.left, node.ops[0], node.comparators[0]
        called = any(isinstance(n, ast.Call) for n in ast.walk(node))  # f() == f(): two calls
        if isinstance(op, ast.Eq | ast.Is | ast.LtE | ast.GtE) and _same(left, right):
            return not called
        counted = isinstance(left, ast.Call) and _name(left.func) == "len"
        return counted and isinstance(op, ast.GtE) and _same(right, ast.Constant(0))
    return isinstance(node, ast.Tuple | ast.List) and bool(node.elts)


def _checks(function: ast.AST, checkers: set[str]) -> bool:
    """An assert that can fail, a raise, or a call of a checking helper, in the function's
    own body (a nested helper counts when it is called: then it is in `checkers`)."""
    for node in _own_nodes(function):
        if isinstance(node, ast.Assert) and not _truthy_constant(node.test):
            return True
        if isinstance(node, ast.Raise):
            return True
    return bool(_called(function) & checkers)


def _functions(tree: ast.AST) -> list[Function]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def unchecked_tests(modules: list[Module]) -> list[str]:
    found = []
    for name, tree in modules:
        functions = _functions(tree)
        # a module's own helpers that check count too (to a fixed point: helpers of helpers)
        checkers = {*CHECKING_FUNCTIONS, *(f".{m}" for m in CHECKING_METHODS), "pytest.raises"}
        for _ in range(3):
            checkers |= {f.name for f in functions if _checks(f, checkers)}
        tests = [f for f in functions if f.name.startswith("test_")]
        found += [f"{name}::{f.name}" for f in tests if not _checks(f, checkers - {f.name})]
    return found


def tautologies(modules: list[Module]) -> list[str]:
    """`assert True`, `assert x or True`, `assert (x, "message")`: asserts that cannot fail."""
    return [
        f"{name}:{node.lineno}"
        for name, tree in modules
        for node in ast.walk(tree)
        if isinstance(node, ast.Assert) and _truthy_constant(node.test)
    ]


def bare_comparisons(modules: list[Module]) -> list[str]:
    """A comparison standing alone as a statement (`xs[0] == 1`): an assert left out."""
    return [
        f"{name}:{node.lineno}"
        for name, tree in modules
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Compare)
    ]


def _kept(name: str, body: list[ast.stmt]) -> bool:
    """Whether an except clause keeps what it caught: stored (assigned, appended, put), not
    merely mentioned (printed)."""
    for node in (n for b in body for n in ast.walk(b)):
        value = None
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            value = node.value
        elif isinstance(node, ast.Call) and _name(node.func) in STORING:
            value = ast.Tuple(elts=list(node.args), ctx=ast.Load())
        if value is not None and any(
            isinstance(n, ast.Name) and n.id == name for n in ast.walk(value)
        ):
            return True
    return False


STORING = {"append", "put", "put_nowait", "add", "extend", "set_exception", "set_result"}


def _exception_names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {n for e in node.elts for n in _exception_names(e)}
    return {_name(node)} - {""}


def swallowed_assertions(modules: list[Module]) -> list[str]:
    """`suppress` of AssertionError or of any exception, `raises` of any exception (by
    argument, tuple or keyword), and a broad `except` (bare, Exception, BaseException or
    AssertionError) that neither raises nor keeps what it caught."""
    found = []
    for name, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name(node.func) in ("suppress", "raises"):
                args = [*node.args, *(k.value for k in node.keywords if k.arg != "match")]
                caught = {n for a in args for n in _exception_names(a)}
                if any(isinstance(a, ast.Starred) for a in args):
                    caught.add("Exception")  # *ERRORS: what it holds is not to be read here
                broad = BROAD if _name(node.func) == "suppress" else BROAD - {"AssertionError"}
                if caught & broad:
                    found.append(f"{name}:{node.lineno} {_name(node.func)}({sorted(caught)})")
            elif isinstance(node, ast.ExceptHandler):
                caught = _exception_names(node.type) if node.type is not None else {"<bare>"}
                if not caught & (BROAD | {"<bare>"}):
                    continue
                body = [n for b in node.body for n in ast.walk(b)]
                raises = any(isinstance(n, ast.Raise) for n in body)
                kept = node.name is not None and _kept(node.name, node.body)
                if not (raises or kept):
                    found.append(f"{name}:{node.lineno} except {sorted(caught)} swallows it")
    return found


class _Daemons(ast.NodeVisitor):
    """The innermost function of every daemon thread made: a `daemon=` keyword that is not
    False (or `**options`), `x.daemon = ...` (not False), `setattr(x, "daemon", ...)`,
    `setDaemon(...)`."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.found: set[str] = set()

    def _function(self, node: Function) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def _here(self) -> None:
        self.found.add(self.stack[-1] if self.stack else "<module>")

    def visit_Call(self, node: ast.Call) -> None:
        daemonic = any(
            (k.arg == "daemon" and not (isinstance(k.value, ast.Constant) and not k.value.value))
            or (k.arg is None and _name(node.func) in ("Thread", "Timer"))  # **options
            for k in node.keywords
        )
        attribute = _name(node.func) == "setattr" and any(
            isinstance(a, ast.Constant) and a.value == "daemon" for a in node.args
        )
        if daemonic or attribute or _name(node.func) == "setDaemon":
            self._here()
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        made = any(isinstance(t, ast.Attribute) and t.attr == "daemon" for t in node.targets)
        if made and not (isinstance(node.value, ast.Constant) and not node.value.value):
            self._here()
        self.generic_visit(node)


def daemon_threads(modules: list[Module]) -> set[tuple[str, str]]:
    found = set()
    for name, tree in modules:
        daemons = _Daemons()
        daemons.visit(tree)
        found |= {(name, function) for function in daemons.found}
    return found


def _clock_call(node: ast.AST) -> bool:
    """`time.monotonic()`, or `monotonic()` imported by name."""
    return isinstance(node, ast.Call) and _name(node.func) in CLOCKS


def _timed(node: ast.AST, names: set[str]) -> bool:
    """A clock's reading or one of `names` in `node`."""
    return any(
        _clock_call(n) or (isinstance(n, ast.Name) and n.id in names) for n in ast.walk(node)
    )


def _bound_names(function: ast.AST, test: Callable[[ast.AST, set[str]], bool]) -> set[str]:
    """Names a function binds to what `test` accepts, to a fixed point (names from names),
    and lists it appends such values to."""
    names: set[str] = set()
    for _ in range(3):
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and test(node.value, names):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
                if test(node.value, names) and isinstance(node.target, ast.Name):
                    names.add(node.target.id)
            elif (
                isinstance(node, ast.Call)
                and _name(node.func) == "append"
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and any(test(a, names) for a in node.args)
            ):
                names.add(node.func.value.id)
    return names


def _fixed(node: ast.AST, names: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
    """Numbers, constants (UPPER_CASE, or their fields), names bound to such values (however
    spelt: `limit = 5`), and calls and arithmetic of them."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id.isupper() or node.id in names
    if isinstance(node, ast.Attribute):
        return node.attr.isupper() or _fixed(node.value, names)
    if isinstance(node, ast.Call):  # progress_interval(), not a clock's reading
        return not _clock_call(node) and all(_fixed(a, names) for a in node.args)
    if isinstance(node, ast.BinOp):
        return _fixed(node.left, names) and _fixed(node.right, names)
    if isinstance(node, ast.UnaryOp):
        return _fixed(node.operand, names)
    return False


def _literal(node: ast.AST, names: set[str]) -> bool:
    """A number written out, or arithmetic of numbers and `names` (`limit = 5`, `t = 2 * k`):
    what a name bound to a bound looks like."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float)
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.BinOp):
        return _literal(node.left, names) and _literal(node.right, names)
    return isinstance(node, ast.UnaryOp) and _literal(node.operand, names)


def _compares_under(
    test: ast.AST, clocks: set[str], fixed: set[str], *, failing: bool = False
) -> bool:
    """A comparison in `test` putting a clock's reading under a fixed value (over it, when
    `test` is what fails the test: `if took > N: fail`)."""
    for compare in (n for n in ast.walk(test) if isinstance(n, ast.Compare)):
        operands = [compare.left, *compare.comparators]
        for i, op in enumerate(compare.ops):
            if not isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE):
                continue
            pair = (operands[i], operands[i + 1])
            under = isinstance(op, ast.Lt | ast.LtE) != failing
            smaller, larger = pair if under else pair[::-1]
            # one reading against another value is a deadline or an order, not a speed
            if _timed(smaller, clocks) and _fixed(larger, fixed):
                return True
    return False


def _fails(body: list[ast.stmt]) -> bool:
    return any(
        isinstance(n, ast.Raise) or (isinstance(n, ast.Call) and _name(n.func) == "fail")
        for b in body
        for n in ast.walk(b)
    )


def _a_deadline(node: ast.AST, clocks: set[str], fixed: set[str]) -> bool:
    """A clock's reading plus a fixed time (`monotonic() + 5`, `t0 + LIMIT`)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return False
    sides = (node.left, node.right)
    return any(_timed(a, clocks) and _fixed(b, fixed) for a, b in (sides, sides[::-1]))


def _upper_bounds_on_a_clock(function: Function, module_fixed: set[str]) -> list[int]:
    clocks = _bound_names(function, _timed)
    fixed = module_fixed | _bound_names(function, lambda v, ns: _literal(v, ns | module_fixed))
    deadlines = _bound_names(function, lambda v, _ns: _a_deadline(v, clocks, fixed))
    lines = []
    joined = False
    # an assert in a loop against a deadline is a wait's own deadline (as wait_for's)
    polled = {id(n) for loop in ast.walk(function) if isinstance(loop, ast.While | ast.For)
              for n in ast.walk(loop)}  # fmt: skip
    for node in ast.walk(function):
        if isinstance(node, ast.Assert) and (
            _compares_under(node.test, clocks, fixed)
            or (id(node) not in polled and _asserts_a_deadline(node.test, clocks, fixed, deadlines))
        ):
            lines.append(node.lineno)
        elif isinstance(node, ast.If) and _fails(node.body):  # if took > N: pytest.fail(...)
            if _compares_under(node.test, clocks, fixed, failing=True):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and _name(node.func) == "join":
            timed = bool(node.args) or any(k.arg == "timeout" for k in node.keywords)
            joined = joined or (isinstance(node.func, ast.Attribute) and timed)
    if joined:  # thread.join(t) then assert not thread.is_alive(): a time bound too
        lines += [
            n.lineno
            for n in ast.walk(function)
            if isinstance(n, ast.Assert) and ".is_alive" in _called(n.test)
        ]
    return lines


def _asserts_a_deadline(
    test: ast.AST, clocks: set[str], fixed: set[str], deadlines: set[str]
) -> bool:
    """`assert monotonic() < deadline` (a deadline set before what it times), or
    `assert t0 + 5 > monotonic()`: the time taken bounded from above."""
    for compare in (n for n in ast.walk(test) if isinstance(n, ast.Compare)):
        operands = [compare.left, *compare.comparators]
        for i, op in enumerate(compare.ops):
            if not isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE):
                continue
            pair = (operands[i], operands[i + 1])
            smaller, larger = pair if isinstance(op, ast.Lt | ast.LtE) else pair[::-1]
            limit = (isinstance(larger, ast.Name) and larger.id in deadlines) or _a_deadline(
                larger, clocks, fixed
            )
            if limit and _timed(smaller, clocks - deadlines):
                return True
    return False


def _module_fixed(tree: ast.Module) -> set[str]:
    return _bound_names(
        ast.Module(body=[s for s in tree.body if isinstance(s, ast.Assign)], type_ignores=[]),
        _literal,
    )


def clock_bounds(modules: list[Module]) -> dict[tuple[str, str], list[int]]:
    """(file, function) -> lines of its upper bounds on a clock (`sooner_than` aside)."""
    found: dict[tuple[str, str], list[int]] = {}
    for name, tree in modules:
        if name == "helpers/waiting.py":
            continue  # sooner_than itself
        module_fixed = _module_fixed(tree)
        for function in _functions(tree):
            lines = _upper_bounds_on_a_clock(function, module_fixed)
            if lines:
                found.setdefault((name, function.name), []).extend(lines)
    return found


SKIPPING = {"skip", "skipif", "xfail", "importorskip", "SkipTest"}


def skips(modules: list[Module]) -> list[str]:
    """`pytest.skip`, `skipif`, `xfail`, `importorskip` (however imported or aliased),
    `unittest.skip` and `SkipTest`, outside MAY_SKIP."""
    return [
        f"{name}:{node.lineno} {_name(node)}"
        for name, tree in modules
        if not name.startswith(MAY_SKIP)
        for node in ast.walk(tree)
        if (isinstance(node, ast.Attribute) and node.attr in SKIPPING)
        or (isinstance(node, ast.Name) and node.id in SKIPPING)
        or (isinstance(node, ast.alias) and node.name in SKIPPING)
    ]


# ---- the rules on the suite -----------------------------------------------------------------

MODULES = _modules()


def test_every_test_checks_something() -> None:
    assert unchecked_tests(MODULES) == []


def test_no_assert_is_a_tautology() -> None:
    assert tautologies(MODULES) == []


def test_no_comparison_stands_alone_without_its_assert() -> None:
    assert bare_comparisons(MODULES) == []


def test_no_assertion_is_swallowed_and_no_raises_takes_any_exception() -> None:
    assert swallowed_assertions(MODULES) == []


def test_every_daemon_thread_in_the_tests_was_reviewed() -> None:
    """A daemon observer that dies is only a warning to pytest: a negative check on what it
    saw would then pass. Each one is listed in REVIEWED_DAEMONS with why it cannot."""
    found = daemon_threads(MODULES)
    assert sorted(found - set(REVIEWED_DAEMONS)) == [], "daemon threads not reviewed"
    assert sorted(set(REVIEWED_DAEMONS) - found) == [], "reviewed daemon threads gone"


def test_no_test_bounds_a_clock_from_above() -> None:
    """How long something took is a benchmark's figure; in a test it fails on a loaded
    machine. An ordering against the behaviour replaced goes through `sooner_than`, which names
    that behaviour and its time; a few reviewed bounds are listed above."""
    found = clock_bounds(MODULES)
    assert sorted(set(found) - set(REVIEWED_CLOCK_BOUNDS)) == [], found
    assert sorted(set(REVIEWED_CLOCK_BOUNDS) - set(found)) == [], "reviewed bounds gone"


def test_nothing_is_skipped_or_expected_to_fail_outside_the_kind_path() -> None:
    assert skips(MODULES) == []


PROBE_SESSION = """
import threading, pytest

def test_a_skip():
    pytest.skip("probe")

def test_a_thread_that_dies():
    thread = threading.Thread(target=lambda: 1 / 0)
    thread.start()
    thread.join()
    assert True is not False
"""


def test_under_ci_a_skip_fails_the_session_and_a_dying_thread_fails_its_test(
    tmp_path: Path,
) -> None:
    """tests/conftest.py and pyproject.toml's filterwarnings, run as `./run test` runs them:
    a probe module with a skip and a thread that dies, in a pytest run of its own."""
    (tmp_path / "test_probe.py").write_text(PROBE_SESSION)
    command = [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider"]
    command += ["-q", "-c", str(TESTS.parent / "pyproject.toml"), "--rootdir", str(TESTS.parent)]

    def run(ci: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "CI": ci}
        return subprocess.run(
            [*command, str(tmp_path)], cwd=TESTS.parent, env=env, capture_output=True, text=True
        )

    under_ci, outside = run("true"), run("")
    assert "1 failed, 1 skipped" in under_ci.stdout, under_ci.stdout[-2000:]
    assert "test_a_thread_that_dies" in under_ci.stdout and "ZeroDivisionError" in under_ci.stdout
    assert under_ci.returncode == pytest.ExitCode.TESTS_FAILED
    assert "CI: skipped or xfailed" in under_ci.stdout
    assert "CI: skipped" not in outside.stdout and "1 failed, 1 skipped" in outside.stdout


# ---- each rule catches what it is for (probes) ----------------------------------------------

PROBES: list[tuple[str, Callable[[list[Module]], object], str]] = [
    ("assert True", tautologies, "def test_x():\n    assert True\n"),
    ("assert x or True", tautologies, "def test_x(x):\n    assert x or True\n"),
    ("assert (x, message)", tautologies, "def test_x(x):\n    assert (x, 'why')\n"),
    ("only a tautology", unchecked_tests, "def test_x():\n    assert True\n"),
    (
        "a check in a helper never called",
        unchecked_tests,
        "def test_x():\n    def inner():\n        assert 1 == 2\n",
    ),
    (
        "Event().wait() as the check",
        unchecked_tests,
        "import threading\ndef test_x():\n    threading.Event().wait(1)\n",
    ),
    (
        "re.compile as the check",
        unchecked_tests,
        "import re\ndef test_x():\n    re.compile('x')\n",
    ),
    (
        "except AssertionError: pass",
        swallowed_assertions,
        "def test_x():\n    try:\n        assert 1 == 2\n"
        "    except AssertionError:\n        pass\n",
    ),
    (
        "bare except",
        swallowed_assertions,
        "def test_x():\n    try:\n        assert 1 == 2\n    except:\n        pass\n",
    ),
    (
        "except Exception as e: pass",
        swallowed_assertions,
        "def test_x():\n    try:\n        f()\n    except Exception as e:\n        pass\n",
    ),
    (
        "raises of a tuple holding Exception",
        swallowed_assertions,
        "import pytest\ndef test_x():\n    with pytest.raises((ValueError, Exception)):\n"
        "        f()\n",
    ),
    (
        "raises by keyword",
        swallowed_assertions,
        "import pytest\ndef test_x():\n    with pytest.raises(expected_exception=Exception):\n"
        "        f()\n",
    ),
    (
        "suppress of a tuple holding AssertionError",
        swallowed_assertions,
        "import contextlib\ndef test_x():\n    with contextlib.suppress((AssertionError,)):\n"
        "        assert 1 == 2\n",
    ),
    (
        "t.daemon = True",
        lambda m: daemon_threads(m) - set(REVIEWED_DAEMONS),
        "import threading\ndef test_x():\n    t = threading.Thread(target=f)\n"
        "    t.daemon = True\n    t.start()\n",
    ),
    (
        "setDaemon",
        lambda m: daemon_threads(m) - set(REVIEWED_DAEMONS),
        "import threading\ndef test_x():\n    t = threading.Thread(target=f)\n"
        "    t.setDaemon(True)\n",
    ),
    (
        "a clock bound in a lowercase name",
        clock_bounds,
        "import time\ndef test_x():\n    limit = 5\n    t0 = time.monotonic()\n    f()\n"
        "    assert time.monotonic() - t0 < limit\n",
    ),
    (
        "monotonic imported by name",
        clock_bounds,
        "from time import monotonic\ndef test_x():\n    t0 = monotonic()\n    f()\n"
        "    assert monotonic() - t0 < 3\n",
    ),
    (
        "a module-level bound",
        clock_bounds,
        "import time\nbudget = 2.0\ndef test_x():\n    t0 = time.time()\n    f()\n"
        "    took = time.time() - t0\n    assert took <= budget\n",
    ),
    (
        "if took > N: fail",
        clock_bounds,
        "import time, pytest\ndef test_x():\n    t0 = time.monotonic()\n    f()\n"
        "    if time.monotonic() - t0 > 3:\n        pytest.fail('slow')\n",
    ),
    (
        "join(N) then is_alive",
        clock_bounds,
        "def test_x(t):\n    t.join(5)\n    assert not t.is_alive()\n",
    ),
    ("assert x == x", tautologies, "def test_x(x):\n    assert x == x\n"),
    ("assert not None", tautologies, "def test_x():\n    assert not None\n"),
    ("assert len(xs) >= 0", tautologies, "def test_x(xs):\n    assert len(xs) >= 0\n"),
    (
        "Condition.wait_for as the check",
        unchecked_tests,
        "def test_x(cond):\n    cond.wait_for(lambda: True, 1)\n",
    ),
    (
        "asyncio.wait_for as the check",
        unchecked_tests,
        "import asyncio\nasync def test_x():\n    await asyncio.wait_for(f(), 1)\n",
    ),
    (
        "a module helper's name taken by a method",
        unchecked_tests,
        "import subprocess\ndef run():\n    assert f()\n"
        "def test_x():\n    subprocess.run(['true'])\n",
    ),
    ("a comparison without its assert", bare_comparisons, "def test_x(xs):\n    xs[0] == 1\n"),
    (
        "except AssertionError as e: print(e)",
        swallowed_assertions,
        "def test_x():\n    try:\n        assert f()\n"
        "    except AssertionError as e:\n        print(e)\n",
    ),
    (
        "suppress(*ERRORS)",
        swallowed_assertions,
        "import contextlib\ndef test_x():\n    with contextlib.suppress(*ERRORS):\n"
        "        assert f()\n",
    ),
    (
        "Thread(**options)",
        lambda m: daemon_threads(m) - set(REVIEWED_DAEMONS),
        "import threading\ndef test_x():\n    threading.Thread(target=f, **{'daemon': True})\n",
    ),
    (
        "setattr(t, 'daemon', True)",
        lambda m: daemon_threads(m) - set(REVIEWED_DAEMONS),
        "import threading\ndef test_x():\n    t = threading.Thread(target=f)\n"
        "    setattr(t, 'daemon', True)\n",
    ),
    (
        "a deadline asserted",
        clock_bounds,
        "from time import monotonic\ndef test_x():\n    deadline = monotonic() + 5\n    f()\n"
        "    assert monotonic() < deadline\n",
    ),
    (
        "t0 + 5 > monotonic()",
        clock_bounds,
        "import time\ndef test_x():\n    t0 = time.monotonic()\n    f()\n"
        "    assert t0 + 5 > time.monotonic()\n",
    ),
    (
        "datetime.now() bounded",
        clock_bounds,
        "import datetime\ndef test_x():\n    t0 = datetime.datetime.now()\n    f()\n"
        "    assert (datetime.datetime.now() - t0).seconds < 3\n",
    ),
    (
        "join(timeout=5) then is_alive",
        clock_bounds,
        "def test_x(t):\n    t.join(timeout=5)\n    assert not t.is_alive()\n",
    ),
    ("from pytest import skip", skips, "from pytest import skip\ndef test_x():\n    skip('no')\n"),
    ("pytest as pt", skips, "import pytest as pt\ndef test_x():\n    pt.skip('no')\n"),
    ("unittest's SkipTest", skips, "import unittest\ndef test_x():\n    raise unittest.SkipTest\n"),
    ("pytest.skip", skips, "import pytest\ndef test_x():\n    pytest.skip('no')\n"),
    (
        "skipif",
        skips,
        "import pytest\n@pytest.mark.skipif(True, reason='no')\ndef test_x():\n    assert f()\n",
    ),
    ("xfail", skips, "import pytest\n@pytest.mark.xfail\ndef test_x():\n    assert f()\n"),
    ("importorskip", skips, "import pytest\nx = pytest.importorskip('x')\n"),
]

# What the rules must let be: real checks written the usual ways.
CLEAN = """
import contextlib, threading, time, pytest
from clusters.helpers.waiting import sooner_than, wait_for

def test_asserts(x):
    assert x == 1, "message"

def test_raises():
    with pytest.raises(ValueError, match="x"):
        f()

def test_helper():
    def check():
        assert f()
    check()

def test_waits():
    wait_for(f, 10)

def test_keeps_what_it_caught():
    failed = []
    try:
        f()
    except Exception as exc:
        failed.append(exc)
    assert not failed

def test_a_deadline_is_not_a_bound():
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert f()

def test_ordering():
    t0 = time.monotonic()
    f()
    sooner_than(time.monotonic() - t0, 30, "the old way")

def test_not_daemon():
    t = threading.Thread(target=f, daemon=False)
    t.start()
    t.join()
    assert not t.is_alive()
"""


def _parsed(source: str) -> list[Module]:
    return [("probe/test_probe.py", ast.parse(textwrap.dedent(source)))]


@pytest.mark.parametrize(("what", "rule", "source"), PROBES, ids=[p[0] for p in PROBES])
def test_each_rule_catches_what_it_is_for(
    what: str, rule: Callable[[list[Module]], object], source: str
) -> None:
    assert rule(_parsed(source)), f"{what}: not caught"


def test_the_rules_let_real_checks_be() -> None:
    clean = _parsed(CLEAN)
    assert unchecked_tests(clean) == []
    assert tautologies(clean) == []
    assert swallowed_assertions(clean) == []
    assert daemon_threads(clean) == set()
    assert clock_bounds(clean) == {}
    assert skips(clean) == []
    assert bare_comparisons(clean) == []
