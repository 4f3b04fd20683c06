"""Pure builders and readers of Kueue Workloads (kueue.x-k8s.io/v1beta2) for TrainJobs."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from kubecontrol.objects import Dict
from trainjob import conditions as cond
from trainjob import constants as c
from trainjob.jsondoc import json_copy
from trainjob.models import TrainJob
from trainjob.naming import owner_reference
from trainjob.runtime import PodSetShape, RuntimeInfo
from trainjob.runtime.topology import topology_request
from trainjob.views import ObjectView, StatusEntry

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
MAX_NAME = 253
HASH_LENGTH = 5


def workload_name(trainjob: str, uid: str) -> str:
    """Kueue's naming for a job's Workload: `trainjob-<name>-<hash of kind, group, name, uid>`."""
    digest = hashlib.sha1(f"TrainJob\n{c.TRAINER_GROUP}\n{trainjob}\n{uid}".encode()).hexdigest()
    prefix = f"trainjob-{trainjob}"[: MAX_NAME - 1 - HASH_LENGTH]
    return f"{prefix}-{digest[:HASH_LENGTH]}"


def _pod_template_for_kueue(template: Dict) -> Dict:
    """The pod template Kueue sees: the pods' spec as the Jobs will run it (requests decide
    quota, nodeSelector and tolerations placement), with only labels and annotations kept
    from the template's metadata."""
    spec = json_copy(template.get("spec") or {})
    meta = template.get("metadata") or {}
    return {
        "metadata": {k: dict(meta[k]) for k in ("labels", "annotations") if meta.get(k)},
        "spec": spec,
    }


def build_pod_sets(info: RuntimeInfo) -> list[Dict]:
    """A Workload's PodSets, with the pod templates Kueue's own TrainJob integration gives
    (PodSet.kueue_template): quota, placement and a prebuilt Workload's match with Kueue on a
    worker that runs Kubeflow Trainer all read these."""
    return [
        {
            "name": ps.name,
            "count": ps.count,
            "template": _pod_template_for_kueue(
                ps.kueue_template if ps.kueue_template is not None else ps.pod_template
            ),
            "topologyRequest": topology_request(ps),
        }
        for ps in info.pod_sets
    ]


@dataclass(frozen=True)
class Priority:
    """A Workload's priority as Kueue takes it from its job: the class (group, kind, name),
    or none, and the value."""

    group: str | None
    kind: str | None
    name: str | None
    value: int

    @property
    def ref(self) -> Dict | None:
        if self.name is None:
            return None
        return {"group": self.group, "kind": self.kind, "name": self.name}


def build_workload(
    tj: TrainJob, info: RuntimeInfo, queue: str, priority: Priority | None = None
) -> Dict:
    """The Workload Kueue admits for `tj`: owned by it, one PodSet per replicatedJob."""
    uid = tj.metadata.uid or ""
    spec: Dict = {"queueName": queue, "podSets": build_pod_sets(info)}
    if priority is not None:
        if priority.ref is not None:
            spec["priorityClassRef"] = priority.ref
        spec["priority"] = priority.value
    return {
        "apiVersion": c.KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(tj.name, uid),
            "namespace": tj.namespace,
            "labels": {JOB_UID_LABEL: uid},
            "ownerReferences": [owner_reference(tj.name, uid)],
        },
        "spec": spec,
    }


# The states of an AdmissionCheck on a Workload (Kueue's CheckState).
CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]


class CheckView(StatusEntry):
    """One of a Workload's admission check states (status.admissionChecks[])."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self._text("name")

    @property
    def state(self) -> str:
        """Pending, Ready, Retry or Rejected (Kueue's CheckState)."""
        return self._text("state")


class WorkloadView(ObjectView):
    """A Kueue Workload read by field name: what the controllers read of one, each a property
    in place of a `.get(...) or {}` chain (absent fields read as Kueue leaves them: None,
    empty, or the API's default)."""

    __slots__ = ()

    @property
    def queue_name(self) -> str | None:
        return self.spec.get("queueName")

    @property
    def active(self) -> bool:
        """spec.active (Kueue's default: true); false once deactivated."""
        return self.spec.get("active", True) is not False

    @property
    def pod_sets(self) -> list[Dict]:
        return list(self.spec.get("podSets") or [])

    @property
    def cluster_name(self) -> str | None:
        """status.clusterName: the worker a MultiKueue manager Workload was dispatched to."""
        return self.status.get("clusterName")

    @property
    def nominated_clusters(self) -> list[str]:
        return list(self.status.get("nominatedClusterNames") or [])

    @property
    def admission(self) -> Dict:
        return self.status.get("admission") or {}

    @property
    def cluster_queue(self) -> str:
        """The ClusterQueue it was admitted to ("" before admission)."""
        return str(self.admission.get("clusterQueue", ""))

    @property
    def admission_checks(self) -> list[Dict]:
        return list(self.status.get("admissionChecks") or [])

    @property
    def checks(self) -> list[CheckView]:
        """Its admission checks' states, each read in place."""
        return [CheckView(x) for x in self.admission_checks]

    def check(self, name: str) -> CheckView | None:
        """The state of the admission check `name`, if the Workload has one."""
        found = next((s for s in self.admission_checks if s.get("name") == name), None)
        return None if found is None else CheckView(found)

    @property
    def reclaimable_pods(self) -> list[Dict]:
        return list(self.status.get("reclaimablePods") or [])

    # ---- its state, from its conditions ----------------------------------------------------

    @property
    def has_quota(self) -> bool:
        return self.is_true("QuotaReserved")

    @property
    def evicted(self) -> bool:
        return self.is_true("Evicted")

    @property
    def admitted(self) -> bool:
        """Admitted and not evicted."""
        return self.is_true("Admitted") and not self.evicted

    @property
    def finished(self) -> bool:
        return self.is_true("Finished")

    @property
    def finished_reason(self) -> str | None:
        """The reason of a Finished Workload (Succeeded, Failed, OutOfSync ...); None if not."""
        found = self.condition("Finished")
        return found.reason if found is not None and found.true else None

    @property
    def admitted_at(self) -> str | None:
        """When it was admitted (its Admitted condition's last change), while it is."""
        found = self.condition("Admitted")
        return (found.since or "") if found is not None and found.true else None

    @property
    def eviction_message(self) -> str:
        evicted = self.condition("Evicted")
        if evicted is not None and evicted.true:
            return f"{evicted.reason or 'Evicted'}: {evicted.message}".strip()
        return "the Workload is no longer admitted"

    def reserved_for(self, now: dt.datetime) -> float | None:
        """Seconds since its QuotaReserved condition last changed (None: it has none)."""
        found = self.condition("QuotaReserved")
        since = found.since if found is not None else None
        return max(0.0, (now - cond.parse_time(since)).total_seconds()) if since else None


# The same questions of a Workload's JSON, for callers that hold no view.


def is_admitted(wl: Dict) -> bool:
    return WorkloadView(wl).admitted


def has_quota(wl: Dict) -> bool:
    return WorkloadView(wl).has_quota


def reserved_for(wl: Dict, now: dt.datetime) -> float | None:
    return WorkloadView(wl).reserved_for(now)


def is_evicted(wl: Dict) -> bool:
    return WorkloadView(wl).evicted


def is_finished(wl: Dict) -> bool:
    return WorkloadView(wl).finished


def finished_reason(wl: Dict) -> str | None:
    return WorkloadView(wl).finished_reason


def eviction_message(wl: Dict) -> str:
    return WorkloadView(wl).eviction_message


def pod_sets_match(wl: Dict, pod_sets: Sequence[PodSetShape]) -> bool:
    """Whether the Workload still describes the TrainJob (names and counts of its PodSets)."""
    have = [(p.get("name"), p.get("count")) for p in WorkloadView(wl).pod_sets]
    return have == [(ps.name, ps.count) for ps in pod_sets]


def owned_by(wl: Dict, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in WorkloadView(wl).owner_references)


def build_admission_patch(wl: Dict, flavors: dict[str, Dict]) -> Dict:
    """The runtimePatch (manager kueue.x-k8s.io/manager) carrying where Kueue admitted each
    PodSet: flavour node labels and tolerations, plus admission checks' podSetUpdates."""
    view = WorkloadView(wl)
    admission = view.admission
    updates: dict[str, Dict] = {}
    for check in view.admission_checks:
        for upd in check.get("podSetUpdates") or []:
            updates[upd["name"]] = upd
    rjs = []
    for psa in admission.get("podSetAssignments") or []:
        node_selector: dict[str, str] = {}
        tolerations: list[Dict] = []
        for flavor_name in sorted(set((psa.get("flavors") or {}).values())):
            flavor = flavors.get(flavor_name, {}).get("spec", {})
            node_selector.update(flavor.get("nodeLabels") or {})
            tolerations += [t for t in flavor.get("tolerations") or [] if t not in tolerations]
        update = updates.get(psa["name"]) or {}
        node_selector.update(update.get("nodeSelector") or {})
        tolerations += [t for t in update.get("tolerations") or [] if t not in tolerations]
        # What Kueue 0.19's job framework puts on the pods of an admitted PodSet besides
        # placement: the PodSet's name, the Workload's (its TopologyAwareScheduling gate is
        # on by default) and, on a MultiKueue worker, its worker-pod label.
        labels = {c.KUEUE_PODSET_LABEL: str(psa["name"])}
        if c.KUEUE_MULTIKUEUE_ORIGIN_LABEL in view.labels:
            labels[c.KUEUE_MULTIKUEUE_WORKER_POD_LABEL] = "true"
        # Kueue's AssignQueueLabelsForPods (on by default): the queues the pods ran through
        labels[c.KUEUE_LOCAL_QUEUE_LABEL] = str(view.spec.get("queueName") or "")
        if _DNS_LABEL.fullmatch(view.cluster_queue or ""):
            labels[c.KUEUE_CLUSTER_QUEUE_LABEL] = str(view.cluster_queue)
        meta: Dict = {
            "labels": {**labels, **(update.get("labels") or {})},
            "annotations": {
                c.KUEUE_WORKLOAD_ANNOTATION: view.name,
                **(update.get("annotations") or {}),
            },
        }
        pod_spec: Dict = {}
        if node_selector:
            pod_spec["nodeSelector"] = node_selector
        if tolerations:
            pod_spec["tolerations"] = tolerations
        template: Dict = {"metadata": meta}
        if pod_spec:
            template["spec"] = pod_spec
        rjs.append({"name": psa["name"], "template": {"spec": {"template": template}}})
    return {
        "manager": c.KUEUE_RUNTIME_PATCH_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": rjs}}},
    }


def with_runtime_patch(patches: list[Dict], patch: Dict | None, manager: str) -> list[Dict]:
    """`patches` with `manager`'s entry replaced by `patch` (or removed when None)."""
    out = [json_copy(p) for p in patches if p.get("manager") != manager]
    if patch is not None:
        out.append(json_copy(patch))
    return out
