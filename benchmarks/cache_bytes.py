"""Benchmark: what one cached object of each kind costs each controller, by kind (no bed).

Each controller's informers decode what the API server sends (orjson) and keep what their
transform returns: the whole object but `managedFields` (`slim`), a copy's few fields
(`copies.seen`), a worker's Job or Workload without its pods' image, command and environment,
a pod's or an Event's digest. Here each kind is made as this repository's
examples make it on a fleet (the torch runtime of examples/runtimes/torch-ddp-cpu.yaml, a
TrainJob of `--nodes` nodes as the Kubeflow SDK creates it, the Workload the product builds
for it, a Job and a pod of it running), `--count` of them (each another job's: its name and
UID its own) decoded through the transform it goes through, their strings shared as the
informer shares them (`kubecontrol.informer.Strings`, its table counted; `--unshared`: each
object's strings its own, as before), and the Python heap they hold measured with
tracemalloc: bytes per cached object, with the JSON's size beside it, and the microseconds
each took to decode and keep. A TrainJob applied with `kubectl apply` carries its
last-applied configuration too (`--kubectl`).

It measures the objects alone: an informer's index entries and the process's other memory
are not in it (benchmarks/memory.py measures the processes on a bed).

    .venv/bin/python benchmarks/cache_bytes.py [--count 1000] [--nodes 4] [--kubectl] [--unshared]
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clusters.helpers.examples import RUNTIME_FILE
from dispatcher.decisions.copies import seen
from kubebase.objects import Dict
from kubecontrol.informer import Strings, slim
from tests.support.builders import make_trainjob
from trainjob.models import parse_runtime, parse_trainjob
from trainjob.naming import owner_of
from trainjob.runtime import build_runtime_info
from trainjob.workload import build_workload
from trainjob_api import constants as c
from trainjob_api.views import ObjectView
from worker_controller.builders import build_job
from worker_controller.digests import job_digest, pod_digest, workload_digest

UID = "6c1d8f0e-5b7a-4f3e-9a51-0d2c3b4a5e6f"
NAME = "llama-finetune-0001"  # each object measured is another job's: its own name and UID
STAMP = "2026-12-04T10:00:00Z"


def _stored(obj: Dict, rv: int) -> Dict:
    """`obj` as the API server returns it: its UID, version, creation time, and a
    managedFields entry per writer (which `slim` drops)."""
    meta = obj["metadata"]
    meta.update(uid=UID, resourceVersion=str(rv), generation=1, creationTimestamp=STAMP)
    meta["managedFields"] = [
        {"manager": m, "operation": "Update", "apiVersion": obj["apiVersion"], "time": STAMP,
         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}, "f:spec": {}}}
        for m in ("kubeflow-sdk", "kueue", "trainjob-dispatcher")
    ]  # fmt: skip
    return obj


def _condition(ctype: str, reason: str, message: str) -> Dict:
    return {"type": ctype, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": STAMP, "observedGeneration": 1}  # fmt: skip


def objects(nodes: int, kubectl: bool) -> dict[str, Dict]:
    """One of each kind, as the API server would hold it mid-run."""
    runtime = yaml.safe_load(RUNTIME_FILE.read_text())
    trainjob = make_trainjob(
        NAME,
        "team-a",
        runtimeRef={"name": runtime["metadata"]["name"]},
        trainer={"numNodes": nodes, "env": [{"name": "EPOCHS", "value": "3"}]},
    )
    trainjob["metadata"]["labels"] = {c.KUEUE_QUEUE_NAME_LABEL: "team-a"}
    trainjob["spec"]["managedBy"] = c.MANAGED_BY_MULTIKUEUE
    if kubectl:
        trainjob["metadata"]["annotations"] = {
            "kubectl.kubernetes.io/last-applied-configuration": orjson.dumps(trainjob).decode()
        }
    _stored(trainjob, 101)
    tj = parse_trainjob(trainjob, stored=True)
    info = build_runtime_info(tj, parse_runtime(runtime), runtime["spec"]["template"]["spec"])
    trainjob["status"] = {
        "conditions": [_condition("Created", "JobsCreated", "the jobs of the TrainJob are made")],
        "jobsStatus": [{"name": ps.name, "active": ps.count, "ready": ps.count, "failed": 0,
                        "succeeded": 0, "suspended": 0} for ps in info.pod_sets],
    }  # fmt: skip
    workload = _stored(build_workload(tj, info, "team-a"), 102)
    workload["status"] = {
        "conditions": [
            _condition("QuotaReserved", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
            _condition("Admitted", "Admitted", "The workload is admitted"),
        ],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [
            {"name": p["name"], "count": p["count"], "flavors": {"cpu": "default"},
             "resourceUsage": {"cpu": "4"}} for p in workload["spec"]["podSets"]]},
        "admissionChecks": [{"name": "mk", "state": "Ready", "message": "The workload got "
                             "reservation on \"worker1\"", "lastTransitionTime": STAMP}],
    }  # fmt: skip
    owner = owner_of(ObjectView(trainjob))
    job = _stored(build_job(info, info.pod_sets[0], 0, owner, suspend=False), 103)
    job["status"] = {"active": nodes, "ready": nodes, "startTime": STAMP,
                     "uncountedTerminatedPods": {}}  # fmt: skip
    pod = _stored(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{job['metadata']['name']}-0-x7k2p",
                "namespace": "team-a",
                "labels": dict(job["spec"]["template"]["metadata"].get("labels") or {}),
                "annotations": dict(job["spec"]["template"]["metadata"].get("annotations") or {}),
            },
            "spec": job["spec"]["template"]["spec"],
            "status": {
                "phase": "Running",
                "podIP": "10.244.0.17",
                "conditions": [_condition(t, "", "") for t in ("Ready", "PodScheduled")],
                "containerStatuses": [{"name": "node", "ready": True, "restartCount": 0,
                                       "image": "python:3.11", "imageID": "sha256:" + "0" * 64,
                                       "state": {"running": {"startedAt": STAMP}}}],
            },
        },
        104,
    )  # fmt: skip
    return {"TrainJob": trainjob, "Workload": workload, "Job": job, "Pod": pod}


# Each controller's caches, by kind: the object, and the transform its informer applies.
CACHES: list[tuple[str, str, Callable[[Dict], Dict]]] = [
    ("dispatcher", "TrainJob", slim),
    ("dispatcher", "Workload", slim),
    ("dispatcher (each worker's copy)", "TrainJob", functools.partial(seen, c.TRAINJOB)),
    ("dispatcher (each worker's copy)", "Workload", functools.partial(seen, c.WORKLOAD)),
    ("worker controller", "TrainJob", slim),
    ("worker controller", "Workload", lambda obj: workload_digest(slim(obj))),
    ("worker controller", "Job", lambda obj: job_digest(slim(obj))),
    ("worker controller", "Pod", pod_digest),
]


def held_bytes(
    body: bytes, transform: Callable[[Dict], Dict], count: int, shared: bool
) -> tuple[float, float]:
    """The heap `count` decoded, transformed objects hold, per object (each another job's: its
    name and UID its own; its strings shared as the informer shares them, `shared`), and the
    microseconds each took to decode and keep."""
    bodies = [
        body.replace(NAME.encode(), f"{NAME[:-4]}{i:04d}".encode()).replace(
            UID.encode(), str(uuid.UUID(int=i)).encode()
        )
        for i in range(count)
    ]
    kept: list[Dict] = []
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    strings = Strings() if shared else None  # its entries count: the process holds them
    for one in bodies:
        kept.append(_kept(one, transform, strings))
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    kept.clear()
    strings = Strings() if shared else None
    start = time.perf_counter()  # untraced: what the informer's thread spends per object
    for one in bodies:
        kept.append(_kept(one, transform, strings))
    return (after - before) / count, (time.perf_counter() - start) / count * 1e6


def _kept(body: bytes, transform: Callable[[Dict], Dict], strings: Strings | None) -> Dict:
    obj = transform(orjson.loads(body))
    if strings is not None:
        strings.share(obj)
    return obj


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="objects decoded per kind")
    parser.add_argument("--nodes", type=int, default=4, help="the TrainJob's numNodes")
    parser.add_argument("--kubectl", action="store_true", help="applied with kubectl apply")
    parser.add_argument(
        "--unshared",
        action="store_true",
        help="each object's strings its own, as the informers kept them before they shared them",
    )
    args = parser.parse_args()
    made = objects(args.nodes, args.kubectl)
    print(f"{'process':34} {'kind':9} {'JSON B':>7} {'held B':>7} {'us':>6}")
    for process, kind, transform in CACHES:
        body = orjson.dumps(made[kind])
        held, cpu = held_bytes(body, transform, args.count, not args.unshared)
        print(f"{process:34} {kind:9} {len(body):7d} {held:7.0f} {cpu:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
