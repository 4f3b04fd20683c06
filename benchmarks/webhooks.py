"""Benchmark: CPU of the admission webhooks per TrainJob created on the manager.

Creates TrainJobs with dryRun=All: the API server calls both of the dispatcher's webhooks
(mutating, then validating) and stores nothing, so no other part of the product wakes up. The
replica the bed points the webhooks at is measured (its process CPU over the creates, less its
idle rate just before). Needs a running bed.

    .venv/bin/python benchmarks/webhooks.py --count 300 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.multikueue import TRAINER, clean_up, trainjob_body, with_product
from benchmarks.worker_trainjobs import cpu_seconds
from clusters import setup
from clusters.install import DISPATCHER


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=300, help="dry-run creates per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    started = with_product("webhooks")
    if started is None:
        return 1
    bed, ns, ctrls = started
    manager = bed.config.managers[0].name
    try:
        served = next(c for c in ctrls if c.name == DISPATCHER)  # the bed's webhook target
        custom = client.CustomObjectsApi(bed.api(manager))

        def create(i: int) -> None:
            body = trainjob_body(f"dry-{i:05d}")
            custom.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", body, dry_run="All")

        for i in range(20):  # connections and caches warm
            create(i)
        per_create = []
        for r in range(args.rounds):
            time.sleep(2)
            idle0 = cpu_seconds(served.proc.pid)
            time.sleep(3)
            idle = (cpu_seconds(served.proc.pid) - idle0) / 3
            cpu0, start = cpu_seconds(served.proc.pid), time.monotonic()
            for i in range(args.count):
                create(i)
            wall = time.monotonic() - start
            ms = (cpu_seconds(served.proc.pid) - cpu0 - idle * wall) * 1e3 / args.count
            per_create.append(ms)
            print(
                f"round {r}: {args.count} dry-run creates in {wall:.1f}s "
                f"({wall * 1e3 / args.count:.1f} ms each); {served.identity} CPU {ms:.2f} ms "
                f"per create (idle {idle * 1e3:.0f} ms/s taken off)",
                flush=True,
            )
        print(
            f"webhook CPU per TrainJob created: {statistics.median(per_create):.2f} ms "
            f"({min(per_create):.2f}-{max(per_create):.2f}, {args.rounds} rounds)"
        )
    finally:
        try:
            clean_up(bed, ns, [manager, *(w.name for w in bed.config.workers)])
        finally:
            setup.stop_controllers(bed, ctrls)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
