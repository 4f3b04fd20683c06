"""Benchmark: capacity-aware placement against AllAtOnce, with the first worker full.

The first worker's ClusterQueue is filled by a TrainJob of its own (a local one, run by the
worker controller there, holding all of its quota for the whole run); the second worker has
room. The same TrainJobs (`--sequential` one at a time, then a `--burst`) go through the
manager twice, each time with the dispatcher installed afresh: once with
`--capacity-aware false` (copies to every worker, Kueue's AllAtOnce), once as installed
(`--capacity-aware`, the default). Prints, for each and side by side: remote Workload
creations per TrainJob on each worker (the dispatcher's creates in the workers' audit logs;
AllAtOnce makes one on the full worker for nothing), (a) create -> first pod Running and the
burst's total (benchmarks/multikueue.py's `measure`, which prints the rest too). Needs a
running bed.

    .venv/bin/python benchmarks/placement.py --sequential 10 --burst 40
"""

from __future__ import annotations

import datetime as dt
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.multikueue import (
    TRAINER,
    clean_up,
    measure,
    run_patch,
    trainjob_body,
    workload_args,
)
from clusters import audit, setup
from clusters.bed import Bed
from clusters.config import load_config
from clusters.install import leading_dispatcher

FULL_CPU = "4"  # the first worker's quota, all of it taken by its own TrainJob
DISPATCHER_USER = "system:serviceaccount:trainjob-system:trainjob-multikueue"


def fill(bed: Bed, worker: str, ns: str) -> None:
    """A TrainJob of the worker's own (no MultiKueue) holding all of its quota in `ns`."""
    body: dict[str, Any] = trainjob_body("filler", run_patch("3600s"), cpu=FULL_CPU)
    client.CustomObjectsApi(bed.api(worker)).create_namespaced_custom_object(
        *TRAINER, ns, "trainjobs", body
    )
    custom = client.CustomObjectsApi(bed.api(worker))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        cq = custom.get_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "clusterqueues", f"cq-{ns}"
        )
        used = [
            r.get("total")
            for f in (cq.get("status") or {}).get("flavorsReservation") or []
            for r in f.get("resources") or []
            if r["name"] == "cpu"
        ]
        if used and str(used[0]) == FULL_CPU:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the filler never reserved the quota of {worker}")


def remote_creates(bed: Bed, workers: list[str], since: dt.datetime) -> Counter[str]:
    """Workloads the dispatcher created on each worker since `since` (audit logs)."""
    return Counter(
        {
            w: sum(
                1
                for r in audit.requests(bed.cluster_dir(w), since)
                if r.user == DISPATCHER_USER and r.verb == "create" and r.resource == "workloads"
            )
            for w in workers
        }
    )


def run(bed: Bed, args: Any, capacity_aware: bool) -> dict[str, float]:
    workers = [w.name for w in bed.config.workers]
    full, free = workers[0], workers[1]
    ns = f"place-{uuid.uuid4().hex[:4]}"
    # The second worker (and any further one) has room for every TrainJob of the run.
    setup.install(bed, ns, worker_cpu="1000", cpu_by_worker={full: FULL_CPU})
    flag = ("--capacity-aware", "true" if capacity_aware else "false")
    ctrls = setup.start_controllers(bed, resync=None, manager_flags=flag)
    leader = leading_dispatcher(ctrls)
    title = "capacity-aware" if capacity_aware else "AllAtOnce"
    print(f"== {title}: {full} full (its own TrainJob holds {FULL_CPU} cpu), {free} free")
    try:
        fill(bed, full, ns)
        since = dt.datetime.now(dt.UTC)
        figures = measure(bed, ns, args, {"dispatcher (leader)": [leader.proc.pid]})
        n = args.sequential + args.burst
        creates = remote_creates(bed, workers, since)
        for w in workers:
            figures[f"remote Workload creations per TrainJob: {w}"] = creates[w] / n
        figures["remote Workload creations per TrainJob"] = sum(creates.values()) / n
        print(
            "remote Workload creations per TrainJob: "
            + ", ".join(f"{w} {creates[w] / n:.2f}" for w in workers)
        )
        clean_up(bed, ns, [bed.config.managers[0].name, *workers])
    finally:
        setup.stop_controllers(bed, ctrls)
    return figures


def main() -> int:
    args = workload_args(__doc__, sequential=10, burst=40).parse_args()
    bed = Bed(load_config())
    if not bed.is_up():
        print("the bed is not up; run `python -m clusters up` first", file=sys.stderr)
        return 1
    before = run(bed, args, capacity_aware=False)
    after = run(bed, args, capacity_aware=True)
    print("\nfigure: AllAtOnce -> capacity-aware")
    for key in before:
        if key in after and (
            key.startswith("remote Workload")
            or key.startswith("one (a)")
            or key.startswith("burst")
            or key.startswith("CPU ms")
            or key.startswith("API requests")
        ):
            print(f"  {key}: {before[key]:.2f} -> {after[key]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
