"""What a worker's preemption would cost, estimated (pure): the Workloads its Kueue would evict
to admit a copy blocked on MultiKueue's preemption gate, and the training each would lose.

Orchestrated preemption (decide.py) lets one worker at a time preempt for a job. Kueue opens
the gate on the worker that asked first; the dispatcher, where it can estimate the cost on
each, opens it on the worker whose preemption loses the least training. The estimate follows
Kueue's classical preemption within a ClusterQueue (v0.19, pkg/scheduler/preemption):

- the copy takes, per resource group, the first flavour whose nominal quota could hold it;
- candidates are the Workloads holding quota in the same ClusterQueue that its
  `preemption.withinClusterQueue` policy lets go (LowerPriority; LowerOrNewerEqualPriority:
  also those of the same priority created after the copy; Any) and that use a flavour and
  resource the copy is short of;
- in Kueue's order (already evicted first, lower priority first, the latest admitted first,
  then by UID), each is taken out until the copy fits; then, from the last but one back to the
  first, each is put back if the copy still fits without it.

What is not simulated leaves the cost unknown (and the choice to Kueue's order): a
ClusterQueue in a cohort (reclaiming and borrowing), fair sharing, topology, a flavour the
first pick does not match. A victim's training lost is the time since its last checkpoint
(the one its TrainJob's progress report names, from when the dispatcher first saw it named),
or since it was admitted without one; a Workload that is not a TrainJob of ours counts from
its admission.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from kubebase.objects import Dict
from trainjob.ownership import controller_ref
from trainjob.queues import Amounts, ClusterQueueView, Quotas, Table
from trainjob_api import conditions as cond
from trainjob_api import constants as c
from trainjob_api.quantity import parse_quantity
from trainjob_api.views import WorkloadView

POLICIES = ("LowerPriority", "LowerOrNewerEqualPriority", "Any")


@dataclass(frozen=True, slots=True)
class Held:
    """A Workload holding quota on a worker, as the estimate reads it."""

    namespace: str
    name: str
    uid: str
    cluster_queue: str
    priority: int
    usage: Table  # (flavour, resource) -> what its admission holds
    reserved_at: dt.datetime | None  # its QuotaReserved condition's time
    created: str  # its creationTimestamp (Kueue's queue order, by default)
    evicted: bool = False
    trainjob: tuple[str, str] | None = None  # the (name, UID) of the TrainJob that owns it
    ours: bool = False  # a copy the dispatcher made (its origin label is ours)
    checkpoint_at: dt.datetime | None = None  # when its last checkpoint was first seen named


# ---- what the watch keeps -------------------------------------------------------------------


HELD = "held"  # where a kept Workload holds its Held


def held_seen(obj: Dict, origin: str) -> Dict:
    """What the cache keeps of a worker's Workload (the informer's transform, for the copies of
    the manager `origin`): who it is, and while it holds quota, as a Held read once (its
    ClusterQueue, priority, what it holds, when it was admitted, whether it is evicted, the
    TrainJob that owns it). One that holds none, or whose hold cannot be read, is kept as who
    it is only (`held_of`: None), and the watch keeps only those that hold some."""
    wl = WorkloadView(obj)
    meta = wl.meta
    kept: Dict = {
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta
        }
    }
    if not wl.has_quota or wl.finished:
        return kept
    try:
        usage = Table()
        for assignment in wl.pod_set_assignments:
            flavors = assignment.flavors
            for resource, qty in assignment.resource_usage.items():
                if resource in flavors:
                    usage[(str(flavors[resource]), str(resource))] += parse_quantity(qty)
        found = wl.condition("QuotaReserved")
        since = found.since if found is not None else None
        reserved_at = _aware(cond.parse_time(since)) if since else None
    except (ValueError, TypeError, ArithmeticError, AttributeError):
        return kept
    ref = controller_ref(obj)
    owner = (
        (str(ref.get("name")), str(ref.get("uid")))
        if ref is not None and ref.get("kind") == c.TRAINJOB.kind
        else None
    )
    priority = wl.spec.get("priority")
    kept[HELD] = Held(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        cluster_queue=wl.cluster_queue,
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        usage=usage,
        reserved_at=reserved_at,
        created=str(meta.get("creationTimestamp") or ""),
        evicted=wl.evicted,
        trainjob=owner,
        ours=wl.labels.get(c.KUEUE_MULTIKUEUE_ORIGIN_LABEL) == origin,
    )
    return kept


def held_of(kept: Dict) -> Held | None:
    """The Held a kept Workload holds (None: it holds no quota, or it cannot be read)."""
    found = kept.get(HELD)
    return found if isinstance(found, Held) else None


def _aware(when: dt.datetime) -> dt.datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


# ---- the victims Kueue would pick -------------------------------------------------------------


def _assigned(podsets: list[tuple[str, Amounts]], quotas: Quotas) -> Table | None:
    """What the copy would hold, per (flavour, resource): per PodSet and resource group, the
    first flavour whose nominal quota could hold the group's resources (None: none could)."""
    need = Table()
    for _, wants in podsets:
        for group in quotas.groups:
            wanted = {r: q for r, q in wants.items() if r in group.resources}
            if not wanted:
                continue
            flavor = next(
                (
                    f
                    for f in group.flavors
                    if all(need[(f, r)] + q <= quotas.nominal[(f, r)] for r, q in wanted.items())
                ),
                None,
            )
            if flavor is None:
                return None
            for r, q in wanted.items():
                need[(flavor, r)] += q
    return need


def _may_preempt(policy: str, priority: int, created: str, candidate: Held) -> bool:
    """Kueue's SatisfiesPreemptionPolicy, its queue order read as the creation time (RFC 3339
    in UTC compares as text)."""
    if candidate.priority < priority or policy == "Any":
        return True
    if policy == "LowerOrNewerEqualPriority":
        return candidate.priority == priority and bool(created) and created < candidate.created
    return False


def _order(candidate: Held, now: dt.datetime) -> tuple[bool, int, float, str]:
    """Kueue's CandidatesOrdering within one ClusterQueue: already evicted first, lower
    priority first, the latest admitted first (not yet admitted: now), then by UID."""
    admitted = candidate.reserved_at or now
    return (not candidate.evicted, candidate.priority, -admitted.timestamp(), candidate.uid)


def victims(
    podsets: list[tuple[str, Amounts]],
    priority: int,
    created: str,
    cq: ClusterQueueView,
    held: list[Held],
    now: dt.datetime,
) -> list[Held] | None:
    """The Workloads of `held` (all that hold quota in `cq`) that `cq`'s Kueue would evict to
    admit a Workload asking `podsets` at `priority`, created at `created` (none when it fits
    as it is); None when that cannot be estimated (see the module's docstring) or when no
    set of them would make room."""
    policy = (cq.spec.get("preemption") or {}).get("withinClusterQueue") or "Never"
    if cq.cohort or policy not in POLICIES:
        return None
    quotas = cq.quotas()
    need = _assigned(podsets, quotas)
    if need is None:
        return None
    used = Table()
    for h in held:
        for key, qty in h.usage.items():
            used[key] += qty

    def fits() -> bool:
        return all(qty <= quotas.nominal[key] - used[key] for key, qty in need.items())

    short = {key for key, qty in need.items() if qty > quotas.nominal[key] - used[key]}
    if not short:
        return []  # it fits as it is
    candidates = sorted(
        (
            h
            for h in held
            if _may_preempt(policy, priority, created, h) and any(h.usage[k] for k in short)
        ),
        key=lambda h: _order(h, now),
    )
    targets: list[Held] = []
    for candidate in candidates:
        _take(used, candidate, -1)
        targets.append(candidate)
        if fits():
            # From the last but one back, each put back if the copy still fits (fillBack).
            for i in range(len(targets) - 2, -1, -1):
                _take(used, targets[i], 1)
                if fits():
                    targets[i] = targets[-1]
                    targets.pop()
                else:
                    _take(used, targets[i], -1)
            return targets
    return None


def _take(used: Table, workload: Held, sign: int) -> None:
    for key, qty in workload.usage.items():
        used[key] += sign * qty


# ---- what it would cost ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Victim:
    """One Workload a worker's preemption would evict, and the training it would lose."""

    namespace: str
    name: str
    lost: float  # seconds of training lost
    checkpointed: bool  # counted from its last checkpoint (else from its admission)


@dataclass(frozen=True, slots=True)
class Cost:
    """What letting one worker preempt would cost: its victims."""

    victims: tuple[Victim, ...]

    @property
    def lost(self) -> float:
        return sum(v.lost for v in self.victims)

    @property
    def rank(self) -> tuple[int, int]:
        """How it compares with another's: whole minutes of training lost, then victims
        (estimates closer than a minute are a tie, left to Kueue's order)."""
        return (int(self.lost // 60), len(self.victims))

    def __str__(self) -> str:
        n = len(self.victims)
        jobs = f"{n} job" if n == 1 else f"{n} jobs"
        return f"preempts {jobs}, {show_lost(self.lost)} of training lost"


def cost(chosen: list[Held], now: dt.datetime) -> Cost | None:
    """The training each of `chosen` would lose if evicted `now` (None: one was never
    admitted, so nothing can be said of it)."""
    out = []
    for h in chosen:
        if h.reserved_at is None:
            return None
        since = h.reserved_at
        checkpointed = h.checkpoint_at is not None and h.checkpoint_at > since
        if checkpointed and h.checkpoint_at is not None:
            since = h.checkpoint_at
        out.append(
            Victim(h.namespace, h.name, max(0.0, (now - since).total_seconds()), checkpointed)
        )
    return Cost(tuple(out))


def show_lost(seconds: float) -> str:
    """A duration of training as people say it: ~40 s, ~4 min, ~2.5 h."""
    if seconds < 90:
        return f"~{round(seconds)} s"
    if seconds < 90 * 60:
        return f"~{round(seconds / 60)} min"
    return f"~{seconds / 3600:.1f} h"
