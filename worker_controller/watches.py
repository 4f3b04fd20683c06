"""What the worker controller watches (`watches`: one table), and what each event does: it
only puts a TrainJob's key on the work queue (kubecontrol/workqueue.py); the pass for a key is
`reconcile.sync_trainjob` (observe -> pure decision -> execute).
"""

from __future__ import annotations

import logging
import threading

from kubebase.kinds import WEBHOOK_CONFIGURATIONS
from kubebase.objects import Dict
from kubecontrol.controller import Watch, start_watchdog
from kubecontrol.informer import TENANT_SIZED_PAGE, slim
from kubecontrol.schema_bounds import version_schema
from trainjob.caches import WATCHDOG_CACHES, Index
from trainjob.crd import (
    NEEDED_STATUS_FIELDS,
    TRAINJOB_CRD,
    WORKER_STATUS_FIELDS,
    missing_status_fields,
    trainer_controller_problem,
)
from trainjob.jobframework import expected_workload_name
from trainjob.naming import owner_name, owning_trainjob
from trainjob.ownership import controlled_by_a_trainjob
from trainjob_api import constants as c
from trainjob_api.views import JobView, ObjectView, TrainJobView
from worker_controller import digests
from worker_controller.context import Context

log = logging.getLogger("worker_controller.watches")


def watches(ctx: Context) -> list[Watch]:
    """Every kind the worker controller keeps, and what a change of each queues."""

    def trainjob_changed(etype: str, trainjob: Dict) -> None:
        if etype != "DELETED":
            ctx.queue.add(_key(trainjob))

    def job_changed(_type: str, job: Dict) -> None:
        ctx.queue.add(_controller(job))

    def workload_changed(_type: str, workload: Dict) -> None:
        owner = ctx.caches.trainjob_by_workload(*_key(workload))
        if owner is not None:
            ctx.queue.add(owner.key)

    table = [
        Watch(
            Index.TRAINJOBS,
            c.TRAINJOB,
            trainjob_changed,
            group_by=_workload_key,
            groups=Index.TRAINJOB_BY_WORKLOAD,  # (namespace, its Workload's name) -> the TrainJob
            page=TENANT_SIZED_PAGE,
        ),
        # Workloads (ours, and every MultiKueue copy waiting here) and Jobs are kept without
        # their pods' image, command and environment (digests.py), which nothing here reads.
        Watch(
            Index.WORKLOADS,
            c.WORKLOAD,
            workload_changed,
            transform=lambda workload: digests.workload_digest(slim(workload)),
            page=TENANT_SIZED_PAGE,
        ),
        # Jobs a TrainJob controls, by it (reconcile keeps those of its very UID): kept by their
        # owner, not filtered by our label, which whoever may edit Jobs can take off a running
        # one (it would leave the cache, and go on running once its TrainJob was suspended).
        Watch(
            "jobs",
            c.JOB,
            job_changed,
            keep=controlled_by_a_trainjob,
            transform=lambda job: digests.job_digest(slim(job)),
            group_by=_controller,
            groups=Index.JOBS,
            page=TENANT_SIZED_PAGE,  # a Job carries its tenant's pod template
        ),
        # Services we made (the API server filters them by our label), by the label (one that
        # is not ours is a condition, never written).
        Watch(
            "services",
            c.SERVICE,
            label_selector=c.TRAINJOB_NAME_LABEL,
            group_by=_trainjob_label,
            groups=Index.SERVICES,
            page=TENANT_SIZED_PAGE,
        ),
        Watch(Index.RUNTIMES, c.TRAINING_RUNTIME, page=TENANT_SIZED_PAGE),
        Watch(Index.CLUSTER_RUNTIMES, c.CLUSTER_TRAINING_RUNTIME),
        Watch(Index.FLAVORS, c.RESOURCE_FLAVOR),
        # A namespace's default queue, for admission (a TrainJob created without a queue)
        Watch(Index.LOCAL_QUEUES, c.LOCAL_QUEUE),
    ]
    if ctx.settings.pod_summary:
        table += [
            # Our pods, kept as digests grouped by TrainJob (status.podsStatus).
            Watch(
                "pods",
                c.POD,
                lambda _type, pod: ctx.queue.add(digests.pod_owner(pod)),
                label_selector=c.TRAINJOB_NAME_LABEL,
                transform=digests.pod_digest,
                group_by=digests.pod_owner,
                groups=Index.PODS,
                page=TENANT_SIZED_PAGE,
            ),
            # The Job controller's Events for pods the API refused: only these stream in,
            # from every namespace; there are none while all is well (status: PodsStuck,
            # PodCreateFailed).
            Watch(
                "failed_creates",
                c.EVENT,
                lambda _type, event: _failed_create(ctx, event),
                field_selector=FAILED_CREATE_EVENTS,
                transform=digests.event_digest,
                group_by=digests.event_job,
                groups=Index.FAILED_CREATES,  # by Job
            ),
        ]
    return table


FAILED_CREATE_EVENTS = "involvedObject.kind=Job,reason=FailedCreate"


def _key(obj: Dict) -> tuple[str, str]:
    return obj["metadata"]["namespace"], obj["metadata"]["name"]


def _trainjob_label(obj: Dict) -> tuple[str, str]:
    """A Job's or Service's TrainJob, from our label on it."""
    meta = obj["metadata"]
    return meta["namespace"], (meta.get("labels") or {}).get(c.TRAINJOB_NAME_LABEL, "")


def _controller(obj: Dict) -> tuple[str, str]:
    """A Job's TrainJob: its controller owner of that kind ("" when it has none)."""
    meta = obj["metadata"]
    return meta["namespace"], owner_name(ObjectView(obj), controller=True) or ""


def _workload_key(trainjob: Dict) -> tuple[str, str]:
    """(namespace, the name of its Workload): the deterministic one, or the prebuilt one a
    MultiKueue copy names."""
    view = TrainJobView(trainjob)
    return view.namespace, expected_workload_name(view)


def _failed_create(ctx: Context, event: Dict) -> None:
    """A FailedCreate Event queues the TrainJob whose Job it is about."""
    namespace, job = digests.event_job(event)
    names = [n for ns, n in ctx.caches.trainjob_keys() if ns == namespace]
    trainjob = owning_trainjob(job, names)
    if trainjob is not None:
        ctx.queue.add((namespace, trainjob))


# ---- the controller's own loops ---------------------------------------------------------------


def on_synced(ctx: Context) -> None:
    """Once the caches are in: the look for Kubeflow Trainer's controller (before the queue
    opens), the work queue's workers, the resync loop, the watchdog."""
    check_trainer(ctx)
    threading.Thread(target=_trainer_loop, args=(ctx,), name="trainer-check", daemon=True).start()
    ctx.queue.start()
    threading.Thread(target=_resync_loop, args=(ctx,), name="resync", daemon=True).start()
    start_watchdog(ctx, ctx.cluster, WATCHDOG_CACHES)


def check_trainer(ctx: Context) -> None:
    """Hold the work while Kubeflow Trainer's controller is installed here (its webhook
    configurations; trainjob/crd.py), and let it go once it is removed; say so each time."""
    configurations = []
    try:
        for kind in WEBHOOK_CONFIGURATIONS:
            found = ctx.cluster.send("GET", kind.path(None, None))
            configurations += [{**item, "kind": kind.kind} for item in found.get("items") or []]
    except Exception as exc:  # unreadable (a blip, RBAC): keep the last verdict, look again
        log.warning(
            "webhook configurations not listed",
            extra={"cluster": ctx.settings.cluster_name, "error": str(exc)},
        )
        return
    _warn_of_trainers_crd(ctx)
    problem = trainer_controller_problem(configurations)
    if problem is not None:
        log.error(
            "held: Kubeflow Trainer's controller is here",
            extra={"cluster": ctx.settings.cluster_name, "why": problem},
        )
    elif ctx.held is not None:
        log.info(
            "Kubeflow Trainer's controller is gone: reconciling",
            extra={"cluster": ctx.settings.cluster_name},
        )
    if problem != ctx.held:
        ctx.hold_work(problem)


def _warn_of_trainers_crd(ctx: Context) -> None:
    """Say (as an error, at each check) when the TrainJob CRD is not this product's (Kubeflow
    Trainer's own, or an old one): TrainJobs still run, but the API server drops the status
    fields this product adds (status.podsStatus, the worker a job runs on)."""
    try:
        crd = ctx.cluster.get_or_none(c.CUSTOM_RESOURCE_DEFINITION, TRAINJOB_CRD)
    except Exception as exc:  # unreadable now: look again at the next check
        log.debug(
            "TrainJob CRD not read", extra={"cluster": ctx.settings.cluster_name, "error": str(exc)}
        )
        return
    ctx.trainjob_schema = version_schema(crd, c.TRAINER_VERSION)
    if crd is not None and missing_status_fields(
        ObjectView(crd), NEEDED_STATUS_FIELDS + WORKER_STATUS_FIELDS
    ):
        log.error(
            "the TrainJob CRD is not this product's (Kubeflow Trainer's own, or an old one, was "
            "applied over it): the API server drops the status this controller adds; apply the "
            "product's CRDs again (kubectl apply --server-side -k crds/)",
            extra={"cluster": ctx.settings.cluster_name, "crd": TRAINJOB_CRD},
        )


def _trainer_loop(ctx: Context) -> None:
    while not ctx.stop.wait(ctx.settings.trainer_check_seconds):
        check_trainer(ctx)


def _resync_loop(ctx: Context) -> None:
    """Level-based safety net: every TrainJob not yet settled, each resync period (a thread,
    never a finalizer: a TrainJob stays deletable while this controller is down)."""
    while not ctx.stop.wait(ctx.settings.resync_seconds):
        ctx.queue.log_stats(ctx.settings.cluster_name)
        if ctx.leads():
            _resync(ctx)


def on_leading(ctx: Context) -> None:
    """A new leader looks at every TrainJob once: the last one may have stopped mid-pass."""
    _resync(ctx, everything=True)


def _resync(ctx: Context, everything: bool = False) -> None:
    """Queue the TrainJobs not yet settled (`everything`: all of them, as a new leader does)."""
    if not ctx.synced.is_set():
        return
    caches = ctx.caches
    live = set()
    for key in caches.trainjob_keys():
        tj = caches.trainjob(*key)
        if tj is not None:
            live.add(str(tj.uid or ""))
        if (
            tj is not None
            and tj.uid not in ctx.gone
            and (everything or not _settled(tj, caches.jobs_of(key)))
        ):
            ctx.queue.resync(key)
    ctx.forget_all_but(live)


def _settled(trainjob: TrainJobView, jobs: list[JobView]) -> bool:
    """Finished, and none of its Jobs still running: no pass can change anything."""
    if not trainjob.finished:
        return False
    return not any(j.count("active") > 0 or not (j.suspended or j.finished) for j in jobs)
