"""Benchmark: a burst of high-priority TrainJobs over a busy fleet (issue 80's figure). How many
lower-priority jobs are preempted per high-priority job, how much training they lose, and how
long the high-priority jobs wait for admission, for:

- ours, ungated: our dispatcher, Kueue's MultiKueueOrchestratedPreemption gate off everywhere
  (each worker a job is sent to may preempt for it);
- ours, Kueue's order: the gate on in every Kueue, the dispatcher with
  `--orchestrated-preemption true --preemption-order Kueue`;
- ours, by cost: the same with `--preemption-order Cost` (the default);
- peer: Kueue's own MultiKueue (with Trainer and JobSet on the workers), the gate on in every
  Kueue.

Ours runs its three on one fresh bed (a namespace each, every Kueue restarted for the gate);
the peer on a fresh bed of its own. The fleet: each worker's ClusterQueue of the namespace
holds `--quota` CPU and preempts lower priorities (withinClusterQueue: LowerPriority). Each
worker is filled with lower-priority TrainJobs of its own, worker i's (from 0) each taking
quota / 2**(2 - i mod 3) (so with 4 CPU: four jobs of 1 on the first, two of 2 on the second,
one of 4 on a third), worker by worker `--age-gap` seconds apart (the first worker's jobs are
the oldest). Then `--burst` TrainJobs of a WorkloadPriorityClass of 1000, each asking
`--urgent-cpu`, go to the manager at once. Each mode runs `--repeat` times, in an order that
rotates; the table gives the median (min-max) of each figure.

Training lost per eviction: from the evicted job's admission (QuotaReserved) to its eviction
(Kueue's decision; its pods' start and stop are not counted, and the bed's jobs save no
checkpoints). Time to admission: the high-priority job's manager Workload, from its creation
to the first Admitted condition seen. Every time is in whole seconds, as Kueue writes them.

    .venv/bin/python benchmarks/preemption.py
    .venv/bin/python benchmarks/preemption.py --pipelines ours --burst 6 --age-gap 70
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.figures import spread
from benchmarks.multikueue import (
    fresh_bed,
    replicas_arg,
    run_patch,
    start_ours,
    trainjob_body,
    wait_active,
)
from clusters import peer, setup
from clusters.bed import Bed
from clusters.helpers.kube import KUEUE, TrainJobs, preempting_for, workloads_seen
from clusters.helpers.waiting import wait_for

Dict = dict[str, Any]
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
GATE = "MultiKueueOrchestratedPreemption"
URGENT = "bench-urgent"
MODES = {
    "ours-ungated": (),
    "ours-kueue-order": ("--orchestrated-preemption", "true", "--preemption-order", "Kueue"),
    "ours-cost": ("--orchestrated-preemption", "true", "--preemption-order", "Cost"),
}


def _time(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _condition(obj: Dict, ctype: str) -> Dict | None:
    return next(
        (
            cd
            for cd in (obj.get("status") or {}).get("conditions") or []
            if cd.get("type") == ctype and cd.get("status") == "True"
        ),
        None,
    )


def evictions(seen: list[Dict], prefix: str) -> dict[tuple[str, str], float]:
    """Each preemption of a worker's own job (TrainJob named `prefix`...) as its Workload's
    versions show it: (Workload UID, eviction time) -> seconds of training lost (from its
    latest admission before then, as any version showed it, to its eviction)."""
    ours = [
        wl
        for wl in list(seen)
        if (wl["metadata"].get("ownerReferences") or [{}])[0].get("name", "").startswith(prefix)
    ]
    admissions: dict[str, set[dt.datetime]] = {}
    for wl in ours:
        admitted = _time((_condition(wl, "QuotaReserved") or {}).get("lastTransitionTime"))
        if admitted is not None:
            admissions.setdefault(wl["metadata"]["uid"], set()).add(admitted)
    out: dict[tuple[str, str], float] = {}
    for wl in ours:
        evicted = _condition(wl, "Evicted")
        if evicted is None or evicted.get("reason") != "Preempted":
            continue
        uid, at = wl["metadata"]["uid"], _time(evicted["lastTransitionTime"])
        before = [t for t in admissions.get(uid, ()) if at is not None and t <= at]
        if at is not None and before:
            out[(uid, evicted["lastTransitionTime"])] = (at - max(before)).total_seconds()
    return out


def admissions(seen: list[Dict], prefix: str) -> list[float]:
    """Per manager Workload of a TrainJob named `prefix`..., seconds from its creation to the
    first Admitted condition any of its versions showed (whole seconds, as Kueue writes
    them)."""
    first: dict[str, float] = {}
    for wl in list(seen):
        owner = (wl["metadata"].get("ownerReferences") or [{}])[0].get("name", "")
        admitted = _time((_condition(wl, "Admitted") or {}).get("lastTransitionTime"))
        created = _time(wl["metadata"].get("creationTimestamp"))
        if owner.startswith(prefix) and admitted and created:
            took = (admitted - created).total_seconds()
            uid = wl["metadata"]["uid"]
            first[uid] = min(first.get(uid, took), took)
    return list(first.values())


class Fleet:
    """One namespace of the bed: a MultiKueue queue `q` on the manager, a queue `q` of `quota`
    CPU on every worker preempting lower priorities for URGENT (setup.install)."""

    def __init__(self, bed: Bed, quota: int, runtime: Path | None = None) -> None:
        self.bed, self.ns = bed, f"pre-{uuid.uuid4().hex[:6]}"
        self.manager = bed.config.managers[0].name
        self.workers = [w.name for w in bed.config.workers]
        if runtime is None:  # the product's example runtime
            setup.install(bed, self.ns, worker_cpu=str(quota))
        else:
            setup.install(bed, self.ns, worker_cpu=str(quota), runtime=runtime)
        wait_active(bed)
        preempting_for(bed, self.ns, URGENT)

    def trainjobs(self, cluster: str) -> TrainJobs:
        return TrainJobs(self.bed.api(cluster), self.ns)

    def submit(self, name: str, cluster: str, cpu: int, run: str, urgent: bool = False) -> None:
        body = trainjob_body(name, run_patch(run), cpu=str(cpu))
        if urgent:
            body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = URGENT
        self.trainjobs(cluster).create(body)

    def wait_full(self, worker: str, cpu: int) -> None:
        """Until the worker's ClusterQueue of the namespace says `cpu` is reserved."""
        custom = client.CustomObjectsApi(self.bed.api(worker))

        def reserved() -> bool:
            cq = custom.get_cluster_custom_object(*KUEUE, "clusterqueues", f"cq-{self.ns}")
            return any(
                r["name"] == "cpu" and str(r.get("total")) == str(cpu)
                for f in (cq.get("status") or {}).get("flavorsReservation") or []
                for r in f.get("resources") or []
            )

        wait_for(reserved, 120, what=f"{worker} full")

    def free(self) -> None:
        """Every TrainJob of the namespace gone (the namespace kept: its Events too)."""
        for cluster in [self.manager, *self.workers]:
            jobs = self.trainjobs(cluster)
            for tj in jobs.custom.list_namespaced_custom_object(*TRAINER, self.ns, "trainjobs")[
                "items"
            ]:
                with contextlib.suppress(client.ApiException):
                    jobs.delete(tj["metadata"]["name"])


def fill(fleet: Fleet, quota: int, gap: float) -> None:
    """Each worker full of its own lower-priority jobs (see the module's docstring)."""
    for i, worker in enumerate(fleet.workers):
        if i and gap:
            time.sleep(gap)
        size = max(1, quota // 2 ** (2 - i % 3))
        for j in range(quota // size):
            fleet.submit(f"local-{j}", worker, size, "3600s")
        fleet.wait_full(worker, quota)


def one_run(fleet: Fleet, args: argparse.Namespace) -> dict[str, float]:
    """The burst over the filled fleet; its figures."""
    with contextlib.ExitStack() as stack:
        seen = {
            w: stack.enter_context(workloads_seen(fleet.bed.api(w), fleet.ns, w))
            for w in fleet.workers
        }
        on_manager = stack.enter_context(
            workloads_seen(fleet.bed.api(fleet.manager), fleet.ns, fleet.manager)
        )
        fill(fleet, args.quota, args.age_gap)
        started = time.monotonic()
        names = [f"urgent-{i}" for i in range(args.burst)]
        for name in names:
            fleet.submit(name, fleet.manager, args.urgent_cpu, args.urgent_run, urgent=True)
        jobs = fleet.trainjobs(fleet.manager)
        for name in names:
            jobs.wait_condition(name, "Complete", timeout=args.timeout)
        took = time.monotonic() - started
        time.sleep(3)  # the last evictions' versions reach the watches
        lost = {w: evictions(s, "local-") for w, s in seen.items()}
        said = {
            w: sorted(
                {
                    f"{(wl['metadata'].get('ownerReferences') or [{}])[0].get('name')}: "
                    + ",".join(
                        f"{cd['type']}={cd['status']}/{cd.get('reason')}"
                        for cd in (wl.get("status") or {}).get("conditions") or []
                    )
                    for wl in s
                }
            )
            for w, s in seen.items()
        }
        if args.verbose:
            for w, states in said.items():
                print(f"{w}: every state seen:", *states, sep="\n  ")
    waits = admissions(on_manager, "urgent-")
    for name in names:  # which worker each was let preempt on, and why (ours only)
        for reason, message in jobs.events(name):
            if reason == "PreemptionAllowed":
                print(f"  {name}: {message}", flush=True)
    every = [s for by_worker in lost.values() for s in by_worker.values()]
    figures = {
        "preemptions per high-priority job": len(every) / args.burst,
        "training lost, minutes (sum)": sum(every) / 60,
        "training lost per preemption, minutes (mean)": (
            statistics.mean(every) / 60 if every else 0.0
        ),
        "time to admission p50 s": statistics.median(waits) if waits else float("nan"),
        "time to admission max s": max(waits, default=float("nan")),
        "high-priority jobs never seen admitted": args.burst - len(waits),
        "burst took s": took,
    }
    for worker, by in lost.items():
        figures[f"preemptions on {worker}"] = len(by)
    return figures


@contextlib.contextmanager
def gated(bed: Bed, on: bool) -> Iterator[None]:
    """Every Kueue of the bed with the gate `on`, for the block."""
    if on:
        bed.set_kueue_feature_gates({GATE: True})
    try:
        yield
    finally:
        if on:
            bed.set_kueue_feature_gates({})


Results = dict[str, list[dict[str, float]]]


def ours(args: argparse.Namespace) -> Results:
    modes = [m for m in MODES if m in args.modes.split(",")]
    results: Results = {mode: [] for mode in modes}
    with fresh_bed("ours", replicas=args.replicas, pods_ready_timeout=1800, start=False) as (
        bed,
        _,
    ):
        for i in range(args.repeat):
            for mode in modes[i % len(modes) :] + modes[: i % len(modes)]:
                print(f"\n--- {mode}, repeat {i + 1}/{args.repeat}", flush=True)
                flags = MODES[mode]
                with gated(bed, bool(flags)):
                    ctrls = start_ours(bed, args.replicas, flags)
                    try:
                        fleet = Fleet(bed, args.quota)
                        try:
                            results[mode].append(one_run(fleet, args))
                        finally:
                            fleet.free()
                    finally:
                        setup.stop_controllers(bed, ctrls)
                print(results[mode][-1], flush=True)
    return results


def the_peer(args: argparse.Namespace) -> list[dict[str, float]]:
    out = []
    with fresh_bed(
        "peer-shipped", replicas=args.replicas, pods_ready_timeout=1800, kueue_gates={GATE: True}
    ) as (bed, _):
        runtime = peer.trainer_dir() / "manifests" / "base" / "runtimes" / "torch_distributed.yaml"
        for i in range(args.repeat):
            print(f"\n--- peer, repeat {i + 1}/{args.repeat}", flush=True)
            fleet = Fleet(bed, args.quota, runtime)
            try:
                out.append(one_run(fleet, args))
            finally:
                fleet.free()
            print(out[-1], flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pipelines", default="ours,peer", help="ours, peer, or both")
    parser.add_argument("--quota", type=int, default=4, help="CPU of each worker's queue")
    parser.add_argument("--burst", type=int, default=4, help="high-priority TrainJobs")
    parser.add_argument("--urgent-cpu", type=int, default=2, help="CPU each of them asks")
    parser.add_argument("--urgent-run", default="20s", help="how long each of them runs")
    parser.add_argument(
        "--age-gap", type=float, default=0.0, help="seconds between filling one worker and the next"
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds the burst may take")
    parser.add_argument("--verbose", action="store_true", help="print every Workload state seen")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each mode")
    parser.add_argument(
        "--modes", default=",".join(MODES), help="ours: which of " + ", ".join(MODES)
    )
    parser.add_argument("--out", type=Path, help="write every run's figures to this JSON file")
    replicas_arg(parser)
    args = parser.parse_args()
    results: Results = {}
    wanted = args.pipelines.split(",")
    if "ours" in wanted:
        results |= ours(args)
    if "peer" in wanted:
        results["peer (Kueue, gate on)"] = the_peer(args)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    keys = [k for runs in results.values() for figures in runs for k in figures]
    print(f"\n{'figure: median (min-max)':<46} " + " ".join(f"{name:<22}" for name in results))
    for key in dict.fromkeys(keys):
        cells = [spread([f[key] for f in results[n] if key in f]) for n in results]
        print(f"{key:<46} " + " ".join(f"{c:<22}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
