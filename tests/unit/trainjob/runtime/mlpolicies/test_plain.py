"""No framework (trainjob/runtime/mlpolicies/plain.py): the pods run as they are."""

from __future__ import annotations

from tests.unit.trainjob.runtime.mlpolicies import built, node_env


def test_without_a_framework_nothing_is_set_and_the_job_runs_num_nodes_pods() -> None:
    info = built({"numNodes": 3}, env=[{"name": "MINE", "value": "x"}])
    assert info.policy.ml_policy == "plain"
    assert node_env(info) == {"MINE": "x"}  # the TrainJob's own, nothing of a policy's
    assert info.pod_sets[0].parallelism == 3
    assert "ports" not in info.pod_sets[0].container("node")  # type: ignore[operator]
