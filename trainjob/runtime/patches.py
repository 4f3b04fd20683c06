"""Merging a TrainJob's runtimePatches into the runtime's JobSet template (strategic-merge style).

Patches apply in list order (the order managers were added). Maps (labels, annotations,
nodeSelector) merge key by key; lists keyed by name (containers, env, volumes, volumeMounts,
imagePullSecrets, schedulingGates) merge entry by entry; tolerations append; scalars and
structs (affinity, securityContext, serviceAccountName ...) replace.
"""

from __future__ import annotations

from typing import Any

from trainjob.jsondoc import json_copy
from trainjob.models import RuntimePatch
from trainjob.runtime.info import RuntimeSpecError

Dict = dict[str, Any]

_MERGE_BY_NAME = ("volumes", "imagePullSecrets", "schedulingGates")
_REPLACE = ("affinity", "securityContext", "serviceAccountName", "terminationGracePeriodSeconds")


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


def _merge_meta(target: Dict, patch: Dict | None) -> None:
    if not patch:
        return
    for key in ("labels", "annotations"):
        if patch.get(key):
            target.setdefault(key, {}).update(patch[key])


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
        if cpatch.get("volumeMounts"):
            ctr["volumeMounts"] = merge_by_key(
                ctr.get("volumeMounts") or [], cpatch["volumeMounts"]
            )
        if "securityContext" in cpatch:
            ctr["securityContext"] = json_copy(cpatch["securityContext"])


def _patch_pod_spec(pod_spec: Dict, patch: Dict, where: str) -> None:
    if patch.get("nodeSelector"):
        pod_spec.setdefault("nodeSelector", {}).update(patch["nodeSelector"])
    if patch.get("tolerations"):
        pod_spec["tolerations"] = [
            *(pod_spec.get("tolerations") or []),
            *json_copy(patch["tolerations"]),
        ]
    for field in _MERGE_BY_NAME:
        if patch.get(field):
            pod_spec[field] = merge_by_key(pod_spec.get(field) or [], patch[field])
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
            _patch_pod_spec(pod_template.setdefault("spec", {}), pt_patch["spec"], where)
