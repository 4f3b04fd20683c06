"""jax.distributed (Trainer v2.3's JAX plugin)."""

from __future__ import annotations

from kubebase.objects import Dict
from trainjob.models import MLPolicy, TrainJob
from trainjob.naming import pod_dns_name
from trainjob.runtime.info import PodSet, RuntimeInfo
from trainjob.runtime.mlpolicies.common import completion_index_env, rank_env_on_trainer
from trainjob.runtime.templates import ContainerEdit
from trainjob_api import constants as c


class JAXPolicy:
    """jax.distributed's environment on every trainer node (Trainer v2.3's JAX plugin): the
    number of processes (one per node), the process id from the completion index, and the
    coordinator, node 0, on port 29500."""

    name = "jax"

    def applies(self, ml: MLPolicy) -> bool:
        return ml.jax is not None

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        # Trainer v2.3 reserves none of these: a TrainJob that sets one is admitted, and the
        # policy's value is set over it, as Trainer sets it.
        def env(ps: PodSet, ctr: ContainerEdit) -> list[Dict]:
            coordinator = pod_dns_name(info.trainjob, ps.name, 0, 0)
            return [
                {"name": "JAX_NUM_PROCESSES", "value": str(ps.parallelism)},
                completion_index_env("JAX_PROCESS_ID"),
                {
                    "name": "JAX_COORDINATOR_ADDRESS",
                    "value": f"{coordinator}:{c.TORCH_MASTER_PORT}",
                },
            ]

        rank_env_on_trainer(info, trainjob, frozenset(), "JAX", env)
