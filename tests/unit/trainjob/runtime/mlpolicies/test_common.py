"""What the plugins share (trainjob/runtime/mlpolicies/common.py): GPUs per node as
Trainer v2.3 counts them, and the environment a policy sets itself refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.trainjob.runtime.mlpolicies import trainjob
from trainjob.runtime.info import RuntimeSpecError
from trainjob.runtime.mlpolicies.common import gpus_per_node, refuse_reserved_env
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
