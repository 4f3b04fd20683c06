"""Which copies on the workers are deleted (pure): a deleted manager TrainJob's, before our
finalizer lets it go (`removal`), and every GC interval the orphans whose manager object is
gone (`orphans`, the garbage collector's sweep).

Each copy by the UID the watch saw, so a same-named object made since, or anyone else's,
stays. As with Kueue's MultiKueue, a worker that cannot be reached never holds the deletion
up: the copies there are orphans once the TrainJob is gone, and the sweep removes them when
the worker is back; a Warning on the TrainJob says which workers they are and what removes
them. dispatcher/controller/execute.py carries out both."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from dispatcher.decisions.copies import orphan
from dispatcher.decisions.decide import Guard, RemoteAction
from kubebase.objects import Dict
from trainjob_api.views import ObjectView


@dataclass(frozen=True)
class Held:
    """One worker as the manager's watch of it shows a deleted TrainJob's copies."""

    cluster: str
    connected: bool
    copies: tuple[Dict, ...]  # ours there: TrainJob copies first, then Workload copies


@dataclass
class Removal:
    deletes: list[RemoteAction] = field(default_factory=list)
    # Workers its Workload was sent to or runs on (the only ones a Warning names: a copy
    # elsewhere is a leftover the garbage collector sweeps anyway)
    holders: frozenset[str] = frozenset()
    unreachable: tuple[str, ...] = ()  # holders with no connection now: nothing is sent there
    sweep: str = ""  # what removes the copies left behind

    def deferred(self, failed: Iterable[str]) -> str | None:
        """The Warning's message once the deletes are done: the holders whose copies stay
        (unreachable now, or a delete there failed: `failed`), and what removes them; None
        when every holder's copies went."""
        refused = sorted({n for n in failed if n in self.holders} - set(self.unreachable))
        if not self.unreachable and not refused:
            return None
        said = []
        if self.unreachable:
            said.append(f"workers {', '.join(self.unreachable)} unreachable")
        if refused:
            said.append(f"the deletes failed on workers {', '.join(refused)}")
        return f"{' and '.join(said)}: its copies there stay; {self.sweep}"


def removal(held: Iterable[Held], holders: Iterable[str], gc_interval: float) -> Removal:
    """The deletes of a deleted manager TrainJob's copies: every copy the reachable workers'
    watches show, by its UID (never a capture of its pods' tails: the job they would be kept
    for is going)."""
    plan = Removal(holders=frozenset(holders))
    unreachable = []
    for worker in held:
        if not worker.connected:
            if worker.cluster in plan.holders:
                unreachable.append(worker.cluster)
            continue
        plan.deletes += [_delete(worker.cluster, copy) for copy in worker.copies]
    plan.unreachable = tuple(sorted(unreachable))
    plan.sweep = (
        f"the garbage collector removes them once the worker is back (every {gc_interval:g} s)"
        if gc_interval
        else "nothing removes them (the garbage collector is off: gcInterval 0)"
    )
    return plan


class ManagerObjects(Protocol):
    """The manager's objects a copy may have been made for (trainjob.caches.Caches)."""

    def trainjob(self, namespace: str, name: str) -> ObjectView | None: ...

    def workload(self, namespace: str, name: str) -> ObjectView | None: ...


# Deletes one sweep sends to one worker: anyone who may label objects there as copies can
# make orphans by the thousand; the rest wait for the next sweep, one GC interval on.
SWEEP_DELETES_PER_WORKER = 500


def orphans(held: Iterable[Held], manager: ManagerObjects) -> list[RemoteAction]:
    """The sweep's deletes: each copy a connected worker's watch shows whose manager object
    (the TrainJob or Workload of its name) is gone or was replaced by a new one of that name
    (copies.orphan), by the UID the watch saw; not one already being deleted (a finalizer
    holds it: deleting it again changes nothing); at most SWEEP_DELETES_PER_WORKER a worker,
    taken in turn from each namespace (`_in_turn`)."""
    deletes = []
    for worker in held:
        if not worker.connected:
            continue
        found = []
        for copy in worker.copies:
            view = ObjectView(copy)
            find = manager.trainjob if copy["kind"] == "TrainJob" else manager.workload
            if not view.deleting and orphan(view, find(view.namespace, view.name)):
                found.append(copy)
        chosen = _in_turn(found, SWEEP_DELETES_PER_WORKER)
        deletes += [_delete(worker.cluster, copy) for copy in chosen]
    return deletes


def _in_turn(copies: list[Dict], bound: int) -> list[Dict]:
    """At most `bound` of `copies`: all of them, in order, when they fit; else one from each
    namespace in turn (each namespace's in order), so a namespace of thousands of orphans
    cannot hold back another's for sweep after sweep."""
    if len(copies) <= bound:
        return copies
    by_namespace: dict[str, list[Dict]] = {}
    for copy in copies:
        by_namespace.setdefault(copy["metadata"]["namespace"], []).append(copy)
    taken: list[Dict] = []
    for row in itertools.zip_longest(*by_namespace.values()):
        taken += [copy for copy in row if copy is not None]
        if len(taken) >= bound:
            break
    return taken[:bound]


def _delete(cluster: str, copy: Dict) -> RemoteAction:
    """A copy's delete, guarded by the UID its worker's watch showed."""
    return RemoteAction(cluster, "delete", copy, guard=Guard.of(ObjectView(copy)))
