"""The TrainJob reconcile: from what is observed to a Plan of writes, in numbered guarded steps.

Pure: no API calls here. `reconcile.py` gathers the observation and `execute.py` carries out the
plan, so every decision is unit-testable and the loop is level-based and idempotent.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace

from kubebase.events import Event
from kubebase.objects import Dict, OwnerReference
from trainjob.models import InvalidObject, TrainJob, parse_trainjob
from trainjob.naming import job_name, owner_reference
from trainjob.ownership import managed_by_builtin
from trainjob.progress import Wiring, ca_config_map, wire
from trainjob.runtime import RuntimeInfo, components, podgroups, resolve_runtime_info
from trainjob.runtime import failure as failure_policy
from trainjob.runtime.podgroups import PodGroupPlugin
from trainjob.status_writes import hold
from trainjob_api import conditions as cond
from trainjob_api import constants as c
from trainjob_api.views import JobView, PodView, RuntimeView, TrainJobView
from worker_controller import builders, status


@dataclass(frozen=True)
class Blocked:
    """An object the TrainJob needs that could not be made: its name is taken by an object
    this TrainJob did not make (NameTaken), or the API refuses it (RefusedByAPI)."""

    reason: str
    message: str


@dataclass
class Observed:
    """Everything the reconcile looks at, read by the caller (from caches or the API)."""

    # Parsed once per pass (`parse`), from the cache's own object: the one form of the TrainJob
    # every step reads.
    trainjob: TrainJob
    runtime: RuntimeView | None  # the (Cluster)TrainingRuntime spec.runtimeRef names, if any
    jobs: dict[str, JobView]  # our Jobs of this TrainJob, by name
    services: list[Dict]  # Services carrying this TrainJob's label that it controls
    service_named: Dict | None  # the Service called like the TrainJob, whoever made it
    now: dt.datetime
    # Its pods (digests.pod_digest of each), or None when they are not watched (or the watch
    # has not listed them yet): then `podsStatus` is left as it is.
    pods: list[PodView] | None = None
    # Why the API refuses pods of our Jobs that have fewer than they want
    # (`status.jobs_short_of_pods`): the Job controller's last FailedCreate Event of each, by
    # Job name (`status.create_failure`).
    pod_create_failures: dict[str, str] = field(default_factory=dict)
    status_coalesce: float = 0.0  # how long a status change nothing acts on is held (seconds)
    status_held_for: float | None = None  # since such a change was first held (None: none is)
    # Why the last pass could not make an object the TrainJob needs (execute.Blocked), if so.
    blocked: Blocked | None = None
    # Where the trainer pods report their progress (None: they are not told to).
    progress: Wiring | None = None
    # The PodGroup APIs the worker serves (podgroups.BY_NAME keys), asked when the runtime has a
    # podGroupPolicy.
    pod_group_apis: frozenset[str] = frozenset()


@dataclass
class Plan:
    # Objects to make, in order: what the pods need, then Jobs. Each is only ever created:
    # an object of that name this TrainJob did not make is never adopted or overwritten.
    create: list[Dict] = field(default_factory=list)
    # Merge patches of our live Jobs' suspension and placement (builders.job_patch).
    patch: list[Dict] = field(default_factory=list)
    # Our Jobs to go, (name, uid), deleted with their pods first: of an earlier restart
    # attempt, or (suspended) whose pods ask otherwise than the TrainJob now.
    delete: list[tuple[str, str]] = field(default_factory=list)
    ssh_secret: str | None = None  # create once (MPI) if missing, before any Job
    status: Dict | None = None  # the new status, only when it changed
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    status_held: bool = False  # a status change is held back (status_writes.hold)


ANNOUNCED = frozenset({cond.Change.NEW, cond.Change.STATE})


class _Status:
    """Accumulates condition changes and the Events that announce them."""

    def __init__(self, tj: TrainJob, obs: Observed, plan: Plan) -> None:
        self.old = {k: v for k, v in tj.status.items()}
        self.conditions = cond.Conditions(
            tj.conditions(),
            obs.now,
            tj.metadata.generation,
            track_generation=True,
            events=plan.events,
        )
        self.jobs_status = self.old.get("jobsStatus")
        self.pods_status = self.old.get("podsStatus")
        self.restarts = int(self.old.get("restarts") or 0)
        self.counted = int(self.old.get("restartsCountTowardsMax") or 0)
        self.plan = plan
        self.held_for, self.coalesce = obs.status_held_for, obs.status_coalesce

    def set(
        self, ctype: str, value: bool, reason: str, message: str, event_type: str = "Normal"
    ) -> None:
        # A new state is announced; a condition that appears False is not (nothing happened).
        announce = ANNOUNCED if value else frozenset({cond.Change.STATE})
        self.conditions.set(ctype, value, reason, message, event=event_type, announce=announce)

    def count(self, info: RuntimeInfo, obs: Observed) -> None:
        """Jobs per state and, when its pods are watched, pods per phase, for each PodSet."""
        self.jobs_status = status.compute_jobs_status(info, obs.jobs)
        if obs.pods is not None:
            self.pods_status = status.compute_pods_status(info, obs.pods)

    def remove(self, ctype: str) -> None:
        self.conditions.remove(ctype)

    def finish(self) -> None:
        new = dict(self.old)
        new["conditions"] = self.conditions.list
        if self.jobs_status is not None:
            new["jobsStatus"] = self.jobs_status
        if self.pods_status is not None:
            new["podsStatus"] = self.pods_status
        if self.restarts:
            new["restarts"] = self.restarts
            new["restartsCountTowardsMax"] = self.counted
        if new == self.old:
            return
        wait = hold(self.old, new, self.coalesce, self.held_for)
        if wait is not None:  # then written with whatever has changed by then
            self.plan.status_held = True
            self.plan.requeue_after = min(self.plan.requeue_after or wait, wait)
            return
        self.plan.status = new


def _suspend_active(jobs: dict[str, JobView], plan: Plan) -> None:
    """Suspend every unfinished Job the TrainJob controls (its pods are deleted), whether the
    runtime names it now or not (one it no longer names, its replicas lowered or its
    replicatedJob renamed, would run on no quota at all): by `spec.suspend` alone
    (builders.suspend_patch), which nothing the runtime or the Job says now can have refused,
    and which builds nothing."""
    for job in jobs.values():
        if not (job.finished or job.suspended or job.deleting):
            plan.patch.append(builders.suspend_patch(job))


def _unnamed(info: RuntimeInfo, jobs: dict[str, JobView]) -> dict[str, JobView]:
    """The Jobs of `jobs` the runtime does not name (its replicas lowered or a replicatedJob
    renamed since they were made; or made by whoever may edit Jobs, naming the TrainJob)."""
    named = {
        job_name(info.trainjob, ps.name, i) for ps in info.pod_sets for i in range(ps.replicas)
    }
    return {n: j for n, j in jobs.items() if n not in named}


def _start_time(conditions: list[Dict], jobs: dict[str, JobView], now: dt.datetime) -> dt.datetime:
    """When the current run started: the last resume, else the first Job's creation."""
    suspended = cond.find(conditions, c.COND_SUSPENDED)
    if suspended and suspended.get("status") == "False":
        return cond.parse_time(suspended["lastTransitionTime"])
    created = [cond.parse_time(j.created) for j in jobs.values() if j.created]
    return min(created) if created else now


def parse(trainjob: TrainJobView) -> TrainJob | Plan:
    """The pass's one parse of its TrainJob, at the boundary (memoized by its uid and
    resourceVersion: the cache's object names its content). One the API server accepted
    should always parse; one that does not (a CRD older or looser than the models) gets the
    plan of one Warning naming the field, and nothing else: never a pass that raises."""
    try:
        return parse_trainjob(trainjob.raw, stored=True)
    except InvalidObject as exc:
        return Plan(events=[Event("Warning", c.EVENT_INVALID_TRAINJOB, str(exc))])


def decide(obs: Observed) -> Plan:
    """One function per step, in order; the first that settles the pass ends it."""
    plan = Plan()
    tj = obs.trainjob  # 1. parsed at the boundary (`parse`)
    # 2. Not ours (e.g. managedBy MultiKueue): hands off entirely, not even status.
    if not managed_by_builtin(tj.spec.managed_by) or tj.metadata.deletion_timestamp:
        return plan
    p = _step2b_restarts(tj, obs, plan)
    if _step3_finished(p):
        return plan
    info = _step4_runtime(p)
    if info is None:
        return plan
    settled = _step5_service(p, info) or _step6_suspended(p, info) or _step7_deadline(p, info)
    if not settled:
        _step8_outcome_or_run(p, info)
    p.st.count(info, p.obs)
    p.st.finish()
    return plan


@dataclass
class _Pass:
    """What every step of a decision reads, and the plan they write."""

    tj: TrainJob
    obs: Observed  # its Jobs those of the current restart attempt (or later: `ahead`)
    plan: Plan
    st: _Status
    attempt: int  # the restart attempt the status says
    old_jobs: dict[str, JobView]  # Jobs of an earlier attempt, going
    ahead: list[str]  # Jobs of a later attempt than the status says
    group: PodGroupPlugin | None = None

    @property
    def owner(self) -> OwnerReference:
        """The controller ownerReference every object made for the TrainJob carries."""
        return owner_reference(self.tj.name, str(self.tj.metadata.uid or ""))


def _step2b_restarts(tj: TrainJob, obs: Observed, plan: Plan) -> _Pass:
    """Restarts (trainjob/runtime/failure.py): Jobs of an earlier attempt go, pods first."""
    st = _Status(tj, obs, plan)
    attempt = st.restarts
    old_jobs = {n: j for n, j in obs.jobs.items() if builders.attempt_of(j) < attempt}
    plan.delete = [(n, str(j.uid)) for n, j in sorted(old_jobs.items()) if not j.deleting]
    obs = replace(obs, jobs={n: j for n, j in obs.jobs.items() if n not in old_jobs})
    ahead = sorted(n for n, j in obs.jobs.items() if builders.attempt_of(j) > attempt)
    return _Pass(tj, obs, plan, st, attempt, old_jobs, ahead)


def _step3_finished(p: _Pass) -> bool:
    """Finished is final: only make sure nothing of it still runs."""
    if not cond.trainjob_finished(p.tj.conditions()):
        return False
    finished_info = resolve_runtime_info(p.tj, p.obs.runtime)[0]
    if finished_info is not None:
        _group_pods(finished_info, p.obs)
    _suspend_active(p.obs.jobs, p.plan)
    return True


def _step4_runtime(p: _Pass) -> RuntimeInfo | None:
    """The runtime must exist and fit; both failures recover once fixed. What the Jobs are
    made of follows from it: the pod group, the origin label, the progress wiring."""
    tj, obs, st = p.tj, p.obs, p.st
    ref = tj.spec.runtime_ref
    info, problem = resolve_runtime_info(tj, obs.runtime)
    if info is None:
        assert problem is not None
        st.set(c.COND_FAILED, True, problem.reason, problem.message, "Warning")
        st.finish()
        return None
    failed = cond.find(st.conditions.list, c.COND_FAILED)
    if failed and failed.get("reason") in c.RECOVERABLE_FAILURE_REASONS:
        st.remove(c.COND_FAILED)
        p.plan.events.append(
            Event("Normal", "RuntimeResolved", f"{ref.kind} {ref.name!r} found; starting")
        )
    p.group = _group_pods(info, obs)
    origin = tj.metadata.labels.get(c.KUEUE_MULTIKUEUE_ORIGIN_LABEL)
    if origin:  # a MultiKueue copy: its Jobs and pods say which manager sent it (as Kueue's)
        info.labels[c.KUEUE_MULTIKUEUE_ORIGIN_LABEL] = origin
    if obs.progress is not None:  # the trainer pods are told where to report progress
        wire(info.pod_sets, obs.progress.url(tj.namespace, tj.name), tj.namespace, tj.name)
    return info


def _step5_service(p: _Pass, info: RuntimeInfo) -> bool:
    """The headless Service: exactly one, ours, found by label; otherwise nothing is made
    (True: settled). Then the objects the pods need, while Jobs are still to be made (not
    every pass)."""
    obs, plan = p.obs, p.plan
    if not _ensure_service(obs, info, p.owner, p.st, plan):
        return True
    _say_blocked(obs.blocked, p.st)
    if len(obs.jobs) >= sum(ps.replicas for ps in info.pod_sets):
        return False
    for part in components.build(info, p.group):
        owner = p.owner if part.owned else None
        plan.create.append(builders.build_extra_object(part.obj, owner, p.tj.name))
    if obs.progress is not None:
        ca = ca_config_map(p.tj.namespace, p.tj.name, obs.progress.ca_pem)
        plan.create.append(builders.build_extra_object(ca, p.owner, p.tj.name))
    plan.ssh_secret = info.policy.ssh_secret_name
    return False


def _step6_suspended(p: _Pass, info: RuntimeInfo) -> bool:
    """Suspended: suspend whatever runs, start nothing; a Job whose pods would ask for other
    resources than the TrainJob's now goes (made again on resume)."""
    obs, plan, st = p.obs, p.plan, p.st
    if p.tj.spec.suspend:
        outdated = _asking_otherwise(info, obs.jobs)
        plan.delete += [(n, str(obs.jobs[n].uid)) for n in outdated if not obs.jobs[n].deleting]
        kept = {n: j for n, j in obs.jobs.items() if n not in outdated}
        _apply_jobs(
            info, p.owner, kept, plan, suspend=True, create_missing=False, attempt=p.attempt
        )
        _suspend_active(_unnamed(info, kept), plan)
        st.set(c.COND_SUSPENDED, True, c.REASON_SUSPENDED, "TrainJob is suspended")
        return True
    if cond.is_true(st.conditions.list, c.COND_SUSPENDED):
        st.set(c.COND_SUSPENDED, False, c.REASON_RESUMED, "TrainJob is resumed")
    return False


def _step7_deadline(p: _Pass, info: RuntimeInfo) -> bool:
    """The deadline, counted from the start of this run (a resume starts a new run)."""
    deadline = p.tj.spec.active_deadline_seconds
    if not deadline:
        return False
    started = _start_time(p.st.conditions.list, p.obs.jobs, p.obs.now)
    left = deadline - (p.obs.now - started).total_seconds()
    if left > 0:
        p.plan.requeue_after = left
        return False
    p.st.set(
        c.COND_FAILED,
        True,
        c.REASON_DEADLINE_EXCEEDED,
        f"TrainJob was active longer than activeDeadlineSeconds={deadline}",
        "Warning",
    )
    _suspend_active(p.obs.jobs, p.plan)
    return True


def _step8_outcome_or_run(p: _Pass, info: RuntimeInfo) -> None:
    """A failed Job fails the TrainJob, or restarts its Jobs as the runtime's failurePolicy
    says; success follows the runtime's success policy; otherwise it runs (step 9)."""
    obs, st = p.obs, p.st
    if p.ahead:
        # Jobs of a later attempt than the status says: the status lost its restarts (the
        # TrainJob CRD is not this product's?). Restarting again could go on for ever.
        message = (
            f"Jobs {', '.join(p.ahead)} were made for restart {p.attempt + 1} or later, but "
            "status.restarts does not say so: the TrainJob CRD may not be this product's "
            "(kubectl apply --server-side -k crds/); not restarted again"
        )
        st.set(c.COND_FAILED, True, c.REASON_RESTARTS_LOST, message, "Warning")
        _suspend_active(obs.jobs, p.plan)
    elif status.any_failed(info, obs.jobs):
        _on_failure(info, obs, st)
    elif status.succeeded(info, obs.jobs):
        st.set(c.COND_COMPLETE, True, c.REASON_COMPLETED, c.MESSAGE_COMPLETED)
        _suspend_active(obs.jobs, p.plan)
        p.plan.requeue_after = None
    else:
        _step9_run(p, info)


def _step9_run(p: _Pass, info: RuntimeInfo) -> None:
    """Run: Jobs for every PodSet whose dependencies are met; a pod group the runtime asks for
    that this worker cannot make, or runtime fields it does not do: a condition (with a
    Warning, once) says so."""
    obs, plan, st = p.obs, p.plan, p.st
    asked = podgroups.select_plugin(info.policy.pod_group)
    if asked is not None and p.group is None:
        message = podgroups.ignored_message(asked)
        st.set(c.COND_POD_GROUP_IGNORED, True, c.COND_POD_GROUP_IGNORED, message, "Warning")
    else:
        st.remove(c.COND_POD_GROUP_IGNORED)
    if info.policy.ignored:
        st.set(
            c.COND_RUNTIME_FIELDS_IGNORED,
            True,
            c.COND_RUNTIME_FIELDS_IGNORED,
            "the runtime sets fields this worker does not do, and the job runs without them "
            f"(docs/operators/differences.md): {', '.join(info.policy.ignored)}",
            "Warning",
        )
    else:
        st.remove(c.COND_RUNTIME_FIELDS_IGNORED)
    # Each Job of a restart is made once its old one is gone (Recreate), or once all old ones
    # are (BlockingRecreate).
    blocking = info.policy.failure is not None and info.policy.failure.blocking
    _apply_jobs(
        info,
        p.owner,
        obs.jobs,
        plan,
        suspend=False,
        create_missing=not (blocking and p.old_jobs),
        attempt=p.attempt,
        occupied=set(p.old_jobs),
    )
    # A Job it controls that its runtime does not name runs on no quota: suspended.
    _suspend_active(_unnamed(info, obs.jobs), plan)
    _pods_stuck(obs, st)


def _group_pods(info: RuntimeInfo, obs: Observed) -> PodGroupPlugin | None:
    """The gang scheduler whose PodGroup the TrainJob's pods are in (their templates say so
    from here on), or None. Jobs already made keep what they were made with (a pod template
    is never changed); new ones are grouped when the worker serves the PodGroup's API."""
    plugin = podgroups.select_plugin(info.policy.pod_group)
    if plugin is None:
        return None
    if obs.jobs:
        tj = info.trainjob
        grouped = any(podgroups.names_group(j, plugin, tj) for j in obs.jobs.values())
    else:
        grouped = plugin.name in obs.pod_group_apis
    if not grouped:
        return None
    podgroups.mark_pods(info, plugin)
    return plugin


def _on_failure(info: RuntimeInfo, obs: Observed, st: _Status) -> None:
    """A Job of this attempt failed: the TrainJob fails, or restarts (JobSet's failurePolicy:
    trainjob/runtime/failure.py), in JobSet's words naming the Job that decided it, then what
    the first of its PodSet's pods to go wrong said. With no failurePolicy the first failed
    Job fails the TrainJob (JobSet's FailedJobs), as on a worker running Trainer."""
    failures = []
    for job in obs.jobs.values():
        if (failed := status.job_failed(job)) is not None:
            rj = job.labels.get(c.REPLICATED_JOB_NAME_LABEL, "")
            why = (failed.reason or "", failed.message or "", failed.since or "")
            failures.append(failure_policy.Failed(job.name, rj, *why))
    verdict, culprit = failure_policy.on_failure(info.policy.failure, failures, st.counted)
    podset = next(
        (ps.name for ps in info.pod_sets if culprit.job in status.podset_names(ps, info.trainjob)),
        culprit.replicated_job,
    )
    said = status.pod_words(podset, obs.pods or [])
    message = f"{verdict.message}; {said}" if said else verdict.message
    if not verdict.restart:
        st.set(c.COND_FAILED, True, verdict.reason, message, "Warning")
        _suspend_active(obs.jobs, st.plan)
        return
    # Restart: the new attempt is written first; its Jobs replace these from the next pass.
    st.restarts += 1
    st.counted += 1 if verdict.counts else 0
    st.plan.events.append(Event("Warning", verdict.reason, message))


def _apply_jobs(
    info: RuntimeInfo,
    owner: OwnerReference,
    jobs: dict[str, JobView],
    plan: Plan,
    *,
    suspend: bool,
    create_missing: bool,
    attempt: int = 0,
    occupied: set[str] | None = None,
) -> None:
    """Each Job the TrainJob wants: made when missing (not while a Job of an earlier attempt
    still holds its name: `occupied`), its suspension and placement kept up to date
    (builders.job_patch). A suspended Job whose pods ask otherwise than the TrainJob's now
    (_asking_otherwise) is never resumed: it goes, and is made again once gone."""
    for ps in info.pod_sets:
        ready = suspend or status.dependencies_met(ps, info, jobs)
        wanted = builders.build_jobs(info, ps, owner, suspend=suspend, attempt=attempt)
        asks = builders.pods_ask(ps)
        for desired in wanted:
            actual = jobs.get(desired["metadata"]["name"])
            if actual is None:
                if create_missing and ready and desired["metadata"]["name"] not in (occupied or ()):
                    plan.create.append(desired)
                continue
            if actual.finished:
                continue
            if not suspend and actual.suspended and builders.asked_by(actual) != asks:
                if not actual.deleting:
                    plan.delete.append((actual.name, str(actual.uid)))
                continue
            if (write := builders.job_patch(JobView(desired), actual)) is not None:
                plan.patch.append(write)


def _asking_otherwise(info: RuntimeInfo, jobs: dict[str, JobView]) -> list[str]:
    """The unfinished Jobs whose pods ask for other resources (trainjob.queues.resources_key)
    than the TrainJob's would now, as their stored pod templates say (what the pods run with;
    nothing on the Job a tenant can write stands in for it). A Job's pod template cannot
    change, and Kueue admits a TrainJob for what it asks now (its Workload is made again when
    that changes): resumed as it was, such a Job would run pods bigger than the quota taken
    for them. (A platform webhook that changes a Job's stored resources has its Jobs made
    again at each suspension: their pods are gone then anyway.)"""
    outdated = []
    for ps in info.pod_sets:
        want = builders.pods_ask(ps)
        for index in range(ps.replicas):
            name = job_name(info.trainjob, ps.name, index)
            actual = jobs.get(name)
            if actual is None or actual.finished:
                continue
            if builders.asked_by(actual) != want:
                outdated.append(name)
    return outdated


def _say_blocked(blocked: Blocked | None, st: _Status) -> None:
    """ObjectsBlocked: True (with a Warning) while an object the TrainJob needs cannot be
    made, naming it; False once the objects are made."""
    if blocked is not None:
        st.set(c.COND_OBJECTS_BLOCKED, True, blocked.reason, blocked.message, "Warning")
    elif cond.is_true(st.conditions.list, c.COND_OBJECTS_BLOCKED):
        st.set(
            c.COND_OBJECTS_BLOCKED,
            False,
            c.REASON_OBJECTS_CREATED,
            "the objects the TrainJob needs are made",
        )


def _pods_stuck(obs: Observed, st: _Status) -> None:
    """PodsStuck: True (with a Warning) while the API refuses a Job's pods (PodCreateFailed,
    with the API's message, from the Job controller's FailedCreate Event) or some pod cannot
    start or keeps crashing (the kubelet's reason: ErrImagePull, CrashLoopBackOff, ...),
    naming the Job or pod; False once none is. Left as it is when pods are not watched."""
    if obs.pods is None:
        return
    refused = sorted(obs.pod_create_failures.items())
    stuck = status.stuck_pods(obs.pods)
    if refused:
        job, message = refused[0]
        st.set(
            c.COND_PODS_STUCK,
            True,
            c.REASON_POD_CREATE_FAILED,
            f"Job {job} cannot create its pods: {message}",
            "Warning",
        )
    elif stuck is not None:
        st.set(c.COND_PODS_STUCK, True, stuck[0], stuck[1], "Warning")
    elif cond.is_true(st.conditions.list, c.COND_PODS_STUCK):
        st.set(c.COND_PODS_STUCK, False, c.REASON_PODS_STARTED, "no pod is stuck")


def _ensure_service(
    obs: Observed, info: RuntimeInfo, owner: OwnerReference, st: _Status, plan: Plan
) -> bool:
    """Plan the Service; False (with a condition and an Event) when we must not go on."""
    if len(obs.services) > 1:
        names = ", ".join(sorted(s["metadata"]["name"] for s in obs.services))
        st.set(
            c.COND_SERVICE_CONFLICT,
            True,
            c.REASON_SERVICE_CONFLICT,
            f"{len(obs.services)} Services name TrainJob {info.trainjob!r} as their controller "
            f"({names}); remove all but one",
            "Warning",
        )
        return False
    named = obs.service_named
    if not obs.services and named is not None:
        st.set(
            c.COND_SERVICE_CONFLICT,
            True,
            c.REASON_SERVICE_NAME_TAKEN,
            f"Service {info.trainjob!r} exists and is not this TrainJob's (not controlled by "
            "it); rename or delete it",
            "Warning",
        )
        return False
    if cond.find(st.conditions.list, c.COND_SERVICE_CONFLICT):
        st.set(c.COND_SERVICE_CONFLICT, False, c.REASON_SERVICE_OK, "exactly one headless Service")
    if not obs.services:
        plan.create.append(builders.build_service(info, owner))
    return True
