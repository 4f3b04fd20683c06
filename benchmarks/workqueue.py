"""Benchmark: the work queue's own CPU while keys come back by timer, with idle workers.

Controllers ask for many timed passes (a status held back for a moment, a grace period, a
retry), and most of the queue's workers are idle between bursts. This measures what the queue
itself costs then: `--keys` keys, each asking once for a pass after a delay spread over
`--spread` seconds, on a queue of `--workers` idle workers whose handler does nothing. It
prints the process's CPU per timer (all threads; the handler's own share is nil) and the
workers' idle wake-ups (woken, and nothing to take). Pure Python, no bed; the median and range
of `--repeat` rounds.

    .venv/bin/python benchmarks/workqueue.py --workers 16 --keys 2000 --spread 4 --repeat 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.figures import spread as spread_of
from kubecontrol.workqueue import WorkQueue


def one_round(workers: int, keys: int, spread: float) -> tuple[float, int]:
    """CPU microseconds per timer, and the workers' idle wake-ups."""
    done: list[int] = []
    queue: WorkQueue[int] = WorkQueue(done.append, workers=workers)
    queue.start()
    time.sleep(0.2)  # every worker waiting
    queue.stats()
    start = time.process_time()
    for key in range(keys):
        queue.add(key, after=spread * (key + 1) / keys)
    deadline = time.monotonic() + spread + 10
    while len(done) < keys and time.monotonic() < deadline:
        time.sleep(0.05)
    cpu = time.process_time() - start
    stats = queue.stats()
    queue.stop()
    if len(done) < keys:
        sys.exit(f"only {len(done)} of {keys} timers fired within {spread + 10:.0f}s")
    return cpu / keys * 1e6, stats.idle_wakeups


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=16, help="the dispatcher's default")
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--spread", type=float, default=4.0, help="seconds the timers span")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rounds = [one_round(args.workers, args.keys, args.spread) for _ in range(args.repeat)]
    cpu = [us for us, _ in rounds]
    wakeups = [idle / args.keys for _, idle in rounds]
    print(
        f"{args.keys} timers over {args.spread:g}s, {args.workers} idle workers: "
        f"CPU {spread_of(cpu, 0, ' us per timer')}"
    )
    print(f"idle wake-ups per timer: {spread_of(wakeups)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
