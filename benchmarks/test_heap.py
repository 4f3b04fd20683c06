"""benchmarks/heap.py: a traced process's heap read by allocating line, and what grew (a test of
the benchmark, beside it: the suite never imports the benchmarks)."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import heap

# A process that holds about 8 MiB from one line of its own, then waits to be read.
HOLDER = """
import sys, time
held = [bytes(1024) for _ in range(8 * 1024)]  # the line read back
print("ready", flush=True)
time.sleep(120)
"""


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
    # each frame of a site of several
    where = "/repo/kubecontrol/client.py:413 < /srv/a:b/c.py:7 < <frozen abc>:106"
    assert heap.short(where, root) == "kubecontrol/client.py:413 < a:b/c.py:7 < <frozen abc>:106"


def test_hooked_children_trace_from_their_start_and_the_variables_go_after() -> None:
    assert "PYTHONTRACEMALLOC" not in os.environ
    with heap.hooked_children(traced=True):
        child = subprocess.run(
            [sys.executable, "-c", "import tracemalloc; print(tracemalloc.is_tracing())"],
            capture_output=True,
            text=True,
            check=True,
        )
    assert child.stdout.strip() == "True"
    assert "PYTHONTRACEMALLOC" not in os.environ and "HEAP_SITES_DIR" not in os.environ


def test_hooked_children_take_the_variables_away_when_their_block_fails() -> None:
    paths = os.environ.get("PYTHONPATH")
    with pytest.raises(RuntimeError), heap.hooked_children(traced=True):
        raise RuntimeError("the bed did not start")
    assert "PYTHONTRACEMALLOC" not in os.environ
    assert os.environ.get("PYTHONPATH") == paths


# Holds 8 MiB of 1 KiB blocks (malloc's), then, told to on stdin, frees every other one and
# holds 64 MiB in one block (a mapping of its own).
CHANGER = """
import sys
held = [bytes(1024) for _ in range(8 * 1024)]
print("ready", flush=True)
sys.stdin.readline()
del held[::2]
big = bytes(64 * 2**20)
print("changed", flush=True)
sys.stdin.readline()
"""

# Catches SIGUSR2 and does nothing: it never answers.
MUTE = """
import signal, time
signal.signal(signal.SIGUSR2, lambda *_: None)
print("ready", flush=True)
time.sleep(120)
"""


Holder = Callable[..., tuple[Path, "subprocess.Popen[str]"]]


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Holder]:
    """Starts a process running `code` (HOLDER by default) and waits for it to be ready: its
    script and the process, ended after the test."""
    started: list[subprocess.Popen[str]] = []

    def start(code: str = HOLDER, stdin: int | None = None) -> tuple[Path, subprocess.Popen[str]]:
        script = tmp_path / f"holder{len(started)}.py"
        script.write_text(code)
        proc = subprocess.Popen(
            [sys.executable, str(script)], stdin=stdin, stdout=subprocess.PIPE, text=True
        )
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return script, proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_a_traced_process_says_which_line_holds_its_memory_and_goes_on(holder: Holder) -> None:
    with heap.hooked_children(traced=True):
        script, proc = holder()
    for _ in range(3):  # asked again at once: the signal handled, the process still there
        held = heap.heap_of(proc.pid, timeout=30)
        sites = held.sites
        size, count = sites[f"{script}:3"]
        assert size >= 8 * 2**20 and count >= 8 * 1024
        assert max(sites.items(), key=lambda x: x[1][0])[0] == f"{script}:3"
        assert proc.poll() is None
        # tracing hides pymalloc's figures; malloc's are there
        assert held.allocators["malloc in use"] >= 8 * 2**20
        assert "pymalloc arenas" not in held.allocators
    assert not (heap.sites_dir() / f"{proc.pid}.ask").exists()  # the request taken away


# Holds 8 MiB allocated by one helper called from two lines: 6 MiB from one, 2 from the other.
CALLERS = """
import time
def blocks(n):
    out = []
    for _ in range(n):
        out.append(bytes(1024))  # the allocating line
    return out
many = blocks(6 * 1024)
few = blocks(2 * 1024)
print("ready", flush=True)
time.sleep(120)
"""


def test_with_more_frames_a_site_names_who_called_the_line_that_allocated(holder: Holder) -> None:
    with heap.hooked_children(traced=True, frames=3):
        script, proc = holder(CALLERS)
    sites = heap.heap_of(proc.pid, timeout=30).sites
    many = sites[f"{script}:6 < {script}:8"]  # the allocating line, then who called it
    few = sites[f"{script}:6 < {script}:9"]
    assert 6 * 2**20 <= many[0] < 7 * 2**20 and 2 * 2**20 <= few[0] < 3 * 2**20
    with pytest.raises(ValueError), heap.hooked_children(traced=True, frames=0):
        pass


def _hook(sites: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The hook's module loaded in this process (its SIGUSR2 handler put back after)."""
    monkeypatch.setenv("HEAP_SITES_DIR", str(sites))
    spec = importlib.util.spec_from_file_location("hook", heap.HOOK / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    saved = signal.getsignal(signal.SIGUSR2)
    try:
        spec.loader.exec_module(hook)
    finally:
        signal.signal(signal.SIGUSR2, saved)
    return hook


def test_an_answer_that_failed_leaves_the_next_request_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = _hook(tmp_path, monkeypatch)
    answer = hook._answer
    monkeypatch.setattr(hook, "_answer", lambda: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        hook._write_heap(signal.SIGUSR2, None)
    monkeypatch.setattr(hook, "_answer", answer)
    hook._write_heap(signal.SIGUSR2, None)
    assert (tmp_path / f"{os.getpid()}.txt").read_text().startswith("# \n")


def test_a_signal_that_comes_while_an_answer_is_written_adds_no_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """heap_of sends the signal again each second, and Python runs a handler again inside the
    one under way: a second snapshot taken inside the first held gigabytes."""
    hook = _hook(tmp_path, monkeypatch)
    taken, summed = [], []

    class Slow:
        """A snapshot whose summing the signal interrupts (the seconds-long part)."""

        def __init__(self, real: tracemalloc.Snapshot) -> None:
            self.real = real

        def statistics(self, key_type: str) -> list[tracemalloc.Statistic]:
            summed.append(1)
            hook._write_heap(signal.SIGUSR2, None)  # the signal again, mid-sum
            return self.real.statistics(key_type)

    def snapshot() -> Slow:
        taken.append(1)
        hook._write_heap(signal.SIGUSR2, None)  # the signal again, mid-snapshot
        return Slow(real())

    real = tracemalloc.take_snapshot
    monkeypatch.setattr(tracemalloc, "take_snapshot", snapshot)
    tracemalloc.start()
    try:
        hook._write_heap(signal.SIGUSR2, None)
        assert (taken, summed) == ([1], [1])
        hook._write_heap(signal.SIGUSR2, None)  # and answered again once it is done
        assert (taken, summed) == ([1, 1], [1, 1])
    finally:
        tracemalloc.stop()
    assert (tmp_path / f"{os.getpid()}.txt").read_text().startswith("# \n")


def test_an_untraced_process_reads_as_no_heap_and_is_never_signalled(
    holder: Holder, capsys: pytest.CaptureFixture[str]
) -> None:
    _, proc = holder()  # SIGUSR2 would end it: its default action
    assert heap.heap_of(proc.pid, timeout=5) == heap.NO_HEAP
    assert "does not answer SIGUSR2" in capsys.readouterr().out
    assert proc.poll() is None


def test_an_untraced_process_with_the_hook_gives_its_allocators_only(holder: Holder) -> None:
    with heap.hooked_children(traced=False):
        _, proc = holder()
    held = heap.heap_of(proc.pid, timeout=30)
    assert held.sites == {}
    # the 8 MiB of 1 KiB bytes are above the small-object bound: malloc's; pymalloc's
    # figures can be read in an untraced process
    assert held.allocators["malloc in use"] >= 8 * 2**20
    arenas, used = (
        held.allocators["pymalloc arenas"],
        held.allocators["pymalloc in blocks used"],
    )
    assert 0 < used <= arenas
    assert used + held.allocators["pymalloc free in pools used"] <= arenas


def test_a_tracing_already_asked_for_is_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONTRACEMALLOC", "25")
    with heap.hooked_children(traced=True):
        assert os.environ["PYTHONTRACEMALLOC"] == str(heap.FRAMES)
    assert os.environ["PYTHONTRACEMALLOC"] == "25"


def test_malloc_figures_follow_what_the_process_frees_and_maps(holder: Holder) -> None:
    with heap.hooked_children(traced=False):
        _, proc = holder(CHANGER, stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    before = heap.heap_of(proc.pid, timeout=30).allocators
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "changed"
    after = heap.heap_of(proc.pid, timeout=30).allocators
    # 4 MiB freed in holes malloc keeps; 64 MiB in a mapping of its own
    assert before["malloc in use"] - after["malloc in use"] >= 3 * 2**20
    assert after["malloc free kept"] - before["malloc free kept"] >= 3 * 2**20
    assert after["malloc mapped blocks"] - before["malloc mapped blocks"] >= 64 * 2**20
    pools = after["pymalloc free pools"]
    assert pools % (16 * 1024) == 0  # whole pools (16 KiB each on 3.11 and later)


def test_an_answer_to_another_request_is_never_taken_for_this_one(holder: Holder) -> None:
    with heap.hooked_children(traced=True):
        script, proc = holder()
    stale = heap.sites_dir() / f"{proc.pid}.txt"
    stale.write_text("# an-earlier-request\n1 1 stale.py:1\n")
    sites = heap.heap_of(proc.pid, timeout=30).sites
    assert "stale.py:1" not in sites and f"{script}:3" in sites


def test_a_process_that_never_answers_or_is_gone_reads_as_no_heap(
    holder: Holder, capsys: pytest.CaptureFixture[str]
) -> None:
    _, proc = holder(MUTE)
    assert heap.heap_of(proc.pid, timeout=1.5) == heap.NO_HEAP
    assert "nothing written in time" in capsys.readouterr().out
    assert not (heap.sites_dir() / f"{proc.pid}.ask").exists()
    proc.kill()
    proc.wait()
    assert heap.heap_of(proc.pid, timeout=5) == heap.NO_HEAP  # gone: not even asked


def test_hooked_children_keep_the_path_they_were_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with heap.hooked_children(traced=False):
        child = subprocess.run(
            [sys.executable, "-c", "import sys; print(sys.path)"],
            capture_output=True,
            text=True,
            check=True,
        )
    assert str(heap.HOOK) in child.stdout and str(tmp_path) in child.stdout
