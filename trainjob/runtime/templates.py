"""A runtime's templates as the framework builds a job from them: typed editors over its own
copy of the JSON, and typed views of the runtimePatches that edit them (pure).

An editor (`MetaEdit`, `JobTemplateEdit`, `PodSpecEdit`, `ContainerEdit`) reads as the views of
trainjob_api.pods do (a field of another shape reads as absent) and writes in place, one field
at a time. What it does not name stays as the runtime wrote it: a model would drop the fields
it does not know, and a pod template is open-ended (a field newer than this code must still
reach the pods), which is why Kubernetes' typed clients edit through apply configurations
rather than structs. The merges are the strategic merges of the Pod API (`merge_by_key`,
`merge_struct`).

The patch views read a runtimePatch as Trainer v2.3 types it (its PodSpecPatch and
ContainerPatch): only the fields a patch may carry, each of the type the CRD gives it."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import orjson

from kubebase.objects import Dict
from trainjob.jsondoc import json_copy
from trainjob_api.pods import ContainerView, PodSpecView
from trainjob_api.views import JsonView, mapping, objects


def identity(value: object) -> Hashable:
    """A merge key as a dict key, tagged by its JSON type: a string is itself, any other value
    its JSON (sorted keys), so that a key of another shape (a number, a list, an object: the
    CRDs refuse them) is told apart from every string and never raised on."""
    if isinstance(value, str):
        return ("string", value)
    return ("json", orjson.dumps(value, option=orjson.OPT_SORT_KEYS))


def merge_by_key(base: list[Dict], extra: list[Dict], key: str = "name") -> list[Dict]:
    """Entries of `extra` replace same-key entries of `base` in place; new ones are appended."""
    out = [json_copy(e) for e in base]
    index = {identity(e.get(key)): i for i, e in enumerate(out)}
    for entry in extra:
        found = identity(entry.get(key))
        if found in index:
            out[index[found]] = json_copy(entry)
        else:
            index[found] = len(out)
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


class _Edit(JsonView):
    """What every editor does to its object: a part made where it is first written, a map
    merged key by key, a list merged entry by entry, a struct merged field by field, a field
    replaced."""

    __slots__ = ()

    def _object(self, key: str) -> Dict:
        """The object under `key`, made (empty) when it is absent, null or of another shape:
        absent and null are one to the API, and the runtime's shapes are checked before any
        edit."""
        found = self.raw.get(key)
        if not isinstance(found, dict):
            found = self.raw[key] = {}
        return found

    def _list(self, key: str) -> list[Any]:
        """The list under `key`, made (empty) when it is absent, null or of another shape."""
        found = self.raw.get(key)
        if not isinstance(found, list):
            found = self.raw[key] = []
        return found

    def entries(self, field: str) -> list[Dict]:
        """The objects of its list `field`."""
        return objects(self.raw.get(field))

    def merge_map(self, key: str, patch: Dict | None) -> None:
        """A string map (labels, nodeSelector ...) merged key by key; a null removes one, and
        a map left empty is left out."""
        if not patch:
            return
        merged = merge_struct(mapping(self.raw.get(key)), patch)
        if merged:
            self.raw[key] = merged
        else:
            self.raw.pop(key, None)

    def merge_entries(self, field: str, extra: list[Dict], key: str = "name") -> None:
        """`extra` merged into the list `field` by its merge key (`merge_by_key`)."""
        self.raw[field] = merge_by_key(self.entries(field), extra, key)

    def merge_struct(self, field: str, patch: object) -> None:
        self.raw[field] = merge_struct(self.raw.get(field), patch)

    def replace(self, field: str, value: object) -> None:
        self.raw[field] = json_copy(value)


class MetaEdit(_Edit):
    """An object's metadata: its labels and annotations."""

    __slots__ = ()

    @property
    def labels(self) -> Dict:
        return mapping(self.raw.get("labels"))

    @property
    def annotations(self) -> Dict:
        return mapping(self.raw.get("annotations"))

    def merge(self, patch: MetaPatchView) -> None:
        self.merge_map("labels", patch.labels)
        self.merge_map("annotations", patch.annotations)

    def put(self, field: str, key: str, value: str) -> None:
        """One entry of `labels` or `annotations` set (the map copied, not edited in place)."""
        self.raw[field] = {**mapping(self.raw.get(field)), key: value}


class ContainerEdit(ContainerView, _Edit):
    """A container of a pod template being built."""

    __slots__ = ()

    def merge_env(self, env: list[Dict]) -> None:
        """`env` over the container's own, by name."""
        self.merge_entries("env", env)

    def merge_mounts(self, mounts: list[Dict]) -> None:
        """`mounts` over the container's own, by path (the Pod API's merge key for them)."""
        self.merge_entries("volumeMounts", mounts, key="mountPath")

    def add_port(self, port: int) -> None:
        """A TCP port the container listens on, unless it lists that port already."""
        ports = self._list("ports")
        if not any(p.get("containerPort") == port for p in objects(ports)):
            ports.append({"containerPort": port, "protocol": "TCP"})

    def add_secret_env(self, secret: str) -> None:
        """Every key of the Secret `secret` as an environment variable (envFrom), once."""
        env_from = self._list("envFrom")
        ref = {"secretRef": {"name": secret}}
        if ref not in env_from:
            env_from.append(ref)


class PodSpecEdit(PodSpecView, _Edit):
    """The pod spec of a pod template being built."""

    __slots__ = ()

    def editable(self, kind: str) -> list[ContainerEdit]:
        """Its containers of one list (`containers`, `initContainers`), to edit."""
        return self._entries(ContainerEdit, kind)

    def container(self, name: str) -> ContainerEdit | None:
        """Its container (not init container) `name`."""
        return next((ctr for ctr in self.editable("containers") if ctr.name == name), None)

    def any_container(self, name: str) -> ContainerEdit | None:
        """Its container or init container `name` (a container first)."""
        both = [*self.editable("containers"), *self.editable("initContainers")]
        return next((ctr for ctr in both if ctr.name == name), None)

    def mounted(self) -> set[str]:
        """The names of the volumes its containers and init containers mount."""
        both = [*self.editable("containers"), *self.editable("initContainers")]
        return {
            name
            for ctr in both
            for m in ctr.entries("volumeMounts")
            if isinstance(name := m.get("name"), str)
        }


class PodTemplateEdit(_Edit):
    """A pod template being built: its metadata and spec, each made when first edited."""

    __slots__ = ()

    @property
    def metadata(self) -> MetaEdit:
        return MetaEdit(self._object("metadata"))

    @property
    def spec(self) -> PodSpecEdit:
        return PodSpecEdit(self._object("spec"))


class JobTemplateEdit(_Edit):
    """A replicatedJob's Job template being built."""

    __slots__ = ()

    @property
    def metadata(self) -> MetaEdit:
        return MetaEdit(self._object("metadata"))

    @property
    def pod_template(self) -> PodTemplateEdit:
        return PodTemplateEdit(_Edit(self._object("spec"))._object("template"))


class MetaPatchView(JsonView):
    """A patch's metadata: the labels and annotations it merges."""

    __slots__ = ()

    @property
    def labels(self) -> Dict | None:
        return mapping(self.raw.get("labels")) or None

    @property
    def annotations(self) -> Dict | None:
        return mapping(self.raw.get("annotations")) or None


class ContainerPatchView(JsonView):
    """A container's patch (Trainer's ContainerPatch): its name, env, mounts, securityContext."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self._text("name")

    @property
    def env(self) -> list[Dict]:
        return objects(self.raw.get("env"))

    @property
    def volume_mounts(self) -> list[Dict]:
        return objects(self.raw.get("volumeMounts"))

    @property
    def security_context(self) -> object:
        return self.raw.get("securityContext")


class PodSpecPatchView(JsonView):
    """A pod spec's patch (Trainer's PodSpecPatch)."""

    __slots__ = ()

    @property
    def node_selector(self) -> Dict | None:
        return mapping(self.raw.get("nodeSelector")) or None

    def entries(self, field: str) -> list[Dict]:
        """A list of objects it carries (tolerations, volumes ...)."""
        return objects(self.raw.get(field))

    def struct(self, field: str) -> object:
        """An object it carries (affinity, securityContext), None when it carries none."""
        return self.raw.get(field)

    def has(self, field: str) -> bool:
        return field in self.raw

    def value(self, field: str) -> object:
        return self.raw.get(field)

    def containers(self, field: str) -> list[ContainerPatchView]:
        """Its patches of `containers` or `initContainers`."""
        return [ContainerPatchView(p) for p in objects(self.raw.get(field))]


class ReplicatedJobPatchView(JsonView):
    """A replicatedJob's patch: its name, its Job's and pods' metadata, its pods' spec."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self._text("name")

    @property
    def _job(self) -> Dict:
        return mapping(self.raw.get("template"))

    @property
    def _pod(self) -> Dict:
        return mapping(mapping(mapping(self._job.get("spec")).get("template")))

    @property
    def job_metadata(self) -> MetaPatchView:
        return MetaPatchView(mapping(self._job.get("metadata")))

    @property
    def pod_metadata(self) -> MetaPatchView:
        return MetaPatchView(mapping(self._pod.get("metadata")))

    @property
    def pod_spec(self) -> PodSpecPatchView | None:
        """The pods' spec patch, None when it patches nothing there."""
        spec = mapping(self._pod.get("spec"))
        return PodSpecPatchView(spec) if spec else None


class TemplatePatchView(JsonView):
    """A runtimePatch's trainingRuntimeSpec: the JobSet template's metadata and replicatedJobs."""

    __slots__ = ()

    @property
    def _template(self) -> Dict:
        return mapping(self.raw.get("template"))

    @property
    def metadata(self) -> MetaPatchView:
        return MetaPatchView(mapping(self._template.get("metadata")))

    @property
    def replicated_jobs(self) -> list[ReplicatedJobPatchView]:
        spec = mapping(self._template.get("spec"))
        return [ReplicatedJobPatchView(p) for p in objects(spec.get("replicatedJobs"))]


class ClaimTemplateView(JsonView):
    """A volume claim template of a runtime's volumeClaimPolicies: a PVC's metadata and spec."""

    __slots__ = ()

    @property
    def _meta(self) -> Dict:
        return mapping(self.raw.get("metadata"))

    @property
    def name(self) -> str:
        return str(self._meta.get("name") or "")

    @property
    def labels(self) -> Dict:
        return mapping(self._meta.get("labels"))

    @property
    def annotations(self) -> Dict:
        return mapping(self._meta.get("annotations"))

    @property
    def spec(self) -> Dict:
        return mapping(self.raw.get("spec"))


class ClaimPolicyView(JsonView):
    """One of a runtime's volumeClaimPolicies: its claim templates and what becomes of their
    claims when the job is deleted."""

    __slots__ = ()

    @property
    def when_deleted(self) -> object:
        return mapping(self.raw.get("retentionPolicy")).get("whenDeleted")

    @property
    def templates(self) -> list[ClaimTemplateView]:
        return [ClaimTemplateView(t) for t in objects(self.raw.get("templates"))]


class JobSetSpecView(JsonView):
    """A runtime's JobSet template spec (spec.template.spec) as the framework reads it beside
    the models (after `shapes.check_template_spec`): its success and claim policies."""

    __slots__ = ()

    @property
    def success_policy(self) -> tuple[str, list[str]]:
        """Its successPolicy's operator (All by default) and target replicatedJobs."""
        policy = mapping(self.raw.get("successPolicy"))
        targets = policy.get("targetReplicatedJobs")
        return str(policy.get("operator") or "All"), list(targets or [])

    @property
    def claim_policies(self) -> list[ClaimPolicyView]:
        return [ClaimPolicyView(p) for p in objects(self.raw.get("volumeClaimPolicies"))]
