"""The shapes of a runtime's open parts (its Job and pod templates, success and claim
policies), checked before the framework reads them (pure).

Our TrainingRuntime CRDs leave a replicatedJob's template open, as the API server sees it, so a
runtime can hold `template: []` or `containers: {}`; each such field is a RuntimeSpecError
naming it, never an exception in the controllers' passes."""

from __future__ import annotations

from typing import Any

from kubebase.objects import Dict
from trainjob.runtime.info import RuntimeSpecError

# Each pod-spec list the framework reads, and what each of its entries must be.
_POD_LISTS = ("containers", "initContainers", "volumes", "tolerations")
_CONTAINER_LISTS = ("env", "envFrom", "volumeMounts", "ports")
# The fields of an entry the framework tells entries apart by (the Pod API's merge keys, and
# what a toleration is told by), each a string where it is given; a name is required.
_MERGE_KEYS = {
    "containers": ("name",),
    "initContainers": ("name",),
    "volumes": ("name",),
    "env": ("name",),
    "volumeMounts": ("name", "mountPath"),
    "tolerations": ("key", "operator", "value", "effect"),
}
_REQUIRED = frozenset({"name", "mountPath"})


def check_metadata(value: Any, where: str) -> None:
    """An object's metadata, or absent: its labels and annotations maps of strings."""
    meta = _mapping(value, where)
    for key in ("labels", "annotations"):
        _strings(meta.get(key), f"{where}.{key}")


def _keys(found: list[Dict], keys: tuple[str, ...], where: str) -> None:
    """Each entry's `keys` are strings (`_REQUIRED` ones given)."""
    for i, entry in enumerate(found):
        for key in keys:
            value = entry.get(key)
            if (value is not None or key in _REQUIRED) and not isinstance(value, str):
                raise RuntimeSpecError(f"{where}[{i}].{key} must be a string")


def _mapping(value: Any, where: str) -> Dict:
    """`value` when it is a mapping or absent ({}), else the error naming `where`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RuntimeSpecError(f"{where} must be an object, not {type(value).__name__}")
    return value


def entries(value: Any, where: str) -> list[Dict]:
    """`value` when it is a list of objects or absent ([]), else the error naming `where`."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RuntimeSpecError(f"{where} must be a list, not {type(value).__name__}")
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):  # null included: an entry is an object
            raise RuntimeSpecError(f"{where}[{i}] must be an object, not {type(entry).__name__}")
    return value


def check_job_template(name: str, template: Any) -> None:
    """A replicatedJob's template: a Job template whose fields the framework reads have the
    types the Job and pod APIs give them."""
    where = f"replicatedJob {name!r} template"
    template = _mapping(template, where)
    check_metadata(template.get("metadata"), f"{where}.metadata")
    spec = _mapping(template.get("spec"), f"{where}.spec")
    parallelism = spec.get("parallelism")
    if parallelism is not None and (
        isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 0
    ):
        raise RuntimeSpecError(f"{where}.spec.parallelism must be a whole number of pods")
    pod = _mapping(spec.get("template"), f"{where}.spec.template")
    check_metadata(pod.get("metadata"), f"{where}.spec.template.metadata")
    pod_spec = _mapping(pod.get("spec"), f"{where}.spec.template.spec")
    _strings(pod_spec.get("nodeSelector"), f"{where}.spec.template.spec.nodeSelector")
    for field in _POD_LISTS:
        found = entries(pod_spec.get(field), f"{where}.spec.template.spec.{field}")
        _keys(found, _MERGE_KEYS.get(field, ()), f"{where}.spec.template.spec.{field}")
        if field not in ("containers", "initContainers"):
            continue
        for i, ctr in enumerate(found):
            at = f"{where}.spec.template.spec.{field}[{i}]"
            for key in _CONTAINER_LISTS:
                _keys(entries(ctr.get(key), f"{at}.{key}"), _MERGE_KEYS.get(key, ()), f"{at}.{key}")
            resources = _mapping(ctr.get("resources"), f"{at}.resources")
            for key in ("requests", "limits"):
                _mapping(resources.get(key), f"{at}.resources.{key}")
            entries(resources.get("claims"), f"{at}.resources.claims")


def check_template_spec(raw: Any) -> None:
    """The runtime's JobSet template spec: its success and claim policies."""
    spec = _mapping(raw, "spec.template.spec")
    policy = _mapping(spec.get("successPolicy"), "spec.template.spec.successPolicy")
    targets = policy.get("targetReplicatedJobs")
    if targets is not None and not (
        isinstance(targets, list) and all(isinstance(t, str) for t in targets)
    ):
        raise RuntimeSpecError(
            "spec.template.spec.successPolicy.targetReplicatedJobs must be a list of names"
        )
    where = "spec.template.spec.volumeClaimPolicies"
    for i, claim in enumerate(entries(spec.get("volumeClaimPolicies"), where)):
        _mapping(claim.get("retentionPolicy"), f"{where}[{i}].retentionPolicy")
        for j, template in enumerate(entries(claim.get("templates"), f"{where}[{i}].templates")):
            at = f"{where}[{i}].templates[{j}]"
            meta = _mapping(template.get("metadata"), f"{at}.metadata")
            if meta.get("name") is not None and not isinstance(meta.get("name"), str):
                raise RuntimeSpecError(f"{at}.metadata.name must be a string")
            for key in ("labels", "annotations"):
                _strings(meta.get(key), f"{at}.metadata.{key}")
            _mapping(template.get("spec"), f"{at}.spec")


def _strings(value: Any, where: str) -> None:
    """A map of strings (labels, annotations, a node selector), or absent."""
    for key, item in _mapping(value, where).items():
        if not isinstance(item, str):
            raise RuntimeSpecError(f"{where}[{key}] must be a string")
