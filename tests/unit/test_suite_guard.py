"""A guard on the suite itself (an AST scan of tests/): the weaknesses an audit of the suite
found do not come back. Each test checks something (an assert, `pytest.raises`, or a helper
that raises when its check fails); no AssertionError is swallowed; no `pytest.raises` takes any
exception at all; and a daemon thread in a test is one whose death or silence was reviewed
(listed below with why it cannot make a check pass vacuously)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HELPERS = TESTS.parent / "clusters" / "helpers"  # the tests' helpers that benchmarks use too
PLUGIN_TESTS = TESTS.parent / "plugin" / "tests"  # the kubectl plugin's own (Python 3.10 on)

# Helpers that raise when what they check does not hold (tests/support, pytest, the stdlib).
CHECKING_HELPERS = {
    "raises",  # pytest.raises
    "wait_for",  # clusters/helpers/waiting.py (and a module's own, which raise too)
    "stays_false",
    "wait",  # MultiKueue.wait: wait_for on a condition
    "wait_condition",
    "wait_healthy",  # clusters' component start: raises with the component's log
    "compile",  # raises SyntaxError on what is not Python
}

# Daemon threads in tests, reviewed: (file, function) -> why a dead or stuck thread fails the
# test rather than letting a check pass without it.
REVIEWED_DAEMONS = {
    (
        "bed/test_client.py",
        "test_a_watch_hands_over_each_event_as_it_comes_and_ends_with_the_server",
    ): ("the test reads each event off a queue with a timeout: a dead watch fails it"),
    ("bed/test_leader.py", "_within"): "joined; the test fails while it is alive",
    ("conftest.py", "silent_server"): "a loopback server the tests talk to, not an observer",
    (
        "e2e/test_progress.py",
        "test_a_chatty_pod_costs_one_write_per_interval_and_its_last_report_is_kept",
    ): ("what it sees is waited for with wait_for, which fails on a dead watcher"),
    ("local/test_serving.py", "__init__"): "the attacker's connections, not an observer",
    (
        "local/test_transport.py",
        "test_a_request_without_a_timeout_ends_when_its_answer_stops_coming",
    ): ("joined; the test fails while it is alive and reads what it recorded"),
    ("real/test_real_nodes.py", "test_dispatcher_failover_keeps_creates_working"): (
        "the creator records what stopped it, and the test asserts it did not stop early"
    ),
    ("real/test_upgrade.py", "flight"): "Flight.failure and Flight.looked, checked by _ran_once",
    ("real/test_upgrade.py", "_during"): "Flight.failure, checked as the creator is joined",
    ("support/multikueue.py", "workloads_seen"): "its failure is asserted as the block ends",
    ("helpers/waiting.py", "http_server"): "a loopback server the test talks to",
}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (
            path.relative_to(root if root is TESTS else root.parent).as_posix(),
            ast.parse(path.read_text(), str(path)),
        )
        for root in (TESTS, HELPERS, PLUGIN_TESTS)
        for path in sorted(root.rglob("*.py"))
    ]


def _called(node: ast.AST) -> set[str]:
    return {
        f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
        for f in [n.func]
    }


def _checks(node: ast.AST, checkers: set[str]) -> bool:
    """An assert, a raise (a helper's own check), or a call of a checking helper."""
    checked = any(isinstance(n, ast.Assert | ast.Raise) for n in ast.walk(node))
    return checked or bool(_called(node) & checkers)


def test_every_test_checks_something() -> None:
    found = []
    for name, tree in _modules():
        functions = [
            n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        # a module's own helpers that check (assert, or call a checking helper) count too
        checkers = CHECKING_HELPERS | {f.name for f in functions if _checks(f, CHECKING_HELPERS)}
        tests = [f for f in functions if f.name.startswith("test_")]
        found += [f"{name}::{f.name}" for f in tests if not _checks(f, checkers)]
    assert found == [], f"tests that check nothing: {found}"


def test_no_assertion_is_swallowed_and_no_raises_takes_any_exception() -> None:
    found = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            args = {a.id for a in node.args if isinstance(a, ast.Name)} | {
                a.attr for a in node.args if isinstance(a, ast.Attribute)
            }
            if called == "suppress" and args & {"AssertionError", "Exception", "BaseException"}:
                found.append(f"{name}:{node.lineno} suppress({', '.join(sorted(args))})")
            if called == "raises" and args & {"Exception", "BaseException"}:
                found.append(f"{name}:{node.lineno} raises({', '.join(sorted(args))})")
    assert found == [], found


class _Daemons(ast.NodeVisitor):
    """(function, line) of every call with a `daemon=` keyword, by its innermost function."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.found: set[str] = set()

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Call(self, node: ast.Call) -> None:
        if any(k.arg == "daemon" for k in node.keywords):
            self.found.add(self.stack[-1] if self.stack else "<module>")
        self.generic_visit(node)


def test_every_daemon_thread_in_the_tests_was_reviewed() -> None:
    """A daemon observer that dies is only a warning to pytest: a negative check on what it
    saw would then pass. Each one is listed in REVIEWED_DAEMONS with why it cannot."""
    found = set()
    for name, tree in _modules():
        daemons = _Daemons()
        daemons.visit(tree)
        found |= {(name, function) for function in daemons.found}
    unreviewed = sorted(found - set(REVIEWED_DAEMONS))
    stale = sorted(set(REVIEWED_DAEMONS) - found)
    assert unreviewed == [], f"daemon threads not reviewed: {unreviewed}"
    assert stale == [], f"reviewed daemon threads no longer there: {stale}"


CLOCKS = {"monotonic", "perf_counter", "process_time", "thread_time", "time"}

# Upper bounds on a clock left in tests, reviewed: (file, function) -> why it is not a speed.
REVIEWED_CLOCK_BOUNDS = {
    ("real/test_upgrade.py", "_ran_once"): (
        "a liveness check: the Job watcher looks every second; 10 s without a look is a dead"
        " or stuck watcher, which would make 'ran once' pass without looking"
    ),
}


def _timed(node: ast.AST, names: set[str]) -> bool:
    """A clock's reading (`time.monotonic()`, `time.time()`...) or one of `names` in `node`."""
    return any(
        (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in CLOCKS)
        or (isinstance(n, ast.Name) and n.id in names)
        for n in ast.walk(node)
    )


def _clock_names(function: ast.AST) -> set[str]:
    """Names a function binds to a clock reading or to arithmetic on one (`took = now - t0`),
    and lists it appends clock readings to."""
    names: set[str] = set()
    for _ in range(3):  # names made from names made from a clock
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and _timed(node.value, names):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
                if _timed(node.value, names) and isinstance(node.target, ast.Name):
                    names.add(node.target.id)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append"
                and isinstance(node.func.value, ast.Name)
                and any(_timed(a, names) for a in node.args)
            ):
                names.add(node.func.value.id)
    return names


def _fixed(node: ast.AST) -> bool:
    """Numbers, constants (UPPER_CASE, or their fields) and calls, with arithmetic on them."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id.isupper()
    if isinstance(node, ast.Attribute):
        return node.attr.isupper() or _fixed(node.value)
    if isinstance(node, ast.Call):  # progress_interval(), not a clock's reading
        return not (_called(node) & CLOCKS) and all(_fixed(a) for a in node.args)
    if isinstance(node, ast.BinOp):
        return _fixed(node.left) and _fixed(node.right)
    if isinstance(node, ast.UnaryOp):
        return _fixed(node.operand)
    return False


def _upper_bounds_on_a_clock(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    names = _clock_names(function)
    lines = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            operands = [compare.left, *compare.comparators]
            for i, op in enumerate(compare.ops):
                if not isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE):
                    continue
                pair = (operands[i], operands[i + 1])
                smaller, larger = pair if isinstance(op, ast.Lt | ast.LtE) else pair[::-1]
                # a reading under a fixed number; one reading against another value is a
                # deadline or an order (`before <= x.since`), not a speed
                if _timed(smaller, names) and _fixed(larger):
                    lines.append(node.lineno)
    return lines


def test_no_test_bounds_a_clock_from_above() -> None:
    """How long something took is a benchmark's figure; in a test it fails on a loaded
    machine. An ordering against the behaviour replaced goes through `sooner_than`, which names
    that behaviour and its time; a few reviewed bounds are listed above."""
    found, reviewed = [], set()
    for name, tree in _modules():
        if name == "support/waiting.py":
            continue  # sooner_than itself
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            lines = _upper_bounds_on_a_clock(function)
            if lines and (name, function.name) in REVIEWED_CLOCK_BOUNDS:
                reviewed.add((name, function.name))
            elif lines:
                found += [f"{name}:{line} ({function.name})" for line in lines]
    assert found == [], f"upper bounds on a clock: {found}"
    assert reviewed == set(REVIEWED_CLOCK_BOUNDS), "reviewed clock bounds no longer there"
