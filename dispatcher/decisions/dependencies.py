"""A TrainJob's dependencies: the Secrets and ConfigMaps its pods reference, and the
namespaced TrainingRuntime it names, copied to the worker that runs it (pure; the writes are
dependencies_io.py's).

Only in a namespace a platform admin opted in (the `trainjob.dev/copy-dependencies: "true"`
label on the manager's namespace; tenants cannot label their namespace). What the pods read
is found in the manager Workload's PodSets, which hold the pod templates as the worker will
run them (runtime and TrainJob merged): env and envFrom of every container, secret,
configMap and projected volumes, imagePullSecrets. What the ML policy makes on the worker
itself (an MPI job's SSH keys and hostfile) is not in them, and never copied.

A TrainingRuntime of the job's namespace goes along the same way (its spec), so that a
tenant's own runtime, which the tenant cannot make on the workers, runs where its job goes. A
runtime of that name already on the worker that is not a copy is left as it is: used when its
spec is the manager's, else the worker gets no copy of the job (RuntimeDrift). A copy kept in
step with a runtime the tenant changes after its jobs' Workloads were made runs nothing Kueue
did not admit: a Workload is held to what each pod asks for (trainjob/workload.py
pod_sets_match), so a copy of the job whose pods would now ask for more ends out of sync on its
worker and is sent again from a Workload made for what it asks.

A copy carries our origin label and the manager object's UID (the copies' usual marks), the
digest of what it holds, and one ownerReference per Workload copy on that worker that needs it
(one copy serves them all: copy_ledger.py remembers what it holds and for whom):
the worker's garbage collector deletes it with the last of them. A same-named object there that
is not ours is never adopted or written over: the job goes to another worker (`NameTaken`).
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

from dispatcher.decisions.copies import not_ours
from kubebase.kinds import CONFIG_MAP, SECRET
from kubebase.objects import Dict, OwnerReference
from trainjob.lru import LRU
from trainjob.ownership import is_dependency_copy
from trainjob.queues import PodSetView
from trainjob.runtime.defaults import same_runtime_spec
from trainjob_api import constants as c
from trainjob_api.pods import (
    CONTAINER_LISTS,
    ContainerView,
    PodPartView,
    PodSpecView,
    VolumeView,
)
from trainjob_api.views import ObjectView, RuntimeView, TrainJobView, WorkloadView, objects

# On a manager namespace: its TrainJobs' Secrets and ConfigMaps follow them to the workers.
NAMESPACE_LABEL = f"{c.DOMAIN}/copy-dependencies"
# On a copy: the digest of the manager object's content it holds.
DIGEST_ANNOTATION = f"{c.DOMAIN}/source-digest"
# The most objects one TrainJob may take along (each is a read on the manager and a write on
# the worker per dispatch).
MAX_DEPENDENCIES = 32
# Secrets that are the manager's own credentials: never copied anywhere.
NEVER_COPIED_TYPES = frozenset({"kubernetes.io/service-account-token"})
KINDS = {k.kind: k for k in (SECRET, CONFIG_MAP, c.TRAINING_RUNTIME)}
# What a copy takes of its source, besides the name.
CONTENT = {
    "Secret": ("type", "data", "stringData"),
    "ConfigMap": ("data", "binaryData"),
    c.TRAINING_RUNTIME_KIND: ("spec",),
}


def opted_in(namespace_labels: dict[str, str]) -> bool:
    """Whether a manager namespace's TrainJobs take their dependencies along."""
    return namespace_labels.get(NAMESPACE_LABEL) == "true"


@dataclass(frozen=True)
class Ref:
    """One object the pods name: its kind and name, whether every reference to it is
    optional, and the first field that names it."""

    kind: str  # Secret | ConfigMap
    name: str
    optional: bool
    field: str


Found = tuple[str, str, bool, str]  # kind, name, optional, the field that names it
KEY_REFS = (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap"))
WHOLE_REFS = (("secretRef", "Secret"), ("configMapRef", "ConfigMap"))
PROJECTED = (("secret", "Secret"), ("configMap", "ConfigMap"))


def _named(holder: PodPartView, keys: tuple[tuple[str, str], ...], where: str) -> Iterator[Found]:
    """The objects named under `keys` of `holder`."""
    for key, kind in keys:
        ref = holder.ref(key)
        if ref is not None and ref.name:
            yield kind, ref.name, ref.optional, f"{where}.{key}"


def _env_refs(ctr: ContainerView, where: str) -> Iterator[Found]:
    for env in ctr.env:
        yield from _named(env.value_from, KEY_REFS, f"{where}.env[{env.at}].valueFrom")
    for env_from in ctr.env_from:
        yield from _named(env_from, WHOLE_REFS, f"{where}.envFrom[{env_from.at}]")


def _volume_refs(volume: VolumeView, where: str) -> Iterator[Found]:
    secret = volume.secret
    if secret is not None and secret.name:
        yield "Secret", secret.name, secret.optional, f"{where}.secret"
    yield from _named(volume, (("configMap", "ConfigMap"),), where)
    for source in volume.projected_sources:
        yield from _named(source, PROJECTED, f"{where}.projected.sources[{source.at}]")


def _pod_refs(pod: PodSpecView, where: str) -> Iterator[Found]:
    for section in CONTAINER_LISTS:
        for ctr in pod.containers_in(section):
            yield from _env_refs(ctr, f"{where}.{section}[{ctr.at}]")
    for volume in pod.volumes:
        yield from _volume_refs(volume, f"{where}.volumes[{volume.at}]")
    for pull in pod.image_pull_secrets:
        if pull.name:
            yield "Secret", pull.name, False, f"{where}.imagePullSecrets[{pull.at}]"


def references(pod_sets: list[Dict]) -> list[Ref]:
    """The Secrets and ConfigMaps a Workload's pods reference, each once (optional only when
    every reference to it is), in the order first named."""
    found: dict[tuple[str, str], Ref] = {}
    for ps in map(PodSetView, pod_sets):
        where = f"spec.podSets[{ps.name}].template.spec"
        for kind, name, optional, path in _pod_refs(ps.pod_spec, where):
            seen = found.get((kind, name))
            if seen is None:
                found[(kind, name)] = Ref(kind, name, optional, path)
            elif seen.optional and not optional:
                found[(kind, name)] = Ref(kind, name, False, path)
    return list(found.values())


def named_by(workload: WorkloadView) -> list[tuple[str, str, str]]:
    """The (namespace, Kind, name) of each Secret and ConfigMap a manager Workload's pods
    reference: the keys the dispatcher's index of dependents files it under, so that a change
    of one queues only the TrainJobs that take it along. The first MAX_DEPENDENCIES only: a job
    that names more is refused whatever they hold."""
    refs = references(objects(workload.spec.get("podSets")))
    return [(workload.namespace, ref.kind, ref.name) for ref in refs[:MAX_DEPENDENCIES]]


def runtime_named_by(trainjob: TrainJobView) -> list[tuple[str, str]]:
    """The (namespace, name) of the TrainingRuntime of its namespace a TrainJob names, if it
    names one: the key the dispatcher's index of a runtime's users files it under."""
    if trainjob.runtime_kind != c.TRAINING_RUNTIME_KIND:
        return []
    name = trainjob.runtime_ref.get("name")
    return [(trainjob.namespace, name)] if isinstance(name, str) and name else []


# ---- the manager's objects, as the cache keeps them ----------------------------------------


def digest(obj: Dict) -> str:
    """What a copy must hold of `obj`, hashed: its type and data (Secret), data and
    binaryData (ConfigMap)."""
    content = {k: obj.get(k) for k in CONTENT[obj["kind"]] if obj.get(k) is not None}
    blob = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


IDENTITY = ("name", "namespace", "uid", "resourceVersion")


def source_seen(kind: str, obj: Dict) -> Dict:
    """What the manager's cache keeps of a Secret or ConfigMap (the informer's transform):
    who it is and the digest of its content, never the content."""
    kept = source_unread(kind, obj)
    kept["digest"] = digest({**obj, "kind": kind})
    if kind == "Secret":
        kept["type"] = obj.get("type")
    return kept


def source_unread(kind: str, obj: Dict) -> Dict:
    """What the cache keeps of a Secret or ConfigMap `source_seen` failed on (the informer's
    fallback): who it is, never its content, and a digest no copy holds (a copy of it is
    refreshed from the API server, within its namespace's turns, until the object changes
    and is read again)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return {"kind": kind, "metadata": {k: meta[k] for k in IDENTITY if k in meta}, "digest": ""}


@dataclass(frozen=True)
class Source:
    """One manager object a job takes along, as the cache saw it."""

    kind: str
    name: str
    uid: str
    digest: str

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass
class Needs:
    """What a TrainJob takes to its worker: the objects found, and why it cannot go yet
    (a required object missing, too many, one that never leaves the manager)."""

    sources: list[Source] = field(default_factory=list)
    problem: str | None = None
    reason: str = ""


REASON_MISSING = c.REASON_DEPENDENCY_MISSING
REASON_REFUSED = c.REASON_DEPENDENCY_REFUSED


# A runtime's digest and comparisons, by the versions they were made of (uid and
# resourceVersion name a stored object's content): a runtime may be a tenant's megabyte, read
# on every pass of every job that names it.
_DIGESTS: LRU[tuple[str, str], str] = LRU(4096)
_SAME: LRU[tuple[str, str, str, str], bool] = LRU(4096)


def _version(obj: ObjectView) -> tuple[str, str]:
    return str(obj.uid or ""), str(obj.resource_version or "")


def runtime_source(runtime: RuntimeView) -> Source:
    """A namespaced TrainingRuntime of the manager (as its cache holds it) as a job takes it
    along."""
    body = {"kind": c.TRAINING_RUNTIME_KIND, "spec": runtime.raw.get("spec")}
    uid, version = _version(runtime)
    made = _DIGESTS.get_or_make((uid, version), lambda: digest(body)) if version else digest(body)
    return Source(c.TRAINING_RUNTIME_KIND, runtime.name, uid, made)


def usable_as_is(found: ObjectView, source: ObjectView) -> bool:
    """Whether an object of a copy's name on a worker that is not ours serves as it is: a
    TrainingRuntime whose spec is the manager's (a platform made the same runtime there)."""
    if source.raw.get("kind") != c.TRAINING_RUNTIME_KIND:
        return False

    def same() -> bool:
        return same_runtime_spec(found.spec, source.spec)

    versions = (*_version(found), *_version(source))
    return _SAME.get_or_make(versions, same) if versions[1] and versions[3] else same()


def needs(
    namespace: str,
    pod_sets: list[Dict],
    lookup: Callable[[str, str, str], Dict | None],
    never_from: frozenset[str] = frozenset(),
    runtime: RuntimeView | None = None,
) -> Needs:
    """What the pods of a Workload in `namespace` take along, from the manager's cache
    (`lookup(kind, namespace, name)`: the `source_seen` form, or None), and `runtime`, the
    namespaced TrainingRuntime its TrainJob names (None: a ClusterTrainingRuntime, which the
    platform installs on every cluster)."""
    refs = references(pod_sets)
    if not refs and runtime is None:
        return Needs()
    if namespace in never_from:
        return Needs(
            problem=f"namespace {namespace!r} holds the dispatcher's own credentials: nothing "
            "in it is copied to a worker",
            reason=REASON_REFUSED,
        )
    if len(refs) > MAX_DEPENDENCIES:
        return Needs(
            problem=f"its pods reference {len(refs)} Secrets and ConfigMaps; at most "
            f"{MAX_DEPENDENCIES} follow a TrainJob to its worker",
            reason=REASON_REFUSED,
        )
    found = [runtime_source(runtime)] if runtime is not None else []
    missing, refused = [], []
    for ref in refs:
        seen = lookup(ref.kind, namespace, ref.name)
        if seen is None:
            if not ref.optional:
                missing.append(f"{ref.kind} {ref.name!r} ({ref.field})")
            continue
        if ref.kind == "Secret" and seen.get("type") in NEVER_COPIED_TYPES:
            refused.append(
                f"Secret {ref.name!r} ({ref.field}) is a {seen.get('type')} Secret: the "
                "manager's tokens never leave it"
            )
            continue
        meta = seen["metadata"]
        found.append(Source(ref.kind, ref.name, str(meta.get("uid", "")), str(seen["digest"])))
    if refused:
        return Needs(found, "; ".join(refused), REASON_REFUSED)
    if missing:
        return Needs(
            found,
            f"{', '.join(missing)} not found in namespace {namespace!r} on the manager; it "
            "is sent to a worker once they exist",
            REASON_MISSING,
        )
    return Needs(found)


# ---- a copy -----------------------------------------------------------------------------------


def skeleton(source: Source, namespace: str, origin: str, owner: OwnerReference) -> Dict:
    """A copy's identity and marks, without its content (filled in from the manager object
    when it is written): `owner` is the ownerReference of the Workload copy that needs it; the
    digest is the one the cache saw (a copy already holding it and owned so needs no write)."""
    kind = KINDS[source.kind]
    return {
        "apiVersion": kind.api_version,
        "kind": source.kind,
        "metadata": {
            "name": source.name,
            "namespace": namespace,
            "labels": {c.KUEUE_MULTIKUEUE_ORIGIN_LABEL: origin},
            "annotations": {
                c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: source.uid,
                DIGEST_ANNOTATION: source.digest,
            },
            "ownerReferences": [owner],
        },
    }


def owner_of(workload: ObjectView) -> OwnerReference:
    """The ownerReference a dependency's copy gets from the Workload copy that needs it."""
    return {
        "apiVersion": c.KUEUE_API,
        "kind": "Workload",
        "name": workload.name,
        "uid": str(workload.uid or ""),
    }


def filled(copy: Dict, source: ObjectView) -> Dict:
    """`copy` (a skeleton) holding the manager object's content, its digest noted."""
    body = {**copy, "metadata": {**copy["metadata"]}}
    for key in CONTENT[copy["kind"]]:
        if source.raw.get(key) is not None:
            body[key] = source.raw[key]
    body["metadata"]["annotations"] = {
        **copy["metadata"]["annotations"],
        DIGEST_ANNOTATION: digest(source.raw),
    }
    return body


def _holds(found: ObjectView, want: Dict) -> bool:
    """Whether a copy on the worker holds what `want` does (its content; a skeleton's, the
    digest it names), judged by the copy's content, never by the digest its annotation claims:
    someone with rights there may have changed it since. A runtime's spec counts as the same
    where one side lacks a field the other holds at Trainer's default."""
    kind = want["kind"]
    if not any(key in want for key in CONTENT[kind]):  # a skeleton
        claimed = str(want["metadata"]["annotations"][DIGEST_ANNOTATION])
        return digest({**found.raw, "kind": kind}) == claimed
    if kind == c.TRAINING_RUNTIME_KIND:
        return same_runtime_spec(found.spec, want.get("spec") or {})
    return digest({**found.raw, "kind": kind}) == digest(want)


def updated(found: ObjectView, want: Dict) -> Dict | None:
    """Our copy `found` on the worker brought to `want` (a filled skeleton): its content, and
    the new owner beside those it has. None when it holds both already."""
    owners = found.owner_references
    new_owner = want["metadata"]["ownerReferences"][0]
    have_owner = any(o.get("uid") == new_owner["uid"] for o in owners)
    annotations = found.annotations
    want_digest = want["metadata"]["annotations"][DIGEST_ANNOTATION]
    if have_owner and annotations.get(DIGEST_ANNOTATION) == want_digest and _holds(found, want):
        return None
    body = {k: v for k, v in found.raw.items() if k not in CONTENT[want["kind"]]}
    for key in CONTENT[want["kind"]]:
        if key in want:
            body[key] = want[key]
    body["metadata"] = {
        **found.meta,
        "annotations": {**annotations, DIGEST_ANNOTATION: want_digest},
        "ownerReferences": owners if have_owner else [*owners, new_owner],
    }
    return body


# ---- writing a copy: what is written, from what was read --------------------------------------


class Unread(enum.Enum):
    """The manager's object, not read yet (None is: read, and not there)."""

    UNREAD = "UNREAD"


UNREAD: Final = Unread.UNREAD


@dataclass(frozen=True)
class ReadSource:
    """The manager's object is needed: to judge a worker's own runtime of the name (`write`
    False, spending no copy refresh), or to fill in the copy (`write` True: the namespace's
    turn is taken first)."""

    write: bool


@dataclass(frozen=True)
class InPlace:
    """Our copy on the worker holds what the job needs, owned by its Workload copy."""

    copy: Dict


@dataclass(frozen=True)
class ServedAsIs:
    """The worker's own object of the name serves the job as it is; never written."""


@dataclass(frozen=True)
class Taken:
    """An object of the copy's name on the worker that is not ours: left as it is, the name
    noted as taken there (the job goes elsewhere)."""

    why: str


@dataclass(frozen=True)
class Gone:
    """The manager's object is gone, or never leaves it: nothing is written (the next pass
    sees it missing or refused in the cache)."""


@dataclass(frozen=True)
class Create:
    body: Dict


@dataclass(frozen=True)
class Replace:
    body: Dict


CopyStep = ReadSource | InPlace | ServedAsIs | Taken | Gone | Create | Replace


def copy_step(
    want: Dict, found: ObjectView | None, source: ObjectView | Unread | None = UNREAD
) -> CopyStep:
    """The next step for a dependency's copy `want` (a skeleton, see `skeleton`), from what is
    on the worker (`found`, None: nothing of the name) and the manager's object (`source`,
    with its kind; None: not there; UNREAD: not read yet). An object there that is not our copy
    is never written: a TrainingRuntime whose spec is the manager's serves as it is. Before the
    manager's object is read, our copy holding the skeleton's digest (the cache's), owned by
    its Workload copy, needs nothing more; once it is read, the copy is made, or ours brought,
    to its content."""
    meta = want["metadata"]
    if found is not None and not is_dependency_copy(
        found.raw, meta["labels"][c.KUEUE_MULTIKUEUE_ORIGIN_LABEL]
    ):
        if want["kind"] == c.TRAINING_RUNTIME_KIND and isinstance(source, Unread):
            return ReadSource(write=False)
        if isinstance(source, ObjectView) and usable_as_is(found, source):
            return ServedAsIs()
        return Taken(not_ours(ObjectView(want)))
    if isinstance(source, Unread):
        if found is not None and updated(found, want) is None:
            return InPlace(found.raw)
        return ReadSource(write=True)
    if source is None or source.raw.get("type") in NEVER_COPIED_TYPES:
        return Gone()
    marked = {  # the skeleton marked with the UID of the object read (the digest: `filled`)
        **want,
        "metadata": {
            **meta,
            "annotations": {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: source.uid or ""},
        },
    }
    content = filled(marked, source)
    if found is None:
        return Create(content)
    body = updated(found, content)
    return InPlace(found.raw) if body is None else Replace(body)
