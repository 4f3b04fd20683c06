"""GPUs across a fleet of different GPUs (manager + 2 workers of the bed): examples/gpu/ as a
platform team applies it, kwok nodes that advertise nvidia.com/gpu (no real GPU here), one
worker's A100s and the other's H100s, tainted as managed clusters taint GPU nodes. A TrainJob
that asks for a model by nodeSelector runs only on the worker that has it, on a GPU node."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from clusters import images
from clusters.bed import KWOK_NODE_ANNOTATION, Bed
from clusters.config import REPO_ROOT
from clusters.helpers.waiting import wait_for
from clusters.kube import Applier, load_manifests
from tests.support.multikueue import TRAINER, MultiKueue

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
Dict = dict[str, Any]
GPU = REPO_ROOT / "examples" / "gpu"
PRODUCT = "nvidia.com/gpu.product"
MODELS = {"a100": "NVIDIA-A100-SXM4-80GB", "h100": "NVIDIA-H100-80GB-HBM3"}


def _in(docs: list[Dict], ns: str) -> list[Dict]:
    """The example's objects with its namespace (team-a) the test's."""
    out = copy.deepcopy(docs)
    for d in out:
        if d["metadata"].get("namespace") == "team-a":
            d["metadata"]["namespace"] = ns
    return out


def _gpu_node(name: str, model: str) -> Dict:
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok", PRODUCT: model},
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


@contextlib.contextmanager
def gpu_fleet(bed: Bed, mk: MultiKueue) -> Iterator[dict[str, str]]:
    """worker1 with an A100 node and its queues, worker2 with an H100 node and its, the
    manager's GPU queue (examples/gpu/), for the test's length. Yields node name by worker."""
    made: list[tuple[str, list[Dict]]] = []
    nodes = {}
    try:
        manager_docs = _in(load_manifests((GPU / "manager-queues.yaml").read_text()), mk.ns)
        Applier(bed.api(mk.manager)).apply_all(manager_docs)
        made.append((mk.manager, manager_docs))
        for worker, flavor in zip(mk.workers, ("a100", "h100"), strict=True):
            node = _gpu_node(f"{worker}-{flavor}-{mk.ns}", MODELS[flavor])
            queues = load_manifests((GPU / f"worker-{flavor}-queues.yaml").read_text())
            docs = [node, *_in(queues, mk.ns)]
            Applier(bed.api(worker)).apply_all(docs)
            made.append((worker, docs))
            nodes[worker] = node["metadata"]["name"]
        for worker, name in nodes.items():
            core = client.CoreV1Api(bed.api(worker))
            wait_for(
                lambda core=core, name=name: any(  # type: ignore[misc]
                    c.type == "Ready" and c.status == "True"
                    for c in core.read_node(name).status.conditions or []
                ),
                60,
                what=f"GPU node {name} Ready",
            )
        yield nodes
    finally:
        for cluster, docs in reversed(made):
            Applier(bed.api(cluster)).delete_all(docs)


def test_a_job_asking_for_a_gpu_model_runs_only_where_that_model_is(bed: Bed) -> None:
    mk = MultiKueue(bed)
    runtime = images.for_the_bed(
        [
            d
            for d in load_manifests(
                (REPO_ROOT / "examples/runtimes/torch-ddp-cpu.yaml").read_text()
            )
            if d["kind"] != "TrainJob"
        ]
    )
    for cluster in [mk.manager, *mk.workers]:
        Applier(bed.api(cluster)).apply_all(runtime)
    jobs = _in(load_manifests((GPU / "gpu-trainjobs.yaml").read_text()), mk.ns)
    for job in jobs:  # the bed's pods run 15 s, to be looked at while they run
        patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
        pod = patch["replicatedJobs"][0]["template"]["spec"]["template"]
        pod["metadata"] = {"annotations": {"bed.trainjob.dev/run-duration": "15s"}}
    with gpu_fleet(bed, mk) as nodes:
        custom = mk.custom()
        for job in jobs:
            custom.create_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", job)
        a100, h100 = mk.workers
        for name, worker, count in (("ddp-a100", a100, 1), ("ddp-h100", h100, 2)):
            pods = wait_for(
                lambda name=name, worker=worker, count=count: (  # type: ignore[misc]
                    found if len(found := mk.pods(worker, name)) == count else None
                ),
                90,
                what=f"{count} pods of {name} running on {worker}",
            )
            for pod in pods:
                assert pod.spec.node_name == nodes[worker], (name, pod.spec.node_name)
                limits = pod.spec.containers[0].resources.limits or {}
                assert limits.get("nvidia.com/gpu") in ("1", "2"), limits
                assert any(t.key == "nvidia.com/gpu" for t in pod.spec.tolerations or [])
                # /dev/shm from a memory-backed emptyDir, as DataLoader workers and NCCL need
                shm = {
                    v.name
                    for v in pod.spec.volumes or []
                    if v.empty_dir and v.empty_dir.medium == "Memory"
                }
                mounts = pod.spec.containers[0].volume_mounts or []
                assert any(m.mount_path == "/dev/shm" and m.name in shm for m in mounts), mounts
            assert mk.running_on(name) == [worker], name
        for job in jobs:
            name = job["metadata"]["name"]
            mk.wait_until(name, "Complete", timeout=120)
            assert (mk.get(name) or {})["status"]["clusterName"] in (a100, h100)
        assert (mk.get("ddp-a100") or {})["status"]["clusterName"] == a100
        assert (mk.get("ddp-h100") or {})["status"]["clusterName"] == h100
