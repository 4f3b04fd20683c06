"""The controllers' log lines (`--log-format`, `--log-level`, `--verbose`), as a replica
started with those flags writes them to its standard error."""

from __future__ import annotations

import ast
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubecontrol.controller import KeyValueFormatter

REPO = Path(__file__).resolve().parents[3]

SCRIPT = """
import logging, sys
from kubecontrol import controller
from worker_controller.settings import WorkerSettings
settings, verbose = WorkerSettings.from_argv(sys.argv[1:], "test", None)
controller.setup_logging(settings, verbose)
log = logging.getLogger("worker_controller")
log.debug("a debug line")
log.info("Job made", extra={"cluster": "worker1", "trainjob": "ns/tj", "job": 'tj "node" 0'})
log.warning("a warning")
try:
    raise ValueError("boom")
except ValueError:
    log.exception("a pass failed")
"""


def run(*flags: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *flags], capture_output=True, text=True, check=True
    )
    return done.stderr.splitlines()


def test_json_lines_carry_time_level_logger_message_and_the_traceback() -> None:
    lines = run("--log-format", "json")
    records = [json.loads(line) for line in lines]  # every line one JSON object
    assert [(r["level"], r["message"]) for r in records] == [
        ("INFO", "Job made"),
        ("WARNING", "a warning"),
        ("ERROR", "a pass failed"),
    ]
    assert all(r["logger"] == "worker_controller" for r in records)
    assert all(r["time"].endswith("+00:00") and "T" in r["time"] for r in records)
    assert "ValueError: boom" in records[2]["exc_info"]
    made = records[0]
    assert (made["cluster"], made["trainjob"], made["job"]) == ("worker1", "ns/tj", 'tj "node" 0')


def test_text_lines_carry_the_fields_as_key_values_before_the_traceback() -> None:
    lines = run()
    made = next(line for line in lines if "Job made" in line)
    assert made.endswith(
        ' worker_controller: Job made cluster=worker1 trainjob=ns/tj job="tj \\"node\\" 0"'
    )
    failed = lines.index(next(line for line in lines if "a pass failed" in line))
    assert lines[failed].endswith("worker_controller: a pass failed")
    assert lines[failed + 1] == "  Traceback (most recent call last):"


@pytest.mark.parametrize(
    ("flags", "levels"),
    [
        ((), ["INFO", "WARNING", "ERROR"]),
        (("--log-level", "warning"), ["WARNING", "ERROR"]),
        (("--log-level", "error", "--verbose"), ["DEBUG", "INFO", "WARNING", "ERROR"]),
    ],
)
def test_text_lines_at_the_level_asked(flags: tuple[str, ...], levels: list[str]) -> None:
    lines = [line for line in run(*flags) if " worker_controller: " in line]
    assert [line.split(" ")[2] for line in lines] == levels


def test_a_format_that_is_not_one_is_refused_naming_the_flag() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, "--log-format", "xml"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "--log-format" in done.stderr


def _extra_keys(source: str) -> set[str]:
    """Every key a call's `extra=` can hold in `source`, whatever builds it: a dict literal
    (and what it spreads), `dict(...)`, `a | b`, a name assigned, updated (`.update`, `|=`,
    `setdefault`, `x["k"] = ...`) in the calling function or at the module's top, or what a
    function of the module (a `_fields` helper) returns."""
    tree = ast.parse(source)
    functions: dict[str, list[ast.AST]] = {}
    enclosing: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):  # breadth first: an inner function comes after its outer one
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            if not isinstance(node, ast.Lambda):
                functions.setdefault(node.name, []).append(node)
            for inner in ast.walk(node):
                if inner is not node:
                    enclosing[inner] = node  # so the innermost is the one kept

    def named(node: ast.AST, name: str) -> bool:
        return isinstance(node, ast.Name) and node.id == name

    def writes_to(name: str, scope: ast.AST) -> Iterator[ast.AST | None]:
        """What goes into `name` in `scope`: assigned, merged, updated, or set by key."""
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(named(t, name) for t in targets):
                    yield node.value
                for t in targets:
                    if (
                        isinstance(t, ast.Subscript)
                        and named(t.value, name)
                        and isinstance(t.slice, ast.Constant)
                    ):
                        yield ast.Dict(keys=[t.slice], values=[node.value])  # type: ignore[list-item]
            elif isinstance(node, ast.AugAssign) and named(node.target, name):
                yield node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and named(node.func.value, name)
                and node.func.attr in ("update", "setdefault")
            ):
                if node.func.attr == "setdefault" and node.args:
                    yield ast.Dict(keys=[node.args[0]], values=[ast.Constant(None)])
                else:
                    yield ast.Call(func=ast.Name("dict"), args=node.args, keywords=node.keywords)

    def keys(expr: ast.AST | None, scope: ast.AST, seen: dict[int, ast.AST]) -> set[str]:
        if expr is None or id(expr) in seen:
            return set()
        seen[id(expr)] = expr  # kept alive: a node made here must not lend its id to the next
        if isinstance(expr, ast.Dict):
            out = {str(k.value) for k in expr.keys if isinstance(k, ast.Constant)}
            for k, v in zip(expr.keys, expr.values, strict=True):
                if k is None:  # {**spread}
                    out |= keys(v, scope, seen)
            return out
        if isinstance(expr, ast.BinOp):  # a | b
            return keys(expr.left, scope, seen) | keys(expr.right, scope, seen)
        if isinstance(expr, ast.IfExp | ast.BoolOp):
            parts = [expr.body, expr.orelse] if isinstance(expr, ast.IfExp) else expr.values
            return set().union(*(keys(p, scope, seen) for p in parts))
        if isinstance(expr, ast.Call):
            func = expr.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name == "dict":
                out = {k.arg for k in expr.keywords if k.arg}
                out |= set().union(
                    *(keys(k.value, scope, seen) for k in expr.keywords if not k.arg)
                )
                return out.union(*(keys(a, scope, seen) for a in expr.args))
            found: set[str] = set()
            for fn in functions.get(name, []):
                for r in ast.walk(fn):
                    if isinstance(r, ast.Return):
                        found |= keys(r.value, fn, seen)
            return found
        if isinstance(expr, ast.Name):
            found = set()
            for where in (scope, tree) if scope is not tree else (tree,):
                for value in writes_to(expr.id, where):
                    found |= keys(value, scope, seen)
            return found
        return set()

    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for k in node.keywords:
                if k.arg == "extra":
                    out |= keys(k.value, enclosing.get(node, tree), {})
    return out


def test_the_scan_finds_the_keys_however_the_fields_are_built() -> None:
    probe = """
TOP = {"module_level": 1}

def _fields(x):
    return {"from_helper": x} | {"merged": 1}

def f(log, a):
    log.info("a", extra={"literal": 1, **{"spread": 2}})
    log.info("b", extra=dict(by_call=1, **{"call_spread": 2}))
    fields = {"by_name": 1}
    fields["added"] = 2
    fields.update(updated=3)
    fields.update({"updated_dict": 3})
    fields |= {"or_assigned": 4}
    fields.setdefault("defaulted", 5)
    log.info("c", extra=fields)
    log.info("d", extra=_fields(a))
    log.info("e", extra={"x": 1} if a else {"y": 2})
    log.info("f", extra=TOP)

    def inner():
        mine = {"inner": 1}
        log.info("g", extra=mine)
"""
    assert _extra_keys(probe) == {
        "literal", "spread", "by_call", "call_spread", "by_name", "added", "updated",
        "updated_dict", "or_assigned", "defaulted", "from_helper", "merged", "x", "y",
        "module_level", "inner",
    }  # fmt: skip


def test_no_log_call_of_the_product_names_a_field_a_log_record_has() -> None:
    """`extra=` may not name an attribute of LogRecord (`name`, `message`, `args`...): logging
    raises KeyError in the call, and the pass that logs fails with it. Every module of the
    product (the plugin's distribution too), each call's `extra=` however it is built."""
    reserved = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
    reserved |= {"taskName"}  # a LogRecord's from Python 3.12
    reserved |= {"level", "logger", "time"}  # the JSON lines' own keys (setup_logging)
    used: dict[str, set[str]] = {}
    homes = [REPO / p for p in ("dispatcher", "worker_controller", "trainjob", "kubecontrol")]
    homes += [REPO / "plugin" / p for p in ("kubebase", "trainjob_api", "kubectl_trainjob")]
    for home in homes:
        for path in home.rglob("*.py"):
            used[str(path.relative_to(REPO))] = _extra_keys(path.read_text())
    assert sum(len(k) for k in used.values()) > 40
    assert {p: keys & reserved for p, keys in used.items() if keys & reserved} == {}


@pytest.mark.parametrize(
    "value", ["a\rINFO fake: line", "x\x1b[2K", "a\u2028b", "a\x85b", "a\xa0b", "a\tb", "a\nb"]
)
def test_a_value_that_could_forge_a_line_is_quoted_and_escaped(value: str) -> None:
    """A tenant's string (a priorityClassName refused as no name, an error the API server
    echoes) comes out as one JSON string: nothing in it moves the cursor or starts a line."""
    record = logging.LogRecord("x", logging.INFO, "", 0, "refused", None, None)
    record.object = value
    line = KeyValueFormatter("%(message)s").format(record)
    assert line == f"refused object={json.dumps(value)}"
    assert line.isprintable() and line.isascii()


@pytest.mark.parametrize("value", ["a b", 'a"b', "a=b", ""])
def test_a_value_with_a_space_a_quote_an_equals_sign_or_nothing_is_quoted(value: str) -> None:
    record = logging.LogRecord("x", logging.INFO, "", 0, "m", None, None)
    record.k, record.plain = value, "ns/tj-0"
    line = KeyValueFormatter("%(message)s").format(record)
    assert line == f"m k={json.dumps(value)} plain=ns/tj-0"


def test_the_fields_come_before_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, "", 0, "failed", None, sys.exc_info())
    record.cluster = "w1"
    lines = KeyValueFormatter("%(message)s").format(record).splitlines()
    assert lines[:2] == ["failed cluster=w1", "  Traceback (most recent call last):"]
    assert lines[-1] == "  ValueError: boom"


@pytest.mark.parametrize(
    ("message", "last"),
    [
        (
            "a\n2026-12-04 10:00:00,000 INFO dispatcher: forged",
            ["  ValueError: a", "  2026-12-04 10:00:00,000 INFO dispatcher: forged"],
        ),
        ("a\rINFO x", ["  ValueError: a\\rINFO x"]),  # escaped, neither dropped nor split
        ("a\u2028b", ["  ValueError: a\\u2028b"]),
    ],
)
def test_a_traceback_cannot_forge_a_line(message: str, last: list[str]) -> None:
    """An exception's message can hold a tenant's string (a name the API server echoes): every
    line of the traceback is indented and nothing in it moves the cursor, so only the record's
    own line starts at the left."""
    try:
        raise ValueError(message)
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, "", 0, "failed", None, sys.exc_info())
    record.stack_info = "Stack (most recent call last):\n  File x\nforged\rline"
    lines = KeyValueFormatter("%(message)s").format(record).split("\n")
    assert lines[0] == "failed"
    assert all(line.startswith("  ") and line.isprintable() for line in lines[1:])
    assert lines[-1] == "  forged\\rline"  # the stack, after the traceback
    traceback_end = lines.index("  Stack (most recent call last):")
    assert lines[traceback_end - len(last) : traceback_end] == last


def test_a_traceback_another_handler_cached_is_written_again_as_ours() -> None:
    """logging keeps the first handler's traceback text on the record: a plain formatter
    before ours must not make ours write it plain."""
    try:
        raise ValueError("a\nINFO forged")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, "", 0, "failed", None, sys.exc_info())
    plain = logging.Formatter("%(message)s").format(record)  # caches the plain text
    lines = KeyValueFormatter("%(message)s").format(record).split("\n")
    assert "INFO forged" not in lines and all(line.startswith("  ") for line in lines[1:])
    # and ours stays ours: a handler after it writes its own text, not our indented one
    assert logging.Formatter("%(message)s").format(record) == plain


def test_a_traceback_text_with_no_exception_left_is_written_indented_and_escaped() -> None:
    """A record made from another's (logging.makeLogRecord) may carry a traceback's text and
    no exception to format again: it is still written, as continuation lines."""
    record = logging.makeLogRecord(
        {"msg": "failed", "levelno": logging.ERROR, "exc_text": "Traceback\nINFO forged\u2028x"}
    )
    lines = KeyValueFormatter("%(message)s").format(record).split("\n")
    assert lines == ["failed", "  Traceback", "  INFO forged\\u2028x"]
    assert record.exc_text == "Traceback\nINFO forged\u2028x"  # the record's own, kept


@pytest.mark.parametrize("message", ["served\u2028INFO forged", "line\nINFO forged", "a\x1b[2K"])
def test_a_librarys_message_cannot_forge_a_line(message: str) -> None:
    """A library's message may hold what a client sent (aiohttp's access log writes a
    request's headers): it comes out on one line, escaped."""
    record = logging.LogRecord("aiohttp.access", logging.INFO, "", 0, message, None, None)
    line = KeyValueFormatter("%(message)s").format(record)
    assert line == json.dumps(message)[1:-1] and line.isprintable()
