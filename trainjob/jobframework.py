"""The Kueue job integration for TrainJob (what Kueue's own `jobframework` package does for
the kinds it integrates): decisions from TrainJob + Workload to a QueuePlan.

Kueue runs with TrainJob as an external framework, so this is the code that plays Kueue's
job reconciler for TrainJobs: one Workload per queued TrainJob, start on admission (the
placement travels as a runtimePatch of manager kueue.x-k8s.io/manager, applied together with
`suspend: false` in one write), stop on eviction and hand the quota back once nothing runs,
and mark the Workload Finished when the TrainJob ends. Pure: `worker_controller` executes it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from kubebase.events import Event
from kubebase.objects import Dict
from trainjob import readiness
from trainjob import workload as wlmod
from trainjob.models import TrainJob
from trainjob.naming import owner_reference
from trainjob.ownership import has_owner
from trainjob.queues import ResourceFlavorView
from trainjob.runtime import PodSetShape, RuntimeInfo, RuntimeProblem, resolve_runtime_info
from trainjob_api import conditions as cond
from trainjob_api import constants as c
from trainjob_api.views import (
    ReplicatedJobStatusView,
    RuntimeView,
    TrainJobView,
    WorkloadView,
    replicated_job_statuses,
)

# How long a priority class's read stands (jobframework_io keeps it so long), and so when a
# TrainJob waiting for a missing class is looked at again.
CLASS_TTL = 30.0

# What a TrainJob makes of its runtime as Kueue counts it, or why it cannot run on it.
Shape = tuple[tuple[PodSetShape, ...] | None, RuntimeProblem | None]


@dataclass
class QueueObserved:
    trainjob: TrainJob
    pod_sets: tuple[PodSetShape, ...] | None  # None while the runtime is missing or invalid
    problem: RuntimeProblem | None  # why `pod_sets` is None
    workload: WorkloadView | None  # the TrainJob's Workload (deterministic or prebuilt name)
    flavors: Mapping[str, ResourceFlavorView]  # by name
    # The priority Kueue would give the Workload now (jobframework_io.extract_priority), when
    # there is none yet or the TrainJob's priority-class label names another class; or the
    # class it names that does not exist; None when not asked or not answered.
    priority: wlmod.Priority | wlmod.ClassMissing | None
    jobs_active: bool  # any child Job still has pods
    finished: tuple[bool, str, str] | None  # (succeeded, reason, message) once final
    now: dt.datetime
    # Set by a controller that must not start the TrainJob although Kueue admitted it (why).
    start_blocked: str | None = None
    # The whole runtime info (templates included), resolved when there is a Workload to build.
    info: RuntimeInfo | None = None


@dataclass
class QueuePlan:
    create_workload: Dict | None = None
    delete_workload: str | None = None
    # The UID of the Workload to delete: one made again since under its name is left alone.
    delete_workload_uid: str | None = None
    # Merge patch of the Workload (ownerReferences on adoption, queueName while pending: fields
    # only we write, so unguarded: a guard would lose to Kueue's constant status writes and
    # hold up the start that follows in the same pass).
    workload_patch: Dict | None = None
    # Merge patch of its status: it replaces the whole conditions list, which Kueue writes
    # too, so it is guarded by the resourceVersion it was planned from (a conflict waits for
    # the next watch event).
    workload_status: Dict | None = None
    workload_version: str | None = None
    # PodsReady + reclaimablePods, server-side applied to the Workload's status (the fields we
    # own there; Kueue writes the other conditions at the same time)
    workload_readiness: Dict | None = None
    trainjob_patch: Dict | None = None  # merge patch of the TrainJob spec (one write)
    events: list[Event] = field(default_factory=list)
    # When the pass wants another though nothing it watches changes (a class still missing).
    requeue_after: float | None = None

    @property
    def changes_trainjob(self) -> bool:
        return self.trainjob_patch is not None


def expected_workload_name(tj: TrainJobView) -> str:
    """The name of a TrainJob's Workload: the prebuilt one it names (a MultiKueue copy), else
    Kueue's deterministic one."""
    return tj.prebuilt_workload or wlmod.workload_name(tj.name, tj.uid or "")


def _kueue_patch(tj: TrainJob) -> Dict | None:
    return next(
        (
            p.model_dump(by_alias=True, exclude_none=True)
            for p in tj.spec.runtime_patches
            if p.manager == c.KUEUE_RUNTIME_PATCH_MANAGER
        ),
        None,
    )


def _patches(tj: TrainJob) -> list[Dict]:
    return [p.model_dump(by_alias=True, exclude_none=True) for p in tj.spec.runtime_patches]


def observe(
    tj: TrainJob,
    runtime: RuntimeView | None,
    workload: WorkloadView | None,
    flavors: Mapping[str, ResourceFlavorView],
    priority: wlmod.Priority | None,
    jobs_active: bool,
    now: dt.datetime,
    shape: Shape | None = None,
) -> QueueObserved:
    """`workload`: its Workload, if there is one. `shape`:
    `shape_of(tj, runtime)`, when the caller has it already. The whole runtime info is
    resolved only when it is needed: while there is no Workload yet."""
    info = None
    if workload is None or shape is None:
        info, problem = resolve_runtime_info(tj, runtime)
        pod_sets = info.shape if info is not None else None
    else:
        pod_sets, problem = shape
    return QueueObserved(
        trainjob=tj,
        info=info,
        pod_sets=pod_sets,
        problem=problem,
        workload=workload,
        flavors=flavors,
        priority=priority,
        jobs_active=jobs_active,
        finished=cond.final_outcome(tj.conditions()),
        now=now,
    )


def shape_of(tj: TrainJob, runtime: RuntimeView | None) -> Shape:
    info, problem = resolve_runtime_info(tj, runtime)
    return (info.shape if info is not None else None), problem


def reconcile_queueing(obs: QueueObserved) -> QueuePlan:
    """Kueue's job integration for one TrainJob: one function per step, in order; the first
    that settles the pass ends it."""
    plan = QueuePlan()
    tj, wl = obs.trainjob, obs.workload
    # 1. Only queued TrainJobs (queue-name label, or a prebuilt Workload) are Kueue's.
    if not tj.queued or tj.metadata.deletion_timestamp:
        return plan
    if obs.finished is not None:
        _step2_finished(obs, plan)
        return plan
    if wl is None:
        _step3_no_workload(obs, plan)
        return plan
    plan.workload_version = _version(wl)
    # 4. PodsReady and reclaimable pods, which Kueue's waitForPodsReady and quota rely on.
    plan.workload_readiness = desired_readiness(obs, wl)
    _step5_adopt(obs, wl, plan)
    _step5a_priority(obs, wl, plan)
    if _step5b_out_of_sync(obs, wl, plan):
        return plan
    # A finished Workload admits nothing any more (only an out-of-sync one gets here).
    admitted = wl.admitted and not wl.finished
    if (
        _step6_in_step_while_suspended(obs, wl, plan)
        or _step6b_no_matching_workload(obs, wl, plan)
        or _step7_start(obs, wl, admitted, plan)
        or _step8_stop(obs, wl, admitted, plan)
    ):
        return plan
    _step9_release(obs, wl, admitted, plan)
    return plan


def _step2_finished(obs: QueueObserved, plan: QueuePlan) -> None:
    """Finished: report it on the Workload so Kueue releases the quota; nothing else."""
    wl = obs.workload
    if wl is None or wl.finished or obs.finished is None:
        return
    ok, reason, message = obs.finished
    conds = cond.set_condition(
        wl.conditions,
        "Finished",
        True,
        "Succeeded" if ok else "Failed",
        message or reason,
        obs.now,
    )
    plan.workload_status = {"conditions": conds}
    plan.workload_version = _version(wl)
    plan.events.append(
        Event("Normal", "FinishedWorkload", f"Workload {wl.name} finished: {reason}")
    )


def _step3_no_workload(obs: QueueObserved, plan: QueuePlan) -> None:
    """No Workload yet: build one (prebuilt ones are made by someone else: wait), and never
    run before admission. None while a priority class it names does not exist (Kueue's
    reconcile fails and tries again): a Workload keeps the priority it is made with, and
    one made without would queue the job at 0, above a negative default's."""
    tj = obs.trainjob
    if isinstance(obs.priority, wlmod.ClassMissing):
        told = obs.priority.message("no Workload is made until it exists")
        once = _once(tj, "ErrWorkloadCompose", obs.priority)
        plan.events.append(Event("Warning", "ErrWorkloadCompose", told, once))
        plan.requeue_after = CLASS_TTL
    elif tj.prebuilt_workload is None and obs.info is not None:
        queue = tj.queue_name or ""
        # Its CreatedWorkload Event is recorded once the API has taken it (jobframework_io).
        plan.create_workload = wlmod.build_workload(tj, obs.info, queue, obs.priority)
    if not tj.spec.suspend:
        plan.trainjob_patch = {"spec": {"suspend": True}}


def _once(tj: TrainJob, reason: str, missing: wlmod.ClassMissing) -> str:
    """The name of an Event said once on this TrainJob (its UID) for this missing class: each
    pass while it waits would otherwise record it again."""
    said = f"{tj.metadata.uid}/{reason}/{missing.kind}/{missing.name}"
    return f"{tj.name[:200]}.{hashlib.sha256(said.encode()).hexdigest()[:16]}"


def _step5_adopt(obs: QueueObserved, wl: WorkloadView, plan: QueuePlan) -> None:
    """A prebuilt Workload is adopted: the TrainJob becomes its owner."""
    tj = obs.trainjob
    uid = tj.metadata.uid or ""
    if not has_owner(wl.raw, uid):
        ours = owner_reference(tj.name, uid, controller=tj.prebuilt_workload is None)
        plan.workload_patch = {"metadata": {"ownerReferences": [*wl.owner_references, ours]}}


def _step5b_out_of_sync(obs: QueueObserved, wl: WorkloadView, plan: QueuePlan) -> bool:
    """A prebuilt Workload (made by someone else: a MultiKueue copy) that no longer describes
    its TrainJob (changed since) is finished as out of sync, as Kueue does; its sender decides
    what comes next. The TrainJob does not run on it."""
    if not (
        obs.trainjob.prebuilt_workload
        and obs.pod_sets is not None
        and not wl.finished
        and not wlmod.pod_sets_match(wl, obs.pod_sets)
    ):
        return False
    conds = cond.set_condition(
        wl.conditions,
        "Finished",
        True,
        c.KUEUE_FINISHED_OUT_OF_SYNC,
        OUT_OF_SYNC_MESSAGE,
        obs.now,
    )
    plan.workload_status = {"conditions": conds}
    plan.workload_readiness = None
    plan.events.append(Event("Warning", "WorkloadOutOfSync", OUT_OF_SYNC_MESSAGE))
    if not obs.trainjob.spec.suspend:  # stopped in the same pass: nothing more is made for it
        plan.trainjob_patch = {"spec": {"suspend": True}}
    return True


def _step6_in_step_while_suspended(obs: QueueObserved, wl: WorkloadView, plan: QueuePlan) -> bool:
    """While suspended and not admitted, keep the Workload in step with the TrainJob: rebuilt
    when its PodSets changed (that settles the pass), moved when its queue did."""
    tj = obs.trainjob
    if not (tj.spec.suspend and not wl.has_quota and tj.prebuilt_workload is None):
        return False
    if obs.pod_sets is not None and not wlmod.pod_sets_match(wl, obs.pod_sets):
        plan.delete_workload, plan.delete_workload_uid = wl.name, wl.uid
        plan.workload_readiness = None
        plan.events.append(
            Event(
                "Normal",
                "DeletedWorkload",
                "Workload is out of date with the TrainJob; rebuilding it",
            )
        )
        return True
    if tj.queue_name and wl.queue_name != tj.queue_name:
        patch = plan.workload_patch or {}
        patch["spec"] = {"queueName": tj.queue_name}
        plan.workload_patch = patch
        plan.events.append(
            Event("Normal", "UpdatedWorkload", f"Moved Workload to queue {tj.queue_name}")
        )
    return False


def _step6b_no_matching_workload(obs: QueueObserved, wl: WorkloadView, plan: QueuePlan) -> bool:
    """Quota reserved for PodSets the TrainJob no longer has (it, or its runtime, changed
    since its Workload was made: more pods, bigger pods): never start on it. As Kueue's job
    framework does, a running TrainJob is stopped and the Workload deleted, so that one made
    again from the TrainJob as it is now queues for the quota it needs. A TrainJob MultiKueue
    dispatches runs nowhere here: its copy on the worker is held to the Workload it was sent
    with, and ends out of sync there (step 5b, or Kueue's own on a Trainer worker)."""
    tj = obs.trainjob
    if not (
        wl.has_quota
        and not wl.finished
        and tj.prebuilt_workload is None
        and tj.spec.managed_by != c.MANAGED_BY_MULTIKUEUE
        and obs.pod_sets is not None
        and not wlmod.pod_sets_match(wl, obs.pod_sets)
    ):
        return False
    plan.delete_workload, plan.delete_workload_uid = wl.name, wl.uid
    plan.workload_readiness = None
    plan.workload_patch = None
    if not tj.spec.suspend:
        plan.trainjob_patch = {"spec": {"suspend": True}}
        plan.events.append(Event("Normal", "Stopped", NO_MATCHING_WORKLOAD_MESSAGE))
    plan.events.append(
        Event("Normal", "DeletedWorkload", f"{NO_MATCHING_WORKLOAD_MESSAGE}; rebuilding it")
    )
    return True


def _step7_start(obs: QueueObserved, wl: WorkloadView, admitted: bool, plan: QueuePlan) -> bool:
    """Admitted and suspended: start, with Kueue's placement, in one write."""
    tj = obs.trainjob
    if not (admitted and tj.spec.suspend and obs.start_blocked is None):
        return False
    # Stamped by its writer (Trainer's webhook stamps the patches written by others).
    kueue_patch = wlmod.build_admission_patch(wl, obs.flavors)
    kueue_patch["time"] = cond.now_rfc3339(obs.now)
    plan.trainjob_patch = {
        "spec": {
            "suspend": False,
            "runtimePatches": wlmod.with_runtime_patch(
                _patches(tj), kueue_patch, c.KUEUE_RUNTIME_PATCH_MANAGER
            ),
        }
    }
    plan.events.append(Event("Normal", "Started", started_message(wl)))
    return True


def _step8_stop(obs: QueueObserved, wl: WorkloadView, admitted: bool, plan: QueuePlan) -> bool:
    """Running without admission (evicted, preempted, or never admitted): stop."""
    if admitted or obs.trainjob.spec.suspend:
        return False
    plan.trainjob_patch = {"spec": {"suspend": True}}
    plan.events.append(Event("Normal", "Stopped", wl.eviction_message))
    return True


def _step9_release(obs: QueueObserved, wl: WorkloadView, admitted: bool, plan: QueuePlan) -> None:
    """Stopped and quiet: drop Kueue's placement and hand the quota back."""
    tj = obs.trainjob
    if not tj.spec.suspend or obs.jobs_active:
        return
    if _kueue_patch(tj) is not None and not admitted:
        plan.trainjob_patch = {
            "spec": {
                "runtimePatches": wlmod.with_runtime_patch(
                    _patches(tj), None, c.KUEUE_RUNTIME_PATCH_MANAGER
                )
            }
        }
    if wl.evicted and wl.has_quota:
        evicted = cond.find(wl.conditions, "Evicted") or {}
        conds = wl.conditions
        conds = cond.set_condition(
            conds, "QuotaReserved", False, "Pending", str(evicted.get("message", "")), obs.now
        )
        conds = cond.set_condition(
            conds,
            "Admitted",
            False,
            "NoReservation",
            "The workload has no reservation",
            obs.now,
        )
        conds = cond.set_condition(
            conds,
            "Requeued",
            evicted.get("reason") in REQUEUED_AT_ONCE,
            str(evicted.get("reason", "Evicted")),
            str(evicted.get("message", "")),
            obs.now,
        )
        # No longer admitted: PodsReady goes back to WaitForStart in this same write.
        conds = cond.set_condition(
            conds,
            readiness.PODS_READY,
            False,
            readiness.WAIT_FOR_START,
            readiness.NOT_READY_MESSAGE,
            obs.now,
            wl.generation,
        )
        plan.workload_status = {"admission": None, "conditions": conds}
        plan.workload_readiness = None


def follows_label(wl: WorkloadView, label: str) -> bool:
    """Kueue 0.19: a Workload whose priority comes from a WorkloadPriorityClass (or that has
    none and has reserved no quota, after which none can be added) follows its job's
    priority-class label. True when the label now names another class than it has."""
    ref = wl.spec.get("priorityClassRef")
    if ref is None and wl.has_quota:
        return False
    if ref is not None and ref.get("kind") != "WorkloadPriorityClass":
        return False
    return str((ref or {}).get("name") or "") != label


def _step5a_priority(obs: QueueObserved, wl: WorkloadView, plan: QueuePlan) -> None:
    """The TrainJob's priority-class label changed: its Workload's priority follows (kept
    while the class it names now does not exist; the controllers' resync looks again)."""
    new = obs.priority
    spec = wl.spec
    if isinstance(new, wlmod.ClassMissing):
        told = new.message("the Workload keeps its priority")
        once = _once(obs.trainjob, "UpdatedWorkload", new)
        plan.events.append(Event("Warning", "UpdatedWorkload", told, once))
        return
    if new is None or (spec.get("priorityClassRef"), spec.get("priority")) == (new.ref, new.value):
        return
    patch = plan.workload_patch or {}
    patch.setdefault("spec", {}).update({"priorityClassRef": new.ref, "priority": new.value})
    plan.workload_patch = patch
    name = f"{obs.trainjob.namespace}/{wl.name}"
    plan.events.append(
        Event("Normal", "UpdatedWorkload", f"Updated workload priority class: {name}")
    )


def started_message(wl: WorkloadView) -> str:
    """Kueue's words for a start, and on a MultiKueue manager where the job went: the
    Workload's clusterName, set in the write that turned the check Ready, before admission."""
    cq = wl.cluster_queue or "?"
    cluster = wl.cluster_name
    where = f"; dispatched to cluster {cluster}" if cluster else ""
    return f"Admitted by clusterQueue {cq}{where}"


OUT_OF_SYNC_MESSAGE = "The prebuilt workload is out of sync with its user job"
NO_MATCHING_WORKLOAD_MESSAGE = (
    "No matching Workload: the TrainJob's PodSets (their pods, or what each asks for) changed "
    "after its Workload took quota"
)

# Eviction reasons after which Kueue requeues at once (Requeued=True); after the others (e.g.
# PodsReadyTimeout) its workload controller sets Requeued=True once the backoff is over.
REQUEUED_AT_ONCE = frozenset({"Preempted", "NodeFailures"})


def _jobs_status(tj: TrainJob, wl: WorkloadView) -> list[ReplicatedJobStatusView] | None:
    """The TrainJob's jobsStatus, if it describes the run of this Workload's admission. On the
    manager it is the status synced back from a worker: it counts only when it comes from the
    cluster the Workload now runs on (`status.clusterName` of both), never from an earlier one."""
    if tj.status.get("clusterName") != wl.cluster_name:
        return None
    found = tj.status.get("jobsStatus")
    return replicated_job_statuses(found) if isinstance(found, list) else None


def _of_no_cluster(tj: TrainJob) -> bool:
    """A status with jobs in it that names no cluster: brought back by another controller (Kueue's
    own MultiKueue, before the manager switched to the dispatcher), which names none. It is not
    read as the run of the Workload's cluster, and neither is it read as no pods ready: the
    dispatcher names the cluster with its first status write (status_writes.can_wait)."""
    return not tj.status.get("clusterName") and bool(tj.status.get("jobsStatus"))


def _version(wl: WorkloadView) -> str | None:
    found = wl.resource_version
    return str(found) if found else None


def desired_readiness(obs: QueueObserved, wl: WorkloadView) -> Dict | None:
    """The PodsReady condition and reclaimablePods the Workload should carry, when either
    differs from what it has (None: no write). Both travel together: they are the fields of
    the Workload's status our server-side apply owns."""
    if obs.pod_sets is None:  # runtime gone or invalid: keep what the Workload says
        return None
    if wl.evicted and wl.has_quota:  # step 9 resets it with the quota
        return None
    jobs_status = _jobs_status(obs.trainjob, wl)
    if jobs_status is None and _of_no_cluster(obs.trainjob):
        return None  # whose run it counts is unknown: what the Workload says stands meanwhile
    ready = jobs_status is not None and readiness.all_pods_ready(obs.pod_sets, jobs_status)
    status, reason, message = readiness.compute_pods_ready(wl, ready)
    reclaimable = readiness.compute_reclaimable_pods(obs.pod_sets, jobs_status or [], wl)
    pods_ready_changed = readiness.pods_ready_changed(wl, status, reason)
    if not pods_ready_changed and not readiness.reclaimable_changed(wl, reclaimable):
        return None
    conds = wl.conditions
    if pods_ready_changed:
        generation = wl.generation
        conds = cond.set_condition(
            conds, readiness.PODS_READY, status, reason, message, obs.now, generation
        )
    out: Dict = {"conditions": [cond.find(conds, readiness.PODS_READY)]}
    if reclaimable:
        out["reclaimablePods"] = reclaimable
    return out
