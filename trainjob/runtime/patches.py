"""Merging a TrainJob's runtimePatches into the runtime's JobSet template, as Trainer v2.3 does
(a strategic merge patch of the JobSet spec, one patch after the other in list order).

Maps (labels, annotations, nodeSelector) merge key by key (a null removes one); structs
(affinity, securityContext) merge field by field, their lists replaced whole; lists with a
merge key merge entry by entry (containers, env, volumes, imagePullSecrets and schedulingGates
by name, volumeMounts by mountPath); tolerations are atomic, so a patch's list replaces the
one before it; scalars (serviceAccountName, terminationGracePeriodSeconds) replace.

One exception, Kueue's own placement patch (manager kueue.x-k8s.io/manager): its tolerations
are added to those already there (same key, operator, value and effect: kept as they were),
which is what Kueue writes since kueue#15161 was fixed (it puts the whole merged list in its
patch); before that fix a ResourceFlavor's tolerations replaced the runtime's.
"""

from __future__ import annotations

from kubebase.objects import Dict
from trainjob.jsondoc import json_copy
from trainjob.models import RuntimePatch
from trainjob.runtime.info import RuntimeSpecError
from trainjob.runtime.templates import (
    JobTemplateEdit,
    MetaEdit,
    PodSpecEdit,
    PodSpecPatchView,
    TemplatePatchView,
    identity,
)
from trainjob_api import constants as c
from trainjob_api.views import JsonView

_MERGE_BY_NAME = ("volumes", "imagePullSecrets", "schedulingGates")
_MERGE_STRUCT = ("affinity", "securityContext")
_REPLACE = ("serviceAccountName", "terminationGracePeriodSeconds")


class _Toleration(JsonView):
    """A toleration, as one is told from another: key, operator, value and effect."""

    __slots__ = ()

    @property
    def identity(self) -> tuple[object, ...]:
        raw = self.raw
        told_by = (
            raw.get("key"),
            raw.get("operator") or "Equal",
            raw.get("value"),
            raw.get("effect"),
        )
        return tuple(identity(v) for v in told_by)


def add_tolerations(base: list[Dict], extra: list[Dict]) -> list[Dict]:
    """`base` and then those of `extra` it does not hold yet (by key, operator, value and
    effect; one already there stays as it is, tolerationSeconds included)."""
    out = [json_copy(t) for t in base]
    seen = {_Toleration(t).identity for t in out}
    for t in extra:
        if _Toleration(t).identity not in seen:
            seen.add(_Toleration(t).identity)
            out.append(json_copy(t))
    return out


def _patch_containers(
    pod_spec: PodSpecEdit, field: str, patch: PodSpecPatchView, where: str
) -> None:
    by_name = {ctr.name: ctr for ctr in pod_spec.editable(field)}
    for cpatch in patch.containers(field):
        ctr = by_name.get(cpatch.name)
        if ctr is None:
            known = ", ".join(sorted(by_name)) or "none"
            raise RuntimeSpecError(
                f"{where}: {field} patch names container {cpatch.name!r}, which the runtime "
                f"does not have (it has: {known})"
            )
        if cpatch.env:
            ctr.merge_env(cpatch.env)
        if cpatch.volume_mounts:
            ctr.merge_mounts(cpatch.volume_mounts)
        if cpatch.security_context is not None:
            ctr.merge_struct("securityContext", cpatch.security_context)


def _patch_pod_spec(
    pod_spec: PodSpecEdit, patch: PodSpecPatchView, where: str, manager: str
) -> None:
    pod_spec.merge_map("nodeSelector", patch.node_selector)
    tolerations = patch.entries("tolerations")
    if tolerations:
        if manager == c.KUEUE_RUNTIME_PATCH_MANAGER:
            pod_spec.raw["tolerations"] = add_tolerations(
                pod_spec.entries("tolerations"), tolerations
            )
        else:  # atomic in Trainer's API: the patch's list is the list
            pod_spec.replace("tolerations", tolerations)
    for field in _MERGE_BY_NAME:
        if patch.entries(field):
            pod_spec.merge_entries(field, patch.entries(field))
    for field in _MERGE_STRUCT:
        if patch.struct(field) is not None:
            pod_spec.merge_struct(field, patch.struct(field))
    for field in _REPLACE:
        if patch.has(field):
            pod_spec.replace(field, patch.value(field))
    for field in ("initContainers", "containers"):
        if patch.containers(field):
            _patch_containers(pod_spec, field, patch, where)


def apply_runtime_patch(
    jobset_meta: MetaEdit, replicated_jobs: dict[str, JobTemplateEdit], patch: RuntimePatch
) -> None:
    """Apply one runtimePatch in place to the JobSet metadata and replicatedJob templates."""
    template = TemplatePatchView(patch.training_runtime_spec or {})
    jobset_meta.merge(template.metadata)
    for rj_patch in template.replicated_jobs:
        name = rj_patch.name
        where = f"runtimePatches[manager={patch.manager}].replicatedJobs[{name}]"
        job_template = replicated_jobs.get(name)
        if job_template is None:
            known = ", ".join(sorted(replicated_jobs))
            raise RuntimeSpecError(
                f"{where}: the runtime has no replicatedJob {name!r} (it has: {known})"
            )
        job_template.metadata.merge(rj_patch.job_metadata)
        pod_template = job_template.pod_template
        pod_template.metadata.merge(rj_patch.pod_metadata)
        pod_spec_patch = rj_patch.pod_spec
        if pod_spec_patch is not None:
            _patch_pod_spec(pod_template.spec, pod_spec_patch, where, patch.manager)
