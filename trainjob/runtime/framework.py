"""Build a TrainJob's RuntimeInfo: resolve the template, merge patches and overrides, plugins.

The phases, in order (the plugins of each phase in their package's registry, as Trainer v2.3
lays out its framework):
1. the runtime's shapes checked, then the TrainJob's runtimePatches (patches.py);
2. spec.trainer and spec.initializer on their steps' containers, the volume claims, the
   dependency graph and each quantity checked;
3. the gang scheduler's own refusals (podgroups/: `check`);
4. the ML policy plugin (mlpolicies/: `enforce`), which edits the PodSets per node;
5. names and the success policy checked.
Then, where the worker makes the TrainJob's objects: the pods name their group (podgroups/:
`mark_pods`) and the components are built (components.py: the PodGroup, the ML policy's
objects, the claims)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from kubebase.objects import Dict
from trainjob.jsondoc import json_copy
from trainjob.lru import LRU
from trainjob.models import (
    InitializerStep,
    InvalidObject,
    ReplicatedJob,
    TrainingRuntime,
    TrainJob,
    parse_runtime,
)
from trainjob.runtime import failure, fields, podgroups
from trainjob.runtime.info import PodSet, RuntimeInfo, RuntimePolicy, RuntimeSpecError
from trainjob.runtime.limits import check_counts, check_names
from trainjob.runtime.mlpolicies import select_plugin
from trainjob.runtime.patches import apply_runtime_patch
from trainjob.runtime.shapes import (
    check_job_template,
    check_metadata,
    check_template_spec,
    entries,
)
from trainjob.runtime.templates import (
    ClaimPolicyView,
    ContainerEdit,
    JobSetSpecView,
    JobTemplateEdit,
    MetaEdit,
    merge_by_key,
)
from trainjob.runtime.topology import topology_request
from trainjob_api import constants as c
from trainjob_api.pods import PodSpecView
from trainjob_api.quantity import parse_quantity
from trainjob_api.views import RuntimeView, mapping


def _apply_trainer(ps: PodSet, trainjob: TrainJob, *, whole: bool = True) -> None:
    """spec.trainer on the PodSet's `node` container. `whole` is the trainer step itself
    (image, command, args, env, resourcesPerNode); otherwise an MPI `node` PodSet whose
    launcher runs as a node too, which Trainer v2.3 gives the env and resourcesPerNode only."""
    trainer = trainjob.spec.trainer
    if trainer is None:
        return
    ctr = ps.pod_spec.container(c.NODE_CONTAINER)
    if ctr is None:
        if whole and (
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
    if whole and trainer.image:
        ctr.replace("image", trainer.image)
    if whole and trainer.command is not None:
        ctr.replace("command", trainer.command)
    if whole and trainer.args is not None:
        ctr.replace("args", trainer.args)
    if trainer.env:
        ctr.merge_env(trainer.env)
    if trainer.resources_per_node is not None:
        _merge_resources(ctr, trainer.resources_per_node)


def _merge_resources(ctr: ContainerEdit, override: Dict) -> None:
    """Trainer v2.3's merge of resourcesPerNode into the runtime container's resources (a
    strategic merge): requests and limits key by key (a null removes one), claims by name;
    what resourcesPerNode does not name stays as the runtime has it."""
    base = ctr.raw.get("resources")
    out: Dict = json_copy(base) if isinstance(base, dict) else {}
    for key, value in override.items():
        if key in ("requests", "limits") and isinstance(value, dict):
            merged = dict(out.get(key) or {})
            for res, qty in value.items():
                if qty is None:
                    merged.pop(res, None)
                else:
                    merged[res] = qty
            if merged:
                out[key] = merged
            else:  # an empty map is left out, as the API would
                out.pop(key, None)
        elif key == "claims" and isinstance(value, list):
            claims = entries(value, "spec.trainer.resourcesPerNode.claims")
            out[key] = merge_by_key(out.get("claims") or [], claims)
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = json_copy(value)
    ctr.raw["resources"] = out


def _apply_initializer(ps: PodSet, step: InitializerStep | None) -> None:
    if step is None:
        return
    ctr = ps.pod_spec.container(ps.role or "")
    if ctr is None:
        raise RuntimeSpecError(
            f"spec.initializer configures {ps.role!r}, but replicatedJob "
            f"{ps.name!r} has no container of that name"
        )
    env: list[Dict] = []
    if step.storage_uri:
        env.append({"name": "STORAGE_URI", "value": step.storage_uri})
    ctr.merge_env([*env, *step.env])
    if step.secret_ref and step.secret_ref.get("name"):
        ctr.add_secret_env(step.secret_ref["name"])


def build_runtime_info(
    trainjob: TrainJob, runtime: TrainingRuntime, raw_template_spec: Dict | None = None
) -> RuntimeInfo:
    """Everything needed to run `trainjob` on `runtime`, in the phases the module names;
    pure, raises RuntimeSpecError."""
    spec = runtime.spec
    replicated_jobs = spec.template.spec.replicated_jobs
    # 1. the runtime's shapes checked, then the TrainJob's runtimePatches
    check_template_spec(raw_template_spec)
    check_metadata(spec.template.metadata, "spec.template.metadata")
    seen: set[str] = set()
    for rj in replicated_jobs:
        if rj.name in seen:  # the CRD's list key refuses it; one name is one template
            raise RuntimeSpecError(
                f"spec.template.spec.replicatedJobs: more than one is named {rj.name!r}"
            )
        seen.add(rj.name)
        check_job_template(rj.name, rj.template)
    jobset_meta = MetaEdit(json_copy(spec.template.metadata))
    templates = {rj.name: JobTemplateEdit(json_copy(rj.template)) for rj in replicated_jobs}
    for patch in trainjob.spec.runtime_patches:  # typed by the CRD: they keep the shapes
        apply_runtime_patch(jobset_meta, templates, patch)
    # 2. spec.trainer and spec.initializer on their steps' containers, the dependency graph
    template_spec = JobSetSpecView(raw_template_spec or {})
    policy = _policy(trainjob, runtime, template_spec)
    pod_sets = [
        _pod_set(rj, templates, trainjob, runtime, policy.num_nodes) for rj in replicated_jobs
    ]
    info = RuntimeInfo(
        trainjob=trainjob.name,
        namespace=trainjob.namespace,
        pod_sets=pod_sets,
        policy=policy,
        labels=dict(mapping(jobset_meta.raw.get("labels"))),
        annotations=dict(mapping(jobset_meta.raw.get("annotations"))),
    )
    _check_dependencies(replicated_jobs)
    # 3. the gang scheduler's own refusals
    podgroups.check(info)
    # 2, its rest: the volume claims and each quantity
    _claim_volumes(info, template_spec.claim_policies)
    for ps in pod_sets:
        _check_quantities(ps, trainjob)
        topology_request(ps)  # a bad TAS annotation is said here, not when Kueue sees it
    # Before the plugin builds anything per node.
    trainer = trainjob.spec.trainer
    from_trainer = bool(trainer and trainer.num_nodes)
    check_counts(
        pod_sets, policy.num_nodes, "spec.trainer" if from_trainer else "the runtime's mlPolicy"
    )
    # 4. the ML policy plugin (Kueue is told of each PodSet's pods as they were before it)
    plugin = select_plugin(spec.ml_policy)
    policy.ml_policy = plugin.name
    for ps in pod_sets:
        ps.kueue_template = json_copy(ps.pod_template)
    plugin.enforce(info, trainjob)
    # 5. names and the success policy checked
    check_names(info.trainjob, pod_sets)
    for target in policy.success_targets:
        if target not in templates:
            raise RuntimeSpecError(
                f"successPolicy targets replicatedJob {target!r}, which the runtime does not have"
            )
    return info


def _policy(
    trainjob: TrainJob, runtime: TrainingRuntime, template_spec: JobSetSpecView
) -> RuntimePolicy:
    """The job's policies: its node count (the TrainJob's, else the runtime's), the runtime's
    ML and gang policies, the fields ignored, success and failure."""
    trainer = trainjob.spec.trainer
    num_nodes = (
        trainer.num_nodes if trainer and trainer.num_nodes else None
    ) or runtime.spec.ml_policy.num_nodes
    operator, targets = template_spec.success_policy
    return RuntimePolicy(
        ml_policy="",
        num_nodes=num_nodes,
        ml=runtime.spec.ml_policy,
        pod_group=runtime.spec.pod_group_policy,
        ignored=fields.ignored(template_spec.raw, trainjob.metadata.name),
        success_operator=operator,
        success_targets=targets,
        failure=failure.parse(template_spec.raw),
    )


def _pod_set(
    rj: ReplicatedJob,
    templates: dict[str, JobTemplateEdit],
    trainjob: TrainJob,
    runtime: TrainingRuntime,
    num_nodes: int,
) -> PodSet:
    """One replicatedJob's PodSet from its patched template: its dependencies checked, then
    its step's part of the TrainJob applied (the trainer's, or an initializer's)."""
    template = templates[rj.name].raw
    # Absent and null are one to the API (shapes.py checks both alike).
    job_spec = template["spec"] = template.get("spec") or {}
    pod = job_spec["template"] = job_spec.get("template") or {}
    pod["spec"] = pod.get("spec") or {}
    role = mapping(mapping(template.get("metadata")).get("labels")).get(c.ANCESTOR_STEP_LABEL)
    for dep in rj.depends_on:
        if dep.name not in templates or dep.name == rj.name:
            raise RuntimeSpecError(
                f"replicatedJob {rj.name!r} dependsOn {dep.name!r}, "
                "which is not another replicatedJob of the runtime"
            )
    ps = PodSet(
        name=rj.name,
        role=role,
        replicas=rj.replicas,
        parallelism=num_nodes if role == c.STEP_TRAINER else int(job_spec.get("parallelism") or 1),
        job_template=template,
        depends_on=list(rj.depends_on),
    )
    mpi = runtime.spec.ml_policy.mpi
    initializer = trainjob.spec.initializer
    if role == c.STEP_TRAINER:
        _apply_trainer(ps, trainjob)
    elif mpi and mpi.run_launcher_as_node and rj.name == c.NODE_REPLICATED_JOB:
        _apply_trainer(ps, trainjob, whole=False)
    elif role == c.STEP_DATASET_INITIALIZER and initializer:
        _apply_initializer(ps, initializer.dataset)
    elif role == c.STEP_MODEL_INITIALIZER and initializer:
        _apply_initializer(ps, initializer.model)
    return ps


def _claim_volumes(info: RuntimeInfo, policies: list[ClaimPolicyView]) -> None:
    """The runtime's volumeClaimPolicies as JobSet v0.12 carries them out: one PVC per
    template, named `<template>-<trainjob>` and labelled with the JobSet name, owned by the
    TrainJob only when `retentionPolicy.whenDeleted` is Delete (otherwise it outlives the
    job, as JobSet's does); every pod template that mounts a volume of the template's name
    gets that claim as the volume."""
    claimed: list[tuple[PodSet, set[str], list[Dict]]] = [
        (ps, ps.pod_spec.mounted(), []) for ps in info.pod_sets
    ]
    for policy in policies:
        for template in policy.templates:
            name = template.name
            if not name:
                raise RuntimeSpecError(
                    "spec.template.spec.volumeClaimPolicies: a template has no name"
                )
            claim = f"{name}-{info.trainjob}"
            meta: Dict = {
                "name": claim,
                "namespace": info.namespace,
                "labels": {**template.labels, c.JOBSET_NAME_LABEL: info.trainjob},
            }
            if template.annotations:
                meta["annotations"] = template.annotations
            info.policy.claims.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": meta,
                    "spec": json_copy(template.spec),
                }
            )
            if policy.when_deleted == "Delete":
                info.policy.owned_claims.add(claim)
            volume = {"name": name, "persistentVolumeClaim": {"claimName": claim}}
            for _, mounted, volumes in claimed:
                if name in mounted:
                    volumes.append(volume)
    # One merge per PodSet, of its claims in the templates' order: a runtime may hold
    # thousands of templates, each mounted by every PodSet.
    for ps, _, volumes in claimed:
        if volumes:
            ps.pod_spec.merge_entries("volumes", volumes)


@dataclass(frozen=True)
class RuntimeProblem:
    """Why a TrainJob cannot run on its runtime (yet): a condition reason and a message."""

    reason: str  # RuntimeNotFound | RuntimeInvalid: both clear once the runtime is fixed
    message: str


def resolve_runtime_info(
    trainjob: TrainJob, runtime: RuntimeView | None
) -> tuple[RuntimeInfo | None, RuntimeProblem | None]:
    """`build_runtime_info` from the runtime as the caches hold it, or the problem, in the
    words both controllers report (the TrainJob's Failed condition and a Warning Event)."""
    ref = trainjob.spec.runtime_ref
    if runtime is None:
        where = "" if ref.kind == c.CLUSTER_TRAINING_RUNTIME_KIND else f" in {trainjob.namespace}"
        return None, RuntimeProblem(
            c.REASON_RUNTIME_NOT_FOUND,
            f"{ref.kind} {ref.name!r}{where} not found; the TrainJob starts once it exists",
        )
    try:
        _check_nesting(trainjob, runtime)
        info = build_runtime_info(trainjob, parse_runtime(runtime.raw), runtime.template_spec)
        if trainjob.queued and len(info.pod_sets) > KUEUE_MAX_POD_SETS:
            raise RuntimeSpecError(
                f"spec.template.spec.replicatedJobs has {len(info.pod_sets)} entries; a queued "
                f"TrainJob becomes a Kueue Workload, which holds at most {KUEUE_MAX_POD_SETS} "
                "PodSets"
            )
        return info, None
    except (InvalidObject, RuntimeSpecError) as exc:
        return None, RuntimeProblem(
            c.REASON_RUNTIME_INVALID, f"{ref.kind} {ref.name!r} cannot run this TrainJob: {exc}"
        )


# orjson's limit of nested objects and lists: JSON the controllers write (a copy, a Job, a
# Workload) nests no deeper.
MAX_NESTING = 255

# Whether a runtime's body can be written as JSON, by its version (a runtime may be a tenant's
# megabyte, read on every pass of every job that names it).
_WRITABLE: LRU[tuple[str, str], bool] = LRU(1024)


def _writable(value: object) -> bool:
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True


def _check_nesting(trainjob: TrainJob, runtime: RuntimeView) -> None:
    """The runtime and the TrainJob's runtimePatches can be written as JSON. Each holds what
    goes into the job's pod templates deeper than a Job, a Workload or a copy of either holds
    it, so all that is built from them can be written too; one that cannot is refused here,
    not met by the write of a Job or a Workload, pass after pass."""
    version = (str(runtime.uid or ""), str(runtime.resource_version or ""))
    ok = (  # kept only for an object the API server named (both set)
        _WRITABLE.get_or_make(version, lambda: _writable(runtime.raw))
        if all(version)
        else _writable(runtime.raw)
    )
    if not ok:
        raise RuntimeSpecError(f"the runtime nests deeper than {MAX_NESTING} levels")
    if not _writable([p.training_runtime_spec for p in trainjob.spec.runtime_patches]):
        raise RuntimeSpecError(f"spec.runtimePatches nest deeper than {MAX_NESTING} levels")


# Kueue v1beta2 Workload: spec.podSets has at most 18 items (one PodSet per replicatedJob).
KUEUE_MAX_POD_SETS = 18


def _check_dependencies(replicated_jobs: list[Any]) -> None:
    """dependsOn must not loop (a -> b -> a): such a TrainJob could never start. A walk with a
    stack of its own: a runtime's chain of dependencies may be longer than Python's recursion
    limit."""
    edges = {rj.name: [d.name for d in rj.depends_on] for rj in replicated_jobs}
    done: set[str] = set()
    for root in edges:
        if root in done:
            continue
        path, pending = [root], [iter(edges[root])]
        while pending:
            dep = next(pending[-1], None)
            if dep is None:  # every dependency of path[-1] is done
                done.add(path.pop())
                pending.pop()
            elif dep in path:
                cycle = " -> ".join([*path[path.index(dep) :], dep])
                raise RuntimeSpecError(f"the replicatedJobs' dependsOn form a cycle: {cycle}")
            elif dep not in done:
                path.append(dep)
                pending.append(iter(edges.get(dep, [])))


def _check_quantities(ps: PodSet, trainjob: TrainJob) -> None:
    """Every resource quantity of the PodSet's pods parses and is not negative (its
    containers', the pod's own `resources` and its `overhead`: all `pod_requests` reads); the
    message names the field the user wrote (spec.trainer.resourcesPerNode, or the runtime's)."""
    trainer = trainjob.spec.trainer
    from_trainer = ps.role == c.STEP_TRAINER and bool(trainer and trainer.resources_per_node)
    for where, container, field, quantities in _quantity_maps(ps.name, ps.pod_spec):
        if not isinstance(quantities, dict):
            raise RuntimeSpecError(f"{where}: {field} must be a map of quantities")
        kind = field.rpartition(".")[2]  # requests, limits (or overhead)
        named = (trainer.resources_per_node or {}).get(kind) if trainer else None
        for res, qty in quantities.items():
            try:
                ok = parse_quantity(qty) >= 0
            except (ValueError, TypeError, AttributeError):
                ok = False
            if ok:
                continue
            written = from_trainer and container == c.NODE_CONTAINER
            at = (
                f"spec.trainer.resourcesPerNode.{kind}[{res}]"
                if written and isinstance(named, dict) and res in named
                else f"{where} {field}[{res}]"
            )
            raise RuntimeSpecError(
                f"{at}: {qty!r} is not a valid quantity (e.g. 500m, 2, 4Gi; never negative)"
            )


def _quantity_maps(name: str, pod_spec: PodSpecView) -> Iterator[tuple[str, object, str, object]]:
    """Each map of quantities a pod of this spec asks with: where it is (for a message), the
    container it belongs to (None: the pod's own), its field, and the map (None: a
    `resources` that is no object)."""
    parts: list[tuple[str, str | None, object]] = [
        (f"replicatedJob {name!r} container {ctr.name!r}", ctr.name, ctr.raw.get("resources"))
        for field in ("initContainers", "containers")
        for ctr in pod_spec.containers_in(field)
    ]
    pod = f"replicatedJob {name!r} pod"
    parts.append((pod, None, pod_spec.raw.get("resources")))
    for where, container, given in parts:
        resources = given or {}
        for kind in ("requests", "limits"):
            found = resources.get(kind) or {} if isinstance(resources, dict) else None
            yield where, container, f"resources.{kind}", found
    yield pod, None, "overhead", pod_spec.raw.get("overhead") or {}
