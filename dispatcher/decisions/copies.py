"""A TrainJob's copies on the workers, in one place: what a copy is (built from the manager's
Workload and TrainJob, `managedBy` and Kueue's placement patch stripped, our origin label and
the manager object's UID), which object on a worker is ours, what the workers' watches keep of
a copy, the status brought back from the one that runs it, and which copies are orphans
(their manager object gone). Pure: which copies go, with their TrainJob or as orphans, is
removal.py's plan; dispatcher/controller/execute.py carries it out.

Where each is used: the dispatch decision builds copies (decide.py, steps 4 and 5) and
execute.py sends them (`is_our_copy` on a 409); remote.py watches them (`seen`, `KINDS`);
reconcile.py deletes them with a deleted TrainJob; the resync loop sweeps orphans (resync.py).
"""

from __future__ import annotations

import orjson

from kubebase.kinds import Kind
from kubebase.objects import Dict
from trainjob.jsondoc import json_copy
from trainjob.ownership import is_our_copy, origin_uid
from trainjob_api import constants as c
from trainjob_api.views import ObjectView, TrainJobView, WorkloadView

# ---- building a copy --------------------------------------------------------------------------


def remote_workload(wl: WorkloadView, origin: str, gated: bool = False) -> Dict:
    """The copy of a manager Workload sent to a worker: same name, origin label, no owner.
    `gated` (orchestrated preemption): its only preemption gate is MultiKueue's, closed until
    the manager opens it (the manager's own gates are the manager's, as in Kueue)."""
    labels = {k: v for k, v in wl.labels.items() if k != c.KUEUE_JOB_UID_LABEL}
    spec = json_copy(wl.raw["spec"])
    if gated:
        spec["preemptionGates"] = [{"name": c.KUEUE_MULTIKUEUE_PREEMPTION_GATE}]
    return {
        "apiVersion": c.KUEUE_API,
        "kind": "Workload",
        "metadata": _remote_metadata(wl, origin, labels, wl.annotations),
        "spec": spec,
    }


def _remote_metadata(
    obj: ObjectView, origin: str, labels: dict[str, str], annotations: dict[str, str]
) -> Dict:
    """A remote copy's metadata: the manager object's name, namespace, the given labels and
    annotations, plus our origin label and the manager object's UID (Kueue's keys)."""
    labels = {**labels, c.KUEUE_MULTIKUEUE_ORIGIN_LABEL: origin}
    if obj.uid:
        annotations = {**annotations, c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: obj.uid}
    return {
        "name": obj.name,
        "namespace": obj.namespace,
        "labels": labels,
        "annotations": annotations,
    }


def remote_trainjob(tj: TrainJobView, wl_name: str, origin: str) -> Dict:
    """The TrainJob for the winning worker: built-in controller, suspended, prebuilt Workload."""
    patches = [p for p in tj.runtime_patches if p.get("manager") != c.KUEUE_RUNTIME_PATCH_MANAGER]
    spec = json_copy({**tj.spec, "runtimePatches": patches})
    spec.pop("managedBy", None)
    spec["suspend"] = True
    if not spec["runtimePatches"]:
        spec.pop("runtimePatches")
    labels = {**tj.labels, c.KUEUE_PREBUILT_WORKLOAD_LABEL: wl_name}
    annotations = {
        k: v for k, v in tj.annotations.items() if not k.startswith("kubectl.kubernetes.io/")
    }
    # Kueue 0.19 names the prebuilt Workload in an annotation; the label stays for readers
    # that know only the label (Kueue before 0.18, ours before this version).
    annotations[c.KUEUE_PREBUILT_WORKLOAD_ANNOTATION] = wl_name
    return {
        "apiVersion": c.TRAINER_API,
        "kind": "TrainJob",
        "metadata": _remote_metadata(tj, origin, labels, annotations),
        "spec": spec,
    }


# ---- what the workers' watches keep of a copy ----------------------------------------------

# What we keep of each worker (our copies only, by origin label), by kind name.
COPY_KINDS = {k.kind: k for k in (c.WORKLOAD, c.TRAINJOB)}


# What the dispatcher reads of its copies: who they are and whether they are going, and of a
# Workload whether it is active, its priority, its admission conditions and its preemption
# gates (decide.py); of a
# TrainJob its status (`status_back`). The caches keep no more, so a copy's other changes
# (the worker's PodsReady, its owner reference, the unsuspend and its node selectors) cost
# neither memory nor a pass.
COPY_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "deletionTimestamp",
    "creationTimestamp",  # when it was sent there (a run's start in placements.py)
)
WORKLOAD_CONDITIONS = frozenset(
    {"QuotaReserved", "Admitted", "Evicted", "Finished", c.KUEUE_BLOCKED_ON_PREEMPTION_GATES}
)
COPY_WORKLOAD_SPEC = ("active", "priority", "priorityClassRef", "preemptionGates")


def seen(kind: Kind, obj: Dict) -> Dict:
    """What the cache keeps of a copy of `kind` (the informer's transform)."""
    copy = ObjectView(obj)
    meta = copy.meta
    seen: Dict = {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {k: meta[k] for k in COPY_METADATA if k in meta},
    }
    # The manager object's UID it was made for: a copy of a replaced one is an orphan.
    uid = origin_uid(copy)
    if uid:
        seen["metadata"]["annotations"] = {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: uid}
    if kind == c.TRAINJOB:
        seen["status"] = copy.status
        return seen
    # `active`, and the priority the manager's may change (dispatch._priority_follows)
    spec = copy.spec
    kept = {k: spec[k] for k in COPY_WORKLOAD_SPEC if k in spec}
    if kept:
        seen["spec"] = kept
    conditions = [cd for cd in copy.condition_views if cd.type in WORKLOAD_CONDITIONS]
    seen["status"] = {"conditions": [cd.raw for cd in conditions]}
    gates = WorkloadView(obj).gate_states
    if gates:  # the gates' positions (orchestrated preemption: decide._open)
        seen["status"]["preemptionGates"] = gates
    return seen


# ---- status back -------------------------------------------------------------------------------


def status_back(
    manager_trainjob: TrainJobView, remote_trainjob: TrainJobView, cluster: str
) -> Dict | None:
    """The merge patch that makes the manager TrainJob's status the remote one's (fields the
    remote no longer has, and those of an object such as trainerStatus, are removed with
    None); None when they already agree."""
    want = {**remote_trainjob.status, "clusterName": cluster}
    have = dict(manager_trainjob.status)
    if have == want:
        return None
    patch = {**{k: None for k in have if k not in want}, **want}
    for key, value in want.items():  # an object's fields the remote no longer has go too
        old = have.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            patch[key] = {**{f: None for f in old if f not in value}, **value}
    return patch


# etcd stores an object of at most 1.5 MiB. The manager's TrainJob holds more than its copy
# does (kubectl's annotations, which the copy drops; our finalizer; clusterName), so a status
# its copy took may not fit it, and a status write that cannot fit fails on every pass (its
# Complete never comes back). Beyond this size, parts of the status stay on the worker, in
# this order: jobsStatus last, as the manager Workload's PodsReady is read from it (without
# it Kueue's waitForPodsReady evicts a job whose pods are ready); conditions always come back.
MAX_MANAGER_BYTES = 1_400_000
LEFT_ON_THE_WORKER = ("trainerStatus", "podsStatus", "jobsStatus")


def fit(manager_trainjob: TrainJobView, patch: Dict) -> tuple[Dict, list[str]]:
    """`patch` (a `status_back`) without the parts that would take the manager TrainJob past
    MAX_MANAGER_BYTES, and their names."""
    raw = manager_trainjob.raw
    base = len(orjson.dumps({k: v for k, v in raw.items() if k != "status"}))
    status = _merged(dict(manager_trainjob.status), patch)
    size = base + len(orjson.dumps(status))
    left: list[str] = []
    for key in LEFT_ON_THE_WORKER:
        if size <= MAX_MANAGER_BYTES:
            break
        if status.get(key) is not None:
            size -= len(orjson.dumps(status.pop(key)))
            patch = {**patch, key: None}
            left.append(key)
    return patch, left


def changes(manager_trainjob: TrainJobView, patch: Dict) -> bool:
    """Whether `patch` changes the manager TrainJob's status."""
    have = dict(manager_trainjob.status)
    return _merged(have, patch) != have


def _merged(target: Dict, patch: Dict) -> Dict:
    """`target` with a JSON merge patch applied (RFC 7386)."""
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


# ---- copies going ---------------------------------------------------------------------------


def orphan(copy: ObjectView, manager_obj: ObjectView | None) -> bool:
    """A copy whose manager object is gone, or was replaced by a new one of the same name
    (the copy names the UID of the one it was made for)."""
    if manager_obj is None:
        return True
    uid = origin_uid(copy)
    return uid is not None and uid != manager_obj.uid


def name_taken(found: ObjectView | None, copy: ObjectView) -> str | None:
    """Why a copy's name is taken on a worker whose create answered 409, from the object read
    there (`found`, None: gone meanwhile): anyone else's object of the name (never adopted,
    written over or deleted), said naming it; None when it is ours (our origin, made for this
    very manager object: already there) or gone."""
    if found is None or is_our_copy(found, copy):
        return None
    return not_ours(copy)


def not_ours(copy: ObjectView) -> str:
    """What is said of an object on a worker of `copy`'s kind and name that is not ours."""
    return (
        f"{copy.raw['kind']} {copy.namespace}/{copy.name} exists there and is not a copy from "
        "this manager (it is left as it is)"
    )
