"""The product logs key-values: a fixed message, and what varies in `extra` (the JSON format
carries each as a field, which a log search can select on: the job, the namespace, the
cluster). A message built from its values (printf-style arguments, an f-string, `%` or `+`)
is a new message for every value, and its values are lost to a search."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("dispatcher", "worker_controller", "kubecontrol", "trainjob", "plugin/kubebase",
           "plugin/trainjob_api", "plugin/kubectl_trainjob")  # fmt: skip
LEVELS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal"}


def built_messages(source: str) -> list[int]:
    """The lines of `source` whose log calls build their message from values: calls on the
    `logging` module itself or on any name bound to `logging.getLogger(...)` (`log`, by the
    house's habit), the message given by position or as `msg=`."""
    tree = ast.parse(source)
    loggers, constants = {"log", "logger", "logging"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if not isinstance(target, ast.Name):
                continue
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "logging.getLogger":
                loggers.add(target.id)
            elif node in tree.body and isinstance(value, ast.Constant):
                constants.add(target.id)  # a module's own fixed message
    lines = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in loggers
        ):
            continue
        if node.func.attr == "log":  # log.log(level, message, ...)
            args = node.args[1:]
        elif node.func.attr in LEVELS:
            args = node.args
        else:
            continue
        args += [k.value for k in node.keywords if k.arg == "msg"]
        if len(args) > 1 or (args and not _fixed(args[0], constants)):
            lines.append(node.lineno)
    return lines


def _fixed(message: ast.expr, constants: set[str]) -> bool:
    """A literal, a module's constant, or a choice between fixed messages."""
    if isinstance(message, ast.IfExp):
        return _fixed(message.body, constants) and _fixed(message.orelse, constants)
    if isinstance(message, ast.Name):
        return message.id in constants
    return isinstance(message, ast.Constant)


def test_log_calls_give_a_fixed_message_and_their_values_as_fields() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in built_messages(path.read_text())
    ]
    assert found == [], "log a fixed message, and its values in extra={...}"


def test_what_counts_as_a_built_message() -> None:
    source = "\n".join(
        [
            'MESSAGE = "fixed"',
            'audit = logging.getLogger("audit")',
            'log.info("fixed", extra={"job": job})',
            'log.info("job %s", job)',
            'log.warning(f"job {job}")',
            'log.error("job " + job)',
            'logger.log(logging.INFO, "job %s" % job)',
            "log.exception(message)",
            'log.info("on" if up else "off", extra={"cluster": name})',
            'log.info("on" if up else f"off {name}")',
            "log.exception(MESSAGE)",
            'other.info("a %s", b)',
            'audit.warn(f"job {job}")',
            'logging.info("job %s", job)',
            'log.info(msg=f"job {job}")',
            "WHY = f'job {job}'",
            "log.info(WHY)",
            "def f():\n    LOCAL = 'x'\n    log.info(LOCAL)",
        ]
    )
    assert built_messages(source) == [4, 5, 6, 7, 8, 10, 13, 14, 15, 17, 20]
