"""XGBoost's collective environment (trainjob/runtime/mlpolicies/xgboost.py), as Trainer
v2.3's XGBoost plugin sets it: the tracker on node 0, the task id the completion index, and
nodes x GPUs per node workers (one per node without GPUs)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import container, make_runtime, make_trainjob, replicated_job
from tests.unit.trainjob.runtime.mlpolicies import RANK, built, node_env
from trainjob.models import parse_runtime, parse_trainjob
from trainjob.naming import pod_dns_name
from trainjob.runtime.framework import build_runtime_info
from trainjob.runtime.info import RuntimeSpecError

GPUS = {"requests": {"nvidia.com/gpu": "4"}}


@pytest.mark.parametrize(
    ("nodes", "trainer", "workers"),
    [
        (1, {}, "1"),
        (3, {}, "3"),  # no GPUs: one worker per node
        (2, {"resourcesPerNode": GPUS}, "8"),  # nodes x GPUs per node
        (2, {"numNodes": 5}, "5"),
    ],
)
def test_xgboost_environment(nodes: int, trainer: dict[str, Any], workers: str) -> None:
    env = node_env(built({"numNodes": nodes, "xgboost": {}}, **trainer))
    assert env == {
        "DMLC_TRACKER_URI": pod_dns_name("tj", "node", 0, 0),
        "DMLC_TRACKER_PORT": "29500",
        "DMLC_TASK_ID": RANK,
        "DMLC_NUM_WORKER": workers,
    }


def test_a_variable_the_policy_sets_itself_is_refused_by_name() -> None:
    with pytest.raises(RuntimeSpecError, match="DMLC_NUM_WORKER are set by the XGBoost runtime"):
        built({"numNodes": 1, "xgboost": {}}, env=[{"name": "DMLC_NUM_WORKER", "value": "2"}])


def test_xgboost_counts_the_gpus_of_the_runtimes_node_container() -> None:
    node = replicated_job(
        "node", "trainer", [container(resources={"limits": {"nvidia.com/gpu": 2}})]
    )
    runtime = make_runtime(ml_policy={"numNodes": 3, "xgboost": {}}, replicated_jobs=[node])
    info = build_runtime_info(
        parse_trainjob(make_trainjob()), parse_runtime(runtime), runtime["spec"]["template"]["spec"]
    )
    assert node_env(info)["DMLC_NUM_WORKER"] == "6"
