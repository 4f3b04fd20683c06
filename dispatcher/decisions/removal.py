"""What a deleted manager TrainJob's pass deletes before our finalizer lets it go (pure).

Its copies (the TrainJob's, then the Workload's) on every worker the manager watches, each
by the UID the watch saw, so a same-named object made since, or anyone else's, stays. As
with Kueue's MultiKueue, a worker that cannot be reached never holds the deletion up: the
copies there are orphans once the TrainJob is gone, and the garbage collector removes them
when the worker is back (copies_io.collect_garbage); a Warning on the TrainJob says which
workers they are and what removes them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from dispatcher.decisions.decide import RemoteAction
from kubebase.objects import Dict


@dataclass(frozen=True)
class Held:
    """One worker as the manager's watch of it shows a deleted TrainJob's copies."""

    cluster: str
    connected: bool
    copies: tuple[Dict, ...]  # ours there: the TrainJob's copy first, then the Workload's


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
        plan.deletes += [RemoteAction(worker.cluster, "delete", copy) for copy in worker.copies]
    plan.unreachable = tuple(sorted(unreachable))
    plan.sweep = (
        f"the garbage collector removes them once the worker is back (every {gc_interval:g} s)"
        if gc_interval
        else "nothing removes them (the garbage collector is off: gcInterval 0)"
    )
    return plan
