"""Whether a Workload's PodSets fit a worker's ClusterQueue, now and ever (pure).

The dispatcher reads each worker's ClusterQueues and LocalQueues from watches it keeps anyway
and, before sending a copy, asks the question Kueue's scheduler there will ask: is there a
flavour, in each resource group, with room for every PodSet? Two answers:

- `now`: in the quota left free (status.flavorsReservation), plus what the ClusterQueue may
  borrow from the other ClusterQueues of its cohort on that worker;
- `ever`: in an empty ClusterQueue at its largest (nominal quota plus what it may borrow).

Flavours are tried in order per PodSet and resource group, as Kueue's flavour assigner does.
Left out on purpose, so the answer can be too generous but never stricter than the nominal
quota: ResourceFlavors' node labels and taints (the pods' nodeSelector and tolerations), other
borrowers of the same cohort, and hierarchical cohorts (Cohort objects). Preemption is not
counted as room either. A resource the ClusterQueue does not cover means no room now, never
"never": the worker's Kueue may be configured to ignore it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from trainjob.lru import LRU
from trainjob.queues import (
    ZERO,
    Amounts,
    ClusterQueueView,
    PodSetView,
    Quotas,
    Table,
    add,
)
from trainjob_api.story import ClusterQueueUse, FlavorUse, ResourceUse
from trainjob_api.views import WorkloadView

INF = Decimal("Infinity")


@dataclass(frozen=True)
class Fit:
    now: bool  # fits the room left free now
    ever: bool  # fits the ClusterQueue at its largest (empty, borrowing all it may)
    why: str = ""  # when it does not fit now: what is short, in a phrase


def podset_requests(workload: WorkloadView) -> list[tuple[str, Amounts]]:
    """(PodSet name, what all its pods ask for together) for each PodSet of a Workload."""
    out = []
    for ps in map(PodSetView, workload.pod_sets):
        per_pod = ps.pod_requests
        per_pod["pods"] = Decimal(1)  # counted only where a ClusterQueue covers "pods"
        total = Amounts()
        add(total, per_pod, ps.count)
        out.append((ps.name, Amounts({k: v for k, v in total.items() if v})))
    return out


def _lendable(cq: ClusterQueueView, *, free_only: bool) -> Table:
    """What a ClusterQueue can lend its cohort: its lending limit (or all of its nominal
    quota), less what it uses itself when `free_only`."""
    quotas = cq.quotas()
    used = cq.reserved if free_only else Table()
    return Table(
        {
            key: max(ZERO, min(quotas.lend.get(key, qty), qty - used[key]))
            for key, qty in quotas.nominal.items()
        }
    )


def _room(
    cq: ClusterQueueView, quotas: Quotas, cohort: list[ClusterQueueView], *, now: bool
) -> Table:
    """Per (flavour, resource): how much more the ClusterQueue can admit (now: given what is
    reserved; otherwise: empty), borrowing from `cohort` (the other ClusterQueues of its
    cohort) up to its borrowing limit; `quotas` is `cq.quotas()`, parsed once per question."""
    used = cq.reserved if now else Table()
    pool = Table()
    if cq.cohort:
        for other in cohort:
            for key, qty in _lendable(other, free_only=now).items():
                pool[key] += qty
    room = Table()
    for key, qty in quotas.nominal.items():
        in_use = used[key]
        borrowed = max(ZERO, in_use - qty)  # already borrowed; counts against the limit
        may_borrow = min(quotas.borrow.get(key, INF), pool[key] + borrowed)
        room[key] = qty + may_borrow - in_use
    return room


def _assign(
    podsets: list[tuple[str, Amounts]], name: str, quotas: Quotas, room: Table, *, amounts: bool
) -> str:
    """Place each PodSet as Kueue's flavour assigner would (per resource group, the first
    flavour with room for all of the group's resources), taking the room as it goes. Returns
    what does not fit in ClusterQueue `name` ('' when all do), with the amounts when `amounts`
    (the room now changes at every admission there, and a message that changes with it would
    be a write each time)."""
    room = Table(room)
    for podset, needs in podsets:
        for group in quotas.groups:
            flavors = group.flavors
            wanted = {r: q for r, q in needs.items() if r in group.resources}
            if not wanted:
                continue
            shortest = ""
            for flavor in flavors:
                short = [
                    f"{r} {_show(q)} wanted, {_show(room[(flavor, r)])} available" if amounts else r
                    for r, q in sorted(wanted.items())
                    if q > room[(flavor, r)]
                ]
                if not short:
                    for r, q in wanted.items():
                        room[(flavor, r)] -= q
                    break
                shortest = shortest or f"flavour {flavor}: {', '.join(short)}"
            else:
                return f"PodSet {podset} does not fit ClusterQueue {name} ({shortest})"
    return ""


def _show(qty: Decimal) -> str:
    if qty == INF:
        return "unlimited"
    if qty == qty.to_integral_value():
        return str(int(qty))
    milli = qty * 1000
    return f"{math.ceil(milli)}m" if milli < 1000 else f"{qty.normalize()}"


# What a Workload's PodSets ask for is a function of its spec, which its uid and generation
# name: asked of every worker on every pass while it waits for one, it is worked out once.
_REQUESTS: LRU[tuple[str, str], list[tuple[str, Amounts]]] = LRU(4096)


def requests_of(workload: WorkloadView) -> list[tuple[str, Amounts]]:
    """`podset_requests`, worked out once per stored version of the Workload (its uid and
    generation): capacity's fit and the preemption estimate ask it on every pass."""
    uid, generation = workload.uid, workload.generation
    if not uid or generation is None:
        return podset_requests(workload)  # not a stored version: nothing names its content
    return _REQUESTS.get_or_make((str(uid), str(generation)), lambda: podset_requests(workload))


def fit(
    workload: WorkloadView,
    cq: ClusterQueueView | None,
    cohort: list[ClusterQueueView],
    queue: str = "",
) -> Fit:
    """Whether `workload`'s PodSets fit `cq` (None: its LocalQueue `queue` or the ClusterQueue
    it points at is missing there), given the other ClusterQueues of its cohort."""
    if cq is None:
        # Structural, but an administrator may add it any moment: never a reason to give up.
        return Fit(False, True, f"no LocalQueue {queue} with its ClusterQueue")
    try:
        podsets = requests_of(workload)
    except (ValueError, TypeError, ArithmeticError) as exc:
        # A quantity no pod could ask for (out of range, or not one this reads): the job
        # waits, saying why, and no pass fails over it.
        return Fit(False, True, f"a quantity its pods ask for cannot be read: {str(exc)[:120]}")
    quotas = cq.quotas()
    missing = sorted(
        {r for _, needs in podsets for r in needs if r not in quotas.covered} - {"pods"}
    )
    if missing:
        # Kueue leaves such a Workload pending, but a worker's Kueue may be set to ignore the
        # resource (its resources.excludeResourcePrefixes): no room, and no reason to give up.
        return Fit(False, True, f"ClusterQueue {cq.name} has no quota for {', '.join(missing)}")
    room = _room(cq, quotas, cohort, now=False)
    never = _assign(podsets, cq.name, quotas, room, amounts=True)
    if never:
        return Fit(False, False, f"never: {never}")
    if not cq.active:
        return Fit(False, True, f"ClusterQueue {cq.name} is not active")
    room = _room(cq, quotas, cohort, now=True)
    short = _assign(podsets, cq.name, quotas, room, amounts=False)
    return Fit(not short, True, f"no room now: {short}" if short else "")


def cohort_of(cq: ClusterQueueView, all_cqs: list[ClusterQueueView]) -> list[ClusterQueueView]:
    """The other ClusterQueues of `cq`'s cohort (same spec.cohortName) among `all_cqs`."""
    if not cq.cohort:
        return []
    return [o for o in all_cqs if o.cohort == cq.cohort and o.name != cq.name]


BYTES = ("memory", "ephemeral-storage")
BINARY = (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10))


def show_amount(resource: str, qty: Decimal) -> str:
    """A quantity as a person writes it: bytes in the largest binary unit that divides them
    (`1Ti`, `1536Mi`), anything else as `_show` does (`4`, `500m`)."""
    if resource in BYTES or resource.startswith("hugepages-"):
        for unit, size in BINARY:
            if qty >= size and qty % size == 0:
                return f"{int(qty // size)}{unit}"
    return _show(qty)


def quota_summary(cq: ClusterQueueView) -> ClusterQueueUse:
    """A ClusterQueue's quota and use: per flavour and resource its nominal quota, what is
    reserved (admitted and quota-reserved Workloads) and what is used (admitted ones), with
    the reserved share of the quota; and its Workload counts."""
    held, used = cq.reserved, cq.used
    flavors: dict[str, list[ResourceUse]] = {}
    for (flavor, resource), nominal in cq.quotas().nominal.items():
        taken = held[(flavor, resource)]
        flavors.setdefault(flavor, []).append(
            ResourceUse(
                name=resource,
                nominal_quota=show_amount(resource, nominal),
                reserved=show_amount(resource, taken),
                used=show_amount(resource, used[(flavor, resource)]),
                share=float(min(taken / nominal, Decimal(1))) if nominal > 0 else 0.0,
            )
        )
    counts = cq.counts
    return ClusterQueueUse(
        name=cq.name,
        cohort=cq.cohort,
        active=cq.active,
        pending_workloads=counts.pending or 0,
        reserving_workloads=counts.reserving or 0,
        admitted_workloads=counts.admitted or 0,
        flavors=[FlavorUse(name=f, resources=r) for f, r in flavors.items()],
    )
