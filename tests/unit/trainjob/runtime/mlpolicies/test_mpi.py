"""MPI's slots per host and its hostfile's size known before it is written
(trainjob/runtime/mlpolicies/mpi.py), as Trainer v2.3's MPI plugin; its launcher, nodes,
hostfile and SSH Secret through the framework (tests/unit/trainjob/runtime/test_framework.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.trainjob.runtime.mlpolicies import trainjob
from trainjob.naming import pod_dns_name
from trainjob.runtime.mlpolicies.mpi import hostfile_size, mpi_slots

Dict = dict[str, Any]
GPU = {"limits": {"nvidia.com/gpu": 2}}


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
    assert mpi_slots(trainjob(**trainer), runtime_slots, node) == want


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
    assert hostfile_size("my-job", "node", node_pods, launcher, line_end) == len(written)
