"""Build a TrainJob's RuntimeInfo: resolve the template, merge patches and overrides, plugins."""

from __future__ import annotations

import copy
from collections import defaultdict
from decimal import Decimal
from typing import Any

from trainjob import constants as c
from trainjob.models import InitializerStep, TrainingRuntime, TrainJob
from trainjob.quantity import format_quantity, parse_quantity
from trainjob.runtime.info import PodSet, RuntimeInfo, RuntimePolicy, RuntimeSpecError
from trainjob.runtime.patches import apply_runtime_patch, merge_by_key
from trainjob.runtime.policies import select_plugin

Dict = dict[str, Any]


def _container(pod_spec: Dict, name: str) -> Dict | None:
    for ctr in pod_spec.get("containers") or []:
        if ctr.get("name") == name:
            return ctr  # type: ignore[no-any-return]
    return None


def _apply_trainer(ps: PodSet, trainjob: TrainJob) -> None:
    trainer = trainjob.spec.trainer
    if trainer is None:
        return
    ctr = _container(ps.pod_template.get("spec") or {}, c.NODE_CONTAINER)
    if ctr is None:
        if (
            trainer.image
            or trainer.command
            or trainer.args
            or trainer.env
            or trainer.resources_per_node
        ):
            raise RuntimeSpecError(
                f"spec.trainer sets the training container, but replicatedJob {ps.name!r} of "
                f"the runtime has no container named {c.NODE_CONTAINER!r}"
            )
        return
    if trainer.image:
        ctr["image"] = trainer.image
    if trainer.command is not None:
        ctr["command"] = list(trainer.command)
    if trainer.args is not None:
        ctr["args"] = list(trainer.args)
    if trainer.env:
        ctr["env"] = merge_by_key(ctr.get("env") or [], trainer.env)
    if trainer.resources_per_node is not None:
        ctr["resources"] = copy.deepcopy(trainer.resources_per_node)


def _apply_initializer(ps: PodSet, step: InitializerStep | None) -> None:
    if step is None:
        return
    ctr = _container(ps.pod_template.get("spec") or {}, ps.role or "")
    if ctr is None:
        raise RuntimeSpecError(
            f"spec.initializer configures {ps.role!r}, but replicatedJob "
            f"{ps.name!r} has no container of that name"
        )
    env: list[Dict] = []
    if step.storage_uri:
        env.append({"name": "STORAGE_URI", "value": step.storage_uri})
    ctr["env"] = merge_by_key(ctr.get("env") or [], [*env, *step.env])
    if step.secret_ref and step.secret_ref.get("name"):
        env_from = ctr.setdefault("envFrom", [])
        ref = {"secretRef": {"name": step.secret_ref["name"]}}
        if ref not in env_from:
            env_from.append(ref)


def _success_policy(template_spec: Dict) -> tuple[str, list[str]]:
    policy = template_spec.get("successPolicy") or {}
    return str(policy.get("operator") or "All"), list(policy.get("targetReplicatedJobs") or [])


def build_runtime_info(
    trainjob: TrainJob, runtime: TrainingRuntime, raw_template_spec: Dict | None = None
) -> RuntimeInfo:
    """Everything needed to run `trainjob` on `runtime`; pure, raises RuntimeSpecError."""
    spec = runtime.spec
    jobset_meta = copy.deepcopy(spec.template.metadata)
    rjs: dict[str, Dict] = {
        rj.name: {"template": copy.deepcopy(rj.template)}
        for rj in spec.template.spec.replicated_jobs
    }
    for patch in trainjob.spec.runtime_patches:
        apply_runtime_patch(jobset_meta, rjs, patch)

    trainer = trainjob.spec.trainer
    num_nodes = (
        trainer.num_nodes if trainer and trainer.num_nodes else None
    ) or spec.ml_policy.num_nodes
    operator, targets = _success_policy(raw_template_spec or {})
    policy = RuntimePolicy(
        ml_policy="",
        num_nodes=num_nodes,
        ml=spec.ml_policy,
        pod_group=spec.pod_group_policy,
        success_operator=operator,
        success_targets=targets,
    )
    names = set(rjs)
    pod_sets = []
    for rj in spec.template.spec.replicated_jobs:
        template = rjs[rj.name]["template"]
        job_spec = template.setdefault("spec", {})
        job_spec.setdefault("template", {}).setdefault("spec", {})
        role = (template.get("metadata") or {}).get("labels", {}).get(c.ANCESTOR_STEP_LABEL)
        for dep in rj.depends_on:
            if dep.name not in names or dep.name == rj.name:
                raise RuntimeSpecError(
                    f"replicatedJob {rj.name!r} dependsOn {dep.name!r}, "
                    "which is not another replicatedJob of the runtime"
                )
        parallelism = int(job_spec.get("parallelism") or 1)
        if role == c.STEP_TRAINER:
            parallelism = num_nodes
        ps = PodSet(
            name=rj.name,
            role=role,
            replicas=rj.replicas,
            parallelism=parallelism,
            job_template=template,
            depends_on=list(rj.depends_on),
        )
        if role == c.STEP_TRAINER:
            _apply_trainer(ps, trainjob)
        elif role == c.STEP_DATASET_INITIALIZER and trainjob.spec.initializer:
            _apply_initializer(ps, trainjob.spec.initializer.dataset)
        elif role == c.STEP_MODEL_INITIALIZER and trainjob.spec.initializer:
            _apply_initializer(ps, trainjob.spec.initializer.model)
        pod_sets.append(ps)
    info = RuntimeInfo(
        trainjob=trainjob.name,
        namespace=trainjob.namespace,
        pod_sets=pod_sets,
        policy=policy,
        labels=dict(jobset_meta.get("labels") or {}),
        annotations=dict(jobset_meta.get("annotations") or {}),
    )
    plugin = select_plugin(spec.ml_policy)
    policy.ml_policy = plugin.name
    plugin.enforce(info, trainjob)
    for target in policy.success_targets:
        if target not in names:
            raise RuntimeSpecError(
                f"successPolicy targets replicatedJob {target!r}, which the runtime does not have"
            )
    return info


def pod_requests(pod_spec: Dict) -> dict[str, Decimal]:
    """Effective requests of one pod: sum of containers, at least each init container."""
    total: dict[str, Decimal] = defaultdict(Decimal)
    for ctr in pod_spec.get("containers") or []:
        for res, qty in _requests(ctr).items():
            total[res] += qty
    for ctr in pod_spec.get("initContainers") or []:
        for res, qty in _requests(ctr).items():
            total[res] = max(total[res], qty)
    return dict(total)


def _requests(ctr: Dict) -> dict[str, Decimal]:
    resources = ctr.get("resources") or {}
    # A limit without a request means request == limit (as the API server defaults it).
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {res: parse_quantity(qty) for res, qty in merged.items()}


def total_requests(info: RuntimeInfo) -> dict[str, str]:
    """Resource totals of the whole TrainJob, derived from its PodSets."""
    total: dict[str, Decimal] = defaultdict(Decimal)
    for ps in info.pod_sets:
        for res, qty in pod_requests(ps.pod_template.get("spec") or {}).items():
            total[res] += qty * ps.count
    return {res: format_quantity(qty) for res, qty in sorted(total.items())}
