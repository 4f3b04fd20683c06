"""Restart soak: MultiKueue TrainJobs whose pods fail, restarted by their runtime's
failurePolicy on the workers (manager + 2 workers of the kwok bed; the Job controller, Kueue
and the scheduler real, the pods kwok's).

Every TrainJob runs 2 nodes on a runtime with `failurePolicy: {maxRestarts: M}` and
`backoffLimit: 0` (a failed pod fails its Job). Each is given, at random (seeded), how many of
its attempts fail (`bed.trainjob.dev/failing-attempts: k`, 0 to M+1): a pod of each of those
attempts exits 1 after `--run`; the attempt after them succeeds. So a job with k <= M must end
Complete with `status.restarts == k`, one with k = M+1 Failed (ReachedMaxRestarts) with M.

It prints the restarts per TrainJob, the time from a failed pod to every pod of the next
attempt Running (as the workers' pod watches saw it), and counts, exiting 1 when any is not 0:
- lost: TrainJobs not finished by the deadline, or finished otherwise than expected;
- run twice: TrainJobs whose pods ran on two workers (nothing here sends a job back), or an
  attempt with more pods than the job has nodes (a Job made twice);
- restarts miscounted: `status.restarts` on the manager is not the number of failed attempts.
Needs a running bed.

    .venv/bin/python benchmarks/restart_soak.py --jobs 60 --max-restarts 2
"""

from __future__ import annotations

import copy
import random
import statistics
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from kubernetes import client, watch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.multikueue import clean_up, running_bed, soak_args
from clusters import setup
from clusters.kube import Applier, load_manifests

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
JOBSET = "jobset.sigs.k8s.io/jobset-name"
NODES = 2
Dict = dict[str, Any]


def say(msg: str) -> None:
    print(f"[restart-soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Pods:
    """What the workers' pod watches saw, per TrainJob: the workers its pods ran on, the pods of
    each attempt, when the first pod of an attempt failed and when all of the next ran."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.workers: dict[str, set[str]] = defaultdict(set)
        self.pods: dict[tuple[str, int], set[str]] = defaultdict(set)
        self.running: dict[tuple[str, int], set[str]] = defaultdict(set)
        self.failed_at: dict[tuple[str, int], float] = {}
        self.all_running_at: dict[tuple[str, int], float] = {}

    def see(self, worker: str, pod: Any) -> None:
        labels = pod.metadata.labels or {}
        tj, attempt = labels.get(JOBSET), labels.get(ATTEMPT, "0")
        if not tj or not attempt.isdigit():
            return
        key, now = (tj, int(attempt)), time.monotonic()
        with self.lock:
            self.pods[key].add(pod.metadata.name)
            if pod.status.phase == "Running":
                self.workers[tj].add(worker)
                self.running[key].add(pod.metadata.name)
                if len(self.running[key]) >= NODES:
                    self.all_running_at.setdefault(key, now)
            elif pod.status.phase == "Failed":
                self.failed_at.setdefault(key, now)

    def watch(self, api: client.ApiClient, ns: str, worker: str) -> None:
        core = client.CoreV1Api(api)
        while not self.stop.is_set():
            try:
                for ev in watch.Watch().stream(core.list_namespaced_pod, ns, timeout_seconds=30):
                    self.see(worker, ev["object"])
            except Exception:  # the bed going away
                self.stop.wait(1.0)

    def restart_latencies(self) -> list[float]:
        """Seconds from a failed pod of attempt a to every pod of attempt a+1 Running."""
        with self.lock:
            return [
                self.all_running_at[(tj, a + 1)] - failed
                for (tj, a), failed in self.failed_at.items()
                if (tj, a + 1) in self.all_running_at
            ]


def runtime(name: str, max_restarts: int) -> Dict:
    example = setup.REPO / "examples" / "runtimes" / "torch-distributed.yaml"
    body = copy.deepcopy(load_manifests(example.read_text())[0])
    body["metadata"]["name"] = name
    spec = body["spec"]["template"]["spec"]
    spec["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 0
    spec["failurePolicy"] = {"maxRestarts": max_restarts}
    return body


def trainjob(name: str, runtime_name: str, failing: int, run: str) -> Dict:
    annotations = {
        "bed.trainjob.dev/run-duration": run,
        "bed.trainjob.dev/exit-code": "1",
        "bed.trainjob.dev/failing-attempts": str(failing),
    }
    node = {
        "name": "node",
        "template": {"spec": {"template": {"metadata": {"annotations": annotations}}}},
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "runtimeRef": {"name": runtime_name},
            "trainer": {"numNodes": NODES, "resourcesPerNode": {"requests": {"cpu": "500m"}}},
            "runtimePatches": [
                {
                    "manager": "bench.trainjob.dev/restart-soak",
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}},
                }
            ],
        },
    }


def finished(obj: Dict) -> tuple[str, str] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] in ("Complete", "Failed") and c["status"] == "True":
            return c["type"], c.get("reason", "")
    return None


def main() -> int:
    parser = soak_args(__doc__, jobs=60, run="3s", timeout=1800)
    parser.add_argument("--max-restarts", type=int, default=2)
    args = parser.parse_args()
    bed = running_bed()
    if bed is None:
        return 1
    rng = random.Random(args.seed)
    ns = f"restarts-{uuid.uuid4().hex[:4]}"
    name = f"restart-soak-{ns}"
    manager = bed.config.managers[0].name
    workers = [w.name for w in bed.config.workers]
    setup.install(bed, ns, worker_cpu=args.worker_cpu)
    for cluster in [manager, *workers]:
        Applier(bed.api(cluster)).apply(runtime(name, args.max_restarts))
    ctrls = setup.start_controllers(bed)
    pods = Pods()
    for worker in workers:
        threading.Thread(target=pods.watch, args=(bed.api(worker), ns, worker), daemon=True).start()
    failing = {f"soak-{i:03d}": rng.randint(0, args.max_restarts + 1) for i in range(args.jobs)}
    custom = client.CustomObjectsApi(bed.api(manager))
    failures = 0
    try:
        start = time.monotonic()
        for job, k in failing.items():
            custom.create_namespaced_custom_object(
                *TRAINER, ns, "trainjobs", trainjob(job, name, k, args.run)
            )
        say(
            f"submitted {args.jobs} TrainJobs to {ns}; "
            f"TrainJobs by failing attempts: {dict(sorted(Counter(failing.values()).items()))}"
        )
        state: dict[str, Dict] = {}
        while time.monotonic() < start + args.timeout:
            items = custom.list_namespaced_custom_object(*TRAINER, ns, "trainjobs")["items"]
            state = {i["metadata"]["name"]: i for i in items}
            if all(finished(state.get(j, {})) for j in failing):
                break
            time.sleep(5)
        total = time.monotonic() - start
        lost: list[str] = []
        miscounted: list[str] = []
        restarts: Counter[int] = Counter()
        for job, k in failing.items():
            obj = state.get(job, {})
            want = (
                ("Complete", "AllJobsCompleted")
                if k <= args.max_restarts
                else ("Failed", "ReachedMaxRestarts")
            )
            got = finished(obj)
            if got is None or got[0] != want[0] or (got[0] == "Failed" and got[1] != want[1]):
                lost.append(f"{job}: {got} (k={k})")
            counted = int((obj.get("status") or {}).get("restarts") or 0)
            restarts[counted] += 1
            if counted != min(k, args.max_restarts):
                miscounted.append(
                    f"{job}: restarts {counted}, failed attempts {min(k, args.max_restarts)}"
                )
        with pods.lock:
            two_workers = sorted(j for j, ws in pods.workers.items() if len(ws) > 1)
            made_twice = sorted(
                f"{j} attempt {a}" for (j, a), ps in pods.pods.items() if len(ps) > NODES
            )
        latencies = sorted(pods.restart_latencies())
        say(f"done after {total:.0f}s")
        print(f"  TrainJobs by status.restarts: {dict(sorted(restarts.items()))}")
        if latencies:
            print(
                f"  failed pod -> next attempt's {NODES} pods Running: n={len(latencies)}, "
                f"median {statistics.median(latencies):.1f} s, "
                f"p90 {latencies[int(0.9 * (len(latencies) - 1))]:.1f} s, max {latencies[-1]:.1f} s"
            )
        for label, found in (
            ("lost (unfinished or not as expected)", lost),
            ("run twice (two workers, or an attempt with extra pods)", two_workers + made_twice),
            ("restarts miscounted", miscounted),
        ):
            print(f"  {label}: {len(found)} {found[:5]}")
            failures += len(found)
    finally:
        pods.stop.set()
        try:
            clean_up(bed, ns, [manager, *workers])
            for cluster in [manager, *workers]:
                client.CustomObjectsApi(bed.api(cluster)).delete_cluster_custom_object(
                    *TRAINER, "clustertrainingruntimes", name
                )
        finally:
            setup.stop_controllers(bed, ctrls)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
