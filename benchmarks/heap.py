"""What a running Python controller holds, by the line that allocated it: processes started under
`traced_children` trace their heap from their start (`PYTHONTRACEMALLOC`) and load
`heap_hook/sitecustomize.py`, which has them answer SIGUSR2 by writing their tracemalloc
statistics by line to a file; `heap_sites` sends the signal and reads the file back. Tracing
costs the process memory and CPU of its own: its figures are for finding where memory goes,
never for the resident memory a run reports (benchmarks/memory.py runs it apart, with `--heap`).

No debugger is needed (gdb's calls into a process fail on some machines: Debian's gdb 13.1 on a
CPU with AMX state). The process's main thread runs the handler between two bytecodes: one busy
in a long C call answers when the call returns.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

# Frames kept per allocation: the line that allocated it alone.
FRAMES = "1"

HOOK = Path(__file__).resolve().parent / "heap_hook"


@functools.cache
def sites_dir() -> Path:
    """Where processes traced from here write their heaps, one file per process id: a directory
    of this process's own, made at first use."""
    return Path(tempfile.mkdtemp(prefix="heap-sites-"))


Sites = dict[str, tuple[int, int]]  # file:line -> (bytes, blocks)


@contextlib.contextmanager
def traced_children() -> Iterator[None]:
    """Processes started meanwhile (the bed's replicas take this process's environment) trace
    their heap from their start and write it on SIGUSR2; the environment is put back after."""
    paths = os.environ.get("PYTHONPATH")
    wanted = {
        "PYTHONTRACEMALLOC": FRAMES,
        "HEAP_SITES_DIR": str(sites_dir()),
        "PYTHONPATH": os.pathsep.join([str(HOOK), *([paths] if paths else [])]),
    }
    before = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


def answers(pid: int) -> bool:
    """Process `pid` catches SIGUSR2 (its SigCgt mask says so): started under `traced_children`
    and tracing. Any other would be ended by the signal, so it is never sent one."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    masks = (line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    caught = next(masks, "0")
    return bool(int(caught, 16) >> (signal.SIGUSR2 - 1) & 1)


def heap_sites(pid: int, timeout: float = 120) -> Sites:
    """The traced heap of process `pid`, by allocating line (empty, the reason printed, when it
    does not answer SIGUSR2 or writes nothing within `timeout` seconds)."""
    if not answers(pid):
        print(f"no heap of {pid}: it does not trace its heap (not started under traced_children)")
        return {}
    out = sites_dir() / f"{pid}.txt"
    out.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + timeout
    while not out.exists():
        if time.monotonic() > deadline:
            print(f"no heap of {pid}: nothing written within {timeout:.0f} s")
            return {}
        time.sleep(0.2)
    sites: Sites = {}
    for line in out.read_text().splitlines():
        size, count, where = line.split(" ", 2)
        sites[where] = (int(size), int(count))
    out.unlink()
    return sites


def growth(before: Sites, after: Sites) -> list[tuple[str, int, int]]:
    """(site, bytes, blocks) each site grew by from `before` to `after`, most first."""
    rows = [
        (where, size - before.get(where, (0, 0))[0], count - before.get(where, (0, 0))[1])
        for where, (size, count) in after.items()
    ]
    return sorted(rows, key=lambda row: row[1], reverse=True)


def short(where: str, root: Path) -> str:
    """A site's file relative to `root` when under it (the repository), else its last parts."""
    path, _, line = where.rpartition(":")
    try:
        name = str(Path(path).relative_to(root))
    except ValueError:
        name = "/".join(Path(path).parts[-2:])
    return f"{name}:{line}"
