"""Loaded by Python at the start of every process run under `benchmarks.heap.traced_children`
(their PYTHONPATH leads here; nothing else is on it): a process that traces its heap from its
start answers SIGUSR2 by writing its heap's statistics by allocating line, one
"bytes blocks file:line" per line, to `<HEAP_SITES_DIR>/<pid>.txt` (whole or not at all: written
beside it, then renamed). A process that does not trace installs nothing, and SIGUSR2 keeps its
default action there: `heap.heap_sites` asks only a process that catches it."""

import os
import signal
import tracemalloc


def _write_sites(_signo: int, _frame: object) -> None:
    snapshot = tracemalloc.take_snapshot()  # before anything the file costs
    path = os.path.join(os.environ["HEAP_SITES_DIR"], f"{os.getpid()}.txt")
    with open(f"{path}.part", "w") as out:
        for stat in snapshot.statistics("lineno"):
            frame = stat.traceback[0]
            out.write(f"{stat.size} {stat.count} {frame.filename}:{frame.lineno}\n")
    os.replace(f"{path}.part", path)


if tracemalloc.is_tracing() and os.environ.get("HEAP_SITES_DIR"):
    signal.signal(signal.SIGUSR2, _write_sites)
