"""XGBoost's collective (Trainer v2.3's XGBoost plugin)."""

from __future__ import annotations

from kubebase.objects import Dict
from trainjob.models import MLPolicy, TrainJob
from trainjob.naming import pod_dns_name
from trainjob.runtime.info import PodSet, RuntimeInfo
from trainjob.runtime.mlpolicies.common import (
    completion_index_env,
    gpus_per_node,
    rank_env_on_trainer,
)
from trainjob.runtime.templates import ContainerEdit
from trainjob_api import constants as c

# The variables the XGBoost policy sets for its collective (Trainer's reserved names).
XGBOOST_RESERVED = frozenset(
    {"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"}
)


class XGBoostPolicy:
    """XGBoost's collective (Rabit) environment on every trainer node (Trainer v2.3's XGBoost
    plugin): the tracker on node 0, port 29500; the task id from the completion index; and
    the number of workers, nodes x GPUs per node (one per node without GPUs)."""

    name = "xgboost"

    def applies(self, ml: MLPolicy) -> bool:
        return ml.xgboost is not None

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        def env(ps: PodSet, ctr: ContainerEdit) -> list[Dict]:
            # GPUs from resourcesPerNode if the TrainJob sets it, else the runtime's container's
            per_node = gpus_per_node(trainjob, ctr.resources) or 1
            return [
                {"name": "DMLC_TRACKER_URI", "value": pod_dns_name(info.trainjob, ps.name, 0, 0)},
                {"name": "DMLC_TRACKER_PORT", "value": str(c.TORCH_MASTER_PORT)},
                completion_index_env("DMLC_TASK_ID"),
                {"name": "DMLC_NUM_WORKER", "value": str(ps.parallelism * per_node)},
            ]

        rank_env_on_trainer(info, trainjob, XGBOOST_RESERVED, "XGBoost", env)
