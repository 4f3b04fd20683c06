"""Every ClusterTrainingRuntime that Kubeflow Trainer v2.3.0 ships, applied unchanged to a
2-node TrainJob, gives the pod roles, environment and resources Trainer's own plugins give
(read in its pkg/runtime/framework/plugins at v2.3.0). The runtimes come from Trainer's
module at test time (tests/support/stock_runtimes.py), not from copies."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.support.builders import make_trainjob
from tests.support.stock_runtimes import stock_runtimes
from trainjob.models import parse_runtime, parse_trainjob
from trainjob.runtime import RuntimeInfo, build_runtime_info

Dict = dict[str, Any]
RANK = "<completion index>"
GPU = "nvidia.com/gpu"
# A 2-node TrainJob with 2 GPUs per node and one variable of its own.
TRAINER = {
    "numNodes": 2,
    "env": [{"name": "USER_VAR", "value": "1"}],
    "resourcesPerNode": {"limits": {GPU: "2"}},
}
TORCH_ENV = {
    "USER_VAR": "1",
    "PET_NNODES": "2",
    "PET_NPROC_PER_NODE": "auto",  # GPUs on the node: torchrun starts one per GPU
    "PET_NODE_RANK": RANK,
    "PET_MASTER_ADDR": "tj-node-0-0.tj",
    "PET_MASTER_PORT": "29500",
}
OPENMPI_ENV = {
    "USER_VAR": "1",
    "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
    "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
    "OMPI_MCA_orte_set_default_slots": "2",  # the runtime's 1 becomes the node's 2 GPUs
    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
}
Expected = dict[str, tuple[str | None, int, Dict | None, str | None]]
# The launcher runs as a node: one `node` pod for a 2-node job, and both get the TrainJob's
# env and resourcesPerNode; the hostfile lists them in the runtime's order.
MPI_AS_NODE: Expected = {
    "node": (None, 1, {"USER_VAR": "1"}, "2"),
    "launcher": ("trainer", 1, OPENMPI_ENV, "2"),
}
TORCHTUNE: Expected = {
    "dataset-initializer": ("dataset-initializer", 1, None, None),
    "model-initializer": ("model-initializer", 1, None, None),
    "node": ("trainer", 2, TORCH_ENV, "2"),
}
# runtime -> PodSet -> (role, pods, the node container's env or None to skip, GPU limit)
EXPECTED: dict[str, Expected] = {
    "torch-distributed": {"node": ("trainer", 2, TORCH_ENV, "2")},
    "jax-distributed": {
        "node": (
            "trainer",
            2,
            {
                "USER_VAR": "1",
                "JAX_NUM_PROCESSES": "2",
                "JAX_PROCESS_ID": RANK,
                "JAX_COORDINATOR_ADDRESS": "tj-node-0-0.tj:29500",
            },
            "2",
        )
    },
    "xgboost-distributed": {
        "node": (
            "trainer",
            2,
            {
                "USER_VAR": "1",
                "DMLC_TRACKER_URI": "tj-node-0-0.tj",
                "DMLC_TRACKER_PORT": "29500",
                "DMLC_TASK_ID": RANK,
                "DMLC_NUM_WORKER": "4",  # 2 nodes x 2 GPUs
            },
            "2",
        )
    },
    "deepspeed-distributed": MPI_AS_NODE,
    "mlx-distributed": MPI_AS_NODE,
    "torchtune-llama3.2-1b": TORCHTUNE,
    "torchtune-llama3.2-3b": TORCHTUNE,
    "torchtune-qwen2.5-1.5b": TORCHTUNE,
}


def env_of(ctr: Dict) -> Dict:
    out = {}
    for e in ctr.get("env") or []:
        ref = (e.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
        rank = ref == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        out[e["name"]] = RANK if rank else e.get("value")
    return out


def run(name: str) -> RuntimeInfo:
    runtime = stock_runtimes()[name]
    tj = parse_trainjob(make_trainjob(runtimeRef={"name": name}, trainer=TRAINER))
    return build_runtime_info(tj, parse_runtime(runtime), runtime["spec"]["template"]["spec"])


def test_every_runtime_trainer_ships_is_covered() -> None:
    assert sorted(stock_runtimes()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_stock_runtime_gives_trainers_roles_env_and_resources(name: str) -> None:
    info = run(name)
    got = {}
    for ps in info.pod_sets:
        ctr = ps.container("node") or {}
        gpus = ((ctr.get("resources") or {}).get("limits") or {}).get(GPU)
        want_env = EXPECTED[name][ps.name][2]
        got[ps.name] = (ps.role, ps.count, env_of(ctr) if want_env is not None else None, gpus)
    assert got == EXPECTED[name]


@pytest.mark.parametrize("name", ["deepspeed-distributed", "mlx-distributed"])
def test_mpi_launcher_as_node_hostfile_follows_the_runtime_order(name: str) -> None:
    info = run(name)
    (hostfile,) = [o for o in info.policy.extra_objects if o["kind"] == "ConfigMap"]
    assert hostfile["data"]["hostfile"] == ("tj-node-0-0.tj slots=2\ntj-launcher-0-0.tj slots=2\n")


@pytest.mark.parametrize("name", [n for n in sorted(EXPECTED) if n.startswith("torchtune")])
def test_torchtune_initializer_claim_is_made_and_mounted_as_jobset_does(name: str) -> None:
    info = run(name)
    (claim,) = info.policy.claims
    assert claim["metadata"]["name"] == "initializer-tj"
    assert claim["metadata"]["labels"] == {"jobset.sigs.k8s.io/jobset-name": "tj"}
    assert claim["spec"]["resources"] == {"requests": {"storage": "20Gi"}}
    assert info.policy.owned_claims == set()  # no retentionPolicy: JobSet keeps the claim
    for ps in info.pod_sets:
        volumes = ps.pod_template["spec"]["volumes"]
        assert volumes == [
            {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer-tj"}}
        ]


def test_torch_with_cache_runs_its_initializer_first_and_its_pods_know_the_trainjob() -> None:
    """`torch-distributed-with-cache` (in Trainer's manifests beside the stock runtimes, and in
    its chart): the node waits for the dataset initializer, and both find the TrainJob's name
    through the `jobset.sigs.k8s.io/jobset-name` label of their pods, as under JobSet."""
    from clusters import builds
    from tests.support.stock_runtimes import MODULE
    from worker_controller.builders import build_job

    root = builds.module_source_dir("trainer", MODULE) / "manifests" / "base" / "runtimes"
    runtime = yaml.safe_load(
        (root / "data-cache" / "torch_distributed_with_cache.yaml").read_text()
    )
    tj = parse_trainjob(make_trainjob(runtimeRef={"name": runtime["metadata"]["name"]}))
    info = build_runtime_info(tj, parse_runtime(runtime), runtime["spec"]["template"]["spec"])
    by_name = {ps.name: ps for ps in info.pod_sets}
    assert [d.name for d in by_name["node"].depends_on] == ["dataset-initializer"]
    assert by_name["node"].role == "trainer"
    owner = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
             "metadata": {"name": "tj", "namespace": "ns", "uid": "u-1"}}  # fmt: skip
    for ps in info.pod_sets:
        job = build_job(info, ps, 0, owner, suspend=True)
        pod = job["spec"]["template"]
        assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "tj"
        (ctr,) = pod["spec"]["containers"]
        ref = {e["name"]: e.get("valueFrom") for e in ctr["env"]}["TRAIN_JOB_NAME"]
        assert ref["fieldRef"]["fieldPath"] == "metadata.labels['jobset.sigs.k8s.io/jobset-name']"
