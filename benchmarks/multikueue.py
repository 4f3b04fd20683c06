"""Benchmark: TrainJobs through manager + 2 workers (MultiKueue dispatcher), one at a time and
in a burst.

Prints p50/p99 of (a) manager create -> first pod Running on a worker and (b) remote Complete
-> manager Complete, the burst's total time, the dispatcher's CPU seconds and peak memory, and
API requests per TrainJob on each cluster (kube-apiserver's own counters). Times come from
watches opened by this script (monotonic clock at event receipt). Needs a running bed.

    .venv/bin/python benchmarks/multikueue.py --sequential 100 --burst 500
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from kubernetes import client, watch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.worker_trainjobs import cpu_seconds, pct, peak_rss_mib, request_counts
from clusters.bed import Bed
from clusters.config import load_config
from clusters.install import DISPATCHER, leads, scrape
from demo import setup

TRAINER = ("trainer.kubeflow.org", "v1alpha1")


class Clock:
    """First-seen monotonic times of events, fed by watch threads."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.remote_done: dict[str, float] = {}
        self.manager_done: dict[str, float] = {}
        self.ran_on: dict[str, set[str]] = {}  # TrainJob -> workers where a pod of it ran
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def mark(self, table: dict[str, float], key: str) -> None:
        with self.lock:
            table.setdefault(key, time.monotonic())


def _complete(obj: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Complete" and c["status"] == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def watch_pods(api: client.ApiClient, ns: str, clock: Clock, worker: str) -> None:
    """Note where pods run; survives API-server outages (the watch is simply opened again)."""
    core = client.CoreV1Api(api)
    while not clock.stop.is_set():
        try:
            for ev in watch.Watch().stream(core.list_namespaced_pod, ns, timeout_seconds=30):
                pod = ev["object"]
                tj = (pod.metadata.labels or {}).get("jobset.sigs.k8s.io/jobset-name")
                if tj and pod.status.phase == "Running":
                    clock.mark(clock.running, tj)
                    with clock.lock:
                        clock.ran_on.setdefault(tj, set()).add(worker)
        except Exception:  # the worker's API server is down: try again shortly
            clock.stop.wait(1.0)


def watch_trainjobs(api: client.ApiClient, ns: str, clock: Clock, table: dict[str, float]) -> None:
    custom = client.CustomObjectsApi(api)
    while not clock.stop.is_set():
        for ev in watch.Watch().stream(
            custom.list_namespaced_custom_object, *TRAINER, ns, "trainjobs", timeout_seconds=30
        ):
            if _complete(ev["object"]):
                clock.mark(table, ev["object"]["metadata"]["name"])


RUN_ONE_SECOND = {"annotations": {"bed.trainjob.dev/run-duration": "1s"}}
PATCH = {
    "manager": "bench.trainjob.dev",
    "trainingRuntimeSpec": {
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {"spec": {"template": {"metadata": RUN_ONE_SECOND}}},
                    }
                ]
            }
        }
    },
}


def our_requests(replica: setup.Controller) -> Counter[str]:
    """Requests a replica's clients sent, by HTTP verb (its own trainjob_api_requests_total)."""
    out: Counter[str] = Counter()
    for (name, labels), value in scrape(replica.health).items():
        if name == "trainjob_api_requests_total":
            out[dict(labels)["verb"]] += int(value)
    return out


def submit(custom: client.CustomObjectsApi, ns: str, name: str, clock: Clock) -> None:
    clock.mark(clock.created, name)
    custom.create_namespaced_custom_object(
        *TRAINER,
        ns,
        "trainjobs",
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"numNodes": 1, "resourcesPerNode": {"requests": {"cpu": "10m"}}},
                "runtimePatches": [PATCH],
            },
        },
    )


def report(title: str, names: list[str], clock: Clock) -> None:
    a = [clock.running[n] - clock.created[n] for n in names if n in clock.running]
    b = [
        clock.manager_done[n] - clock.remote_done[n]
        for n in names
        if n in clock.manager_done and n in clock.remote_done
    ]
    print(f"{title}: n={len(names)}")
    if a:
        print(
            f"  (a) create -> first pod Running: p50 {pct(a, 0.5):.2f}s  p99 {pct(a, 0.99):.2f}s"
            f"  mean {statistics.mean(a):.2f}s"
        )
    if b:
        print(
            f"  (b) remote Complete -> manager Complete: p50 {pct(b, 0.5):.2f}s  "
            f"p99 {pct(b, 0.99):.2f}s  mean {statistics.mean(b):.2f}s"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sequential", type=int, default=100)
    parser.add_argument("--burst", type=int, default=500)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--keep", action="store_true", help="leave the namespace behind")
    args = parser.parse_args()
    bed = Bed(load_config())
    if not bed.is_up():
        print("the bed is not up; run `python -m clusters up` first", file=sys.stderr)
        return 1
    ns = f"bench-{uuid.uuid4().hex[:4]}"
    setup.install(bed, ns, worker_cpu="1000")
    ctrls = setup.start_controllers(bed)
    # The replica that leads does the work (CPU and memory below are its own).
    dispatcher = next(c for c in ctrls if c.name == DISPATCHER and leads(c.health))
    manager = bed.config.managers[0].name
    clusters = [manager, *(w.name for w in bed.config.workers)]
    clock = Clock()
    threads = [
        threading.Thread(
            target=watch_trainjobs,
            args=(bed.api(manager), ns, clock, clock.manager_done),
            daemon=True,
        )
    ]
    for worker in bed.config.workers:
        threads.append(
            threading.Thread(
                target=watch_pods, args=(bed.api(worker.name), ns, clock, worker.name), daemon=True
            )
        )
        threads.append(
            threading.Thread(
                target=watch_trainjobs,
                args=(bed.api(worker.name), ns, clock, clock.remote_done),
                daemon=True,
            )
        )
    for t in threads:
        t.start()
    time.sleep(1)
    custom = client.CustomObjectsApi(bed.api(manager))
    try:
        cpu0 = cpu_seconds(dispatcher.proc.pid)
        req0 = {c: request_counts(bed.api(c)) for c in clusters}
        ours0 = {r.identity: our_requests(r) for r in ctrls}
        seq = [f"seq-{i:04d}" for i in range(args.sequential)]
        for name in seq:
            submit(custom, ns, name, clock)
            deadline = time.monotonic() + 120
            while name not in clock.manager_done and time.monotonic() < deadline:
                time.sleep(0.02)
        report("one at a time", seq, clock)
        burst = [f"burst-{i:04d}" for i in range(args.burst)]
        start = time.monotonic()
        for name in burst:
            submit(custom, ns, name, clock)
        deadline = start + args.timeout
        while sum(1 for n in burst if n in clock.manager_done) < len(burst):
            if time.monotonic() > deadline:
                print("burst timed out", file=sys.stderr)
                break
            time.sleep(0.5)
        total = time.monotonic() - start
        report(f"burst (all Complete on the manager after {total:.1f}s)", burst, clock)
        n = args.sequential + args.burst
        twice = sorted(tj for tj, workers in clock.ran_on.items() if len(workers) > 1)
        print(f"TrainJobs whose pods ran on more than one worker: {len(twice)} {twice[:5]}")
        cpu = cpu_seconds(dispatcher.proc.pid) - cpu0
        print(
            f"dispatcher CPU {cpu:.1f}s ({cpu / n * 1000:.0f} ms per TrainJob), peak RSS "
            f"{peak_rss_mib(dispatcher.proc.pid):.0f} MiB"
        )
        standby = [c for c in ctrls if c.name == DISPATCHER and c is not dispatcher]
        rss = [f"{r.identity} {peak_rss_mib(r.proc.pid):.0f} MiB" for r in [dispatcher, *standby]]
        print("dispatcher replicas' peak RSS (leader first): " + ", ".join(rss))
        for r in ctrls:
            mine = our_requests(r) - ours0[r.identity]
            by_verb = ", ".join(f"{v} {k / n:.1f}" for v, k in sorted(mine.items()))
            print(
                f"API requests per TrainJob sent by {r.identity} ({r.cluster}'s token, to any "
                f"cluster): {sum(mine.values()) / n:.1f} ({by_verb})"
            )
        for cluster in clusters:
            delta: Counter[tuple[str, str]] = request_counts(bed.api(cluster)) - req0[cluster]
            top = ", ".join(f"{v} {r} {k / n:.1f}" for (v, r), k in delta.most_common(6))
            print(
                f"API requests per TrainJob on {cluster}: {sum(delta.values()) / n:.1f} "
                f"(top: {top})"
            )
    finally:
        clock.stop.set()
        try:
            if not args.keep:
                clean_up(bed, ns, clusters)
        finally:
            setup.stop_controllers(bed, ctrls)
    return 0


def clean_up(bed: Bed, ns: str, clusters: list[str]) -> None:
    """Delete the namespace everywhere while the dispatcher still runs (its finalizer removes
    the remote objects first), so the next run does not start behind a backlog."""
    start = time.monotonic()
    for cluster in clusters:
        client.CoreV1Api(bed.api(cluster)).delete_namespace(ns)
    core = client.CoreV1Api(bed.api(clusters[0]))
    while time.monotonic() - start < 600:
        try:
            core.read_namespace(ns)
        except client.ApiException as exc:
            if exc.status == 404:
                print(f"namespace {ns} deleted everywhere after {time.monotonic() - start:.1f}s")
                return
            raise
        time.sleep(1)
    print(f"namespace {ns} still there after 600s", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
