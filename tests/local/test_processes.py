"""Process handling of the bed that needs no cluster: ports, dead processes, PID files."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from clusters import processes
from clusters.errors import BedError
from clusters.processes import Component


def _component(tmp_path: Path, argv: list[str], ports: list[int]) -> Component:
    return Component("c1", "thing", argv, ports, lambda: False, tmp_path)


def test_port_in_use_is_reported_with_port_and_component(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        comp = _component(tmp_path, [sys.executable, "-c", "pass"], [port])
        with pytest.raises(BedError, match=rf"port {port} for c1/thing is already in use"):
            processes.start(comp)
    assert comp.pid() is None


def test_process_that_dies_at_start_reports_its_log(tmp_path: Path) -> None:
    comp = _component(tmp_path, [sys.executable, "-c", "print('boom: bad flag'); exit(3)"], [])
    processes.start(comp)
    with pytest.raises(BedError, match=r"(?s)c1/thing exited during start-up.*boom: bad flag"):
        processes.wait_healthy(comp, timeout=10)


def test_missing_binary_says_how_to_build(tmp_path: Path) -> None:
    comp = _component(tmp_path, [str(tmp_path / "nope")], [])
    with pytest.raises(BedError, match="is not built"):
        processes.start(comp)


def test_stop_ends_only_our_process_and_ignores_stale_pid_files(tmp_path: Path) -> None:
    comp = _component(tmp_path, [sys.executable, "-c", "import time; time.sleep(60)"], [])
    assert processes.start(comp)
    pid = comp.pid()
    assert pid is not None
    assert processes.start(comp) is False  # idempotent: already running
    assert processes.stop(comp) is True
    assert comp.pid() is None
    # A PID file naming some other program (a recycled PID) is not ours to stop.
    comp.pid_file.write_text(f'{{"pid": {pid}, "exe": "/not/ours"}}')
    assert processes.stop(comp) is False
