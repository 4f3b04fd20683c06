"""The ML policies' own arithmetic (trainjob/runtime/policies.py), as Trainer v2.3's plugins
count: processes and slots per node, GPUs per node, the environment a TrainJob may not set,
and the hostfile's size known before it is written. The policies' whole output (pods, env,
ports, ConfigMaps) is tested through the framework (test_framework.py)."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.helpers.builders import make_trainjob
from trainjob.models import MLPolicy, parse_trainjob
from trainjob.naming import pod_dns_name
from trainjob.runtime import policies
from trainjob.runtime.info import RuntimeSpecError

Dict = dict[str, Any]


def trainjob(**trainer: Any) -> Any:
    return parse_trainjob(make_trainjob(trainer=trainer))


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
    assert policies.torch_nproc(trainjob(**trainer), runtime) == want


@pytest.mark.parametrize(
    ("resources", "want"),
    [
        ({}, 0),
        ({"requests": {"amd.com/gpu": "1"}}, 1),
        ({"limits": {"nvidia.com/gpu": "4"}}, 4),
        ({"requests": {"cpu": "8", "nvidia.com/mig-1g.5gb": "2"}}, 0),  # no "gpu" in its name
        ({"requests": {"example.com/GPU": "3"}}, 3),  # any case
        ({"requests": {"nvidia.com/gpu": "not a quantity"}}, 0),
    ],
)
def test_gpus_per_node(resources: Dict, want: int) -> None:
    assert policies.gpus_per_node(trainjob(), resources) == want


@pytest.mark.parametrize(
    ("trainer", "runtime_slots", "node", "want"),
    [
        ({}, 4, {}, 4),
        ({}, 1, {"resources": GPU}, 2),  # a runtime's 1 becomes the node's GPUs
        ({}, 1, {"resources": {"limits": {"nvidia.com/gpu": 1}}}, 1),
        ({}, 3, {"resources": GPU}, 3),  # any other number stays
        ({"numProcPerNode": 7}, 1, {"resources": GPU}, 7),
        ({"numProcPerNode": "auto"}, 1, {"resources": GPU}, 2),  # "auto" is no count
    ],
)
def test_mpi_slots_per_host(trainer: Dict, runtime_slots: int, node: Dict, want: int) -> None:
    assert policies.mpi_slots(trainjob(**trainer), runtime_slots, node) == want


def test_env_a_policy_sets_itself_is_refused_by_name() -> None:
    env = [{"name": "PET_NNODES", "value": "9"}, {"name": "MINE", "value": "x"}]
    with pytest.raises(RuntimeSpecError, match=r"spec\.trainer\.env: PET_NNODES are set by"):
        policies.refuse_reserved_env(trainjob(env=env), frozenset({"PET_NNODES"}), "torch")
    policies.refuse_reserved_env(trainjob(env=env[1:]), frozenset({"PET_NNODES"}), "torch")


@pytest.mark.parametrize("node_pods", [1, 9, 10, 11, 100, 1234])
@pytest.mark.parametrize("launcher", [None, "launcher"])
@pytest.mark.parametrize("line_end", [" slots=8\n", ":1\n"])
def test_the_hostfiles_size_is_the_bytes_written(
    node_pods: int, launcher: str | None, line_end: str
) -> None:
    hosts = [pod_dns_name("my-job", "node", 0, i) for i in range(node_pods)]
    if launcher is not None:
        hosts.append(pod_dns_name("my-job", launcher, 0, 0))
    written = "".join(f"{h}{line_end}" for h in hosts)
    assert policies.hostfile_size("my-job", "node", node_pods, launcher, line_end) == len(written)


@pytest.mark.parametrize(
    ("ml", "name"),
    [
        ({"torch": {}}, "torch"),
        ({"mpi": {}}, "mpi"),
        ({}, "plain"),
    ],
)
def test_the_policy_named_by_the_runtime_applies(ml: Dict, name: str) -> None:
    assert policies.select_plugin(MLPolicy.model_validate(ml)).name == name
