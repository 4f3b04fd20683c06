"""One pass for a TrainJob on a worker: observe (from the caches), decide (pure), execute.

First the Kueue integration when the TrainJob is queued (its Workload, PodsReady, start on
admission, stop on eviction: trainjob/jobframework.py, shared with the dispatcher), then the
TrainJob itself: runtime -> PodSets -> Indexed Jobs, the headless Service, status
(worker_controller/decide.py): one plan (worker_controller/plan.py), carried out by
worker_controller/execute.py.
"""

from __future__ import annotations

import datetime as dt
import logging

from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster
from kubecontrol.workqueue import soonest
from trainjob import admission, jobframework
from trainjob.caches import Caches
from trainjob.jobframework_io import observe_queueing
from trainjob.ownership import controlled_by
from trainjob.status_writes import held_key
from trainjob_api import constants as c
from trainjob_api.views import JobView, RuntimeView, TrainJobView
from worker_controller import execute, status
from worker_controller.context import Context
from worker_controller.decide import Blocked, Observed, Plan, decide, parse
from worker_controller.plan import Hold, PassPlan

log = logging.getLogger("worker_controller")


def sync_trainjob(ctx: Context, key: tuple[str, str]) -> float | None:
    """One pass for a TrainJob; returns the seconds after which it wants another (deadlines)."""
    cached = ctx.caches.trainjob(*key)
    if cached is None or cached.uid in ctx.gone:
        return None
    trainjob = TrainJobView(cached.with_kind())  # the cache's own
    try:
        return _sync(ctx, ctx.caches, trainjob)
    except ApiException as exc:
        if exc.status in (400, 403, 404, 422) and _gone(ctx.cluster, trainjob):
            ctx.gone.add(str(trainjob.uid))
            log.warning(
                "gone from the API but still in the watch cache: forgotten",
                extra={"cluster": ctx.settings.cluster_name, "trainjob": "/".join(key)},
            )
            return None
        raise


def _gone(cluster: Cluster, trainjob: TrainJobView) -> bool:
    """Whether this very TrainJob (same UID) no longer exists, asked of the API itself."""
    found = cluster.get_or_none(c.TRAINJOB, trainjob.name, trainjob.namespace)
    return found is None or found["metadata"].get("uid") != trainjob.uid


def _sync(ctx: Context, caches: Caches, trainjob: TrainJobView) -> float | None:
    """Observe, decide, then execute the one plan (plan.py)."""
    key = trainjob.key
    uid = str(trainjob.uid or "")
    plan, observed = _planned(ctx, caches, trainjob)
    blocked = execute.execute_pass(ctx, trainjob, plan)
    if plan.trainjob is None or observed is None:
        return None  # the TrainJob's own update event continues from the new spec
    if blocked is not None and _asks_group(observed.runtime):
        ctx.served.forget()  # its PodGroup's API may have gone: asked again on the next pass
    ctx.memory.note_held(held_key(*key), plan.trainjob.status_held)
    after = _note_blocked(ctx, uid, plan.trainjob, blocked, was=observed.blocked)
    return soonest(after, plan.queue.requeue_after if plan.queue else None)


def _planned(
    ctx: Context, caches: Caches, trainjob: TrainJobView
) -> tuple[PassPlan, Observed | None]:
    """The pass's plan, and what its TrainJob part was decided from (None: that part waits
    for the spec the plan writes)."""
    key = namespace, name = trainjob.key
    runtime = caches.runtime_of(trainjob)
    uid = str(trainjob.uid or "")
    # Only the Jobs this very TrainJob controls: a label is no proof (anyone can write one).
    jobs = {j.name: j for j in caches.jobs_of(key) if controlled_by(j.raw, uid)}
    plan = PassPlan()
    parsed = parse(trainjob)  # the pass's one parse: both parts read it
    if trainjob.queued and not isinstance(parsed, Plan):
        # Any pod of its Jobs still running: what Kueue waits for before it frees the quota.
        active = any(j.count("active") > 0 for j in jobs.values())
        observed = observe_queueing(ctx.cluster, caches, parsed, runtime, active)
        plan.queue = jobframework.reconcile_queueing(observed)
    elif _held(ctx, namespace, trainjob):
        plan.hold = Hold(tell=uid not in ctx.held_told, suspend=not trainjob.suspended)
    if plan.changes_trainjob:
        return plan, None
    if isinstance(parsed, Plan):  # it does not parse: said, and nothing else
        plan.trainjob = parsed
        return plan, None
    # Its Services the same way: a Service labelled for it but made by someone else is not
    # its headless Service (it does not stop ours being made under the TrainJob's name).
    services = [s for s in caches.services_of(key) if controlled_by(s, uid)]
    named = None
    if not services and runtime is not None and not trainjob.finished:
        # Only then can a foreign Service block ours: ask the API. One this TrainJob controls
        # is ours, made by an earlier pass whose watch event has not come in yet: never a
        # name taken (the API's answer is newer than the cache's).
        named = ctx.cluster.get_or_none(c.SERVICE, name, namespace)
        if named is not None and controlled_by(named, uid):
            services, named = [named], None
    pods = caches.pods_of(key) if ctx.settings.pod_summary else None
    asks_group = _asks_group(runtime)
    observed_tj = Observed(
        trainjob=parsed,
        runtime=runtime,
        jobs=jobs,
        services=services,
        service_named=named,
        now=dt.datetime.now(dt.UTC),
        pods=pods,
        pod_create_failures=_pod_create_failures(caches, namespace, jobs)
        if pods is not None
        else {},
        status_coalesce=ctx.settings.status_coalesce_seconds,
        status_held_for=ctx.memory.held_for(held_key(*key)),
        blocked=ctx.blocked.get(uid),
        progress=ctx.progress_wiring(),
        pod_group_apis=ctx.served.pod_group_apis() if asks_group else frozenset(),
    )
    plan.trainjob = decide(observed_tj)
    return plan, observed_tj


def _asks_group(runtime: RuntimeView | None) -> bool:
    """Whether the runtime runs its pods as a gang (a PodGroup of the scheduler's API)."""
    return runtime is not None and runtime.gang


def _note_blocked(
    ctx: Context, uid: str, plan: Plan, blocked: Blocked | None, was: Blocked | None
) -> float | None:
    """Keep why the pass could not make an object the TrainJob needs (a pass that tried to
    make or change something says where it stands), for the next pass's condition; and when
    in the next pass to be: soon while blocked, or when the condition is to be cleared."""
    if plan.create or plan.patch or plan.ssh_secret:
        if blocked is None:
            ctx.blocked.pop(uid, None)
        else:
            ctx.blocked[uid] = blocked
    if blocked is not None or (was is not None and uid not in ctx.blocked):
        return min(
            plan.requeue_after or execute.BLOCKED_RETRY_SECONDS, execute.BLOCKED_RETRY_SECONDS
        )
    return plan.requeue_after


def _held(ctx: Context, namespace: str, trainjob: TrainJobView) -> bool:
    """No queue, on a cluster whose Kueue manages such jobs all the same, and not finished."""
    return (
        admission.held_without_queue(trainjob, ctx.settings.manage_jobs_without_queue_name)
        and not trainjob.finished
    )


def _pod_create_failures(
    caches: Caches, namespace: str, jobs: dict[str, JobView]
) -> dict[str, str]:
    """For each of our Jobs short of pods: why the Job controller could not create them (its
    last FailedCreate Event about this very Job), when it says so."""
    out = {}
    for name in status.jobs_short_of_pods(jobs):
        events = caches.failed_creates_of(namespace, name)
        message = status.create_failure(jobs[name], events)
        if message is not None:
            out[name] = message
    return out
