"""The controllers' log lines (`--log-format`, `--log-level`, `--verbose`), as a replica
started with those flags writes them to its standard error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SCRIPT = """
import logging, sys
from kubecontrol import controller
from worker_controller.settings import WorkerSettings
settings, verbose = WorkerSettings.from_argv(sys.argv[1:], "test", None)
controller.setup_logging(settings, verbose)
log = logging.getLogger("worker_controller")
log.debug("a debug line")
log.info("[worker1] ns/tj: %s", 'made Job "tj-node-0"')
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
        ("INFO", '[worker1] ns/tj: made Job "tj-node-0"'),
        ("WARNING", "a warning"),
        ("ERROR", "a pass failed"),
    ]
    assert all(r["logger"] == "worker_controller" for r in records)
    assert all(r["time"].endswith("+00:00") and "T" in r["time"] for r in records)
    assert "ValueError: boom" in records[2]["exc_info"]


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
