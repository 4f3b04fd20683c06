"""Whole-pass cases as table rows, as Kueue's `workload_test.go` writes them: a row names
what happens (Kueue's writes, a worker lost, a deletion) from a fleet with one submitted
TrainJob, and what every cluster holds after, compared whole.

"Whole" is every object of the kinds a controller writes on every cluster, after a
normaliser: each object reduced to what the controllers decide of it (its origin, our
finalizer, the conditions that are True and why, where it runs, our check's state), its
volatile fields (UIDs, versions, times, messages) left out. A row that forgets a copy left on
a worker, or a condition set by mistake, fails: nothing is asserted field by field."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubebase.kinds import Kind
from kubebase.objects import Dict
from tests.support.whole_pass import Pass, World
from trainjob_api import constants as c

State = dict[str, dict[str, dict[str, Dict]]]  # cluster -> kind -> name -> normalised object
Step = Callable[[World], list[Pass] | None]


def _true_conditions(obj: Dict) -> dict[str, str]:
    """{type: reason} of its True conditions."""
    return {
        str(k.get("type")): str(k.get("reason") or "")
        for k in (obj.get("status") or {}).get("conditions") or []
        if k.get("status") == "True"
    }


# A copy's spec differs from the manager object's only where the copy is built to (copies.py):
# these fields of a TrainJob copy; none of a Workload copy's.
COPY_SPEC_CHANGES = {
    c.TRAINJOB.kind: ("managedBy", "suspend", "runtimePatches"),
    c.WORKLOAD.kind: (),
}


@dataclass(frozen=True)
class _Manager:
    """What a copy is compared with: the manager's objects by (kind, name), and the names of
    its Workloads (each written `wl` wherever it appears: the name carries a UID)."""

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
    conditions = _true_conditions(obj)
    if conditions:
        out["conditions"] = conditions
    cluster = (obj.get("status") or {}).get("clusterName")
    if cluster:
        out["clusterName"] = cluster
    return out


def trainjob(obj: Dict) -> Dict:
    """A TrainJob: who manages it and whether it is suspended, besides the common fields."""
    spec = obj.get("spec") or {}
    out = _common(obj)
    if spec.get("managedBy"):
        out["managedBy"] = spec["managedBy"]
    if spec.get("suspend"):
        out["suspend"] = True
    return out


def workload(obj: Dict) -> Dict:
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


NORMALISERS: dict[Kind, Callable[[Dict], Dict]] = {c.TRAINJOB: trainjob, c.WORKLOAD: workload}


def state(world: World, namespace: str = "ns") -> State:
    """Every cluster's TrainJobs and Workloads in `namespace`, normalised, by name (a manager
    Workload's name is written `wl`); a copy on a worker also says how it stands to the
    manager's object of its name (`_Manager.copy_fields`)."""
    manager = _Manager(
        {
            (kind.kind, o["metadata"]["name"]): o
            for kind in NORMALISERS
            for o in world.apis["manager"].objects(kind, namespace)
        }
    )
    out: State = {}
    for cluster, api in world.apis.items():
        kinds: dict[str, dict[str, Dict]] = {}
        for kind, normalise in NORMALISERS.items():
            found: dict[str, Dict] = {}
            for o in api.objects(kind, namespace):
                name = manager.name(o["metadata"]["name"])
                assert name not in found, f"two {kind.kind}s written {name} on {cluster}"
                extra = {} if cluster == "manager" else manager.copy_fields(o)
                found[name] = {**normalise(o), **extra}
            if found:
                kinds[kind.kind] = found
        out[cluster] = kinds
    return out


@dataclass(frozen=True)
class Row:
    """One case: the steps from a fleet with one submitted TrainJob, the state after them
    (clusters with nothing of the kinds: `{}`), and the Events the last step's passes
    recorded, as (type, reason)."""

    name: str
    steps: tuple[Step, ...]
    want: State
    events: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.name
