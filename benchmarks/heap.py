"""What a running Python controller holds: how much each allocator holds in use and keeps free
(Python's small-object allocator and glibc's malloc), and, traced, by the line that allocated
it. Processes started under `hooked_children` load `heap_hook/sitecustomize.py`, which has them
answer SIGUSR2 by writing those figures to a file, and, `traced=True`, trace their heap from
their start (`PYTHONTRACEMALLOC`) and add its tracemalloc statistics by line; `heap_of` sends
the signal and reads the file back. Tracing costs the process memory and CPU of its own, and
hides the small-object allocator's figures: its figures are for finding where memory goes,
never for the resident memory a run reports (benchmarks/memory.py runs it apart, with `--heap`;
`--allocators` reads the allocators of untraced replicas).

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
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

# Frames kept per allocation unless asked: the line that allocated it alone.
FRAMES = 1
# Between the frames of a site of more than one: the line that allocated, then its callers.
CALLED_FROM = " < "

HOOK = Path(__file__).resolve().parent / "heap_hook"


@functools.cache
def sites_dir() -> Path:
    """Where processes traced from here write their heaps, one file per process id: a directory
    of this process's own, made at first use."""
    return Path(tempfile.mkdtemp(prefix="heap-sites-"))


# file:line (or the allocating line and its callers, joined by CALLED_FROM) -> (bytes, blocks)
Sites = dict[str, tuple[int, int]]


@contextlib.contextmanager
def hooked_children(*, traced: bool, frames: int = FRAMES) -> Iterator[None]:
    """Processes started meanwhile (the bed's replicas take this process's environment) write
    their allocators' figures on SIGUSR2 and, `traced`, their heap by site, traced from their
    start: by allocating line, or with `frames` over 1 by that line and its callers (that
    many frames in all: who keeps what a shared helper allocates); the environment is put
    back after."""
    if frames < 1:
        raise ValueError(f"frames must be 1 or more, not {frames}")
    paths = os.environ.get("PYTHONPATH")
    wanted = {
        "PYTHONTRACEMALLOC": str(frames) if traced else "",
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
    """Process `pid` catches SIGUSR2 (its SigCgt mask says so): started under `hooked_children`.
    Any other would be ended by the signal, so it is never sent one."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    masks = (line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    caught = next(masks, "0")
    return bool(int(caught, 16) >> (signal.SIGUSR2 - 1) & 1)


class Heap(NamedTuple):
    """What a traced process holds: its traced heap by allocating line, and its allocators'
    figures (bytes by name: `pymalloc arenas`, `pymalloc in blocks used`, `pymalloc free in
    pools used`, `pymalloc free pools`, `malloc in use`, `malloc free kept`, `malloc mapped
    blocks`; the last three only on glibc 2.33 or later)."""

    sites: Sites
    allocators: dict[str, int]


NO_HEAP = Heap({}, {})


def heap_of(pid: int, timeout: float = 120) -> Heap:
    """The heap of process `pid` (NO_HEAP, the reason printed, when it does not answer SIGUSR2,
    is gone, or writes nothing within `timeout` seconds).

    The request names itself (`<pid>.ask`, a token the answer's first line repeats): an answer
    to an earlier request is never taken for this one. The signal is sent again every second
    until the answer comes: one that arrives while the process's handler is still running is
    kept pending, and a main thread back in a long C call (a sleep, a lock's wait) would not
    run it until that call returns."""
    if not answers(pid):
        print(f"no heap of {pid}: it does not answer SIGUSR2 (not started under hooked_children)")
        return NO_HEAP
    token = uuid.uuid4().hex
    ask, out = sites_dir() / f"{pid}.ask", sites_dir() / f"{pid}.txt"
    ask.write_text(token)
    try:
        lines = _asked(pid, out, token, time.monotonic() + timeout)
    finally:
        ask.unlink()
    if lines is None:
        return NO_HEAP
    held = Heap({}, {})
    for line in lines:
        if line.startswith("= "):
            name, _, value = line[2:].rpartition(" ")
            held.allocators[name] = int(value)
        else:
            size, count, where = line.split(" ", 2)
            held.sites[where] = (int(size), int(count))
    return held


def _asked(pid: int, out: Path, token: str, deadline: float) -> list[str] | None:
    """The answer's lines: the signal sent, and again each second, until it comes (None, the
    reason printed, when it does not by `deadline` or the process is gone)."""
    while (lines := _answer(out, token)) is None:
        if time.monotonic() > deadline:
            print(f"no heap of {pid}: nothing written in time")
            return None
        try:
            os.kill(pid, signal.SIGUSR2)
        except ProcessLookupError:
            print(f"no heap of {pid}: the process is gone")
            return None
        for _ in range(5):  # a second for the answer, then the signal again
            if out.exists():
                break
            time.sleep(0.2)
    return lines


def _answer(out: Path, token: str) -> list[str] | None:
    """The lines of the answer at `out` to the request `token`, taken away; None while there is
    none (an answer to another request is taken away too)."""
    try:
        first, *lines = out.read_text().splitlines()
    except (FileNotFoundError, ValueError):
        return None
    out.unlink(missing_ok=True)
    return lines if first == f"# {token}" else None


def growth(before: Sites, after: Sites) -> list[tuple[str, int, int]]:
    """(site, bytes, blocks) each site grew by from `before` to `after`, most first."""
    rows = [
        (where, size - before.get(where, (0, 0))[0], count - before.get(where, (0, 0))[1])
        for where, (size, count) in after.items()
    ]
    return sorted(rows, key=lambda row: row[1], reverse=True)


def short(where: str, root: Path) -> str:
    """A site's files relative to `root` when under it (the repository), else their last
    parts; each frame of a site of several so."""
    return CALLED_FROM.join(_short_frame(frame, root) for frame in where.split(CALLED_FROM))


def _short_frame(where: str, root: Path) -> str:
    path, _, line = where.rpartition(":")
    try:
        name = str(Path(path).relative_to(root))
    except ValueError:
        name = "/".join(Path(path).parts[-2:])
    return f"{name}:{line}"
