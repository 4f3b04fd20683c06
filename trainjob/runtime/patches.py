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

from typing import Any

from kubebase.objects import Dict
from trainjob.jsondoc import json_copy
from trainjob.models import RuntimePatch
from trainjob.runtime.info import RuntimeSpecError
from trainjob_api import constants as c

_MERGE_BY_NAME = ("volumes", "imagePullSecrets", "schedulingGates")
_MERGE_STRUCT = ("affinity", "securityContext")
_REPLACE = ("serviceAccountName", "terminationGracePeriodSeconds")


def merge_by_key(base: list[Dict], extra: list[Dict], key: str = "name") -> list[Dict]:
    """Entries of `extra` replace same-key entries of `base` in place; new ones are appended."""
    out = [json_copy(e) for e in base]
    index = {e.get(key): i for i, e in enumerate(out)}
    for entry in extra:
        if entry.get(key) in index:
            out[index[entry[key]]] = json_copy(entry)
        else:
            index[entry.get(key)] = len(out)
            out.append(json_copy(entry))
    return out


def merge_struct(base: Any, patch: Any) -> Any:
    """A strategic merge of a struct without merge keys: maps merge recursively, a null
    removes the field, anything else (lists included) replaces."""
    if not isinstance(patch, dict):
        return json_copy(patch)
    out: Dict = json_copy(base) if isinstance(base, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_struct(out.get(key), value)
    return out


def _merge_map(target: Dict, key: str, patch: Dict | None) -> None:
    """A string map (labels, nodeSelector ...) merged key by key; a null removes one."""
    if not patch:
        return
    merged = merge_struct(target.get(key) or {}, patch)
    if merged:
        target[key] = merged
    else:
        target.pop(key, None)


def _toleration_id(t: Dict) -> tuple[Any, ...]:
    return (t.get("key"), t.get("operator") or "Equal", t.get("value"), t.get("effect"))


def add_tolerations(base: list[Dict], extra: list[Dict]) -> list[Dict]:
    """`base` and then those of `extra` it does not hold yet (by key, operator, value and
    effect; one already there stays as it is, tolerationSeconds included)."""
    out = [json_copy(t) for t in base]
    seen = {_toleration_id(t) for t in out}
    for t in extra:
        if _toleration_id(t) not in seen:
            seen.add(_toleration_id(t))
            out.append(json_copy(t))
    return out


def _merge_meta(target: Dict, patch: Dict | None) -> None:
    if not patch:
        return
    for key in ("labels", "annotations"):
        _merge_map(target, key, patch.get(key))


def _patch_containers(pod_spec: Dict, field: str, patches: list[Dict], where: str) -> None:
    containers = pod_spec.get(field) or []
    by_name = {ctr.get("name"): ctr for ctr in containers}
    for cpatch in patches:
        name = cpatch["name"]
        if name not in by_name:
            known = ", ".join(sorted(str(n) for n in by_name)) or "none"
            raise RuntimeSpecError(
                f"{where}: {field} patch names container {name!r}, which the runtime does "
                f"not have (it has: {known})"
            )
        ctr = by_name[name]
        if cpatch.get("env"):
            ctr["env"] = merge_by_key(ctr.get("env") or [], cpatch["env"])
        if cpatch.get("volumeMounts"):  # the Pod API's merge key for mounts is the path
            ctr["volumeMounts"] = merge_by_key(
                ctr.get("volumeMounts") or [], cpatch["volumeMounts"], key="mountPath"
            )
        if cpatch.get("securityContext") is not None:
            ctr["securityContext"] = merge_struct(
                ctr.get("securityContext"), cpatch["securityContext"]
            )


def _patch_pod_spec(pod_spec: Dict, patch: Dict, where: str, manager: str) -> None:
    _merge_map(pod_spec, "nodeSelector", patch.get("nodeSelector"))
    if patch.get("tolerations"):
        if manager == c.KUEUE_RUNTIME_PATCH_MANAGER:
            pod_spec["tolerations"] = add_tolerations(
                pod_spec.get("tolerations") or [], patch["tolerations"]
            )
        else:  # atomic in Trainer's API: the patch's list is the list
            pod_spec["tolerations"] = json_copy(patch["tolerations"])
    for field in _MERGE_BY_NAME:
        if patch.get(field):
            pod_spec[field] = merge_by_key(pod_spec.get(field) or [], patch[field])
    for field in _MERGE_STRUCT:
        if patch.get(field) is not None:
            pod_spec[field] = merge_struct(pod_spec.get(field), patch[field])
    for field in _REPLACE:
        if field in patch:
            pod_spec[field] = json_copy(patch[field])
    for field in ("initContainers", "containers"):
        if patch.get(field):
            _patch_containers(pod_spec, field, patch[field], where)


def apply_runtime_patch(
    jobset_meta: Dict, replicated_jobs: dict[str, Dict], patch: RuntimePatch
) -> None:
    """Apply one runtimePatch in place to the JobSet metadata and replicatedJob templates."""
    template = (patch.training_runtime_spec or {}).get("template") or {}
    _merge_meta(jobset_meta, template.get("metadata"))
    for rj_patch in (template.get("spec") or {}).get("replicatedJobs") or []:
        name = rj_patch["name"]
        where = f"runtimePatches[manager={patch.manager}].replicatedJobs[{name}]"
        if name not in replicated_jobs:
            known = ", ".join(sorted(replicated_jobs))
            raise RuntimeSpecError(
                f"{where}: the runtime has no replicatedJob {name!r} (it has: {known})"
            )
        job_template = replicated_jobs[name]["template"]
        jt_patch = rj_patch.get("template") or {}
        _merge_meta(job_template.setdefault("metadata", {}), jt_patch.get("metadata"))
        pt_patch = (jt_patch.get("spec") or {}).get("template") or {}
        pod_template = job_template.setdefault("spec", {}).setdefault("template", {})
        _merge_meta(pod_template.setdefault("metadata", {}), pt_patch.get("metadata"))
        if pt_patch.get("spec"):
            _patch_pod_spec(
                pod_template.setdefault("spec", {}), pt_patch["spec"], where, patch.manager
            )
