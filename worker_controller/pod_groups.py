"""Gang scheduling on a worker: the PodGroup a runtime's `podGroupPolicy` asks for, made as
Kubeflow Trainer v2.3 makes it (pure).

- `coscheduling`: the scheduler-plugins' PodGroup (`scheduling.x-k8s.io/v1alpha1`), named
  after the TrainJob, `minMember` every pod of the job, `minResources` what they all request,
  `scheduleTimeoutSeconds` (60 unless set); each pod carries the label
  `scheduling.x-k8s.io/pod-group: <TrainJob>`.
- `volcano`: Volcano's PodGroup (`scheduling.volcano.sh/v1beta1`), with the same counts, the
  queue the runtime's template annotation `scheduling.volcano.sh/queue-name` names (a TrainJob
  overrides it with a runtimePatch), the pods' priorityClassName and `networkTopology`; each
  pod carries the annotation `scheduling.k8s.io/group-name: <TrainJob>`.

The group is owned by the TrainJob (deleted with it by the garbage collector), made once
before its Jobs, and never written over when someone else's holds the name (NameTaken). The
pods' `schedulerName` is the runtime's, as with Trainer: a cluster that runs the
coscheduling plugin or Volcano as a second scheduler names it in the runtime's pod template.

Only where the worker's API serves that PodGroup (`Observed.pod_group_apis`): elsewhere the
pods run ungrouped and the TrainJob says so (PodGroupPolicyIgnored).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from kubebase.kinds import Kind
from kubebase.objects import Dict
from trainjob.models import PodGroupPolicy
from trainjob.queues import Amounts, add, pod_requests
from trainjob.runtime import RuntimeInfo
from trainjob_api import constants as c
from trainjob_api.quantity import format_quantity

COSCHEDULING = "coscheduling"
VOLCANO = "volcano"
DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 60  # Trainer's CRD default


@dataclass(frozen=True)
class GroupApi:
    """One gang scheduler's PodGroup: where its API is, and how a pod names its group."""

    policy: str  # the podGroupPolicy member that asks for it
    kind: Kind
    pod_key: str  # the label (coscheduling) or annotation (Volcano) naming the group
    on_labels: bool
    serves: str  # who serves this API, for messages


APIS: dict[str, GroupApi] = {
    COSCHEDULING: GroupApi(
        COSCHEDULING,
        c.COSCHEDULING_POD_GROUP,
        c.COSCHEDULING_POD_GROUP_LABEL,
        True,
        "the scheduler-plugins' coscheduling",
    ),
    VOLCANO: GroupApi(
        VOLCANO, c.VOLCANO_POD_GROUP, c.VOLCANO_GROUP_NAME_ANNOTATION, False, "Volcano"
    ),
}


def wanted(policy: PodGroupPolicy | None) -> GroupApi | None:
    """The PodGroup API the runtime's podGroupPolicy asks for (None: no gang scheduling)."""
    if policy is None:
        return None
    if policy.coscheduling is not None:
        return APIS[COSCHEDULING]
    if policy.volcano is not None:
        return APIS[VOLCANO]
    return None  # `podGroupPolicy: {}`: nothing asked


def ignored_message(api: GroupApi) -> str:
    return (
        f"podGroupPolicy.{api.policy} asks for a PodGroup ({api.kind.group}/{api.kind.version}), "
        f"which this worker's API does not serve ({api.serves} is not installed): the pods "
        "are scheduled one by one, without a pod group (Kueue still admits the TrainJob whole)"
    )


def mark_pods(info: RuntimeInfo, api: GroupApi) -> None:
    """Every pod of the TrainJob names its group (a label or an annotation, as Trainer sets)."""
    for ps in info.pod_sets:
        meta = ps.pod_template.setdefault("metadata", {})
        field = "labels" if api.on_labels else "annotations"
        meta[field] = {**(meta.get(field) or {}), api.pod_key: info.trainjob}


def _totals(info: RuntimeInfo) -> tuple[int, Amounts]:
    """Every pod of the TrainJob, and what they request together."""
    members: int = 0
    total: Amounts = {}
    for ps in info.pod_sets:
        members += ps.count
        add(total, pod_requests(ps.pod_template.get("spec") or {}), ps.count)
    return members, total


def _resources(total: Amounts) -> Dict:
    return {name: format_quantity(qty) for name, qty in sorted(total.items()) if qty > Decimal(0)}


def build_pod_group(info: RuntimeInfo) -> Dict:
    """The PodGroup the runtime's policy asks for, named after the TrainJob (its owner and
    labels are added as to every object it needs: builders.build_extra_object)."""
    policy = info.policy.pod_group
    api = wanted(policy)
    assert policy is not None and api is not None
    members, total = _totals(info)
    spec: Dict = {"minMember": members}
    if total:
        spec["minResources"] = _resources(total)
    if api.policy == COSCHEDULING:
        assert policy.coscheduling is not None
        timeout = policy.coscheduling.schedule_timeout_seconds
        spec["scheduleTimeoutSeconds"] = (
            DEFAULT_SCHEDULE_TIMEOUT_SECONDS if timeout is None else timeout
        )
    else:
        assert policy.volcano is not None
        queue = info.annotations.get(c.VOLCANO_QUEUE_ANNOTATION)
        if queue is not None:
            spec["queue"] = queue
        # The pods' class (the last role that names one, as Trainer reads it).
        for ps in info.pod_sets:
            name = (ps.pod_template.get("spec") or {}).get("priorityClassName")
            if name:
                spec["priorityClassName"] = name
        topology = policy.volcano.network_topology
        if topology is not None:
            spec["networkTopology"] = {
                "mode": topology.mode or "hard",
                "highestTierAllowed": (
                    1 if topology.highest_tier_allowed is None else topology.highest_tier_allowed
                ),
            }
    return {
        "apiVersion": api.kind.api_version,
        "kind": api.kind.kind,
        "metadata": {"name": info.trainjob, "namespace": info.namespace},
        "spec": spec,
    }


def names_group(job_spec: Dict, api: GroupApi, trainjob: str) -> bool:
    """Whether a Job's pod template puts its pods in the TrainJob's group."""
    meta = (job_spec.get("template") or {}).get("metadata") or {}
    found = meta.get("labels" if api.on_labels else "annotations") or {}
    return bool(found.get(api.pod_key) == trainjob)
