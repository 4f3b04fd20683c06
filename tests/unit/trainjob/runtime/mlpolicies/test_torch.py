"""torchrun's processes per node, as Trainer v2.3's Torch plugin counts them
(trainjob/runtime/mlpolicies/torch.py); its whole output through the framework
(tests/unit/trainjob/runtime/test_framework.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.trainjob.runtime.mlpolicies import trainjob
from trainjob.runtime.mlpolicies.torch import torch_nproc

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
    assert torch_nproc(trainjob(**trainer), runtime) == want
