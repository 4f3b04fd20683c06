"""What a job's Secrets and ConfigMaps cost its start: MultiKueue TrainJobs created one at a
time on the kwok bed, each waited for until its pod runs on a worker, in a namespace without
dependencies and in one that copies them (labelled `trainjob.dev/copy-dependencies=true`, the
workers given `deploy/worker/with-dependencies`), where each job's trainer reads K Secrets
and K ConfigMaps through its env.

It prints, for each, the time from the TrainJob's create to its pod Running (as the workers'
pod watches see it) and from its manager Workload's quota reservation (the Workload's
`QuotaReserved` condition, a whole second as the API stamps it) to that pod Running, median
and p90, and the difference. Needs a running bed.

    .venv/bin/python benchmarks/dependency_start.py --jobs 15 --objects 4
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import functools
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.multikueue import (
    TRAINER,
    Clock,
    clean_up,
    run_patch,
    running_bed,
    trainjob_body,
    watch_pods,
)
from clusters import setup
from clusters.bed import Bed
from clusters.config import REPO_ROOT
from clusters.helpers.waiting import wait_for
from clusters.kube import Applier, load_manifests

KUEUE = ("kueue.x-k8s.io", "v1beta2")
ACCESS = REPO_ROOT / "deploy" / "worker" / "with-dependencies" / "dependencies-rbac.yaml"
Dict = dict[str, Any]


def say(msg: str) -> None:
    print(f"[dependency-start {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def opt_in(bed: Bed, ns: str, objects: int) -> list[Dict]:
    """The namespace labelled by its admin, K Secrets and K ConfigMaps in it; the env that
    reads them all."""
    core = client.CoreV1Api(bed.api(bed.config.managers[0].name))
    core.patch_namespace(ns, {"metadata": {"labels": {"trainjob.dev/copy-dependencies": "true"}}})
    env = []
    for i in range(objects):
        value = base64.b64encode(f"token-{i}".encode()).decode()
        secret = {"metadata": {"name": f"secret-{i}"}, "data": {"token": value}}
        core.create_namespaced_secret(ns, secret)
        core.create_namespaced_config_map(
            ns, {"metadata": {"name": f"config-{i}"}, "data": {"lr": "0.1"}}
        )
        env += [
            {
                "name": f"S{i}",
                "valueFrom": {"secretKeyRef": {"name": f"secret-{i}", "key": "token"}},
            },
            {
                "name": f"C{i}",
                "valueFrom": {"configMapKeyRef": {"name": f"config-{i}", "key": "lr"}},
            },
        ]
    return env


def reserved_at(bed: Bed, ns: str, name: str) -> float | None:
    """When the manager's Workload of `name` had its quota reserved (epoch seconds)."""
    custom = client.CustomObjectsApi(bed.api(bed.config.managers[0].name))
    for wl in custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]:
        if not any(o.get("name") == name for o in wl["metadata"].get("ownerReferences") or []):
            continue
        for cond in (wl.get("status") or {}).get("conditions") or []:
            if cond["type"] == "QuotaReserved" and cond["status"] == "True":
                return dt.datetime.fromisoformat(cond["lastTransitionTime"]).timestamp()
    return None


def run(
    bed: Bed, ns: str, jobs: int, env: list[Dict] | None, clock: Clock
) -> tuple[list[float], list[float]]:
    """Create `jobs` TrainJobs one at a time; (create -> Running, reserved -> Running) each."""
    custom = client.CustomObjectsApi(bed.api(bed.config.managers[0].name))
    from_create, from_reserved = [], []
    for i in range(jobs):
        name = f"start-{i:03d}"
        body = trainjob_body(name, run_patch("600s"), cpu="100m")
        if env:
            body["spec"]["trainer"]["env"] = env
        wall = time.time()
        custom.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", body)
        running: float = wait_for(functools.partial(clock.running.get, name), 120, what=name)
        seen = time.time() - (time.monotonic() - running)  # the watch's moment, in wall time
        from_create.append(seen - wall)
        reserved = reserved_at(bed, ns, name)
        if reserved is not None:
            from_reserved.append(seen - reserved)
        clock.running.pop(name, None)  # the next namespace reuses the names
    return from_create, from_reserved


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return f"median {statistics.median(ordered):.2f} s, p90 {p90:.2f} s (n={len(ordered)})"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=15, help="TrainJobs in each namespace")
    parser.add_argument(
        "--objects", type=int, default=4, help="Secrets (and ConfigMaps) a job reads"
    )
    args = parser.parse_args()
    bed = running_bed()
    if bed is None:
        return 1
    manager = bed.config.managers[0].name
    workers = [w.name for w in bed.config.workers]
    suffix = uuid.uuid4().hex[:4]
    plain, copied = f"plain-{suffix}", f"deps-{suffix}"
    access = load_manifests(ACCESS.read_text())
    for ns in (plain, copied):
        setup.install(bed, ns, worker_cpu="1000")
    for worker in workers:
        Applier(bed.api(worker)).apply_all(access)
    ctrls = setup.start_controllers(bed, resync=None)
    try:
        env = opt_in(bed, copied, args.objects)
        results = {}
        for ns, with_env in ((plain, None), (copied, env)):
            clock = Clock()
            for worker in workers:
                threading.Thread(
                    target=watch_pods, args=(bed.api(worker), ns, clock, worker), daemon=True
                ).start()
            results[ns] = run(bed, ns, args.jobs, with_env, clock)
            clock.stop.set()
        for label, ns in (
            ("no dependencies", plain),
            (f"{args.objects} Secrets + {args.objects} ConfigMaps", copied),
        ):
            create, reserved = results[ns]
            said = f"create -> Running {summary(create)}; reserved -> Running {summary(reserved)}"
            say(f"{label}: {said}")
        extra = statistics.median(results[copied][0]) - statistics.median(results[plain][0])
        say(f"median create -> Running with dependencies minus without: {extra:+.2f} s")
    finally:
        try:
            for ns in (plain, copied):
                clean_up(bed, ns, [manager, *workers])
            for worker in workers:
                Applier(bed.api(worker)).delete_all(access)
        finally:
            setup.stop_controllers(bed, ctrls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
