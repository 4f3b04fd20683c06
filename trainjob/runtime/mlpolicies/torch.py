"""torchrun's environment (Trainer v2.3's Torch plugin): PET_* on every trainer node, the
master on node 0, envInjection into the runtime's other containers it names."""

from __future__ import annotations

from kubebase.objects import Dict
from trainjob.jsondoc import json_copy
from trainjob.models import MLPolicy, TrainJob
from trainjob.naming import pod_dns_name
from trainjob.runtime.info import RuntimeInfo, RuntimeSpecError
from trainjob.runtime.mlpolicies.common import (
    any_container,
    completion_index_env,
    gpus_per_node,
    node_container,
    node_resources,
    per_node,
    refuse_reserved_env,
    trainer_pod_set,
)
from trainjob_api import constants as c
from trainjob_api.pods import ResourcesView


def torch_nproc(trainjob: TrainJob, runtime_resources: ResourcesView) -> str:
    """PET_NPROC_PER_NODE as Trainer v2.3 sets it: the TrainJob's trainer.numProcPerNode;
    else `auto` (torchrun: one per GPU) when a node has GPUs; else the node's CPUs (at least
    1). The node's resources are the TrainJob's resourcesPerNode, else the runtime's."""
    trainer = trainjob.spec.trainer
    if trainer is not None and trainer.num_proc_per_node not in (None, "auto"):
        return str(trainer.num_proc_per_node)
    if gpus_per_node(trainjob, runtime_resources):
        return "auto"
    resources = node_resources(trainjob, runtime_resources)
    return str(max(1, per_node(resources, lambda name: name == "cpu")))


# The variables torchrun reads, which the torch policy sets (Trainer's reserved names).
TORCH_RESERVED = frozenset(
    {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
)


class TorchPolicy:
    """torchrun's PET_* environment on every trainer node, rank from the completion index."""

    name = "torch"

    def applies(self, ml: MLPolicy) -> bool:
        return ml.torch is not None

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        refuse_reserved_env(trainjob, TORCH_RESERVED, "torch")
        trainer = trainjob.spec.trainer
        if trainer is not None and trainer.command == ["tune", "run"]:
            # Trainer v2.3 rewrites this command (recipe, config, rendezvous) from the model
            # and the node count; run as written it would start no training.
            raise RuntimeSpecError(
                "spec.trainer.command: [tune, run] asks for Trainer's torchtune command "
                "rewriting, which this controller does not do; give the whole command (the "
                "runtime's own `tune run ...` runs when spec.trainer.command is unset)"
            )
        ps = trainer_pod_set(info)
        ctr = node_container(ps)
        nproc = torch_nproc(trainjob, ctr.resources)
        master = pod_dns_name(info.trainjob, ps.name, 0, 0)
        pet: list[Dict] = [
            {"name": "PET_NNODES", "value": str(info.policy.num_nodes)},
            {"name": "PET_NPROC_PER_NODE", "value": str(nproc)},
            completion_index_env("PET_NODE_RANK"),
            {"name": "PET_MASTER_ADDR", "value": master},
            {"name": "PET_MASTER_PORT", "value": str(c.TORCH_MASTER_PORT)},
        ]
        ctr.merge_env(pet)
        ctr.add_port(c.TORCH_MASTER_PORT)
        # envInjection: the same PET_* (and master) variables in the runtime's other
        # containers it names, e.g. an init container that waits for the master.
        torch = info.policy.ml.torch
        for target in torch.env_injection.targets if torch and torch.env_injection else []:
            for name in target.container_names:
                found = any_container(info, target.job_name, name)
                if found is None:
                    raise RuntimeSpecError(
                        "spec.mlPolicy.torch.envInjection: target replicatedJob "
                        f"{target.job_name!r} container {name!r} not found in the runtime"
                    )
                found.merge_env(json_copy(pet))
