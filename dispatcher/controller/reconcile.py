"""One pass for a manager TrainJob: observe (from the caches), decide (pure), execute.

In order: our finalizer; the Kueue integration (its Workload, PodsReady, start and stop, the
same code the worker controller runs: trainjob/jobframework.py); the intake (why it cannot be
queued, on the TrainJob: dispatcher/decisions/intake.py); then the MultiKueue check of its Workload
(copies, the first worker to admit wins, status back, retry: dispatcher/decisions/decide.py). A
deleted TrainJob's copies go before its finalizer does (dispatcher/decisions/removal.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass

from dispatcher.controller import admissionchecks, execute, placements_io
from dispatcher.controller.context import Context
from dispatcher.decisions import checkpoints, data, dependencies
from dispatcher.decisions.decide import (
    AllAtOnce,
    CapacityAware,
    DispatchObserved,
    DispatchPlan,
    External,
    Incremental,
    RemoteView,
    Strategy,
    decide,
)
from dispatcher.decisions.intake import (
    IntakePlan,
    not_dispatchable,
    reconcile_intake,
    undecided_for,
    undispatched_message,
)
from dispatcher.decisions.keys import QueueKey, StatusKey
from dispatcher.decisions.plan import Dispatch, PassPlan, planned
from dispatcher.decisions.removal import Held, removal
from dispatcher.decisions.selection import SelectionError, selection_of
from dispatcher.settings import DispatcherSettings
from dispatcher.workers.remote import RemoteCluster
from kubebase.events import Event
from kubecontrol.client import ApiException
from kubecontrol.controller import own_namespace
from kubecontrol.workqueue import soonest
from trainjob import jobframework
from trainjob.caches import Caches, Index
from trainjob.jobframework_io import observe_queueing
from trainjob.models import InvalidObject, parse_trainjob
from trainjob.naming import owner_name
from trainjob.ownership import controller_uid, is_dependency_copy, made_for
from trainjob.runtime import RuntimeProblem
from trainjob.status_writes import held_key
from trainjob_api import constants as c
from trainjob_api.views import ObjectView, RuntimeView, TrainJobView, WorkloadView

log = logging.getLogger("dispatcher")

REMOTE_RETRY_SECONDS = 5.0  # a remote write failed: try again after the dedupe window


def sync(ctx: Context, key: QueueKey) -> float | None:
    """One pass for a work-queue key: a TrainJob's (namespace, name), or the status of one of
    our AdmissionChecks or MultiKueueClusters (admissionchecks.StatusKey)."""
    if isinstance(key, StatusKey):
        admissionchecks.sync_status(ctx, key)
        return None
    return sync_trainjob(ctx, key)


def sync_trainjob(ctx: Context, key: tuple[str, str]) -> float | None:
    """One pass for a manager TrainJob: finalizer, Kueue integration, dispatch. Returns the
    seconds after which it wants another pass, if time alone can change something."""
    caches = ctx.caches
    view = caches.trainjob(*key)
    if view is None or not view.multikueue:
        ctx.memory.forget(("TrainJob", *key))
        ctx.withheld.pop(key, None)
        if view is not None and not ctx.settings.manager_runs_trainjobs:
            _not_dispatched(ctx, view)
        return None
    if view.deleting:
        return _finalize(ctx, caches, view)
    if not view.queued:
        _no_queue(ctx, view)
        return None
    plan = PassPlan(finalizer=None if c.DISPATCHER_FINALIZER in view.finalizers else "add")
    try:
        tj = parse_trainjob(view.with_kind(), stored=True)  # the cache's own
    except InvalidObject as exc:
        # The finalizer, and a Warning naming the field (logged with the Event): nothing else
        # is done for it.
        plan.intake = IntakePlan(events=[Event("Warning", c.EVENT_INVALID_TRAINJOB, str(exc))])
        execute.execute_pass(ctx.manager, ctx.workers, ctx.memory, view, plan)
        return None
    observed = observe_queueing(ctx.manager, caches, tj, caches.runtime_of(view), False)
    ours = set(admissionchecks.our_checks(ctx, caches))
    verdict = _admitted_without_our_check(ctx, observed.workload, caches, ours, observed.now)
    # Admitted, sent nowhere, our check Pending since a moment: neither started here nor
    # dispatched, nor judged, until the state is older (intake.PENDING_RESET_GRACE).
    undecided = undecided_for(observed.workload, ours, observed.now)
    observed.start_blocked = verdict or (
        "our admission check is settling" if undecided is not None else None
    )
    plan.queue = jobframework.reconcile_queueing(observed)
    problem = observed.problem
    if verdict is not None:
        problem = RuntimeProblem(c.REASON_NOT_DISPATCHABLE, verdict)
    plan.intake = reconcile_intake(view, problem, observed.now, observed.workload)
    requeue = undecided
    if undecided is None:
        wl_name = jobframework.expected_workload_name(view)
        plan.dispatch = _dispatch(ctx, caches, planned(view, plan.intake), wl_name)
    retry = execute.execute_pass(ctx.manager, ctx.workers, ctx.memory, view, plan)
    if plan.dispatch is not None:
        requeue = _after_dispatch(ctx, key, plan.dispatch.plan, retry)
    return soonest(requeue, plan.queue.requeue_after)


def _after_dispatch(
    ctx: Context, key: tuple[str, str], plan: DispatchPlan, retry: bool
) -> float | None:
    """What the pass keeps of its dispatch for the next ones, and when the next is due."""
    ctx.memory.note_held(held_key(*key), plan.status_held)
    if plan.withheld or plan.awaited:  # another look once one of these has more room, or
        # is listed (watches.on_remote_room)
        ctx.withheld[key] = frozenset([*plan.withheld, *plan.awaited])
    else:
        ctx.withheld.pop(key, None)
    return REMOTE_RETRY_SECONDS if retry else plan.requeue_after


def _not_dispatched(ctx: Context, view: TrainJobView) -> None:
    """A TrainJob here that MultiKueue does not dispatch: nothing on a manager runs it, and
    spec.managedBy cannot change, so it says so once, as a final Failed (never our finalizer)."""
    if view.deleting or view.finished:
        return
    problem = RuntimeProblem(
        c.REASON_NOT_DISPATCHED, undispatched_message(view, ctx.settings.controller_name)
    )
    _write_intake(ctx, view, problem)


def _no_queue(ctx: Context, view: TrainJobView) -> None:
    """MultiKueue's by spec.managedBy, but queued nowhere (no queue label, and the namespace
    had no default LocalQueue when it was made): Kueue never admits it, so nobody runs it.
    Said on the TrainJob (Failed, NoQueueName, which goes once the label is added)."""
    if view.finished:
        return
    problem = RuntimeProblem(
        c.REASON_NO_QUEUE,
        f"metadata.labels[{c.KUEUE_QUEUE_NAME_LABEL}] is not set: a TrainJob with "
        f"spec.managedBy {c.MANAGED_BY_MULTIKUEUE} is dispatched only once Kueue admits it "
        "through a LocalQueue; add the label (the namespace has no LocalQueue named "
        f"{c.DEFAULT_LOCAL_QUEUE!r} to take it by default)",
    )
    _write_intake(ctx, view, problem)


def _write_intake(ctx: Context, view: TrainJobView, problem: RuntimeProblem) -> None:
    """A pass that only says, on the TrainJob, why it will not run."""
    intake = reconcile_intake(view, problem, dt.datetime.now(dt.UTC))
    if intake.status is not None or intake.events:
        execute.execute_pass(ctx.manager, ctx.workers, ctx.memory, view, PassPlan(intake=intake))


def _admitted_without_our_check(
    ctx: Context, wl: WorkloadView | None, caches: Caches, ours: set[str], now: dt.datetime
) -> str | None:
    """`intake.not_dispatchable` from the caches (`ours`: our AdmissionChecks' names)."""
    return not_dispatchable(
        wl,
        ours,
        lambda cq: admissionchecks.cq_has_our_check(ctx, cq, caches),
        ctx.settings.controller_name,
        now,
    )


def _dispatch(
    ctx: Context, caches: Caches, trainjob: TrainJobView, wl_name: str
) -> Dispatch | None:
    """The MultiKueue check of a TrainJob's Workload (dispatch, watch, sync back, retry): its
    plan, from the caches and the workers' watches, or None when the check is not ours."""
    namespace, tj_name = trainjob.key
    wl = caches.workload(namespace, wl_name)
    if wl is None or owner_name(wl) != tj_name:
        return None
    checks = admissionchecks.our_checks(ctx, caches)
    check = next((s["name"] for s in wl.admission_checks if s.get("name") in checks), None)
    if check is None and wl.cluster_name:
        # Dispatched, then Kueue dropped our check from the Workload (it keeps only checks for
        # the flavours assigned, and a Workload that requests nothing is assigned none): keep
        # watching the worker that runs it through the check its ClusterQueue names.
        check = admissionchecks.our_check_on_cq(ctx, wl.cluster_queue, caches)
    if check is None or check not in checks:
        return None
    clusters = admissionchecks.config_clusters(checks[check], caches) or []
    chosen, selection_problem = _chosen(trainjob, clusters, ctx, caches)
    if wl.cluster_name and wl.cluster_name not in clusters:
        # Its worker was taken out of the MultiKueueConfig while it ran there: it is still
        # watched to its end (taking a worker out drains it), never chosen for another run.
        clusters = [*clusters, wl.cluster_name]
    asks = _asks(ctx, caches, trainjob, wl, chosen)
    remotes = [_remote_view(ctx, caches, cname, asks) for cname in clusters]
    _price_preemptions(ctx, wl, remotes)
    place = _checkpoint_place(caches, trainjob)
    observed = DispatchObserved(
        workload=wl,
        trainjob=trainjob,
        check=check,
        remotes=remotes,
        origin=ctx.settings.origin,
        worker_lost_timeout=ctx.settings.worker_lost_timeout,
        now=dt.datetime.now(dt.UTC),
        retention=ctx.settings.retention_seconds,
        status_coalesce=ctx.settings.status_coalesce_seconds,
        status_held_for=ctx.memory.held_for(held_key(namespace, tj_name)),
        give_up_never_fits=ctx.settings.give_up_never_fits,
        give_up_after=ctx.settings.give_up_after_seconds,
        selection_problem=selection_problem,
        needs=asks.needs,
        checkpoint_place=place,
        recorded_checkpoint=_recorded_checkpoint(ctx, trainjob, place, remotes, wl.cluster_name),
        tails_kept=ctx.settings.log_tails_kept > 0,
        preemption_gated=ctx.settings.orchestrated_preemption,
        preemption_timeout=ctx.settings.single_cluster_preemption_timeout,
        preemption_by_cost=ctx.settings.preemption_order == "Cost",
        preemption_cost_wait=ctx.settings.preemption_cost_wait,
        gate_opened_last=ctx.workers.gate_opened(wl.uid or ""),
    )
    return Dispatch(decide(observed, strategy(ctx.settings)), wl, check)


def _price_preemptions(ctx: Context, wl: WorkloadView, remotes: list[RemoteView]) -> None:
    """What a preemption would cost on each worker where the job's copy is gated and holds
    no quota (or whether that is known soon), worked out only while one of its copies says
    it is blocked on the gate: the only time the gate's choice reads it."""
    if not any(
        r.workload is not None and r.workload.blocked_on_gates_since is not None for r in remotes
    ):
        return
    now = dt.datetime.now(dt.UTC)
    for view in remotes:
        remote, copy = ctx.workers.get(view.name), view.workload
        if remote is None:
            continue  # pending or not: _remote_view said
        gated = copy is not None and copy.gated_by(c.KUEUE_MULTIKUEUE_PREEMPTION_GATE)
        if copy is not None and gated and not copy.has_quota:
            view.preemption = remote.preemption_cost(wl, copy, now)
        if copy is None or (gated and view.preemption is None):  # none seen yet, or not costed
            view.preemption_pending = remote.estimate_pending


@dataclass(frozen=True)
class _Asks:
    """What a job asks of the workers it may go to, read once per pass for all of them."""

    trainjob: TrainJobView
    workload: WorkloadView
    chosen: set[str]  # the workers its own choice allows
    # Room, runtimes and data on the workers matter only while the Workload waits for one
    # (dispatch steps 6 and 7).
    placing: bool
    needs: dependencies.Needs | None  # what its pods take along, when its namespace copies
    own_runtime: RuntimeView | None  # the TrainingRuntime of its namespace it names
    # Its runtime when it follows the job (copied as its Secrets are, kept in step): only one
    # of the worker's own with another spec keeps the job from there.
    follows: dependencies.Source | None
    checked_runtime: RuntimeView | None  # the runtime each chosen worker must serve alike
    data_needs: data.DataNeeds | None
    data_error: str | None  # why its datasets annotation cannot be read

    @property
    def taken_keys(self) -> list[str]:
        return [s.key for s in self.needs.sources] if self.needs is not None else []


def _asks(
    ctx: Context, caches: Caches, trainjob: TrainJobView, wl: WorkloadView, chosen: set[str]
) -> _Asks:
    placing = wl.has_quota and not wl.evicted and not wl.finished and not wl.cluster_name
    named = caches.runtime_of(trainjob)
    own_runtime = named if trainjob.runtime_kind == c.TRAINING_RUNTIME_KIND else None
    needs = _needs(ctx, caches, wl, own_runtime)
    data_needs, data_error = _data_needs(ctx, caches, trainjob, wl) if placing else (None, None)
    sources = needs.sources if needs is not None else []
    return _Asks(
        trainjob=trainjob,
        workload=wl,
        chosen=chosen,
        placing=placing,
        needs=needs,
        own_runtime=own_runtime,
        follows=next((s for s in sources if s.kind == c.TRAINING_RUNTIME_KIND), None),
        checked_runtime=named if placing and ctx.settings.check_runtimes else None,
        data_needs=data_needs,
        data_error=data_error,
    )


def _remote_view(ctx: Context, caches: Caches, cname: str, asks: _Asks) -> RemoteView:
    """What the pass sees of the job on one worker: its copies, the connection, and for a
    chosen worker while the job is placed whether it fits, its runtime and its data."""
    namespace, tj_name = asks.trainjob.key
    wl, wl_name = asks.workload, asks.workload.name
    selected = cname in asks.chosen
    remote = ctx.workers.get(cname)
    if remote is None:
        view = RemoteView(cname, False, _lost_for(caches, cname), None, None)
        view.selected = selected
        # not connected yet (a replica just started) though its MultiKueueCluster says it
        # was Active: its copies, and what a preemption there would cost, are known soon
        view.preemption_pending = (
            ctx.settings.prices_preemption
            and view.disconnected_for == 0.0
            and ctx.workers.problem(cname) is None
        )
        return view
    taken_keys = asks.taken_keys
    view = RemoteView(
        cname,
        remote.connected,
        remote.disconnected_for(),
        remote.workload(namespace, wl_name),
        remote.trainjob(namespace, tj_name),
        ctx.workers.namespace_problem(cname, namespace),
        remote.fit(wl) if asks.placing and selected else None,
        taken=ctx.workers.taken(cname, namespace, tj_name, wl_name, *taken_keys),
    )
    view.selected = selected
    copy = view.workload
    if taken_keys and copy is not None:
        view.copied = ctx.workers.copies.current(cname, namespace, taken_keys, copy.uid or "")
    if asks.follows is not None and _served_there(remote, asks.own_runtime, ctx.settings.origin):
        view.copied[asks.follows.key] = asks.follows.digest  # the worker's own, the same
    if not selected:
        return view
    if asks.data_needs:
        claims = remote.claims(namespace, ctx.settings.data_placement == "Bound")
        view.data_problem = data.problem(asks.data_needs, caches.cluster_labels(cname), claims)
    if asks.data_error:
        view.data_problem = asks.data_error
    if asks.checked_runtime is not None:
        view.runtime_problem = remote.runtime_problem(
            asks.trainjob.runtime_kind,
            namespace,
            asks.trainjob.runtime_name,
            asks.checked_runtime.spec,
            copied_by=ctx.settings.origin if asks.follows is not None else None,
        )
    return view


def _checkpoint_place(caches: Caches, trainjob: TrainJobView | None) -> str | None:
    """Where the job keeps its checkpoints (checkpoints.py); an annotation that cannot be read
    was refused at admission (webhooks.py), so one here came before: logged, and ignored."""
    if trainjob is None:
        return None
    try:
        return checkpoints.place_for(trainjob, caches.runtime_of(trainjob))
    except checkpoints.CheckpointsError as exc:
        log.warning(
            "checkpoints ignored",
            extra={"trainjob": f"{trainjob.namespace}/{trainjob.name}", "error": str(exc)},
        )
        return None


def _recorded_checkpoint(
    ctx: Context,
    trainjob: TrainJobView,
    place: str | None,
    remotes: list[RemoteView],
    wl_cluster: str | None,
) -> checkpoints.Checkpoint | None:
    """The last checkpoint the TrainJob's record of ended runs holds, read only when a copy
    of it may be sent this pass to resume from (decide sends one to a worker that admitted
    its Workload's copy, or the one it runs on, that holds no copy of the TrainJob) and its
    status names none. A record that cannot be read is said, and the copy starts afresh."""
    if place is None or checkpoints.reported(trainjob.trainer_status) is not None:
        return None
    if not any(
        r.connected
        and r.workload is not None
        and r.trainjob is None
        and (r.workload.admitted_at or r.name == wl_cluster)
        for r in remotes
    ):
        return None
    try:
        return checkpoints.last_recorded(placements_io.read(ctx.manager, str(trainjob.uid)))
    except ApiException as exc:
        log.warning(
            "record of runs not read: a copy sent now starts afresh",
            extra={"trainjob": f"{trainjob.namespace}/{trainjob.name}", "error": str(exc)},
        )
        return None


def _data_needs(
    ctx: Context, caches: Caches, trainjob: TrainJobView, wl: WorkloadView
) -> tuple[data.DataNeeds | None, str | None]:
    """What the job's pods read that must be where it runs (data.py), or why that cannot be
    read (its datasets annotation)."""
    if ctx.settings.data_placement == "Off":
        return None, None
    made = data.made_by_job(caches.runtime_of(trainjob), trainjob.name)
    try:
        return data.needs(wl.pod_sets, trainjob.annotations, made), None
    except data.DatasetsError as exc:
        return None, str(exc)


UNREAD = (("Secrets", Index.SECRETS), ("ConfigMaps", Index.CONFIG_MAPS))


def _served_there(remote: RemoteCluster, manager_runtime: RuntimeView | None, origin: str) -> bool:
    """Whether the worker holds the job's runtime already, as its own (not a copy of ours)
    with the manager's spec: nothing to copy there."""
    if manager_runtime is None:
        return False
    name, namespace = manager_runtime.name, manager_runtime.namespace
    here = remote.runtime_here(c.TRAINING_RUNTIME_KIND, namespace, name)
    if here is None:
        return False
    if is_dependency_copy(here, origin):
        return False  # ours: the ledger and its digest say whether it is current
    source = {**manager_runtime.raw, "kind": c.TRAINING_RUNTIME_KIND}
    return dependencies.usable_as_is(ObjectView(here), ObjectView(source))


def _needs(
    ctx: Context, caches: Caches, wl: WorkloadView, runtime: RuntimeView | None = None
) -> dependencies.Needs | None:
    """What the Workload's pods take to their worker, when its namespace copies them, with
    `runtime`, the TrainingRuntime of its namespace its TrainJob names."""
    if not ctx.settings.copy_dependencies or not ctx.listed(Index.NAMESPACES):
        return None  # namespaces not readable: none counts as opted in
    if not dependencies.opted_in(caches.namespace_labels(wl.namespace)):
        return None
    unread = [kind for kind, index in UNREAD if not ctx.listed(index)]
    if unread and dependencies.references(wl.pod_sets):
        return dependencies.Needs(
            problem=f"the dispatcher cannot read {' and '.join(unread)} on the manager yet (its "
            "log names why: its role needs get, list and watch on them): the ones this job "
            "references cannot be checked or copied",
            reason=dependencies.REASON_MISSING,
        )
    return dependencies.needs(
        wl.namespace,
        wl.pod_sets,
        caches.dependency,
        frozenset({ctx.settings.namespace, own_namespace()}),
        runtime,
    )


def _chosen(
    trainjob: TrainJobView, clusters: list[str], ctx: Context, caches: Caches
) -> tuple[set[str], str | None]:
    """The clusters of the queue's MultiKueueConfig the TrainJob's own choice allows
    (selection.py), and why none of them is active when that is so."""
    try:
        choice = selection_of(trainjob.annotations)
    except SelectionError as exc:
        return set(), str(exc)
    if choice is None:
        return set(clusters), None
    labels = {name: caches.cluster_labels(name) for name in clusters}
    chosen = {name for name in clusters if choice.allows(name, labels[name])}
    if not chosen:
        return chosen, (
            f"{choice.text} matches none of the clusters of its queue's MultiKueueConfig "
            f"({', '.join(clusters) or 'none'})"
        )
    if not any((r := ctx.workers.get(name)) is not None and r.connected for name in chosen):
        return (
            chosen,
            f"{choice.text}: none of the chosen clusters ({', '.join(sorted(chosen))}) is active",
        )
    return chosen, None


def _lost_for(caches: Caches, cluster: str) -> float:
    """How long a cluster with no connection among the workers has been lost: since its
    MultiKueueCluster turned Active=False (the clock survives restarts), 0 while it was Active
    and is still being connected, forever when no such MultiKueueCluster exists."""
    mkc = caches.cluster(cluster)
    if mkc is None:
        return float("inf")
    since = mkc.down_since
    return 0.0 if since is None else max(0.0, time.time() - since)


def strategy(settings: DispatcherSettings) -> Strategy:
    if settings.strategy == "External":
        return External()  # the external dispatcher chooses; room is its business
    inner: Strategy = AllAtOnce()
    if settings.strategy == "Incremental":
        inner = Incremental(settings.incremental_batch, settings.incremental_round_seconds)
    return CapacityAware(inner) if settings.capacity_aware else inner


# ---- deletion: our finalizer -----------------------------------------------------------------


def _finalize(ctx: Context, caches: Caches, trainjob: TrainJobView) -> float | None:
    """A deleted manager TrainJob: its copies deleted on the workers (removal.py), then our
    finalizer goes. As with Kueue, a worker that is down never holds the deletion up."""
    if c.DISPATCHER_FINALIZER not in trainjob.finalizers:
        return None
    ns, wl_name = trainjob.namespace, jobframework.expected_workload_name(trainjob)
    # Each copy taken is one made for this TrainJob or for the Workload it controls (its
    # origin-uid). The Workload its prebuilt annotation names may be another's (anyone who may
    # edit the TrainJob can write that name), or gone from the cache: its copies are then the
    # garbage collector's, which judges each by the manager object it was made for. A Workload
    # of Kueue's name for this TrainJob (its UID hashed in) is its own even once gone (deleted
    # first by a foreground deletion): its copies go now, whoever they name.
    named: dict[str, tuple[str, str | None]] = {"TrainJob": (trainjob.name, trainjob.uid)}
    wl = caches.workload(ns, wl_name)
    if wl is not None and controller_uid(wl.raw) == trainjob.uid:
        named["Workload"] = (wl_name, wl.uid)
    elif wl is None and not trainjob.prebuilt_workload:
        named["Workload"] = (wl_name, None)
    held = [
        Held(
            name,
            remote.connected,
            tuple(
                copy
                for kind, (copy_name, uid) in named.items()
                if (copy := remote.get(kind, ns, copy_name)) is not None
                and (uid is None or made_for(copy, uid))  # None: whatever it names
            ),
        )
        for name, remote in list(ctx.workers.remotes.items())
    ]
    gone = removal(held, _holders(caches, trainjob), ctx.settings.gc_interval)
    plan = PassPlan(finalizer="drop", removal=gone)
    execute.execute_pass(ctx.manager, ctx.workers, ctx.memory, trainjob, plan)
    return None


def _holders(caches: Caches, trainjob: TrainJobView) -> set[str]:
    """Clusters that may hold a copy of a manager TrainJob's objects: those its Workload was
    sent to (nominated) or runs on. Deletion waits for these only; a cluster that held a copy
    once and is gone from the Workload's status is swept by the garbage collector instead."""
    wl_name = jobframework.expected_workload_name(trainjob)
    wl = caches.workload(trainjob.namespace, wl_name)
    if wl is None:
        return set()
    holders = set(wl.nominated_clusters)
    if wl.cluster_name:
        holders.add(wl.cluster_name)
    return holders
