"""Whole-pass cases as table rows, as Kueue's `workload_test.go` writes them: a row names
what happens (Kueue's writes, a worker lost, a fault, a deletion) from the objects before,
and what every cluster holds after, the Events the last step's passes recorded and when the
last pass asks to come back, compared whole. Both controllers' whole-pass tests are such
tables (tests/unit/dispatcher/test_reconcile.py, tests/unit/worker_controller/test_reconcile.py).

"Whole" is every object of the kinds a controller writes on every cluster, after a
normaliser: each object reduced to what the controllers decide of it (its origin, our
finalizer, its conditions and why, who owns it, whether it is suspended, where it runs, our
check's state), its volatile fields (UIDs, versions, times, messages) left out. A row that
forgets a copy left on a worker, a Job made, or a condition set by mistake, fails: nothing is
asserted field by field."""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from kubebase.kinds import Kind
from kubebase.objects import Dict
from kubecontrol import workqueue
from tests.support.whole_pass import Pass, World
from trainjob.ownership import controller_ref
from trainjob_api import constants as c

State = dict[str, dict[str, dict[str, Dict]]]  # cluster -> kind -> name -> normalised object
Step = Callable[[World], list[Pass] | None]
# What a row's steps come to: the state, the last step's Events, the last pass's requeue.
Outcome = tuple[State, tuple[tuple[str, str], ...], float | None]
# An object reduced, given the TrainJobs of its cluster (UID -> name) for its owner's name.
Normaliser = Callable[[Dict, dict[str, str]], Dict]


def _conditions(obj: Dict, status: str = "True") -> dict[str, str]:
    """{type: reason} of its conditions of `status`."""
    return {
        str(k.get("type")): str(k.get("reason") or "")
        for k in (obj.get("status") or {}).get("conditions") or []
        if k.get("status") == status
    }


# A copy's spec differs from the manager object's only where the copy is built to (copies.py):
# these fields of a TrainJob copy; none of a Workload copy's.
COPY_SPEC_CHANGES = {
    c.TRAINJOB.kind: ("managedBy", "suspend", "runtimePatches"),
    c.WORKLOAD.kind: (),
}


@dataclass(frozen=True)
class _Reference:
    """What a copy is compared with: the manager's objects by (kind, name) (on a worker
    controller's own cluster: that cluster's), and the names of its Workloads (each written
    `wl` wherever it appears: the name carries a UID)."""

    objects: dict[tuple[str, str], Dict]

    def name(self, value: str) -> str:
        return "wl" if (c.WORKLOAD.kind, value) in self.objects else value

    def copy_fields(self, obj: Dict) -> Dict:
        """Of a copy on a worker: whether its origin UID and spec are the manager object's
        (`manager's`, or what they are instead), and the prebuilt Workload it names."""
        meta, kind = obj["metadata"], obj["kind"]
        source = self.objects.get((kind, meta["name"]))
        out: Dict = {}
        made_for = (meta.get("annotations") or {}).get(c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION)
        if source is None or made_for != source["metadata"].get("uid"):
            out["originUID"] = made_for
            # not a copy of the manager's object: its labels, so that a row shows it is left
            # as its owner wrote it
            out["labels"] = meta.get("labels") or {}
        else:
            out["originUID"] = "manager's"
        if source is not None:
            drop = COPY_SPEC_CHANGES[kind]
            mine = {k: v for k, v in (obj.get("spec") or {}).items() if k not in drop}
            theirs = {k: v for k, v in (source.get("spec") or {}).items() if k not in drop}
            out["spec"] = "manager's" if mine == theirs else mine
        prebuilt = {
            where: self.name(value)
            for where, value in (
                ("label", (meta.get("labels") or {}).get(c.KUEUE_PREBUILT_WORKLOAD_LABEL)),
                (
                    "annotation",
                    (meta.get("annotations") or {}).get(c.KUEUE_PREBUILT_WORKLOAD_ANNOTATION),
                ),
            )
            if value is not None
        }
        if prebuilt:
            out["prebuilt"] = prebuilt
        return out


def _common(obj: Dict) -> Dict:
    meta = obj.get("metadata") or {}
    out: Dict = {}
    origin = (meta.get("labels") or {}).get(c.KUEUE_MULTIKUEUE_ORIGIN_LABEL)
    if origin is not None:
        out["origin"] = origin
    if meta.get("finalizers"):
        out["finalizers"] = sorted(meta["finalizers"])
    conditions = _conditions(obj)
    if conditions:
        out["conditions"] = conditions
    cluster = (obj.get("status") or {}).get("clusterName")
    if cluster:
        out["clusterName"] = cluster
    return out


def trainjob(obj: Dict, _owners: dict[str, str]) -> Dict:
    """A TrainJob on the manager or a worker as the dispatcher sees it: who manages it and
    whether it is suspended, besides the common fields."""
    spec = obj.get("spec") or {}
    out = _common(obj)
    if spec.get("managedBy"):
        out["managedBy"] = spec["managedBy"]
    if spec.get("suspend"):
        out["suspend"] = True
    return out


def workload(obj: Dict, _owners: dict[str, str]) -> Dict:
    """A Workload: our check's state, the workers nominated, whether it is active."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    out = _common(obj)
    checks = {a.get("name"): a.get("state") for a in status.get("admissionChecks") or []}
    if "mk" in checks:
        out["check"] = checks["mk"]
    if status.get("nominatedClusterNames"):
        out["nominated"] = sorted(status["nominatedClusterNames"])
    if spec.get("active") is False:
        out["active"] = False
    return out


def _said(obj: Dict) -> Dict:
    """The conditions a worker controller sets either way: True ones (`conditions`) and False
    ones (`false`), each {type: reason}."""
    out: Dict = {}
    for key, status in (("conditions", "True"), ("false", "False")):
        found = _conditions(obj, status)
        if found:
            out[key] = found
    return out


def _owned(obj: Dict, owners: dict[str, str]) -> Dict:
    """Its controller: the name of the TrainJob of that UID on its cluster, else the UID; a
    controller that does not block its owner's deletion until it is gone (as every object we
    make does) says so; so does any other owner."""
    ref = controller_ref(obj)
    out: Dict = {}
    if ref is not None:
        out["owner"] = owners.get(str(ref.get("uid")), ref.get("uid"))
        if ref.get("blockOwnerDeletion") is not True:
            out["blockOwnerDeletion"] = ref.get("blockOwnerDeletion")
    others = [
        owners.get(str(r.get("uid")), r.get("uid"))
        for r in (obj.get("metadata") or {}).get("ownerReferences") or []
        if r is not ref
    ]
    if others:
        out["otherOwners"] = others
    return out


def worker_trainjob(obj: Dict, _owners: dict[str, str]) -> Dict:
    """A TrainJob as its worker controller keeps it: spec.suspend as it is (unset, True or
    False), its conditions, its Jobs' counts by replicatedJob (the counts that are not 0) and
    its restarts."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    out = _said(obj)
    if "suspend" in spec:
        out["suspend"] = spec["suspend"]
    jobs = {
        str(j.get("name")): {k: v for k, v in j.items() if k != "name" and v}
        for j in status.get("jobsStatus") or []
    }
    if jobs:
        out["jobs"] = jobs
    if status.get("restarts"):
        out["restarts"] = (status["restarts"], status.get("restartsCountTowardsMax"))
    return out


def worker_workload(obj: Dict, owners: dict[str, str]) -> Dict:
    """The Workload a worker controller makes: its owner, its conditions, the pods it says can
    be reclaimed."""
    out = {**_owned(obj, owners), **_said(obj)}
    reclaimable = (obj.get("status") or {}).get("reclaimablePods")
    if reclaimable:
        out["reclaimable"] = {p["name"]: p["count"] for p in reclaimable}
    return out


def _made_here(obj: Dict, owners: dict[str, str]) -> bool:
    """Whether one of its cluster's TrainJobs controls it (what the controller made)."""
    ref = controller_ref(obj)
    return ref is not None and str(ref.get("uid")) in owners


# The labels a Job of a TrainJob and its pods carry, as JobSet's do.
JOB_LABELS = (
    c.JOBSET_NAME_LABEL,
    c.TRAINJOB_NAME_LABEL,
    c.REPLICATED_JOB_NAME_LABEL,
    c.JOB_INDEX_LABEL,
    c.PODSET_LABEL,
)


def job(obj: Dict, owners: dict[str, str]) -> Dict:
    """A Job: its owner, whether it is suspended; of one a TrainJob there controls, also its
    pods (`parallelism = completions`, or both when they differ), the restart it was made for
    (unless the first), the PodGroup its pods join, and whatever breaks JobSet's naming: its
    JOB_LABELS (all of them) when its name is not `<trainjob>-<replicatedJob>-<index>` as they
    say, or they name another TrainJob or PodSet; its pods' labels that differ from its own;
    its pods' subdomain when it is not the TrainJob's name."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    out = _owned(obj, owners)
    if spec.get("suspend"):
        out["suspend"] = True
    if not _made_here(obj, owners):
        return out
    size = spec.get("parallelism"), spec.get("completions")
    out["pods"] = size[0] if size[0] == size[1] else list(size)
    labels = meta.get("labels") or {}
    attempt = labels.get(c.RESTART_ATTEMPT_LABEL)
    if attempt not in (None, "0"):
        out["attempt"] = attempt
    pod_template = spec.get("template") or {}
    pod_labels = (pod_template.get("metadata") or {}).get("labels") or {}
    group = pod_labels.get(c.COSCHEDULING_POD_GROUP_LABEL)
    if group is not None:
        out["podGroup"] = group
    mine = {k: labels.get(k) for k in JOB_LABELS}
    trainjob, replicated = mine[c.TRAINJOB_NAME_LABEL], mine[c.REPLICATED_JOB_NAME_LABEL]
    named = f"{trainjob}-{replicated}-{mine[c.JOB_INDEX_LABEL]}"
    owner = owners.get(str((controller_ref(obj) or {}).get("uid")))
    if (
        meta.get("name") != named
        or trainjob != owner
        or mine[c.JOBSET_NAME_LABEL] != trainjob
        or mine[c.PODSET_LABEL] != replicated
    ):
        out["labels"] = mine
    differ = {k: pod_labels.get(k) for k in JOB_LABELS if pod_labels.get(k) != mine[k]}
    if differ:
        out["podLabels"] = differ
    subdomain = (pod_template.get("spec") or {}).get("subdomain")
    if subdomain != owner:
        out["subdomain"] = subdomain
    return out


def service(obj: Dict, owners: dict[str, str]) -> Dict:
    """A Service: its owner and whom it selects; of one a TrainJob there controls, whether
    it is headless and publishes pods not yet ready, when it is not both (its pods find each
    other by name before they are ready)."""
    spec = obj.get("spec") or {}
    out = {**_owned(obj, owners), "selector": spec.get("selector")}
    headless = spec.get("clusterIP") == "None" and spec.get("publishNotReadyAddresses") is True
    if _made_here(obj, owners) and not headless:
        out["clusterIP"] = spec.get("clusterIP")
        out["publishNotReadyAddresses"] = spec.get("publishNotReadyAddresses")
    return out


def pod_group(obj: Dict, owners: dict[str, str]) -> Dict:
    """A PodGroup: its owner and how many pods make the gang."""
    return {**_owned(obj, owners), "minMember": (obj.get("spec") or {}).get("minMember")}


@dataclass(frozen=True)
class Kinds:
    """What a controller's table compares: the kinds it writes, each with its normaliser;
    `copies`: whether objects on a worker are copies of the manager's (the dispatcher's)."""

    normalisers: dict[Kind, Normaliser]
    copies: bool


DISPATCHER = Kinds({c.TRAINJOB: trainjob, c.WORKLOAD: workload}, copies=True)
WORKER = Kinds(
    {
        c.TRAINJOB: worker_trainjob,
        c.WORKLOAD: worker_workload,
        c.JOB: job,
        c.SERVICE: service,
        c.COSCHEDULING_POD_GROUP: pod_group,
    },
    copies=False,
)


def _objects(world: World, cluster: str, namespace: str) -> dict[tuple[str, str], Dict]:
    return {
        (kind.kind, o["metadata"]["name"]): o
        for kind in (c.TRAINJOB, c.WORKLOAD)
        for o in world.apis[cluster].objects(kind, namespace)
    }


def state(world: World, namespace: str = "ns", kinds: Kinds = DISPATCHER) -> State:
    """Every cluster's objects of `kinds` in `namespace`, normalised, by name (a Workload of
    the manager, or of a worker controller's own cluster, is written `wl`); a copy on a
    worker also says how it stands to the manager's object of its name
    (`_Reference.copy_fields`)."""
    out: State = {}
    for cluster, api in world.apis.items():
        reference = _Reference(_objects(world, "manager" if kinds.copies else cluster, namespace))
        owners = {
            str(o["metadata"].get("uid")): o["metadata"]["name"]
            for o in api.objects(c.TRAINJOB, namespace)
        }
        found_kinds: dict[str, dict[str, Dict]] = {}
        for kind, normalise in kinds.normalisers.items():
            found: dict[str, Dict] = {}
            for o in api.objects(kind, namespace):
                name = reference.name(o["metadata"]["name"])
                assert name not in found, f"two {kind.kind}s written {name} on {cluster}"
                copied = kinds.copies and cluster != "manager"
                extra = reference.copy_fields(o) if copied else {}
                found[name] = {**normalise(o, owners), **extra}
            if found:
                found_kinds[kind.kind] = found
        out[cluster] = found_kinds
    return out


@dataclass(frozen=True)
class Row:
    """One case: the steps from the objects `before`, the state after them (clusters with
    nothing of the kinds: `{}`), the Events the last step's passes recorded, as (type,
    reason), and the seconds after which the last pass asks to come back (None: only when
    something changes; the clock stands still while a row runs: `still_clock`)."""

    name: str
    steps: tuple[Step, ...]
    want: State
    events: tuple[tuple[str, str], ...] = ()
    requeue: float | None = None
    # The objects on the cluster before (the worker controller's rows; the dispatcher's
    # start from its fleet with one submitted TrainJob).
    before: tuple[Dict, ...] = ()

    def __str__(self) -> str:
        return self.name

    @property
    def outcome(self) -> Outcome:
        return self.want, self.events, self.requeue


def outcome(world: World, passes: list[Pass], kinds: Kinds = DISPATCHER) -> Outcome:
    """What a row's steps came to, as `Row` says it: the state, the last step's Events, the
    last pass's requeue."""
    events = tuple(e[:2] for p in passes for e in p.events)
    return state(world, kinds=kinds), events, passes[-1].requeue_after if passes else None


@pytest.fixture
def still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The controllers' write memory (kubecontrol.workqueue: how long a status change has been
    held, how long ago a write went) on a clock that does not move while a row runs: a row's
    requeue is the timer a pass sets, and no hold runs out between its passes however slowly
    the machine runs them. The timers' running out is the status-write tests' to show."""
    now = time.monotonic()
    frozen = types.SimpleNamespace(**{n: getattr(time, n) for n in ("sleep", "time")})
    frozen.monotonic = lambda: now
    monkeypatch.setattr(workqueue, "time", frozen)


def take_steps(world: World, row: Row) -> list[Pass]:
    """Take the row's steps: the passes of the last step that ran any."""
    passes: list[Pass] = []
    for step in row.steps:
        passes = step(world) or passes
    return passes
