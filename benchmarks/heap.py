"""What a running Python controller holds, by the line that allocated it: the process traces its
heap from its start (`PYTHONTRACEMALLOC`, in the environment of processes started under
`traced_children`), and
`heap_sites` has it take a tracemalloc snapshot, through gdb (`PyRun_SimpleString` under the
GIL), and write its statistics by line to a file read back here. Tracing costs the process
memory and CPU of its own: its figures are for finding where memory goes, never for the
resident memory a run reports (benchmarks/memory.py runs it apart, with `--heap`).

Needs gdb (Debian's `gdb`), the right to trace the process (its parent, or root), and a gdb
that can call a function in a process on this machine: Debian's gdb 13.1 cannot on a CPU with
AMX state (it says "Couldn't write extended state status", and the call never runs):
`gdb_problem` says so before a run relies on it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Frames kept per allocation: the line that allocated it alone.
FRAMES = "1"

# Run in the traced process: its snapshot's statistics by line, as "bytes count file:line".
_DUMP = (
    "import tracemalloc as _t\n"
    "_snap = _t.take_snapshot()\n"  # before the file: an untraced process writes none
    "with open({path!r}, 'w') as _f:\n"
    "    for _s in _snap.statistics('lineno'):\n"
    "        _fr = _s.traceback[0]\n"
    "        _f.write(f'{{_s.size}} {{_s.count}} {{_fr.filename}}:{{_fr.lineno}}\\n')\n"
)

Sites = dict[str, tuple[int, int]]  # file:line -> (bytes, blocks)


@contextlib.contextmanager
def traced_children() -> Iterator[None]:
    """Processes started meanwhile (the bed's replicas take this process's environment) trace
    their heap from their start."""
    before = os.environ.get("PYTHONTRACEMALLOC")
    os.environ["PYTHONTRACEMALLOC"] = FRAMES
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONTRACEMALLOC"]
        else:
            os.environ["PYTHONTRACEMALLOC"] = before


@functools.cache
def gdb_problem() -> str | None:
    """Why gdb cannot call a function in a process here (None: it can): tried once on a
    process of its own, as `heap_sites` calls Python's."""
    if shutil.which("gdb") is None:
        return "gdb is not installed (Debian: gdb)"
    proc = subprocess.Popen(["sleep", "60"])
    try:
        argv = ["gdb", "-p", str(proc.pid), "-batch", "-nx", "-ex", "call (int)getpid()"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return "gdb took over 60 s to call getpid() in a sleeping process"
        if f"= {proc.pid}" in done.stdout:
            return None
        said = [line for line in done.stderr.splitlines() if line.strip()]  # its errors
        return f"gdb could not call getpid() in a sleeping process: {said[-1] if said else ''}"
    finally:
        proc.kill()
        proc.wait()


def heap_sites(pid: int, timeout: float = 120) -> Sites:
    """The traced heap of process `pid`, by allocating line (empty when it is not traced or
    gdb could not reach it: the reason is printed)."""
    with tempfile.TemporaryDirectory(prefix="heap-") as tmp:
        out = Path(tmp) / "sites.txt"
        code = _DUMP.format(path=str(out)).replace("\\", "\\\\").replace('"', '\\"')
        code = code.replace("\n", "\\n")
        argv = [
            "gdb", "-p", str(pid), "-batch", "-nx",
            "-ex", "call (int)PyGILState_Ensure()",
            "-ex", f'call (int)PyRun_SimpleString("{code}")',
            "-ex", "call (void)PyGILState_Release($1)",
        ]  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:  # gdb is ended; the process goes on when it detaches
            print(f"no heap of {pid}: gdb took over {timeout:.0f} s")
            return {}
        if not out.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            said = tail[0] if tail else "nothing"
            print(f"no heap of {pid}: it traces none, or gdb could not run Python in it ({said})")
            return {}
        sites: Sites = {}
        for line in out.read_text().splitlines():
            size, count, where = line.split(" ", 2)
            sites[where] = (int(size), int(count))
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
