"""Benchmark: bursts across more workers, measured.

For each worker count (2, 4, 8 by default) and each pipeline (ours, and the upstream peer as
shipped; benchmarks/compare.py says what each is), a fresh bed of a manager and that many
workers, each worker like the bed's first (two kwok nodes of 8 CPUs), runs one burst of
`--burst` TrainJobs (1,000 by default) and reports: throughput (TrainJobs Complete on the
manager per second of the burst), (a) create -> first pod Running and (b) remote Complete ->
manager Complete percentiles, CPU per TrainJob and peak RSS of what dispatches to workers (ours:
the dispatcher replicas and the manager's Kueue; the peer: the manager's Kueue, which does its
MultiKueue) and of the whole pipeline. One machine holds every cluster: each has its own etcd,
API server, controller manager, scheduler, kwok and Kueue, and nothing is shared but the CPUs.

    .venv/bin/python benchmarks/scale.py --workers 2,4,8 --burst 1000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.compare import BED, MANAGER_SIDE, WHOLE, run
from benchmarks.multikueue import PIPELINES, replicas_arg, workload_args

COLUMNS = [
    ("TrainJobs/s", "burst TrainJobs per s", "{:.2f}"),
    ("Complete", "burst Complete", "{:.0f}"),
    ("total s", "burst total s", "{:.0f}"),
    ("(a) p50 s", "burst (a) p50 s", "{:.1f}"),
    ("(a) p99 s", "burst (a) p99 s", "{:.1f}"),
    ("(b) p50 s", "burst (b) p50 s", "{:.2f}"),
    ("(b) p99 s", "burst (b) p99 s", "{:.2f}"),
    ("dispatch CPU ms/TJ", f"CPU ms per TrainJob: {MANAGER_SIDE}", "{:.0f}"),
    ("dispatch peak RSS MiB", f"peak RSS MiB: {MANAGER_SIDE}", "{:.0f}"),
    ("pipeline CPU ms/TJ", f"CPU ms per TrainJob: {WHOLE}", "{:.0f}"),
    ("above idle", f"CPU ms per TrainJob above idle: {WHOLE}", "{:.0f}"),
    ("bed CPU ms/TJ", f"CPU ms per TrainJob: {BED}", "{:.0f}"),
    ("on two at once", "run on two workers at the same time", "{:.0f}"),
]


def main() -> int:
    parser: argparse.ArgumentParser = workload_args(__doc__, sequential=0, burst=1000)
    parser.add_argument("--workers", default="2,4,8", help="worker counts, in turn")
    parser.add_argument(
        "--pipelines", default="ours,peer-shipped", help="of " + ", ".join(PIPELINES)
    )
    parser.add_argument("--pods-ready-timeout", type=int, default=1800)
    replicas_arg(parser)
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    names = args.pipelines.split(",")
    rows: list[str] = []
    started = time.monotonic()
    header = f"{'pipeline':<14} {'workers':>7} " + " ".join(f"{c:>13}" for c, _, _ in COLUMNS)
    for count in counts:
        for name in names:
            print(f"\n##### {count} workers: {name}", flush=True)
            figures = run(name, args, workers=count)
            cells = [fmt.format(figures[k]) if k in figures else "-" for _, k, fmt in COLUMNS]
            rows.append(f"{name:<14} {count:>7} " + " ".join(f"{c:>13}" for c in cells))
            # The table so far after each run: a long series leaves its figures as it goes.
            print("\n".join(["", header, *rows]), flush=True)
    print(f"\nall runs took {time.monotonic() - started:.0f}s; bursts of {args.burst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
