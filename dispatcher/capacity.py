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

from kubecontrol.objects import Dict
from trainjob import conditions as cond
from trainjob.lru import LRU
from trainjob.quantity import parse_quantity

Amounts = dict[str, Decimal]
INF = Decimal("Infinity")


@dataclass(frozen=True)
class Fit:
    now: bool  # fits the room left free now
    ever: bool  # fits the ClusterQueue at its largest (empty, borrowing all it may)
    why: str = ""  # when it does not fit now: what is short, in a phrase


def _add(into: Amounts, other: Amounts, times: int = 1) -> None:
    for name, qty in other.items():
        into[name] = into.get(name, Decimal(0)) + qty * times


def _requests(containers: list[Dict]) -> list[Amounts]:
    return [
        {k: parse_quantity(v) for k, v in (c.get("resources") or {}).get("requests", {}).items()}
        for c in containers
    ]


def pod_requests(pod_spec: Dict) -> Amounts:
    """What one pod asks for, counted as Kueue counts it: the sum over its containers, at least
    the largest init container, plus the pod overhead."""
    total: Amounts = {}
    for amounts in _requests(pod_spec.get("containers") or []):
        _add(total, amounts)
    for amounts in _requests(pod_spec.get("initContainers") or []):
        for name, qty in amounts.items():
            total[name] = max(total.get(name, Decimal(0)), qty)
    _add(total, {k: parse_quantity(v) for k, v in (pod_spec.get("overhead") or {}).items()})
    return total


def podset_requests(workload: Dict) -> list[tuple[str, Amounts]]:
    """(PodSet name, what all its pods ask for together) for each PodSet of a Workload."""
    out = []
    for ps in (workload.get("spec") or {}).get("podSets") or []:
        count = int(ps.get("count", 1))
        per_pod = pod_requests(((ps.get("template") or {}).get("spec")) or {})
        per_pod["pods"] = Decimal(1)  # counted only where a ClusterQueue covers "pods"
        total: Amounts = {}
        _add(total, per_pod, count)
        out.append((str(ps.get("name", "")), {k: v for k, v in total.items() if v}))
    return out


# (flavour, resource) -> amount
Table = dict[tuple[str, str], Decimal]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """One of a ClusterQueue's resource groups: the resources it covers, its flavours in order."""

    resources: tuple[str, ...]
    flavors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Quotas:
    """A ClusterQueue's quotas, parsed once per question: its resource groups, and per
    (flavour, resource) its nominal quota, borrowing limit and lending limit (absent: none)."""

    groups: tuple[ResourceGroup, ...]
    nominal: Table
    borrow: Table
    lend: Table


def _quotas(cq: Dict) -> Quotas:
    """A ClusterQueue's `Quotas`, from its spec.resourceGroups."""
    groups: list[ResourceGroup] = []
    nominal: Table = {}
    borrow: Table = {}
    lend: Table = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        flavors = []
        for flavor in group.get("flavors") or []:
            flavors.append(str(flavor["name"]))
            for res in flavor.get("resources") or []:
                key = (str(flavor["name"]), str(res["name"]))
                nominal[key] = parse_quantity(res.get("nominalQuota", 0))
                if res.get("borrowingLimit") is not None:
                    borrow[key] = parse_quantity(res["borrowingLimit"])
                if res.get("lendingLimit") is not None:
                    lend[key] = parse_quantity(res["lendingLimit"])
        covered = tuple(str(r) for r in group.get("coveredResources") or [])
        groups.append(ResourceGroup(covered, tuple(flavors)))
    return Quotas(tuple(groups), nominal, borrow, lend)


def reserved(cq: Dict) -> Table:
    """Per (flavour, resource): what a ClusterQueue has reserved (status.flavorsReservation)."""
    return _totals(cq, "flavorsReservation")


def _lendable(cq: Dict, *, free_only: bool) -> Table:
    """What a ClusterQueue can lend its cohort: its lending limit (or all of its nominal
    quota), less what it uses itself when `free_only`."""
    quotas = _quotas(cq)
    used = reserved(cq) if free_only else {}
    return {
        key: max(Decimal(0), min(quotas.lend.get(key, qty), qty - used.get(key, Decimal(0))))
        for key, qty in quotas.nominal.items()
    }


def _is_active(cq: Dict) -> bool:
    found = cond.find(list((cq.get("status") or {}).get("conditions") or []), "Active")
    return found is None or found.get("status") == "True"


def _room(cq: Dict, quotas: Quotas, cohort: list[Dict], *, now: bool) -> Table:
    """Per (flavour, resource): how much more the ClusterQueue can admit (now: given what is
    reserved; otherwise: empty), borrowing from `cohort` (the other ClusterQueues of its
    cohort) up to its borrowing limit; `quotas` is `_quotas(cq)`, parsed once per question."""
    used = reserved(cq) if now else {}
    pool: Table = {}
    if (cq.get("spec") or {}).get("cohortName"):
        for other in cohort:
            for key, qty in _lendable(other, free_only=now).items():
                pool[key] = pool.get(key, Decimal(0)) + qty
    room: Table = {}
    for key, qty in quotas.nominal.items():
        in_use = used.get(key, Decimal(0))
        borrowed = max(Decimal(0), in_use - qty)  # already borrowed; counts against the limit
        may_borrow = min(quotas.borrow.get(key, INF), pool.get(key, Decimal(0)) + borrowed)
        room[key] = qty + may_borrow - in_use
    return room


def _assign(
    podsets: list[tuple[str, Amounts]], cq: Dict, quotas: Quotas, room: Table, *, amounts: bool
) -> str:
    """Place each PodSet as Kueue's flavour assigner would (per resource group, the first
    flavour with room for all of the group's resources), taking the room as it goes. Returns
    what does not fit ('' when all do), with the amounts when `amounts` (the room now changes
    at every admission there, and a message that changes with it would be a write each time)."""
    room = dict(room)
    name = cq["metadata"]["name"]
    for podset, needs in podsets:
        for group in quotas.groups:
            flavors = group.flavors
            wanted = {r: q for r, q in needs.items() if r in group.resources}
            if not wanted:
                continue
            shortest = ""
            for flavor in flavors:
                short = [
                    f"{r} {_show(q)} wanted, {_show(room.get((flavor, r), Decimal(0)))} available"
                    if amounts
                    else r
                    for r, q in sorted(wanted.items())
                    if q > room.get((flavor, r), Decimal(0))
                ]
                if not short:
                    for r, q in wanted.items():
                        room[(flavor, r)] = room.get((flavor, r), Decimal(0)) - q
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


def _podset_requests_of(workload: Dict) -> list[tuple[str, Amounts]]:
    meta = workload.get("metadata") or {}
    uid, generation = meta.get("uid"), meta.get("generation")
    if not uid or generation is None:
        return podset_requests(workload)  # not a stored version: nothing names its content
    return _REQUESTS.get_or_make((str(uid), str(generation)), lambda: podset_requests(workload))


def fit(workload: Dict, cq: Dict | None, cohort: list[Dict], queue: str = "") -> Fit:
    """Whether `workload`'s PodSets fit `cq` (None: its LocalQueue `queue` or the ClusterQueue
    it points at is missing there), given the other ClusterQueues of its cohort."""
    if cq is None:
        # Structural, but an administrator may add it any moment: never a reason to give up.
        return Fit(False, True, f"no LocalQueue {queue} with its ClusterQueue")
    name = cq["metadata"]["name"]
    podsets = _podset_requests_of(workload)
    quotas = _quotas(cq)
    covered = {r for group in quotas.groups for r in group.resources}
    missing = sorted({r for _, needs in podsets for r in needs if r not in covered} - {"pods"})
    if missing:
        # Kueue leaves such a Workload pending, but a worker's Kueue may be set to ignore the
        # resource (its resources.excludeResourcePrefixes): no room, and no reason to give up.
        return Fit(False, True, f"ClusterQueue {name} has no quota for {', '.join(missing)}")
    never = _assign(podsets, cq, quotas, _room(cq, quotas, cohort, now=False), amounts=True)
    if never:
        return Fit(False, False, f"never: {never}")
    if not _is_active(cq):
        return Fit(False, True, f"ClusterQueue {name} is not active")
    short = _assign(podsets, cq, quotas, _room(cq, quotas, cohort, now=True), amounts=False)
    return Fit(not short, True, f"no room now: {short}" if short else "")


def cohort_of(cq: Dict, all_cqs: list[Dict]) -> list[Dict]:
    """The other ClusterQueues of `cq`'s cohort (same spec.cohortName) among `all_cqs`."""
    cohort = (cq.get("spec") or {}).get("cohortName")
    if not cohort:
        return []
    return [
        o
        for o in all_cqs
        if (o.get("spec") or {}).get("cohortName") == cohort
        and o["metadata"]["name"] != cq["metadata"]["name"]
    ]


def _totals(cq: Dict, field: str) -> Table:
    """Per (flavour, resource): the totals of one of a ClusterQueue's status lists."""
    out: Table = {}
    for flavor in (cq.get("status") or {}).get(field) or []:
        for res in flavor.get("resources") or []:
            out[(str(flavor["name"]), str(res["name"]))] = parse_quantity(res.get("total", 0))
    return out


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


def quota_summary(cq: Dict) -> Dict:
    """A ClusterQueue's quota and use, as a person reads them: per flavour and resource its
    nominal quota, what is reserved (admitted and quota-reserved Workloads) and what is used
    (admitted ones), with the reserved share of the quota; and its Workload counts."""
    quotas, held, used = _quotas(cq), reserved(cq), _totals(cq, "flavorsUsage")
    flavors: dict[str, list[Dict]] = {}
    for (flavor, resource), nominal in quotas.nominal.items():
        taken = held.get((flavor, resource), Decimal(0))
        flavors.setdefault(flavor, []).append(
            {
                "name": resource,
                "nominalQuota": show_amount(resource, nominal),
                "reserved": show_amount(resource, taken),
                "used": show_amount(resource, used.get((flavor, resource), Decimal(0))),
                "share": float(min(taken / nominal, Decimal(1))) if nominal > 0 else 0.0,
            }
        )
    status = cq.get("status") or {}
    return {
        "name": cq["metadata"]["name"],
        "cohort": (cq.get("spec") or {}).get("cohortName"),
        "active": _is_active(cq),
        "pendingWorkloads": int(status.get("pendingWorkloads") or 0),
        "reservingWorkloads": int(status.get("reservingWorkloads") or 0),
        "admittedWorkloads": int(status.get("admittedWorkloads") or 0),
        "flavors": [{"name": name, "resources": res} for name, res in flavors.items()],
    }
