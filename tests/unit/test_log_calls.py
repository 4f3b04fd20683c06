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
LEVELS = {"debug", "info", "warning", "error", "exception", "critical"}
LOGGERS = {"log", "logger"}


def built_messages(source: str) -> list[int]:
    """The lines of `source` whose log calls build their message from values."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in LOGGERS
        ):
            continue
        if node.func.attr == "log":  # log.log(level, message, ...)
            args = node.args[1:]
        elif node.func.attr in LEVELS:
            args = node.args
        else:
            continue
        if len(args) > 1 or (args and not _fixed(args[0])):
            lines.append(node.lineno)
    return lines


def _fixed(message: ast.expr) -> bool:
    """A literal, a module's constant, or a choice between fixed messages."""
    if isinstance(message, ast.IfExp):
        return _fixed(message.body) and _fixed(message.orelse)
    if isinstance(message, ast.Name):
        return message.id.isupper()
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
        ]
    )
    assert built_messages(source) == [2, 3, 4, 5, 6, 8]
