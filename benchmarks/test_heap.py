"""benchmarks/heap.py: a traced process's heap read by allocating line, and what grew (a test of
the benchmark, beside it: the suite never imports the benchmarks)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import heap

# A process that holds about 8 MiB from one line of its own, then waits to be read.
HOLDER = """
import sys, time
held = [bytes(1024) for _ in range(8 * 1024)]  # the line read back
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture
def gdb_calls() -> None:
    """gdb can call a function in a process here (heap.gdb_problem): else the test is skipped,
    with gdb's reason."""
    if (problem := heap.gdb_problem()) is not None:
        pytest.skip(problem)


def test_gdb_problem_is_none_where_gdb_calls_and_says_why_where_it_cannot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    heap.gdb_problem.cache_clear()
    try:
        assert heap.gdb_problem() == "gdb is not installed (Debian: gdb)"
    finally:
        heap.gdb_problem.cache_clear()


def test_growth_is_by_site_most_first_and_counts_sites_new_since() -> None:
    before = {"a.py:1": (100, 1), "b.py:2": (50, 5)}
    after = {"a.py:1": (100, 1), "b.py:2": (450, 9), "c.py:3": (1000, 2)}
    assert heap.growth(before, after) == [("c.py:3", 1000, 2), ("b.py:2", 400, 4), ("a.py:1", 0, 0)]


def test_a_site_is_named_from_the_repository_or_by_its_last_parts() -> None:
    root = Path("/repo")
    assert heap.short("/repo/kubecontrol/client.py:413", root) == "kubecontrol/client.py:413"
    assert heap.short("/usr/lib/python3.11/json/decoder.py:353", root) == "json/decoder.py:353"
    assert heap.short("<frozen abc>:106", root) == "<frozen abc>:106"
    # its line is what follows the last colon, a colon in its path kept
    assert heap.short("/srv/a:b/c.py:7", root) == "a:b/c.py:7"


def test_traced_children_trace_from_their_start_and_the_variable_goes_after() -> None:
    assert "PYTHONTRACEMALLOC" not in os.environ
    with heap.traced_children():
        child = subprocess.run(
            [sys.executable, "-c", "import tracemalloc; print(tracemalloc.is_tracing())"],
            capture_output=True,
            text=True,
            check=True,
        )
    assert child.stdout.strip() == "True"
    assert "PYTHONTRACEMALLOC" not in os.environ


def test_traced_children_take_the_variable_away_when_their_block_fails() -> None:
    with pytest.raises(RuntimeError), heap.traced_children():
        raise RuntimeError("the bed did not start")
    assert "PYTHONTRACEMALLOC" not in os.environ


@pytest.mark.usefixtures("gdb_calls")
def test_a_traced_process_says_which_line_holds_its_memory(tmp_path: Path) -> None:
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    with heap.traced_children():
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        sites = heap.heap_sites(proc.pid)
        size, count = sites[f"{script}:3"]
        assert size >= 8 * 2**20 and count >= 8 * 1024
        assert max(sites.items(), key=lambda x: x[1][0])[0] == f"{script}:3"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.usefixtures("gdb_calls")
def test_an_untraced_process_reads_as_no_heap(tmp_path: Path) -> None:
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert heap.heap_sites(proc.pid) == {}
    finally:
        proc.kill()
        proc.wait()


def test_a_tracing_already_asked_for_is_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONTRACEMALLOC", "25")
    with heap.traced_children():
        assert os.environ["PYTHONTRACEMALLOC"] == heap.FRAMES
    assert os.environ["PYTHONTRACEMALLOC"] == "25"


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed (Debian: gdb)")
def test_a_process_gdb_cannot_run_python_in_reads_as_no_heap_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    proc = subprocess.Popen(["sleep", "120"])  # no Python in it: gdb writes no file
    try:
        assert heap.heap_sites(proc.pid) == {}
        said = capsys.readouterr().out
        # why: gdb's last word, that the process has none of Python's functions it calls
        assert said.startswith(f"no heap of {proc.pid}: ") and "PyGILState_" in said
    finally:
        proc.kill()
        proc.wait()
