"""PodsReady and reclaimablePods of a TrainJob's Workload, derived as Kueue's job framework does.

Kueue's `waitForPodsReady` (on by default since v0.19) evicts an admitted Workload whose
`PodsReady` condition is not True within its timeout, and one that stays False after a pod was
lost for longer than its recovery timeout. Kueue's job reconciler writes that condition for the
integrations it runs; TrainJob is an external framework here, so we write it ourselves, with
Kueue's rules (its `generatePodsReadyCondition` and the TrainJob adapter's `PodsReady` and
`ReclaimablePods`):

- the input is the TrainJob's `status.jobsStatus`: per replicatedJob, how many of its child
  Jobs are ready (all their pods Ready) or succeeded. The worker controller writes it from the
  Jobs; on the manager it is the winner's status, synced back.
- all pods ready: every child Job of every PodSet is ready or succeeded.
- reclaimable pods: the pods of the child Jobs that succeeded (an initializer done while the
  trainer nodes run), so Kueue can release their quota.

Pure: `jobframework.reconcile_queueing` folds the result into its plan.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubebase.objects import Dict
from trainjob.runtime import PodSetShape
from trainjob_api.views import ReplicatedJobStatusView, WorkloadView, whole

PODS_READY = "PodsReady"
# Kueue's reasons (kueue.x-k8s.io/v1beta2 Workload condition PodsReady).
WAIT_FOR_START = "WaitForStart"
WAIT_FOR_RECOVERY = "WaitForRecovery"
STARTED = "Started"
RECOVERED = "Recovered"

NOT_READY_MESSAGE = "Not all pods are ready or succeeded"
RECOVERY_MESSAGE = "At least one pod has failed, waiting for recovery"
READY_MESSAGE = "All pods reached readiness and the workload is running"


JobsStatus = Sequence[ReplicatedJobStatusView]


def _by_name(jobs_status: JobsStatus) -> dict[str, ReplicatedJobStatusView]:
    """Each replicatedJob's entry (the last of a name), read once per pass."""
    return {js.name: js for js in jobs_status}


def _count(statuses: dict[str, ReplicatedJobStatusView], name: str, state: str) -> int:
    """The count of `state` in `name`'s entry (0 without one)."""
    entry = statuses.get(name)
    return 0 if entry is None else entry.count(state)


def all_pods_ready(pod_sets: Sequence[PodSetShape], jobs_status: JobsStatus) -> bool:
    """Every child Job of every PodSet is ready or has succeeded."""
    statuses = _by_name(jobs_status)
    for ps in pod_sets:
        done = _count(statuses, ps.name, "ready") + _count(statuses, ps.name, "succeeded")
        if done < ps.replicas:
            return False
    return True


def compute_pods_ready(wl: WorkloadView, ready: bool) -> tuple[bool, str, str]:
    """(status, reason, message) of the Workload's PodsReady condition, Kueue's state machine:
    not admitted -> WaitForStart; all pods ready -> Started (Recovered after a recovery); a
    pod lost once the Workload was ready -> WaitForRecovery until all are ready again."""
    if not wl.is_true("Admitted"):
        return False, WAIT_FOR_START, NOT_READY_MESSAGE
    current = wl.condition(PODS_READY)
    if ready:
        recovering = current is not None and current.reason in (WAIT_FOR_RECOVERY, RECOVERED)
        return True, RECOVERED if recovering else STARTED, READY_MESSAGE
    if current is not None and (current.true or current.reason == WAIT_FOR_RECOVERY):
        return False, WAIT_FOR_RECOVERY, RECOVERY_MESSAGE
    return False, WAIT_FOR_START, NOT_READY_MESSAGE


def pods_ready_changed(wl: WorkloadView, status: bool, reason: str) -> bool:
    """Kueue rewrites the condition only when its status or reason changes."""
    current = wl.condition(PODS_READY)
    return (
        current is None
        or current.status != ("True" if status else "False")
        or current.reason != reason
    )


def compute_reclaimable_pods(
    pod_sets: Sequence[PodSetShape], jobs_status: JobsStatus, wl: WorkloadView
) -> list[Dict]:
    """Pods whose quota is no longer needed: those of succeeded child Jobs, per PodSet, never
    more than the Workload's PodSet holds (Kueue's webhook refuses more)."""
    statuses = _by_name(jobs_status)
    sizes = {str(ps.get("name")): int(ps.get("count") or 0) for ps in wl.pod_sets}
    out = []
    for ps in pod_sets:
        succeeded = _count(statuses, ps.name, "succeeded")
        if 0 < succeeded <= ps.replicas and ps.name in sizes:
            out.append({"name": ps.name, "count": min(succeeded * ps.parallelism, sizes[ps.name])})
    return out


def reclaimable_changed(wl: WorkloadView, want: list[Dict]) -> bool:
    have = wl.reclaimable_pods
    return _pairs(have) != _pairs(want)


def _pairs(items: list[Dict]) -> set[tuple[str, int]]:
    return {(str(i.get("name")), whole(i.get("count"))) for i in items}
