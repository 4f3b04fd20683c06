"""The examples a tenant applies (`kubectl apply -n <namespace> -f examples/<file>`, with the
built-in `edit` role in one namespace) hold only what `edit` may create there, name no
namespace, submit to the LocalQueue the install runbook makes, run on a runtime the runbook
installs on every cluster (or one in the same file), and give GPU jobs a /dev/shm in memory."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
RUNBOOK = ROOT / "docs" / "operators" / "install.md"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
Dict = dict[str, Any]

# What a tenant's examples may hold: namespaced kinds the `edit` ClusterRole may create.
TENANT_KINDS = {
    "TrainJob",
    "TrainingRuntime",
    "Secret",
    "ConfigMap",
    "PersistentVolumeClaim",
}


def _docs(path: Path) -> list[Dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _platform(path: Path) -> bool:
    """The platform team's files: the runbook's, the runtimes it installs, the queues."""
    relative = path.relative_to(EXAMPLES).as_posix()
    return relative.startswith(("install/", "runtimes/")) or relative.endswith("-queues.yaml")


TENANT_FILES = [p for p in sorted(EXAMPLES.rglob("*.yaml")) if not _platform(p)]
IDS = [p.relative_to(EXAMPLES).as_posix() for p in TENANT_FILES]


def _local_queue(path: Path) -> str:
    (queue,) = [d["metadata"]["name"] for d in _docs(path) if d["kind"] == "LocalQueue"]
    return str(queue)


# The runbook's LocalQueue (step 4), the one every team gets; the GPU queue of examples/gpu/.
RUNBOOK_QUEUE = _local_queue(EXAMPLES / "install" / "manager-queues.yaml")
GPU_QUEUE = _local_queue(EXAMPLES / "gpu" / "manager-queues.yaml")


def _applied_in_step(step: int) -> set[Path]:
    """The example files the runbook's step `step` applies (`-f examples/...`, a directory
    standing for its YAML files)."""
    section = re.search(rf"^## {step}\. .*?(?=^## )", RUNBOOK.read_text(), re.M | re.S)
    assert section, f"install.md has no step {step}"
    files: set[Path] = set()
    for named in re.findall(r"-f (examples/\S+)", section.group(0)):
        path = ROOT / named
        files |= set(path.glob("*.yaml")) if path.is_dir() else {path}
    return files


def _runbook_runtimes() -> set[str]:
    """The ClusterTrainingRuntimes the runbook installs on every worker (step 2) and on the
    manager (step 4): the dispatcher sends a job only where its runtime is the manager's."""
    return {
        d["metadata"]["name"]
        for path in _applied_in_step(2) & _applied_in_step(4)
        for d in _docs(path)
        if d["kind"] == "ClusterTrainingRuntime"
    }


def _gpus(tj: Dict) -> bool:
    resources = (tj["spec"].get("trainer") or {}).get("resourcesPerNode") or {}
    return any("nvidia.com/gpu" in (resources.get(k) or {}) for k in ("limits", "requests"))


def _shm_in_memory(tj: Dict) -> bool:
    """A runtime patch gives the trainer's `node` container /dev/shm from a Memory emptyDir."""
    for patch in tj["spec"].get("runtimePatches") or []:
        spec = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for job in spec.get("replicatedJobs") or []:
            pod = job["template"]["spec"]["template"]["spec"]
            memory = {
                v["name"]
                for v in pod.get("volumes") or []
                if (v.get("emptyDir") or {}).get("medium") == "Memory"
            }
            for container in pod.get("containers") or []:
                if container["name"] == "node" and any(
                    m["mountPath"] == "/dev/shm" and m["name"] in memory
                    for m in container.get("volumeMounts") or []
                ):
                    return True
    return False


def _referenced(value: Any, key: str) -> set[str]:
    """Names under `key` (`secretKeyRef`, `configMap`, ...) anywhere in `value`."""
    if isinstance(value, dict):
        found = {str(value[key]["name"])} if isinstance(value.get(key), dict) else set()
        return found.union(*(_referenced(v, key) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_referenced(v, key) for v in value))
    return set()


def test_the_tenants_examples_and_the_runbooks_runtimes_are_found() -> None:
    assert set(IDS) >= {
        "torch-ddp-cpu.yaml",
        "progress-sdk.yaml",
        "mpi-cpu.yaml",
        "real-job.yaml",
        "gpu/gpu-trainjobs.yaml",
    }, IDS
    assert RUNBOOK_QUEUE == "user-queue"
    assert _runbook_runtimes() >= {"torch-ddp-cpu", "mpi-cpu", "torch-distributed"}


@pytest.mark.parametrize("path", TENANT_FILES, ids=IDS)
def test_an_example_holds_only_what_edit_may_create_and_names_no_namespace(path: Path) -> None:
    for doc in _docs(path):
        assert doc["kind"] in TENANT_KINDS, f"{doc['kind']} {doc['metadata']['name']}"
        assert "namespace" not in doc["metadata"], doc["metadata"]


@pytest.mark.parametrize("path", TENANT_FILES, ids=IDS)
def test_an_examples_trainjobs_use_the_runbooks_queue_and_a_runtime_it_installs(
    path: Path,
) -> None:
    docs = _docs(path)
    here = {(d["kind"], d["metadata"]["name"]) for d in docs}
    queue = GPU_QUEUE if path.parent.name == "gpu" else RUNBOOK_QUEUE
    for tj in (d for d in docs if d["kind"] == "TrainJob"):
        assert tj["metadata"]["labels"][QUEUE_LABEL] == queue, tj["metadata"]
        assert "managedBy" not in tj["spec"], "the manager's webhook sets it"
        ref = tj["spec"]["runtimeRef"]
        kind = ref.get("kind", "ClusterTrainingRuntime")
        if kind == "TrainingRuntime":
            assert (kind, ref["name"]) in here, ref
        else:
            assert ref["name"] in _runbook_runtimes(), ref


@pytest.mark.parametrize("path", TENANT_FILES, ids=IDS)
def test_the_secrets_and_config_maps_a_job_names_are_in_its_file(path: Path) -> None:
    docs = _docs(path)
    for tj in (d for d in docs if d["kind"] == "TrainJob"):
        for kind, keys in (
            ("Secret", ("secretKeyRef", "secretRef")),
            ("ConfigMap", ("configMapKeyRef", "configMapRef", "configMap")),
        ):
            named = set().union(*(_referenced(tj["spec"], k) for k in keys))
            made = {d["metadata"]["name"] for d in docs if d["kind"] == kind}
            assert named <= made, (kind, named - made)


def test_every_gpu_example_mounts_dev_shm_from_memory() -> None:
    gpu_jobs = [
        (p, d) for p in TENANT_FILES for d in _docs(p) if d["kind"] == "TrainJob" and _gpus(d)
    ]
    assert len(gpu_jobs) >= 2, gpu_jobs
    for path, tj in gpu_jobs:
        assert _shm_in_memory(tj), (path.name, tj["metadata"]["name"])
    for tj in _docs(EXAMPLES / "gpu" / "gpu-trainjobs.yaml"):
        assert _gpus(tj), tj["metadata"]["name"]


def test_the_real_job_uses_a_secret_a_config_map_claims_and_checkpoints() -> None:
    docs = _docs(EXAMPLES / "real-job.yaml")
    (tj,) = [d for d in docs if d["kind"] == "TrainJob"]
    assert _referenced(tj["spec"]["trainer"]["env"], "secretKeyRef") == {"hub-token"}
    pod = tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    pod = pod["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {"dataset", "checkpoints"}
    made = {d["metadata"]["name"] for d in _docs(EXAMPLES / "real-job-claims.yaml")}
    assert claims == made
    place = tj["metadata"]["annotations"]["trainjob.dev/checkpoints"]
    (ckpt,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "checkpoints"]
    assert place.startswith(ckpt["mountPath"] + "/")
