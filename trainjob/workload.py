"""Pure builders and readers of Kueue Workloads (kueue.x-k8s.io/v1beta2) for TrainJobs."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Required, TypedDict

from kubebase.kinds import DNS_LABEL
from kubebase.objects import Dict
from trainjob.jsondoc import json_copy
from trainjob.models import TrainJob
from trainjob.naming import owner_reference
from trainjob.queues import ResourceFlavorView, resources_key
from trainjob.runtime import PodSetShape, RuntimeInfo
from trainjob.runtime.topology import topology_request
from trainjob_api import constants as c
from trainjob_api.pods import PodSpecView
from trainjob_api.views import WorkloadView

MAX_NAME = 253
HASH_LENGTH = 5


def workload_name(trainjob: str, uid: str) -> str:
    """Kueue's naming for a job's Workload: `trainjob-<name>-<hash of kind, group, name, uid>`."""
    digest = hashlib.sha1(f"TrainJob\n{c.TRAINER_GROUP}\n{trainjob}\n{uid}".encode()).hexdigest()
    prefix = f"trainjob-{trainjob}"[: MAX_NAME - 1 - HASH_LENGTH]
    return f"{prefix}-{digest[:HASH_LENGTH]}"


def build_pod_sets(info: RuntimeInfo) -> list[Dict]:
    """A Workload's PodSets, with the pod templates Kueue's own TrainJob integration gives
    (PodSet.kueue_template): quota, placement and a prebuilt Workload's match with Kueue on a
    worker that runs Kubeflow Trainer all read these."""
    return [
        {
            "name": ps.name,
            "count": ps.count,
            "template": ps.workload_template(),
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


@dataclass(frozen=True)
class ClassMissing:
    """A priority class the job names that does not exist: Kueue makes no Workload until it
    does. `kind` and `name` say which, `field` where the job names it."""

    kind: str
    name: str
    field: str

    def message(self, then: str) -> str:
        return f"{self.kind} {self.name[:253]!r} ({self.field}) not found: {then}"


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
            "labels": {c.KUEUE_JOB_UID_LABEL: uid},
            "ownerReferences": [owner_reference(tj.name, uid)],
        },
        "spec": spec,
    }


def pod_sets_match(wl: WorkloadView, pod_sets: Sequence[PodSetShape]) -> bool:
    """Whether the Workload still describes the TrainJob: its PodSets' names and counts, and
    what their pods ask for (requests, limits, claims of every container): a TrainJob or
    runtime changed since would otherwise run pods bigger than the quota Kueue gave."""
    have = [
        (p.get("name"), p.get("count"), resources_key(PodSpecView.of_template(p.get("template"))))
        for p in wl.pod_sets
    ]
    return have == [(ps.name, ps.count, ps.resources) for ps in pod_sets]


@dataclass
class _Update:
    """What the admission checks add to one PodSet's pods, merged."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[Dict] = field(default_factory=list)


def _check_updates(view: WorkloadView) -> dict[str, _Update]:
    """Every admission check's podSetUpdates, merged per PodSet as Kueue merges them: each
    check's first update of that PodSet, in the order of the checks, a key's first value kept
    (Kueue refuses to start a Workload whose checks give one key two values), each toleration
    once."""
    merged: dict[str, _Update] = {}
    for check in view.checks:
        seen: set[str] = set()
        for upd in check.pod_set_updates:
            if upd.name in seen:
                continue
            seen.add(upd.name)
            into = merged.setdefault(upd.name, _Update())
            into.labels = {**upd.labels, **into.labels}
            into.annotations = {**upd.annotations, **into.annotations}
            into.node_selector = {**upd.node_selector, **into.node_selector}
            into.tolerations += [t for t in upd.tolerations if t not in into.tolerations]
    return merged


def build_admission_patch(
    view: WorkloadView, flavors: Mapping[str, ResourceFlavorView]
) -> RuntimePatchEntry:
    """The runtimePatch (manager kueue.x-k8s.io/manager) carrying where Kueue admitted each
    PodSet: flavour node labels and tolerations, plus admission checks' podSetUpdates."""
    updates = _check_updates(view)
    rjs = []
    for psa in view.pod_set_assignments:
        node_selector: dict[str, str] = {}
        tolerations: list[Dict] = []
        for flavor_name in sorted(set(psa.flavors.values())):
            flavor = flavors.get(flavor_name)
            if flavor is not None:
                node_selector.update(flavor.node_labels)
                tolerations += [t for t in flavor.tolerations if t not in tolerations]
        update = updates.get(psa.name) or _Update()
        node_selector.update(update.node_selector)
        tolerations += [t for t in update.tolerations if t not in tolerations]
        # What Kueue 0.19's job framework puts on the pods of an admitted PodSet besides
        # placement: the PodSet's name, the Workload's (its TopologyAwareScheduling gate is
        # on by default) and, on a MultiKueue worker, its worker-pod label.
        labels = {c.KUEUE_PODSET_LABEL: psa.name}
        if c.KUEUE_MULTIKUEUE_ORIGIN_LABEL in view.labels:
            labels[c.KUEUE_MULTIKUEUE_WORKER_POD_LABEL] = "true"
        # Kueue's AssignQueueLabelsForPods (on by default): the queues the pods ran through
        labels[c.KUEUE_LOCAL_QUEUE_LABEL] = str(view.queue_name or "")
        if DNS_LABEL.fullmatch(view.cluster_queue or ""):
            labels[c.KUEUE_CLUSTER_QUEUE_LABEL] = str(view.cluster_queue)
        meta: Dict = {
            "labels": {**labels, **update.labels},
            "annotations": {c.KUEUE_WORKLOAD_ANNOTATION: view.name, **update.annotations},
        }
        pod_spec: Dict = {}
        if node_selector:
            pod_spec["nodeSelector"] = node_selector
        if tolerations:
            pod_spec["tolerations"] = tolerations
        template: Dict = {"metadata": meta}
        if pod_spec:
            template["spec"] = pod_spec
        rjs.append({"name": psa.name, "template": {"spec": {"template": template}}})
    return RuntimePatchEntry(
        manager=c.KUEUE_RUNTIME_PATCH_MANAGER,
        trainingRuntimeSpec={"template": {"spec": {"replicatedJobs": rjs}}},
    )


class RuntimePatchEntry(TypedDict, total=False):
    """One entry of a TrainJob's `spec.runtimePatches` as a manager writes it: who wrote it,
    when, and what it patches of the runtime's spec."""

    manager: Required[str]
    time: str
    trainingRuntimeSpec: Dict


def with_runtime_patch(
    patches: list[Dict], patch: RuntimePatchEntry | None, manager: str
) -> list[Dict]:
    """`patches` with `manager`'s entry replaced by `patch` (or removed when None)."""
    out = [json_copy(p) for p in patches if p.get("manager") != manager]
    if patch is not None:
        out.append(json_copy(dict(patch)))
    return out
