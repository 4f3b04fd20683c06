"""Loaded by Python at the start of every process run under `benchmarks.heap.hooked_children`
(their PYTHONPATH leads here; nothing else is on it): such a process answers SIGUSR2 by writing,
to `<HEAP_SITES_DIR>/<pid>.txt`, after a first line naming the request it answers ("# " and
the token in `<pid>.ask`), its allocators' figures (lines "= name bytes": glibc's malloc,
and Python's small-object allocator where the process does not trace, as tracing hides it), then,
where it traces its heap from its start, the traced heap's statistics by allocating line
("bytes blocks file:line"; where it traces more than one frame, by that line and its callers:
"file:line < file:line ..."); whole or not at all (written beside it, then renamed). Elsewhere
nothing is installed, and SIGUSR2 keeps its default action: `heap.heap_of` asks only a process
that catches it."""

import ctypes
import os
import re
import signal
import sys
import tempfile
import tracemalloc

# sys._debugmallocstats()'s lines read, by the name each is written under here.
_PYMALLOC = {
    "pymalloc arenas": re.compile(r"^(\d+) arenas \* (\d+) bytes/arena"),
    "pymalloc in blocks used": re.compile(r"^# bytes in allocated blocks\s+=\s+([\d,]+)"),
    "pymalloc free in pools used": re.compile(r"^# bytes in available blocks\s+=\s+([\d,]+)"),
    "pymalloc free pools": re.compile(r"^\d+ unused pools \* \d+ bytes\s+=\s+([\d,]+)"),
}

# glibc's mallinfo2 (2.33 and later), every arena summed.
_MALLINFO_FIELDS = (
    "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
    "fordblks", "keepcost",
)  # fmt: skip


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO_FIELDS]


def _pymalloc() -> dict[str, int]:
    """Python's small-object allocator, as sys._debugmallocstats() writes it on stderr (fd 2
    borrowed for the call); it writes none of it while tracemalloc's hooks are in place."""
    figures: dict[str, int] = {}
    with tempfile.TemporaryFile("w+") as out:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        for line in out:
            for name, pattern in _PYMALLOC.items():
                if name not in figures and (found := pattern.match(line)):
                    numbers = [int(g.replace(",", "")) for g in found.groups()]
                    figures[name] = numbers[0] * numbers[1] if len(numbers) == 2 else numbers[0]
    return figures


def _glibc() -> dict[str, int]:
    """glibc's malloc: bytes in use and free kept in its arenas, and in blocks of their own
    mappings (none where the C library is not glibc 2.33 or later)."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return {}
    mallinfo2.restype = _Mallinfo2
    info = mallinfo2()
    return {
        "malloc in use": info.uordblks,
        "malloc free kept": info.fordblks,
        "malloc mapped blocks": info.hblkhd,
    }


_writing = [False]  # whether a request is being answered (the handler is under way)


def _write_heap(_signo: int, _frame: object) -> None:
    """Answer the request (`<pid>.ask`). A signal that comes while an answer is being written
    (heap_of sends it again each second) returns at once: Python runs a handler again between
    any two bytecodes of the one under way, and each would take a snapshot of its own (a heap
    traced with several frames per allocation takes seconds to sum up: those snapshots, one
    inside the other, held gigabytes)."""
    if _writing[0]:
        return
    _writing[0] = True
    try:
        _answer()
    finally:
        _writing[0] = False


def _answer() -> None:
    tracing = tracemalloc.is_tracing()
    snapshot = tracemalloc.take_snapshot() if tracing else None  # before what the file costs
    figures = {**_glibc()} if tracing else {**_pymalloc(), **_glibc()}
    path = os.path.join(os.environ["HEAP_SITES_DIR"], f"{os.getpid()}.txt")
    try:
        with open(os.path.join(os.environ["HEAP_SITES_DIR"], f"{os.getpid()}.ask")) as ask:
            token = ask.read().strip()
    except OSError:
        token = ""
    with open(f"{path}.part", "w") as out:
        out.write(f"# {token}\n")  # the request this answers
        for name, value in figures.items():
            out.write(f"= {name} {value}\n")
        # by allocating line, or by that line and its callers when more frames are traced
        grouped_by = "traceback" if tracemalloc.get_traceback_limit() > 1 else "lineno"
        for stat in snapshot.statistics(grouped_by) if snapshot else []:
            # the allocating line first, then its callers (a traceback runs oldest first)
            frames = [f"{f.filename}:{f.lineno}" for f in reversed(stat.traceback)]
            out.write(f"{stat.size} {stat.count} {_CALLED_FROM.join(frames)}\n")
    os.replace(f"{path}.part", path)


_CALLED_FROM = " < "  # benchmarks/heap.py's CALLED_FROM

if os.environ.get("HEAP_SITES_DIR"):
    signal.signal(signal.SIGUSR2, _write_heap)
