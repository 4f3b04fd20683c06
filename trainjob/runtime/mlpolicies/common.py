"""What the ML policy plugins share: the trainer PodSet and its `node` container, the
environment and ports they set, and the per-node counts Trainer v2.3's plugins make."""

from __future__ import annotations

import math
from collections.abc import Callable

from kubebase.objects import Dict
from trainjob.models import TrainJob
from trainjob.runtime.info import PodSet, RuntimeInfo, RuntimeSpecError
from trainjob.runtime.templates import ContainerEdit
from trainjob_api import constants as c
from trainjob_api.pods import ResourcesView
from trainjob_api.quantity import parse_quantity


def node_container(ps: PodSet) -> ContainerEdit:
    ctr = ps.pod_spec.container(c.NODE_CONTAINER)
    if ctr is None:
        raise RuntimeSpecError(
            f"replicatedJob {ps.name!r} has no container named "
            f"{c.NODE_CONTAINER!r}, which the ML policy configures"
        )
    return ctr


def any_container(info: RuntimeInfo, pod_set: str, name: str) -> ContainerEdit | None:
    """A container or init container `name` of the PodSet `pod_set`, if both exist."""
    ps = next((p for p in info.pod_sets if p.name == pod_set), None)
    return ps.pod_spec.any_container(name) if ps is not None else None


def trainer_pod_set(info: RuntimeInfo) -> PodSet:
    for ps in info.pod_sets:
        if ps.role == c.STEP_TRAINER:
            return ps
    raise RuntimeSpecError(
        f"the runtime has no replicatedJob labelled {c.ANCESTOR_STEP_LABEL}={c.STEP_TRAINER}"
    )


def _whole(amounts: Dict, pick: Callable[[str], bool]) -> int:
    """The first quantity of `amounts` (requests or limits) whose name `pick` accepts, rounded
    up to a whole number (as Kubernetes' Quantity.Value); 0 when there is none."""
    for name, qty in amounts.items():
        if pick(str(name)):
            try:
                whole: int = math.ceil(parse_quantity(qty))
                return max(0, whole)
            except (ValueError, TypeError):
                return 0
    return 0


def per_node(resources: ResourcesView, pick: Callable[[str], bool]) -> int:
    """Trainer's count per node: from requests, else from limits."""
    return _whole(resources.requests, pick) or _whole(resources.limits, pick)


def _is_gpu(name: str) -> bool:
    return "gpu" in name.lower()


def node_resources(trainjob: TrainJob, runtime_resources: ResourcesView) -> ResourcesView:
    """What Trainer's plugins count a node's GPUs and CPUs from: the TrainJob's
    resourcesPerNode when it sets one (in place of the runtime's, not merged), else the
    runtime's `node` container resources."""
    trainer = trainjob.spec.trainer
    if trainer is not None and trainer.resources_per_node is not None:
        return ResourcesView(trainer.resources_per_node)
    return runtime_resources


def gpus_per_node(trainjob: TrainJob, runtime_resources: ResourcesView) -> int:
    """Trainer v2.3's GetNumGPUPerNode: the first resource whose name holds "gpu", from
    requests, else from limits; 0 when there is none."""
    return per_node(node_resources(trainjob, runtime_resources), _is_gpu)


def refuse_reserved_env(trainjob: TrainJob, reserved: frozenset[str], policy: str) -> None:
    """Trainer's webhook refuses spec.trainer.env entries that the runtime's ML policy sets
    itself (each policy its own names); they would be overwritten silently."""
    trainer = trainjob.spec.trainer
    names = sorted(
        {str(e.get("name")) for e in (trainer.env if trainer else None) or []} & reserved
    )
    if names:
        raise RuntimeSpecError(
            f"spec.trainer.env: {', '.join(names)} are set by the {policy} runtime itself; "
            "remove them (numbers of nodes and processes have their own fields)"
        )


def completion_index_env(name: str) -> Dict:
    """An env var holding the pod's completion index: its rank among the PodSet's pods."""
    return {
        "name": name,
        "valueFrom": {
            "fieldRef": {"fieldPath": f"metadata.annotations['{c.JOB_COMPLETION_INDEX}']"}
        },
    }


def rank_env_on_trainer(
    info: RuntimeInfo,
    trainjob: TrainJob,
    reserved: frozenset[str],
    policy: str,
    make_env: Callable[[PodSet, ContainerEdit], list[Dict]],
) -> None:
    """What the JAX and XGBoost policies do alike: refuse the variables Trainer v2.3 reserves
    for the policy in spec.trainer.env (`reserved`; none for JAX), then set theirs (`make_env`
    of the trainer PodSet and its node container) on every trainer node, over any of the same
    name, and have it listen on port 29500."""
    if reserved:
        refuse_reserved_env(trainjob, reserved, policy)
    ps = trainer_pod_set(info)
    ctr = node_container(ps)
    ctr.merge_env(make_env(ps, ctr))
    ctr.add_port(c.TORCH_MASTER_PORT)
