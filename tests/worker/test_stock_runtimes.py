"""Trainer v2.3.0's stock runtimes, each applied with its spec unchanged (as a TrainingRuntime
in the test's namespace, so that runs do not share cluster-scoped names), run a 2-node
TrainJob on a worker: the Jobs the worker controller makes carry each policy's environment,
the TrainJob's own variable and resources, and the roles Trainer gives them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from clusters.bed import Bed
from clusters.helpers.kube import TrainJobs
from clusters.helpers.waiting import wait_for
from tests.support.builders import make_trainjob
from tests.support.stock_runtimes import stock_runtimes

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("worker_controllers")]
TRAINER = {
    "numNodes": 2,
    "env": [{"name": "USER_VAR", "value": "1"}],
    "resourcesPerNode": {"requests": {"cpu": "100m"}},
}
# runtime -> replicatedJob -> the env names its `node` container must carry (beyond USER_VAR)
POLICY_ENV = {
    "torch-distributed": {"node": {"PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR"}},
    "jax-distributed": {"node": {"JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS"}},
    "xgboost-distributed": {"node": {"DMLC_TRACKER_URI", "DMLC_TASK_ID", "DMLC_NUM_WORKER"}},
    "deepspeed-distributed": {"node": set(), "launcher": {"OMPI_MCA_orte_default_hostfile"}},
    "mlx-distributed": {"node": set(), "launcher": {"OMPI_MCA_orte_default_hostfile"}},
}


@pytest.fixture
def tjs(
    bed: Bed, worker_names: list[str], namespace_factory: Callable[..., str]
) -> Iterator[TrainJobs]:
    yield TrainJobs(bed.api(worker_names[0]), namespace_factory(worker_names[0], "stock"))


def node_container(job: client.V1Job) -> client.V1Container:
    return next(c for c in job.spec.template.spec.containers if c.name == "node")


def jobs_by_role(tjs: TrainJobs, name: str, roles: set[str]) -> dict[str, client.V1Job] | None:
    """The TrainJob's Jobs by replicatedJob, once they are exactly `roles`."""
    found = {j.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]: j for j in tjs.jobs(name)}
    return found if found.keys() == roles else None


@pytest.mark.parametrize("runtime", sorted(POLICY_ENV))
def test_stock_runtime_runs_a_two_node_trainjob_as_trainer_does(
    tjs: TrainJobs, runtime: str
) -> None:
    tjs.create_runtime(stock_runtimes()[runtime])
    tjs.create(
        make_trainjob(
            "tj", runtimeRef={"name": runtime, "kind": "TrainingRuntime"}, trainer=TRAINER
        )
    )
    want = POLICY_ENV[runtime]
    jobs = wait_for(
        lambda: jobs_by_role(tjs, "tj", set(want)),
        60,
        what=f"Jobs {sorted(want)}",
    )
    for role, names in want.items():
        ctr = node_container(jobs[role])
        env = {e.name for e in ctr.env or []}
        assert names | {"USER_VAR"} <= env, (role, env)
        assert ctr.resources.requests["cpu"] == "100m"
    pods = {"node": 2} if "node" in want and "launcher" not in want else {"node": 1, "launcher": 1}
    assert {r: j.spec.parallelism for r, j in jobs.items()} == pods


def test_torchtune_runtime_claims_its_volume_as_jobset_does(tjs: TrainJobs) -> None:
    runtime = "torchtune-llama3.2-1b"
    tjs.create_runtime(stock_runtimes()[runtime])
    tjs.create(make_trainjob("tune", runtimeRef={"name": runtime, "kind": "TrainingRuntime"}))
    claim = wait_for(
        lambda: next(iter(tjs.core.list_namespaced_persistent_volume_claim(tjs.ns).items), None),
        60,
        what="the initializer claim",
    )
    assert claim.metadata.name == "initializer-tune"
    assert claim.metadata.labels["jobset.sigs.k8s.io/jobset-name"] == "tune"
    assert not claim.metadata.owner_references  # no retentionPolicy: kept, as JobSet keeps it
    jobs = wait_for(
        lambda: jobs_by_role(tjs, "tune", {"dataset-initializer", "model-initializer"}),
        60,
        what="the initializer Jobs",
    )
    for job in jobs.values():
        volumes = {v.name: v.persistent_volume_claim for v in job.spec.template.spec.volumes}
        assert volumes["initializer"].claim_name == "initializer-tune"
