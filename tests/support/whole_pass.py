"""A controller's whole pass over clusters in memory (tests/support/memory_api.py), as Kueue's
`workload_test.go` runs its reconciler over fake clients: the objects on every cluster before,
one pass (or passes until nothing changes), the objects, Events and requeue after.

The controller runs as it does in its process: its own watch table fills its caches (listed
again between passes instead of watched), its handlers queue keys, its `Cluster` writes. Only
the work queue is a recorder, so the test says which pass runs when.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from dispatcher.controller.context import Context
from dispatcher.controller.reconcile import sync
from dispatcher.controller.watches import on_cluster_event, on_remote_change, watches
from dispatcher.settings import DispatcherSettings
from dispatcher.workers.connections import WorkerConnections
from kubebase.events import build_event
from kubebase.kinds import EVENT, Kind
from kubebase.objects import Dict
from kubecontrol import controller
from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster
from kubecontrol.informer import Informer
from tests.support.kubeconfigs import kubeconfig  # a real CA, as the kubeconfig vetting wants
from tests.support.memory_api import MemoryApi
from trainjob.workload import workload_name
from trainjob_api import constants as c


class MemoryCluster(Cluster):
    """The product's `Cluster` over a `MemoryApi`, its Events recorded at once rather than
    from a background thread, so that a pass's Events are there when it returns."""

    def __init__(self, api: MemoryApi, field_manager: str) -> None:
        super().__init__(api.name, api, field_manager)  # type: ignore[arg-type]
        self.memory = api

    def post_event(
        self, obj: Dict, etype: str, reason: str, message: str, name: str | None = None
    ) -> None:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        # Recorded once (409), or refused: Events are best effort, as in Cluster.
        with contextlib.suppress(ApiException):
            self.create(
                EVENT, build_event(obj, etype, reason, message, self.field_manager, now, name)
            )


class RecordingQueue:
    """What a controller calls of its work queue: `add` and `resync` record the key; the
    test runs the passes, so starting, pausing and stopping the queue do nothing."""

    def __init__(self) -> None:
        self.keys: list[Hashable] = []

    def add(self, key: Hashable, *_args: Any, **_kwargs: Any) -> None:
        if key not in self.keys:
            self.keys.append(key)

    def take(self) -> list[Hashable]:
        keys, self.keys = self.keys, []
        return keys

    def resync(self, key: Hashable) -> None:
        self.add(key)

    def start(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def stop(self) -> None: ...
    def log_stats(self, _name: str) -> None: ...


@dataclass
class Pass:
    """What one pass did: its answer (seconds to the next, or None), the writes it sent per
    cluster, the Events it recorded, and the keys the changes queued."""

    requeue_after: float | None
    writes: dict[str, list[tuple[str, str]]]
    events: list[tuple[str, str, str]]  # (type, reason, the object's name)
    queued: list[Hashable] = field(default_factory=list)
    refused: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)
    # (cluster, group, plural, namespace, name) of every object the pass changed (not Events)
    changed: list[tuple[str, ...]] = field(default_factory=list)

    def wrote(self) -> bool:
        return any(self.writes.values())

    def then(self, after: Pass) -> Pass:
        """This pass and `after` as one: what both did, `after`'s answer."""
        return Pass(
            after.requeue_after,
            {n: [*w, *after.writes.get(n, [])] for n, w in self.writes.items()},
            [*self.events, *after.events],
            [*self.queued, *(k for k in after.queued if k not in self.queued)],
            {n: [*r, *after.refused.get(n, [])] for n, r in self.refused.items()},
            [*self.changed, *after.changed],
        )


# Whether a request (cluster, method, path) is one a controller sends through
# `guarded_write`: the dispatcher's of a manager Workload's and TrainJob's status, the worker
# controller's of a Workload and of a TrainJob's spec (its suspend).
Guarded = Callable[[str, str, str], bool]


_BEHIND = [False]  # how worlds run passes unless told: set by `both_caches`


def behind_by_default(behind: bool | None) -> bool:
    return _BEHIND[0] if behind is None else behind


@pytest.fixture(params=["fresh", "behind"])
def both_caches(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run a whole-pass module's every case twice: with caches as fresh as a pass's writes,
    and with each pass followed by one on caches a write behind (`World.run`). A case whose
    premise is one pass exactly (a fault injected once) makes its world with `behind=False`."""
    _BEHIND[0] = request.param == "behind"
    built = World.built_behind
    yield
    _BEHIND[0] = False
    if request.param == "behind":
        assert World.built_behind > built, "no world ran behind: take the case out of both_caches"


def dispatcher_guarded(cluster: str, method: str, path: str) -> bool:
    kinds = ("/workloads/", "/trainjobs/")
    return (
        (cluster, method) == ("manager", "PATCH")
        and path.endswith("/status")
        and any(k in path for k in kinds)
    )


def worker_guarded(_cluster: str, method: str, path: str) -> bool:
    spec = "/trainjobs/" in path and not path.endswith("/status")
    return method == "PATCH" and ("/workloads/" in path or spec)


def no_conflict(done: Pass) -> None:
    """A pass planned from caches as fresh as the API server meets no conflict: every write
    that changes an object is sent from the version it has, our own earlier writes of the
    same pass included."""
    conflicts = [(n, m, p) for n, rs in done.refused.items() for m, p, s in rs if s == 409]
    updates = [(n, m, p) for n, m, p in conflicts if m in ("PATCH", "PUT")]
    assert not updates, f"a pass on fresh caches sent writes from an old version: {updates}"


def nothing_again(first: Pass, again: Pass, guarded: Guarded) -> None:
    """A pass planned from caches a write behind (`again`) repeats and undoes nothing of the
    pass before (`first`): it changes no object `first` changed, posts none of its Events,
    sends no guarded write to an object `first` changed (`guarded_write` remembers the version
    it made old), and whatever it sends that the API server turns down is a conflict (409) or
    a thing gone (404). New work it may do: what `first` learned (a name taken, a refusal)."""
    undone = sorted(set(first.changed) & set(again.changed))
    assert not undone, f"a pass a write behind changed again what the pass before did: {undone}"
    repeated = [e for e in again.events if e in first.events]
    assert not repeated, f"a pass a write behind posted the same Events again: {repeated}"
    refused = [(n, *r) for n, rs in again.refused.items() for r in rs]
    assert all(status in (404, 409) for *_, status in refused), refused
    sent = [(n, m, p) for n, m, p, _ in refused if guarded(n, m, p)]
    assert not sent, f"guarded writes sent from a version known to be old: {sent}"


def event_tuples(api: MemoryApi) -> list[tuple[str, str, str]]:
    return [_said(e) for e in api.objects(EVENT)]


def _said(event: Dict) -> tuple[str, str, str]:
    return event["type"], event["reason"], event["involvedObject"]["name"]


def _event_key(event: Dict) -> tuple[str, str]:
    return event["metadata"].get("namespace", ""), event["metadata"]["name"]


def event_keys(api: MemoryApi) -> set[tuple[str, str]]:
    return {_event_key(e) for e in api.objects(EVENT)}


def new_events(api: MemoryApi, before: set[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """The Events made since `before` (the names there were then), by name: whatever their
    names, never those that were there already."""
    return [_said(e) for e in api.objects(EVENT) if _event_key(e) not in before]


class World:
    """Clusters in memory and one controller's caches over them; `run(key)` is one pass.
    `more_informers`: caches beyond the watch table's (the dispatcher's of each worker)."""

    built_behind = 0  # worlds made to run behind, so far in the process (`both_caches`)

    def __init__(
        self,
        apis: dict[str, MemoryApi],
        sync: Callable[[Hashable], float | None],
        more_informers: Callable[[], list[Informer]] = list,
        *,
        behind: Guarded | None = None,
    ):
        self.apis = apis
        self.behind = behind
        if behind is not None:
            World.built_behind += 1
        self._sync = sync
        self._more = more_informers
        self.informers: list[Informer] = []
        self.queue = RecordingQueue()
        self.finalizers: list[Callable[[], None]] = []  # what `close` stops
        self.passes: list[Pass] = []  # every pass run, in order

    def close(self) -> None:
        for stop in self.finalizers:
            stop()

    def watch(self, ctx: controller.ControllerContext, cluster: Cluster, table: list[Any]) -> None:
        """Fill `ctx`'s caches from `cluster` by the watch table, as the controller's process
        would (its handlers called once the first list is in: `ctx.synced`)."""
        self.informers += controller.informers(ctx, cluster, table)

    def relist(self) -> None:
        for informer in [*self.informers, *self._more()]:
            informer.list_now()

    def get(self, cluster: str, kind: Kind, name: str, namespace: str | None = "ns") -> Dict | None:
        return self.apis[cluster].object(kind, name, namespace)

    def run(self, key: Hashable) -> Pass:
        """One pass for `key`, with the caches as the watches would have them. A world made
        `behind` follows each pass with another on the same caches (`run_behind`), which must
        change nothing and send none of the writes `behind` says are guarded."""
        if self.behind is not None:
            done, again = self.run_behind(key)
            no_conflict(done)
            nothing_again(done, again, self.behind)
            return done.then(again)
        self.relist()
        done = self._pass(key)
        self.relist()
        done.queued += self.queue.take()
        no_conflict(done)
        return done

    def run_raced(
        self,
        key: Hashable,
        cluster: str,
        kind: Kind,
        name: str,
        ns: str = "ns",
        change: Callable[[Dict], None] | None = None,
        *,
        delete: bool = False,
    ) -> tuple[Pass, Pass]:
        """A pass for `key` planned from caches that miss one write of someone else: the
        object `name` changed by `change` (an annotation added, unless given), or deleted,
        after the caches were listed, so that a write of ours planned from the version before
        meets the conflict a real race makes; then a pass on the same caches (its watch events
        not in yet). Returns both."""
        self.relist()
        raced = self.apis[cluster].object(kind, name, ns)
        assert raced is not None, f"no {kind.kind} {name} on {cluster} to race with"
        if delete:
            self.apis[cluster].request("DELETE", kind.path(ns, name))
        else:
            if change is None:
                annotations = raced["metadata"].setdefault("annotations", {})
                annotations["test.trainjob.dev/raced"] = str(len(self.passes))
            else:
                change(raced)
            self.apis[cluster].put(raced)
        first = self._pass(key)
        again = self._pass(key)
        self.relist()
        again.queued += self.queue.take()
        return first, again

    def run_behind(self, key: Hashable) -> tuple[Pass, Pass]:
        """Two passes for `key` on the same caches: the second plans from caches a write
        behind (the first pass's writes not yet seen, as when its watch events lag), which
        is routine for a controller. Returns both; `refused` of each says what the API
        server turned down (a guarded write it sent from a version it knew to be old)."""
        self.relist()
        first = self._pass(key)
        second = self._pass(key)
        self.relist()
        second.queued += self.queue.take()
        return first, second

    def _pass(self, key: Hashable) -> Pass:
        self.queue.take()
        before_writes = {n: len(a.writes()) for n, a in self.apis.items()}
        before_refused = {n: len(a.refused) for n, a in self.apis.items()}
        before_events = {n: event_keys(a) for n, a in self.apis.items()}
        before_versions = {n: a.versions() for n, a in self.apis.items()}
        requeue = self._sync(key)
        changed: list[tuple[str, ...]] = [
            (n, *k)
            for n, a in self.apis.items()
            for k, v in a.versions().items()
            if before_versions[n].get(k) != v
        ]
        writes = {n: a.writes()[before_writes[n] :] for n, a in self.apis.items()}
        refused = {n: a.refused[before_refused[n] :] for n, a in self.apis.items()}
        events = [e for n, a in self.apis.items() for e in new_events(a, before_events[n])]
        done = Pass(requeue, writes, events, self.queue.take(), refused, changed)
        self.passes.append(done)
        return done

    def requests_of_a_pass(self, key: Hashable) -> dict[str, list[tuple[str, str]]]:
        """One pass for `key` (the caches listed first), and the (method, path) of every
        request each cluster answered during it, served or refused: the pass's own, none of
        the lists'."""
        self.relist()
        served = {n: len(a.requests) for n, a in self.apis.items()}
        refused = {n: len(a.refused) for n, a in self.apis.items()}
        self._sync(key)
        return {
            n: [*a.requests[served[n] :], *((m, p) for m, p, _ in a.refused[refused[n] :])]
            for n, a in self.apis.items()
        }

    def settle(self, key: Hashable, most: int = 10) -> list[Pass]:
        """Passes for `key` until one writes nothing (at most `most`)."""
        passes = [self.run(key)]
        while passes[-1].wrote():
            if len(passes) == most:
                raise AssertionError(f"{key}: still writing after {most} passes: {passes}")
            passes.append(self.run(key))
        return passes


def a_condition(
    ctype: str,
    reason: str | None = None,
    message: str = "",
    status: str = "True",
    since: str = "2026-01-01T00:00:00Z",
) -> Dict:
    """A status condition as the API holds it (its reason the type's unless given)."""
    return {
        "type": ctype,
        "status": status,
        "reason": reason or ctype,
        "message": message,
        "lastTransitionTime": since,
    }


def kueue_status(workload: Dict, *, admitted: bool, flavor: str = "default") -> Dict:
    """A Workload's status once Kueue reserved quota for it in ClusterQueue "cq" (every PodSet
    on `flavor`), and admitted it when `admitted`."""
    return {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": ps["name"], "count": ps["count"], "flavors": {"cpu": flavor}}
                for ps in workload["spec"]["podSets"]
            ],
        },
        "conditions": [
            a_condition("QuotaReserved"),
            *([a_condition("Admitted")] if admitted else []),
        ],
    }


def reserve(
    world: World, cluster: str, name: str = "tj", *, admitted: bool = False, namespace: str = "ns"
) -> None:
    """What Kueue does on `cluster` for TrainJob `name`'s Workload: quota reserved (on a
    worker, admitted too, as a ClusterQueue without checks admits at once); on the manager,
    our check `mk` Pending."""
    tj = world.get("manager", c.TRAINJOB, name, namespace)
    assert tj is not None, f"no TrainJob {name}"
    wl = world.get(cluster, c.WORKLOAD, workload_name(name, tj["metadata"]["uid"]), namespace)
    assert wl is not None, f"no Workload of {name} on {cluster}"
    status = kueue_status(wl, admitted=admitted)
    if cluster == "manager":
        status["admissionChecks"] = [
            {
                "name": "mk",
                "state": "Pending",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    wl["status"] = status
    world.apis[cluster].put(wl)


BLOCKED = "BlockedOnPreemptionGates"


def blocked_on_gate(world: World, cluster: str, since: str, name: str = "tj") -> None:
    """What a worker's Kueue (orchestrated preemption on) does with a gated copy it would
    have to preempt for: it says so in a BlockedOnPreemptionGates condition (since `since`,
    replacing one it held), and waits."""
    tj = world.get("manager", c.TRAINJOB, name)
    assert tj is not None, f"no TrainJob {name}"
    wl = world.get(cluster, c.WORKLOAD, workload_name(name, tj["metadata"]["uid"]))
    assert wl is not None, f"no Workload of {name} on {cluster}"
    status = wl.setdefault("status", {})
    status["conditions"] = [
        *(cd for cd in status.get("conditions") or [] if cd.get("type") != BLOCKED),
        {
            "type": BLOCKED,
            "status": "True",
            "reason": "PreemptionGated",
            "message": "preemption is gated",
            "lastTransitionTime": since,
        },
    ]
    world.apis[cluster].put(wl)


def condition(obj: Dict | None, ctype: str) -> tuple[str, str] | None:
    """(status, reason) of a condition of an object, or None."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond.get("status"), cond.get("reason")
    return None


def names(objects: Iterable[Dict]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


# ---- the dispatcher over a manager and its workers ---------------------------------------


def _kubeconfig_secret(name: str, namespace: str) -> Dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-kubeconfig", "namespace": namespace},
        "data": {"kubeconfig": base64.b64encode(kubeconfig()).decode()},
    }


def multikueue_objects(workers: Iterable[str], namespace: str, controller_name: str) -> list[Dict]:
    """What a platform admin sets up on a manager for MultiKueue (docs/operators/install.md): a
    MultiKueueCluster per worker with its kubeconfig Secret, the MultiKueueConfig, the
    AdmissionCheck, and the ClusterQueue "cq" and LocalQueue "q" (namespace "ns") using it."""
    workers = list(workers)
    kueue = "kueue.x-k8s.io/v1beta2"
    objects: list[Dict] = []
    for name in workers:
        objects.append(_kubeconfig_secret(name, namespace))
        objects.append(
            {
                "apiVersion": kueue,
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {
                    "clusterSource": {
                        "kubeConfig": {"locationType": "Secret", "location": f"{name}-kubeconfig"}
                    }
                },
            }
        )
    return [
        *objects,
        {
            "apiVersion": kueue,
            "kind": "MultiKueueConfig",
            "metadata": {"name": "multikueue"},
            "spec": {"clusters": workers},
        },
        {
            "apiVersion": kueue,
            "kind": "AdmissionCheck",
            "metadata": {"name": "mk"},
            "spec": {
                "controllerName": controller_name,
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "MultiKueueConfig",
                    "name": "multikueue",
                },
            },
        },
        *queues(admission_checks=["mk"]),
    ]


def queues(admission_checks: list[str] | None = None, cpu: str = "8") -> list[Dict]:
    """The ClusterQueue "cq" (flavour "default", `cpu` of quota) and LocalQueue "q" in "ns"."""
    kueue = "kueue.x-k8s.io/v1beta2"
    spec: Dict = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                ],
            }
        ],
    }
    if admission_checks:
        spec["admissionChecks"] = admission_checks
    return [
        {
            "apiVersion": kueue,
            "kind": "ResourceFlavor",
            "metadata": {"name": "default"},
            "spec": {},
        },
        {"apiVersion": kueue, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec},
        {
            "apiVersion": kueue,
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        },
    ]


def fleet(
    manager_objects: Iterable[Dict] = (),
    workers: dict[str, list[Dict]] | None = None,
    *,
    behind: bool | None = None,
    **settings: Any,
) -> tuple[World, Context]:
    """A manager and its workers in memory, and the dispatcher over them as its process runs
    it (its watch table, its WorkerConnections connected to each MultiKueueCluster's worker through
    the kubeconfig in its Secret). Returns the world and the dispatcher's context. `behind`:
    each pass is followed by one on caches a write behind (`World.run`); None: as the module
    runs its cases (`both_caches`)."""
    workers = workers if workers is not None else {"worker1": [], "worker2": []}
    ours = DispatcherSettings(**settings)
    manager = MemoryApi(
        "manager",
        [*multikueue_objects(workers, ours.namespace, ours.controller_name), *manager_objects],
    )
    apis = {"manager": manager}
    for name, objects in workers.items():
        apis[name] = MemoryApi(name, [*queues(), *objects])
    cluster = MemoryCluster(manager, c.DISPATCHER_FIELD_MANAGER)
    ctx = Context(settings=ours, manager=cluster)

    def remote_informers() -> list[Informer]:
        return [i for r in ctx.workers.remotes.values() for i in r.informers]

    world = World(
        apis,
        lambda key: sync(ctx, key),  # type: ignore[arg-type]
        remote_informers,
        behind=dispatcher_guarded if behind_by_default(behind) else None,
    )
    ctx.queue = world.queue  # type: ignore[assignment]
    ctx.workers = WorkerConnections(
        ours, cluster, lambda ns, name, urgent: on_remote_change(ctx, ns, name, urgent)
    )
    ctx.workers.dial = lambda name, _kubeconfig, field_manager: MemoryCluster(
        apis[name], field_manager
    )
    world.watch(ctx, cluster, watches(ctx))
    world.relist()
    ctx.synced.set()
    for mkc in ctx.caches.clusters():
        on_cluster_event(ctx, "ADDED", mkc.raw)
    for remote in ctx.workers.remotes.values():
        for informer in remote.informers:
            if not informer.synced.wait(5):
                raise AssertionError(f"{remote.name}: a watch did not list")
    world.finalizers.append(ctx.shut_down)
    return world, ctx
