"""Carrying out a dispatcher pass's plan (plan.py), the one module that writes for a pass:
our finalizer, the Kueue integration's writes, the manager Workload's check state, remote
creates and deletes, the manager TrainJob's status (intake, or synced back) and Events."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from dispatcher import metrics
from dispatcher.controller import dependencies_io, placements_io
from dispatcher.decisions import checkpoints, copies
from dispatcher.decisions.decide import DispatchPlan, Guard, RemoteAction
from dispatcher.decisions.plan import Dispatch, PassPlan
from dispatcher.decisions.removal import Removal
from dispatcher.workers import log_tails
from dispatcher.workers.connections import WorkerConnections
from kubebase.events import Event
from kubebase.objects import Dict
from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster, guarded_write
from kubecontrol.workqueue import WriteMemory
from trainjob.jobframework_io import execute_queue_plan
from trainjob_api import constants as c
from trainjob_api.views import ObjectView, TrainJobView, WorkloadView

log = logging.getLogger("dispatcher")


def _where(obj: Dict) -> str:
    return f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"


def _fields(action: RemoteAction) -> dict[str, object]:
    """A remote write's log fields: the worker, the verb and the object."""
    return {
        "cluster": action.cluster,
        "verb": action.verb,
        "kind": action.obj["kind"],
        "object": _where(action.obj),
    }


def execute_pass(
    manager: Cluster,
    workers: WorkerConnections,
    memory: WriteMemory,
    trainjob: TrainJobView,
    plan: PassPlan,
) -> bool:
    """Carry out one pass's plan (plan.py), in order: our finalizer; the Kueue integration's
    writes; the MultiKueue check's (the manager Workload first, then the workers); the
    manager TrainJob's status in one write; the Events. Returns True when a remote write
    failed and the key should come back soon."""
    body = trainjob.with_kind()
    mine = ("TrainJob", trainjob.namespace, trainjob.name)
    if plan.finalizer == "drop" and memory.stale(mine, trainjob.resource_version):
        return False  # planned from the version we let go: its copies were deleted then
    if plan.finalizer == "add":
        version = _set_finalizer(manager, trainjob, add=True)
        if version is not None:
            # Our own change, nothing else: the rest of the pass is written from the version
            # it made (from the one before, every first pass's next write was a conflict).
            body = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
    if plan.queue is not None:
        execute_queue_plan(manager, body, plan.queue, memory)
    failed = False
    events: list[Event] = []
    if plan.dispatch is not None:
        done = _dispatch_writes(manager, workers, memory, trainjob, plan.dispatch)
        if done is None:
            return False  # planned from an old Workload: the watch brings the new one
        failed, events = done
    status = plan.trainjob_status()
    if status is None or _write_status(manager, memory, body, status):
        events = [*plan.intake.events, *events]  # the intake's say what its status changed
    if plan.dispatch is not None:
        ended = plan.dispatch.plan.placement_ended
        if ended is not None and not memory.stale(("Placement", trainjob.uid), ended.key):
            placements_io.record(manager, trainjob, ended)
            memory.wrote(("Placement", trainjob.uid), ended.key)
    if plan.removal is not None:
        deferred = _remove(workers, plan.removal)
        if deferred is not None:
            events.append(Event("Warning", "RemoteCleanupDeferred", deferred))
    for etype, reason, message, once in events:
        manager.post_event(body, etype, reason, message, once)
        say = log.warning if etype == "Warning" else log.info
        say(
            "Event",
            extra={
                "cluster": manager.name,
                "trainjob": _where(body),
                "reason": reason,
                "note": message,
            },
        )
    if plan.finalizer == "drop" and _set_finalizer(manager, trainjob, add=False) is not None:
        memory.wrote(mine, trainjob.resource_version)
    return failed


def _dispatch_writes(
    manager: Cluster,
    workers: WorkerConnections,
    memory: WriteMemory,
    trainjob: TrainJobView,
    dispatch: Dispatch,
) -> tuple[bool, list[Event]] | None:
    """The MultiKueue check's writes: the manager Workload first, then the workers.

    The Workload write is guarded by its resourceVersion and goes first, so a plan made from
    a stale view (a conflict, or a version we already wrote from) stops before it deletes or
    creates anything on a worker (None). Otherwise (whether a remote write failed, the Events
    of the plan and of the writes done)."""
    wl, check, plan = dispatch.workload, dispatch.check, dispatch.plan
    ns, name = wl.key
    version = str(wl.resource_version)
    if plan.writes_workload:
        patch = {
            "metadata": {"resourceVersion": version},
            "status": _workload_status(wl, check, plan),
        }
        if not guarded_write(
            memory,
            ("Workload", ns, name),
            version,
            lambda: manager.patch(c.WORKLOAD, name, ns, patch, subresource="status"),
        ):
            return None
    if plan.deactivate:
        manager.patch(c.WORKLOAD, name, ns, {"spec": {"active": False}})

    def run(actions: list[RemoteAction]) -> list[bool | None]:
        done: list[bool | None] = []
        for action in actions:
            if action.verb == "ensure":
                done.append(dependencies_io.ensure(workers, action))
                if done[-1] is not True:
                    # A dependency not in place: its TrainJob is not made there (the next
                    # pass tries again, or sends the job elsewhere when its name is taken).
                    return done + [False] * (len(actions) - len(done))
            else:
                # (a TrainJob copy whose tails are being read is deleted in a later pass; its
                # Workload's delete is not held for it: a copy still there in the next pass
                # would be judged again, its eviction told twice)
                done.append(_remote_write(workers, action))
        return done

    failed = False
    events = list(plan.events)
    cq = wl.cluster_queue
    for cluster, actions, results in _per_worker(workers, plan.remote, run):
        for action, done in zip(actions, results, strict=True):
            failed |= done is None
            if done and action.event is not None:
                events.append(action.event)
            if done and action.verb == "create" and action.obj["kind"] == "Workload":
                metrics.MULTIKUEUE_DISPATCHED.labels(cq, cluster).inc()
            if done and action.verb == "open":  # the timeout runs from it, copy or no copy
                (opened,) = [
                    g["lastTransitionTime"]
                    for g in action.obj["status"]["preemptionGates"]
                    if g.get("name") == c.KUEUE_MULTIKUEUE_PREEMPTION_GATE
                ]
                workers.note_gate_opened(wl.uid or "", cluster, opened)
            if done and action.verb == "create" and action.obj["kind"] == "TrainJob":
                resume = checkpoints.resume_of(TrainJobView(action.obj))
                if resume is not None:
                    events.append(_resuming(cluster, resume))
    if plan.cluster_name is not None:
        _admitted(wl, cq, plan.cluster_name)
    return failed, events


def _per_worker(
    workers: WorkerConnections,
    actions: list[RemoteAction],
    run: Callable[[list[RemoteAction]], list[bool | None]],
) -> list[tuple[str, list[RemoteAction], list[bool | None]]]:
    """`run` over each worker's writes in their order (its TrainJob before its Workload), the
    workers at once: a slow worker does not hold up the others, and no worker gets its copy
    first every time. Each worker with its writes and what each came to."""
    by_cluster: dict[str, list[RemoteAction]] = {}
    for action in actions:
        by_cluster.setdefault(action.cluster, []).append(action)
    # One worker's writes (the usual case) are sent from this thread: no hand-off.
    mapper = workers.pool.map if len(by_cluster) > 1 else map
    done = mapper(run, by_cluster.values())
    return [
        (cluster, mine, results)
        for (cluster, mine), results in zip(by_cluster.items(), done, strict=True)
    ]


def _remove(workers: WorkerConnections, removal: Removal) -> str | None:
    """A deleted TrainJob's copies deleted (removal.removal), each once, the workers at once;
    the Warning's message when a worker that may hold some keeps them."""

    def run(actions: list[RemoteAction]) -> list[bool | None]:
        return [_remote_write(workers, action, once=True) for action in actions]

    done = _per_worker(workers, removal.deletes, run)
    return removal.deferred(cluster for cluster, _, results in done if None in results)


def sweep(workers: WorkerConnections, orphans: list[RemoteAction]) -> int:
    """The garbage collector's deletes (removal.orphans) carried out one after the other on
    the caller's thread (the resync loop's: never the pool the passes' writes share); a
    delete that fails is logged and planned again by the next sweep. How many were done."""
    return sum(bool(_remote_write(workers, action, once=True)) for action in orphans)


def _resuming(cluster: str, resume: checkpoints.Checkpoint) -> Event:
    step = f" (step {resume.step})" if resume.step is not None else ""
    return Event(
        "Normal",
        "ResumedFromCheckpoint",
        f"sent to cluster {cluster} to resume from checkpoint {resume.name}{step}",
    )


def _set_finalizer(manager: Cluster, trainjob: TrainJobView, *, add: bool) -> str | None:
    """Add or drop our finalizer, keeping everyone else's (guarded by resourceVersion); the
    version the write made, None when it conflicted or the TrainJob is gone."""
    finalizers = [f for f in trainjob.finalizers if f != c.DISPATCHER_FINALIZER]
    if add:
        finalizers.append(c.DISPATCHER_FINALIZER)
    try:
        written = manager.patch(
            c.TRAINJOB,
            trainjob.name,
            trainjob.namespace,
            {"metadata": {"resourceVersion": trainjob.resource_version, "finalizers": finalizers}},
        )
    except ApiException as exc:
        if exc.status not in (404, 409):
            raise
        return None
    return str(written["metadata"]["resourceVersion"])


def _write_status(manager: Cluster, memory: WriteMemory, body: Dict, status: Dict) -> bool:
    """The manager TrainJob's status, guarded by the version the plan was made from (or our
    finalizer's write made from it); False when that version is old (the watch brings the
    new one)."""
    meta = body["metadata"]
    return guarded_write(
        memory,
        ("TrainJob", meta["namespace"], meta["name"]),
        str(meta["resourceVersion"]),
        lambda: manager.patch_status(c.TRAINJOB, body, status),
    )


def _admitted(wl: WorkloadView, cq: str, cluster: str) -> None:
    """Count a worker's admission that won, and the dispatch latency: from quota reserved on
    the manager to now (the winner is written as soon as its admission is seen)."""
    metrics.MULTIKUEUE_ADMITTED.labels(cq, cluster).inc()
    seconds = wl.reserved_for(dt.datetime.now(dt.UTC))
    if seconds is not None:
        metrics.DISPATCH_LATENCY.observe(seconds)


def _workload_status(wl: WorkloadView, check: str, plan: DispatchPlan) -> Dict:
    patch: Dict = {}
    if plan.cluster_name is not None:
        # Kueue accepts clusterName only from the nominated ones, and never both at once.
        patch["clusterName"] = plan.cluster_name
        patch["nominatedClusterNames"] = None
    elif plan.nominated is not None:
        patch["nominatedClusterNames"] = plan.nominated or None
    if plan.forget_cluster:
        patch["clusterName"] = None
    if plan.check_state is not None:
        state, message = plan.check_state
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        checks = []
        for entry in wl.admission_checks:
            if entry.get("name") == check:
                changed = entry.get("state") != state
                entry = {**entry, "state": state, "message": message[:32768]}
                if changed or not entry.get("lastTransitionTime"):
                    entry["lastTransitionTime"] = now
            checks.append(entry)
        patch["admissionChecks"] = checks
        if state == "Retry":
            patch["clusterName"] = None
    return patch


def _remote_write(
    workers: WorkerConnections, action: RemoteAction, *, once: bool = False
) -> bool | None:
    """True when done, False when skipped (sent moments ago, or the worker is gone), None when
    it failed and should be tried again. `once`: the only time it is sent (a deleted
    TrainJob's copies, whose pass does not come back): never skipped as sent moments ago."""
    remote = workers.get(action.cluster)
    if remote is None:
        return False
    meta = action.obj["metadata"]
    key = _write_key(action)
    if not once and not workers.first_time(key):
        return False  # the watch has not shown the last write of this yet
    namespace = meta.get("namespace", "")
    try:
        if action.verb == "create":
            remote.cluster.create(c.kind_of(action.obj), action.obj)
            workers.note_namespace_problem(action.cluster, namespace, None)
            workers.note_taken(action.cluster, namespace, meta["name"], None)
        elif action.verb == "patch":  # a merge patch of our copy
            remote.cluster.patch(
                c.kind_of(action.obj),
                meta["name"],
                namespace,
                {"metadata": _guard(action).preconditions(), "spec": action.obj["spec"]},
            )
        elif action.verb == "open":  # a copy's preemption gates, if it is as we saw it
            remote.cluster.patch(
                c.kind_of(action.obj),
                meta["name"],
                namespace,
                {"metadata": _guard(action).preconditions(), "status": action.obj["status"]},
                subresource="status",
            )
        else:
            if action.capture_tails:
                # its pods go with it: their tails are read first, on a thread of their own,
                # and the delete is tried again (the key comes back) until then
                bounds = log_tails.bounds(workers.settings)
                if not workers.captures.over(
                    str(meta.get("uid")),
                    namespace,
                    lambda: log_tails.keep(workers.manager, remote, action.obj, bounds),
                ):
                    workers.forget_write(key)
                    return None
            # Only the copy we saw (ours, by origin): never a same-named object made since.
            remote.cluster.delete(
                c.kind_of(action.obj),
                meta["name"],
                meta.get("namespace"),
                uid=_guard(action).uid,
            )
    except ApiException as exc:
        if exc.status == 404 and action.verb == "create":
            # The namespace does not exist there: say so in the check's message; the resync
            # tries again (and finds it once someone creates it).
            workers.note_namespace_problem(
                action.cluster, namespace, f"namespace {namespace!r} not found"
            )
            return False
        if exc.status == 409 and action.verb == "create":
            return _already_there(workers, action)
        if exc.status == 409 and action.verb == "open":
            # the copy changed since it was seen (its Kueue wrote it): the pass is tried again
            # on what it holds now, not left until the next change or the timeout
            workers.forget_write(key)
            return None
        if exc.status in (404, 409):
            return False  # already gone, or changed since
        log.warning("copy not written", extra={**_fields(action), "error": exc.reason})
        workers.forget_write(key)
        return None
    except Exception as exc:  # an unreachable worker must not stop the others
        log.warning("copy not written", extra={**_fields(action), "error": str(exc)})
        workers.forget_write(key)
        return None
    log.info("copy written", extra=_fields(action))
    # A copy deleted may be wanted again at once (sent elsewhere, then back): a create after
    # our delete is no repeat, nor a delete after our create.
    undone = {"create": "delete", "delete": "create"}.get(action.verb)
    if undone is not None:
        workers.forget_write((*key[:1], undone, *key[2:]))
    return True


def _guard(action: RemoteAction) -> Guard:
    """The plan's guard of a write to an object it saw (RemoteAction requires one): never
    sent without."""
    if action.guard is None or not action.guard.uid:
        raise ValueError(f"{action.verb} of {_where(action.obj)} on {action.cluster}: no guard")
    return action.guard


def _already_there(workers: WorkerConnections, action: RemoteAction) -> bool | None:
    """A copy's create answered 409: an object of that name is on the worker. Ours (our origin,
    made for this very manager object) is "already there"; anyone else's is noted as a name
    taken there, which keeps copies away from that worker and is said in the check's message,
    and is never adopted, written over or deleted. False (nothing more to do now), or None
    when the worker could not be asked."""
    remote = workers.get(action.cluster)
    meta = action.obj["metadata"]
    if remote is None:
        return False
    try:
        found = remote.cluster.get_or_none(c.kind_of(action.obj), meta["name"], meta["namespace"])
    except Exception as exc:  # the worker went away meanwhile: the next pass asks again
        log.warning("copy not read", extra={**_fields(action), "error": str(exc)})
        workers.forget_write(_write_key(action))
        return None
    why = copies.name_taken(None if found is None else ObjectView(found), ObjectView(action.obj))
    if why is None:
        return False
    workers.note_taken(action.cluster, meta["namespace"], meta["name"], why)
    log.warning("name taken on the worker", extra={"cluster": action.cluster, "why": why})
    return False


def _write_key(action: RemoteAction) -> tuple[str, ...]:
    meta = action.obj["metadata"]
    return (
        action.cluster,
        action.verb,
        action.obj["kind"],
        meta.get("namespace", ""),
        meta["name"],
    )
