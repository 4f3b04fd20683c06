"""torchrun's processes per node, as Trainer v2.3's Torch plugin counts them, and the PET_*
environment it sets on a trainer node
(trainjob/runtime/mlpolicies/torch.py); its whole output through the framework
(tests/unit/trainjob/runtime/test_framework.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import container, make_runtime, make_trainjob, replicated_job
from tests.unit.trainjob.runtime.mlpolicies import RANK, node_env, trainjob
from trainjob.models import parse_runtime, parse_trainjob
from trainjob.runtime.framework import build_runtime_info
from trainjob.runtime.mlpolicies.torch import TORCH_RESERVED, torch_nproc
from trainjob_api.pods import ResourcesView

Dict = dict[str, Any]
GPU = {"limits": {"nvidia.com/gpu": 2}}


@pytest.mark.parametrize(
    ("trainer", "runtime", "want"),
    [
        ({}, {}, "1"),  # nothing said: one process
        ({}, {"requests": {"cpu": "3"}}, "3"),  # a node's CPUs
        ({}, {"requests": {"cpu": "1500m"}}, "2"),  # rounded up, as Quantity.Value
        ({}, {"limits": {"cpu": "4"}}, "4"),  # limits when no requests
        ({}, {"requests": {"cpu": "100m"}, "limits": {"cpu": "8"}}, "1"),  # requests first
        ({}, GPU, "auto"),  # torchrun: one per GPU
        ({"numProcPerNode": 5}, GPU, "5"),  # the TrainJob's word wins
        ({"numProcPerNode": "auto"}, {"requests": {"cpu": "2"}}, "2"),
        # the TrainJob's resourcesPerNode in place of the runtime's, not merged with it
        ({"resourcesPerNode": {"requests": {"cpu": "6"}}}, GPU, "6"),
    ],
)
def test_torch_processes_per_node(trainer: Dict, runtime: Dict, want: str) -> None:
    assert torch_nproc(trainjob(**trainer), ResourcesView(runtime)) == want


@pytest.mark.parametrize(
    "runtime_env",
    [
        [],
        [{"name": "OMP_NUM_THREADS", "value": "4"}],
        # a runtime that already says where the master is: the policy's value, once
        [{"name": "PET_MASTER_PORT", "value": "1234"}, {"name": "PET_NNODES", "value": "9"}],
        # one torch does not set is the runtime's to keep
        [{"name": "PET_MAX_RESTARTS", "value": "3"}],
    ],
)
def test_torchs_environment_on_a_trainer_node(runtime_env: list[Dict]) -> None:
    node = replicated_job("node", "trainer", [container(env=runtime_env)])
    runtime = make_runtime(ml_policy={"numNodes": 2, "torch": {}}, replicated_jobs=[node])
    info = build_runtime_info(
        parse_trainjob(make_trainjob()), parse_runtime(runtime), runtime["spec"]["template"]["spec"]
    )
    env = node_env(info)  # every name once
    kept = {e["name"]: e["value"] for e in runtime_env if e["name"] not in TORCH_RESERVED}
    assert {k: v for k, v in env.items() if k not in kept} == {
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": RANK,
        "PET_MASTER_ADDR": "tj-node-0-0.tj",
        "PET_MASTER_PORT": "29500",
    }
    assert {k: v for k, v in env.items() if k in kept} == kept


@pytest.mark.parametrize(
    ("resources", "nproc"),
    [({}, "1"), (GPU, "auto"), ({"requests": {"cpu": "3"}}, "3")],
)
def test_torchs_processes_per_node_are_counted_from_the_runtimes_node_container(
    resources: Dict, nproc: str
) -> None:
    node = replicated_job("node", "trainer", [container(resources=resources)])
    runtime = make_runtime(ml_policy={"numNodes": 1, "torch": {}}, replicated_jobs=[node])
    info = build_runtime_info(
        parse_trainjob(make_trainjob()), parse_runtime(runtime), runtime["spec"]["template"]["spec"]
    )
    assert node_env(info)["PET_NPROC_PER_NODE"] == nproc
