"""Kueue's queues and what a Workload asks of them, as typed views over the JSON (as
plugin/trainjob_api/views.py reads TrainJobs): a ClusterQueue's quotas, reservations, counts and
admission checks, a LocalQueue's ClusterQueue and counts, a Workload PodSet's requests, an
AdmissionCheck's controller and parameters, a MultiKueueConfig's clusters. Quantities are Decimals
(plugin/trainjob_api/quantity.py); tables are keyed by (flavour, resource). Pure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, localcontext
from typing import TypeVar

from kubebase.objects import Dict
from trainjob_api import conditions as cond
from trainjob_api.pods import PodSpecView, ResourcesView
from trainjob_api.quantity import parse_quantity
from trainjob_api.views import JsonView, ObjectView, objects

K = TypeVar("K", bound=Hashable)
ZERO = Decimal(0)


class Zeroed(dict[K, Decimal]):
    """Amounts by key where an absent key reads as none of it (as `collections.Counter`
    reads), without being added."""

    __slots__ = ()

    def __missing__(self, key: K) -> Decimal:
        return ZERO


Amounts = Zeroed[str]  # resource -> amount
Table = Zeroed[tuple[str, str]]  # (flavour, resource) -> amount
# A limit per (flavour, resource), where an absent key is no limit: never read as zero.
Limits = dict[tuple[str, str], Decimal]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """One of a ClusterQueue's resource groups: the resources it covers, its flavours in order."""

    resources: tuple[str, ...]
    flavors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Quotas:
    """A ClusterQueue's quotas: its resource groups, and per (flavour, resource) its nominal
    quota, borrowing limit and lending limit (absent: none)."""

    groups: tuple[ResourceGroup, ...]
    nominal: Table
    borrow: Limits
    lend: Limits

    @property
    def covered(self) -> set[str]:
        return {r for group in self.groups for r in group.resources}


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """A queue's Workloads as Kueue counts them in its status (None: not reported)."""

    pending: int | None
    reserving: int | None
    admitted: int | None


class _QueueView(ObjectView):
    """What a ClusterQueue's and a LocalQueue's status both hold: their Workload counts."""

    __slots__ = ()

    @property
    def counts(self) -> QueueCounts:
        def number(field: str) -> int | None:
            value = self.status.get(field)
            return None if value is None else int(value)

        return QueueCounts(
            number("pendingWorkloads"), number("reservingWorkloads"), number("admittedWorkloads")
        )


class ClusterQueueView(_QueueView):
    __slots__ = ()

    @property
    def cohort(self) -> str | None:
        return self.spec.get("cohortName") or None

    def quotas(self) -> Quotas:
        """spec.resourceGroups, parsed (once per question: the caller keeps it)."""
        groups: list[ResourceGroup] = []
        nominal = Table()
        borrow: Limits = {}
        lend: Limits = {}
        for group in self.spec.get("resourceGroups") or []:
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

    @property
    def reserved(self) -> Table:
        """What admitted and quota-reserved Workloads hold (status.flavorsReservation)."""
        return self._totals("flavorsReservation")

    @property
    def used(self) -> Table:
        """What admitted Workloads hold (status.flavorsUsage)."""
        return self._totals("flavorsUsage")

    @property
    def active(self) -> bool:
        """Its Active condition, True when absent (a ClusterQueue Kueue has not judged yet)."""
        found = self.condition("Active")
        return found is None or found.true

    @property
    def admission_checks(self) -> set[str]:
        """The admission checks it asks for: spec.admissionChecks and those of
        spec.admissionChecksStrategy (for some flavours only)."""
        names = {str(n) for n in self.spec.get("admissionChecks") or []}
        strategy = self.spec.get("admissionChecksStrategy") or {}
        return names | {str(a["name"]) for a in strategy.get("admissionChecks") or []}

    def _totals(self, field: str) -> Table:
        out = Table()
        for flavor in self.status.get(field) or []:
            for res in flavor.get("resources") or []:
                out[(str(flavor["name"]), str(res["name"]))] = parse_quantity(res.get("total", 0))
        return out


class LocalQueueView(_QueueView):
    __slots__ = ()

    @property
    def cluster_queue(self) -> str:
        return str(self.spec.get("clusterQueue") or "")


class PodSetView(JsonView):
    """One PodSet of a Workload: its name, its count, and what one of its pods asks for."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self._text("name")

    @property
    def count(self) -> int:
        return int(self.raw.get("count", 1))

    @property
    def pod_spec(self) -> PodSpecView:
        """Its pod template's spec."""
        return PodSpecView.of_template(self.raw.get("template"))

    @property
    def pod_requests(self) -> Amounts:
        """What one pod asks for (`pod_requests`)."""
        return pod_requests(self.pod_spec)


def pod_requests(pod: PodSpecView, *, limits_as_requests: bool = True) -> Amounts:
    """What one pod of this spec asks for, counted as Kueue 0.19 counts a PodSet's pod (its
    limits standing for requests not given, then Kubernetes' PodRequests): the sum over its
    containers and its sidecars (init containers that keep running), at least what each other
    init container asks beside the sidecars started before it; the pod's own requests in
    place of its containers' for CPU, memory and hugepages (pod-level resources); plus the
    pod's overhead. Without `limits_as_requests`, its requests as written (as Trainer v2.3
    counts a PodGroup's minResources)."""

    def asked_of(resources: ResourcesView) -> Amounts:
        return _asked(resources, limits_as_requests)

    total = Amounts()
    for container in pod.containers:
        add(total, asked_of(container.resources))
    sidecars, init = Amounts(), Amounts()
    for container in pod.init_containers:
        asked = asked_of(container.resources)
        if container.sidecar:  # runs on beside the containers
            add(total, asked)
            add(sidecars, asked)
            continue
        add(asked, sidecars)
        for name, qty in asked.items():
            init[name] = max(init[name], qty)
    for name, qty in init.items():
        total[name] = max(total[name], qty)
    for name, qty in asked_of(pod.resources).items():
        if name in POD_LEVEL_RESOURCES or name.startswith("hugepages-"):
            total[name] = qty
    add(total, Amounts({k: parse_quantity(v) for k, v in pod.overhead.items()}))
    return total


# What a pod's own `resources` may ask for in place of its containers' (Kubernetes' pod-level
# resources), besides hugepages.
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})


def _asked(resources: ResourcesView, limits_as_requests: bool) -> Amounts:
    """What a ResourceRequirements asks for: its requests, a limit standing for a request not
    given (with `limits_as_requests`)."""
    limits = resources.limits if limits_as_requests else {}
    asked = {**limits, **resources.requests}
    return Amounts({str(k): parse_quantity(v) for k, v in asked.items()})


def resources_key(pod: PodSpecView) -> str:
    """What a pod of this spec asks of a queue and of its node, as one short key: each init
    container's and container's requests and limits (a limit standing for a request not
    given, as the API server defaults a pod's), claims and restartPolicy (an init container
    that keeps running is a sidecar, counted with the containers), and the pod's own
    `resources`, `overhead`, `runtimeClassName` and `resourceClaims`; quantities by value as
    the API server keeps them ("1" is "1000m", finer than 1n rounded up). Two specs with the
    same key take the same quota; a Workload whose key differs from its TrainJob's no longer
    describes it (Kueue compares its PodSets' containers the same way)."""
    parts: list[object] = []
    for kind in ("initContainers", "containers"):
        for container in pod.containers_in(kind):
            asks = _resources(container.resources)
            parts.append([kind, container.restart_policy, asks])
    parts.append(["pod", _resources(pod.resources), _amounts(pod.overhead)])
    parts.append([pod.runtime_class_name, pod.resource_claims])
    text = json.dumps(parts, separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# What of a pod spec, and of each of its containers, says what the pod asks of a queue and of
# its node: every field `resources_key` and `pod_requests` read.
POD_ASK_FIELDS = ("resources", "overhead", "runtimeClassName", "resourceClaims")
CONTAINER_ASK_FIELDS = ("name", "resources", "restartPolicy")


def pod_asks(spec: Dict) -> Dict:
    """The part of a pod spec that says what its pod asks for (POD_ASK_FIELDS, and
    CONTAINER_ASK_FIELDS of each container and init container): `resources_key` and
    `pod_requests` read the same of it as of the whole spec. What a cache keeps of a pod
    template whose image, command and environment nothing reads."""
    kept = {f: spec[f] for f in POD_ASK_FIELDS if f in spec}
    for kind in ("initContainers", "containers"):
        if kind in spec:
            kept[kind] = [
                {f: container[f] for f in CONTAINER_ASK_FIELDS if f in container}
                for container in objects(spec[kind])
            ]
    return kept


def _resources(resources: ResourcesView) -> list[object]:
    """A ResourceRequirements by value: requests (limits filling those not given), limits,
    claims."""
    limits = _amounts(resources.limits)
    requests = {**limits, **_amounts(resources.requests)}
    claims = sorted(resources.claims, key=lambda c: json.dumps(c, sort_keys=True))
    return [requests, limits, claims]


# The API server keeps a quantity to the nano, finer rounded up (apimachinery's Quantity).
_NANO = Decimal("1e-9")


def _amounts(given: object) -> dict[str, str]:
    """A requests or limits map with each quantity by value, as the API server would store it
    (one that is not a quantity, as written)."""
    if not isinstance(given, dict):
        return {}
    out = {}
    for name, value in given.items():
        try:
            with localcontext() as exact:
                exact.prec = 64  # room for 2^63 to the nano
                kept = parse_quantity(value).quantize(_NANO, rounding=ROUND_CEILING)
                out[str(name)] = str((kept + 0).normalize())  # -0 is 0
        except (ValueError, ArithmeticError):
            out[str(name)] = f"as written: {value}"
    return out


def add(into: Amounts, other: Amounts, times: int = 1) -> None:
    """Add `other` (`times` over) into `into`."""
    for name, qty in other.items():
        into[name] += qty * times


class ResourceFlavorView(ObjectView):
    """A Kueue ResourceFlavor: what the pods of a PodSet admitted on it get (its node labels
    and tolerations)."""

    __slots__ = ()

    @property
    def node_labels(self) -> dict[str, str]:
        return dict(self.spec.get("nodeLabels") or {})

    @property
    def tolerations(self) -> list[Dict]:
        return list(self.spec.get("tolerations") or [])


class AdmissionCheckView(ObjectView):
    """A Kueue AdmissionCheck: which controller serves it and what its parameters name."""

    __slots__ = ()

    @property
    def controller_name(self) -> str:
        return str(self.spec.get("controllerName") or "")

    @property
    def parameters(self) -> Dict:
        """spec.parameters (apiGroup, kind, name), as written: judged by the dispatcher."""
        return dict(self.spec.get("parameters") or {})


class MultiKueueClusterView(ObjectView):
    """A MultiKueueCluster: where its worker's kubeconfig comes from (a Secret or a file, or a
    ClusterProfile), and since when it has been recorded as not Active."""

    __slots__ = ()

    @property
    def _source(self) -> Dict:
        return self.spec.get("clusterSource") or {}

    @property
    def profile_ref(self) -> object:
        """spec.clusterSource.clusterProfileRef as written (None when absent)."""
        return self._source.get("clusterProfileRef")

    @property
    def kubeconfig_location(self) -> str:
        return str((self._source.get("kubeConfig") or {}).get("location") or "")

    @property
    def kubeconfig_location_type(self) -> str:
        """Secret (the API's default) or Path."""
        return str((self._source.get("kubeConfig") or {}).get("locationType") or "Secret")

    def source_name(self, source: str) -> str | None:
        """The Secret (or file) its `kubeConfig` names, or the ClusterProfile its
        `clusterProfileRef` does (`source`); None when it has no such source."""
        ref = self._source.get(source)
        if not isinstance(ref, dict):
            return None
        found = ref.get("location" if source == "kubeConfig" else "name")
        return None if found is None else str(found)

    @property
    def down_since(self) -> float | None:
        """Since when (epoch seconds) it has been recorded as not Active: the worker-lost
        clock as it stood before this process started. None when it was Active (or never
        reported)."""
        active = self.condition("Active")
        if active is None or active.status != "False" or active.since is None:
            return None
        return cond.parse_time(active.since).timestamp()


class MultiKueueConfigView(ObjectView):
    __slots__ = ()

    @property
    def clusters(self) -> list[str]:
        return [str(name) for name in self.spec.get("clusters") or []]
