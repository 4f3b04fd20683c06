"""What the plugins share (trainjob/runtime/mlpolicies/common.py): GPUs per node as
Trainer v2.3 counts them, the environment a policy sets itself refused by name, and the ports
and env it adds kept once."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.trainjob.runtime.mlpolicies import trainjob
from trainjob.runtime.info import RuntimeSpecError
from trainjob.runtime.mlpolicies.common import add_port, gpus_per_node, refuse_reserved_env, set_env
from trainjob_api.pods import ResourcesView

Dict = dict[str, Any]


@pytest.mark.parametrize(
    ("resources", "want"),
    [
        ({}, 0),
        ({"requests": {"amd.com/gpu": "1"}}, 1),
        ({"limits": {"nvidia.com/gpu": "4"}}, 4),
        ({"requests": {"cpu": "8", "nvidia.com/mig-1g.5gb": "2"}}, 0),  # no "gpu" in its name
        ({"requests": {"example.com/GPU": "3"}}, 3),  # any case
        ({"requests": {"nvidia.com/gpu": "not a quantity"}}, 0),
        # whatever their shape: a section that is no map holds none, the other still counts
        ({"requests": ["nvidia.com/gpu"]}, 0),
        # requests without a GPU: the limits' count
        ({"requests": {"cpu": "8"}, "limits": {"nvidia.com/gpu": "2"}}, 2),
        ({"requests": "nvidia.com/gpu", "limits": {"nvidia.com/gpu": "2"}}, 2),
    ],
)
def test_gpus_per_node(resources: Dict, want: int) -> None:
    assert gpus_per_node(trainjob(), ResourcesView(resources)) == want


def test_env_a_policy_sets_itself_is_refused_by_name() -> None:
    env = [{"name": "PET_NNODES", "value": "9"}, {"name": "MINE", "value": "x"}]
    with pytest.raises(RuntimeSpecError, match=r"spec\.trainer\.env: PET_NNODES are set by"):
        refuse_reserved_env(trainjob(env=env), frozenset({"PET_NNODES"}), "torch")
    refuse_reserved_env(trainjob(env=env[1:]), frozenset({"PET_NNODES"}), "torch")


def test_a_port_the_container_declares_is_not_declared_again() -> None:
    """Two entries of one containerPort and protocol: the API server refuses the pod."""
    ctr: Dict = {"ports": [{"containerPort": 29500, "protocol": "TCP", "name": "torch"}]}
    add_port(ctr, 29500)
    assert ctr["ports"] == [{"containerPort": 29500, "protocol": "TCP", "name": "torch"}]
    add_port(ctr, 29501)
    assert ctr["ports"][1] == {"containerPort": 29501, "protocol": "TCP"}
    bare: Dict = {}
    add_port(bare, 29500)
    add_port(bare, 29500)
    assert bare == {"ports": [{"containerPort": 29500, "protocol": "TCP"}]}


def test_a_policys_env_replaces_a_variable_of_its_name_in_place() -> None:
    user = {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ctr: Dict = {"env": [user, {"name": "A", "value": "1"}]}
    set_env(ctr, [{"name": "B", "value": "policy"}, {"name": "C", "value": "3"}])
    assert ctr["env"] == [
        {"name": "B", "value": "policy"},  # where the user's was, whole
        {"name": "A", "value": "1"},
        {"name": "C", "value": "3"},
    ]
