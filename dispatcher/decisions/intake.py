"""Why a manager TrainJob cannot be queued yet, said on the TrainJob itself (pure).

Before a MultiKueue TrainJob reaches a worker, its status on the manager is ours to write: a
missing or invalid runtime (so no Workload can be built) becomes a `Failed` condition with a
recoverable reason (RuntimeNotFound / RuntimeInvalid, as the worker controller reports them)
and a Warning Event; the condition goes again once the runtime is fixed. Once a worker runs
the TrainJob, its status (synced back) is the word.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from kubebase.events import Event
from kubebase.objects import Dict
from trainjob.runtime import RuntimeProblem
from trainjob_api import conditions as cond
from trainjob_api import constants as c
from trainjob_api.views import TrainJobView, WorkloadView


@dataclass
class IntakePlan:
    status: Dict | None = None  # merge patch of the manager TrainJob's status, when it changes
    events: list[Event] = field(default_factory=list)


def reconcile_intake(
    trainjob: TrainJobView,
    problem: RuntimeProblem | None,
    now: dt.datetime,
    workload: WorkloadView | None = None,
) -> IntakePlan:
    """`workload`: the TrainJob's Workload on the manager, when there is one."""
    plan = IntakePlan()
    # 1. A worker runs it: its status is synced back and says what happens. The Workload's
    #    clusterName says so first (the TrainJob's may wait a moment with other minor fields).
    if trainjob.cluster_name or (workload is not None and workload.cluster_name):
        return plan
    conditions = cond.Conditions(trainjob.conditions, now, trainjob.generation, events=plan.events)
    failed = conditions.find(c.COND_FAILED)
    # 2. A problem: say it once (again only when it changes).
    if problem is not None:
        conditions.set(c.COND_FAILED, True, problem.reason, problem.message, event="Warning")
    # 3. Fixed: drop our condition (a final Failed is not ours to touch).
    elif failed is not None and failed.get("reason") in c.RECOVERABLE_FAILURE_REASONS:
        conditions.remove(c.COND_FAILED)
        plan.events.append(Event("Normal", "RuntimeResolved", "the runtime is usable; queueing"))
    if conditions.changed:
        plan.status = {"conditions": conditions.list}
    return plan


def undispatched_message(trainjob: TrainJobView, controller_name: str) -> str:
    """Why a TrainJob on the manager that MultiKueue does not dispatch will never run: no
    controller on a manager runs TrainJobs itself, and spec.managedBy cannot change.
    `controller_name` is the AdmissionCheck controllerName we serve."""
    managed = trainjob.managed_by
    what = f"spec.managedBy is {managed!r}" if managed else "spec.managedBy is unset"
    queue = trainjob.queue_name
    why = (
        f"its queue {queue!r} (label {c.KUEUE_QUEUE_NAME_LABEL}) has no admission check with "
        f"controllerName {controller_name}"
        if queue
        else f"it names no queue (label {c.KUEUE_QUEUE_NAME_LABEL})"
    )
    return (
        f"not dispatched to a worker: {what} and {why}, and no controller on this manager runs "
        f"TrainJobs itself; create it again with a queue whose ClusterQueue has an admission "
        f"check with controllerName {controller_name}"
    )


# Right after our Retry, a cached Workload was seen admitted, not evicted, without clusterName
# and with our check Pending since a moment (a passing state on the way to the eviction). A
# Pending state this young is no verdict yet.
PENDING_RESET_GRACE = dt.timedelta(seconds=10)


def _sent_nowhere(wl: WorkloadView | None, our_checks: set[str]) -> list[Dict] | None:
    """Our check states on a Workload the manager's Kueue admitted (not evicted, not finished)
    that went to no worker, when none of them is past Pending; None in any other case."""
    if wl is None or not wl.admitted or wl.finished:
        return None
    if wl.evicted:
        return None  # on its way back to the queue: Kueue reset our check to Pending for that
    if wl.cluster_name:
        return None  # it was dispatched before Kueue dropped the check: a worker runs it
    # Kueue admits only once every check it counts is Ready, so admitted with ours absent, or
    # still Pending (listed for a moment before Kueue drops it), means it does not count ours.
    # Ready, or Retry (we just asked for a new dispatch; Kueue evicts next), are normal.
    states = [s for s in wl.admission_checks if s.get("name") in our_checks]
    if any(s.get("state") != "Pending" for s in states):
        return None
    return states


def undecided_for(wl: WorkloadView | None, our_checks: set[str], now: dt.datetime) -> float | None:
    """Seconds before an admitted Workload sent nowhere, with our check Pending since a moment,
    may be judged (`PENDING_RESET_GRACE`); nothing is dispatched for it meanwhile. None when
    the Workload is not in that state."""
    states = _sent_nowhere(wl, our_checks) or []
    since = [
        cond.parse_time(s["lastTransitionTime"]) for s in states if s.get("lastTransitionTime")
    ]
    if not since:
        return None
    left = (PENDING_RESET_GRACE - (now - max(since))).total_seconds()
    return left if left > 0 else None


def not_dispatchable(
    wl: WorkloadView | None,
    our_checks: set[str],
    queue_has_ours: Callable[[str], bool],
    controller_name: str,
    now: dt.datetime | None = None,
) -> str | None:
    """Why a MultiKueue TrainJob's Workload, admitted by the manager's Kueue without our check,
    can never reach a worker; None otherwise. Kueue adds a ClusterQueue's checks for the
    flavours a Workload is assigned, and a Workload whose pods request nothing the ClusterQueue
    covers gets none: admitted at once, it would sit on the manager with nobody to run it."""
    if _sent_nowhere(wl, our_checks) is None:
        return None
    if undecided_for(wl, our_checks, now or dt.datetime.now(dt.UTC)) is not None:
        return None  # the resync looks again once our Pending state is older
    assert wl is not None
    cq = wl.cluster_queue or "?"
    if not queue_has_ours(cq):
        return (
            f"ClusterQueue {cq} has no admission check with controllerName {controller_name}: "
            f"a TrainJob with spec.managedBy {c.MANAGED_BY_MULTIKUEUE} must be queued where "
            "MultiKueue dispatches it"
        )
    return (
        f"Workload {wl.name} was admitted by ClusterQueue {cq} without the "
        "MultiKueue admission check, so it cannot be sent to a worker: Kueue adds the check "
        "only for the flavours a Workload is assigned, and its pods request no resource the "
        "ClusterQueue covers; resubmit with resource requests (e.g. "
        "spec.trainer.resourcesPerNode)"
    )
