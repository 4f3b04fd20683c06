"""jax.distributed's environment (trainjob/runtime/mlpolicies/jax.py), as Trainer v2.3's JAX
plugin sets it: one process per node, its id the completion index, node 0 the coordinator."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.trainjob.runtime.mlpolicies import RANK, built, node_env
from trainjob.naming import pod_dns_name


@pytest.mark.parametrize(
    ("nodes", "trainer", "want"),
    [
        (1, {}, {"JAX_NUM_PROCESSES": "1"}),
        (4, {}, {"JAX_NUM_PROCESSES": "4"}),
        (2, {"numNodes": 3}, {"JAX_NUM_PROCESSES": "3"}),  # the TrainJob's count wins
        # none of its names is reserved: one the TrainJob sets is admitted, and set over
        (2, {"env": [{"name": "JAX_NUM_PROCESSES", "value": "9"}]}, {"JAX_NUM_PROCESSES": "2"}),
    ],
)
def test_jax_environment(nodes: int, trainer: dict[str, Any], want: dict[str, str]) -> None:
    info = built({"numNodes": nodes, "jax": {}}, **trainer)
    env = node_env(info)
    assert env == {
        **want,
        "JAX_PROCESS_ID": RANK,
        "JAX_COORDINATOR_ADDRESS": f"{pod_dns_name('tj', 'node', 0, 0)}:29500",
    }
    ports = info.pod_sets[0].container("node")["ports"]  # type: ignore[index]
    assert {"containerPort": 29500, "protocol": "TCP"} in ports
