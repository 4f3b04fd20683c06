"""The record of the product's replicas an install started on the bed (a JSON file in the
bed's state directory): what `status` lists and `down` stops, each by its PID, only while that
PID still runs the program it started."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from clusters.processes import runs

Dict = dict[str, Any]


def forget_recorded(state: Path, pid_files: set[str]) -> None:
    """Drop the replicas of these pid files from the install's record (the file goes with the
    last): another install's replicas, still running, stay recorded for `down` to stop."""
    mine = pid_files
    left = [r for r in recorded(state) if str(r.get("pid_file")) not in mine]
    if left:
        state_file(state).write_text(json.dumps(left, indent=2))
    else:
        state_file(state).unlink(missing_ok=True)


def state_file(state: Path) -> Path:
    return state / "replicas.json"


def write_state(state: Path, records: list[Dict]) -> None:
    """Record the replicas an install started (each: its cluster, program, pid file ...)."""
    state_file(state).write_text(json.dumps(records, indent=2))


def recorded(state: Path) -> list[Dict]:
    """The replicas an install left running (for `status` and `down`)."""
    try:
        return list(json.loads(state_file(state).read_text()))
    except (OSError, ValueError):
        return []


def stop_recorded(state: Path) -> int:
    """Stop the replicas an install left running (SIGTERM, then SIGKILL after 20 s), each only
    if its PID still runs the program we started; returns how many were running."""
    stopped = 0
    for record in recorded(state):
        pid = current_pid(record)
        if not runs(pid, record["program"]):
            continue
        stopped += 1
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while runs(pid, record["program"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        if runs(pid, record["program"]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    state_file(state).unlink(missing_ok=True)
    return stopped


def current_pid(record: Dict) -> int:
    """A recorded replica's PID now (every start writes it to the replica's pid file); 0 when
    the file is gone."""
    try:
        return int(Path(record["pid_file"]).read_text())
    except (OSError, ValueError):
        return 0
