"""kopf wiring of the worker controller: what it watches and caches, and what each event
does. Watch events only put the TrainJob's key on a work queue (trainjob/workqueue.py); the
pass for a key is `reconcile.sync_trainjob` (observe -> pure decision -> execute).
"""

from __future__ import annotations

import threading
from typing import Any

import kopf

from trainjob import constants as c
from trainjob import operator
from trainjob.caches import Caches
from trainjob.conditions import trainjob_finished
from trainjob.informer import Informer
from trainjob.models import prebuilt_label
from trainjob.naming import owning_trainjob
from trainjob.workload import workload_name
from worker_controller import status
from worker_controller.memo import Memo

Dict = dict[str, Any]
OURS = {c.TRAINJOB_NAME_LABEL: kopf.PRESENT}  # Jobs and Services we made
# The watch caches the worker controller keeps (operator.INDEXES, and the three below).
INDEX_NAMES = (
    "trainjob_index",
    "job_index",
    "service_index",
    "runtime_index",
    "cluster_runtime_index",
    "workload_index",
    "flavor_index",
    "owner_index",
)


# ---- start-up ---------------------------------------------------------------------------------


def on_startup(settings: kopf.OperatorSettings, memo: Memo, **_: Any) -> None:
    operator.configure(settings, "worker-controller")
    memo.queue.start()
    for informer in (memo.pods, memo.failed_creates):
        if informer is not None:
            informer.start()
    threading.Thread(target=_resync_loop, args=(memo,), name="resync", daemon=True).start()
    operator.start_watchdog(memo, memo.cluster)


def on_cleanup(memo: Memo, **_: Any) -> None:
    for informer in (memo.pods, memo.failed_creates):
        if informer is not None:
            informer.stop()
    memo.shut_down()


def pod_informer(memo: Memo) -> Informer:
    """Our pods, filtered by the API server (kopf would watch every pod of the cluster), kept
    as digests grouped by TrainJob; a change queues its TrainJob (status.podsStatus)."""
    return Informer(
        memo.cluster.api,
        c.POD,
        lambda _type, pod: memo.queue.add(status.pod_owner(pod)),
        label_selector=c.TRAINJOB_NAME_LABEL,
        name=f"{memo.settings.cluster_name}-pods",
        transform=status.pod_digest,
        group_by=status.pod_owner,
    )


# The Job controller's Events for pods the API refused: only these stream in (the API server
# filters them), from every namespace; there are none while all is well.
FAILED_CREATE_EVENTS = "involvedObject.kind=Job,reason=FailedCreate"


def failed_create_informer(memo: Memo) -> Informer:
    """The Job controller's FailedCreate Events, kept as digests grouped by Job; one queues
    the TrainJob whose Job it is about (status: PodsStuck, PodCreateFailed)."""

    def on_event(_type: str, event: Dict) -> None:
        namespace, job = status.event_job(event)
        try:
            names = [n for ns, n in memo.caches.keys("trainjob_index") if ns == namespace]
        except KeyError:  # TrainJobs not listed yet: their first passes read the Events
            return
        trainjob = owning_trainjob(job, names)
        if trainjob is not None:
            memo.queue.add((namespace, trainjob))

    return Informer(
        memo.cluster.api,
        c.EVENT,
        on_event,
        field_selector=FAILED_CREATE_EVENTS,
        name=f"{memo.settings.cluster_name}-failed-creates",
        transform=status.event_digest,
        group_by=status.event_job,
    )


def _resync_loop(memo: Memo) -> None:
    """Level-based safety net: every TrainJob not yet settled, each resync period.

    A thread of ours rather than kopf timers: kopf puts a finalizer on every object that has
    a timer, and a TrainJob must stay deletable while this controller is down.
    """
    while not memo.stop.wait(memo.settings.resync_seconds):
        memo.queue.log_stats(memo.settings.cluster_name)
        if memo.leads():
            _resync(memo)


def on_leading(memo: Memo) -> None:
    """A new leader looks at every TrainJob once: the last one may have stopped mid-pass."""
    _resync(memo, everything=True)


def _resync(memo: Memo, everything: bool = False) -> None:
    """Queue the TrainJobs not yet settled (`everything`: all of them, as a new leader does)."""
    if not memo.synced.is_set():
        return
    caches = memo.caches
    for key in caches.keys("trainjob_index"):
        body = caches.trainjob(*key)
        if (
            body is not None
            and body["metadata"].get("uid") not in memo.gone
            and (everything or not _settled(body, caches.every("job_index", key)))
        ):
            memo.queue.resync(key)


def _settled(trainjob: Dict, jobs: Any) -> bool:
    """Finished, and none of its Jobs still running: no pass can change anything."""
    if not trainjob_finished((trainjob.get("status") or {}).get("conditions") or []):
        return False
    return not any(
        int((j.get("status") or {}).get("active") or 0) > 0
        or not ((j.get("spec") or {}).get("suspend") or status.job_finished(j))
        for j in jobs
    )


def on_login(memo: Memo, **kwargs: Any) -> kopf.ConnectionInfo:
    return operator.login(memo.settings, **kwargs)


# ---- indexes: kopf keeps them current from its watches -------------------------------------------


async def job_index(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> Dict:
    return {(namespace, labels[c.TRAINJOB_NAME_LABEL]): dict(body)}


async def service_index(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> Dict:
    return {(namespace, labels[c.TRAINJOB_NAME_LABEL]): dict(body)}


async def owner_index(namespace: str, name: str, labels: kopf.Labels, uid: str, **_: Any) -> Dict:
    """Which TrainJob a Workload belongs to: by its deterministic or its prebuilt name."""
    prebuilt = prebuilt_label(labels)
    return {(namespace, prebuilt or workload_name(name, uid)): name}


# ---- events: queue the TrainJob ------------------------------------------------------------


async def on_trainjob_event(type: str, namespace: str, name: str, memo: Memo, **_: Any) -> None:
    if type != "DELETED":
        memo.queue.add((namespace, name))


async def on_job_event(namespace: str, labels: kopf.Labels, memo: Memo, **_: Any) -> None:
    memo.queue.add((namespace, labels[c.TRAINJOB_NAME_LABEL]))


async def on_workload_event(namespace: str, name: str, memo: Memo, **kwargs: Any) -> None:
    owner = Caches(kwargs).first("owner_index", (namespace, name))
    if owner is not None:
        memo.queue.add((namespace, str(owner)))


def register() -> kopf.OperatorRegistry:
    """A registry with every handler (built at start-up, no import-time registration)."""
    registry = kopf.OperatorRegistry()
    kopf.on.startup(registry=registry)(on_startup)
    kopf.on.login(registry=registry)(on_login)
    operator.add_indexes(
        registry,
        "trainjob_index",
        "runtime_index",
        "cluster_runtime_index",
        "workload_index",
        "flavor_index",
    )
    kopf.index(*c.JOB.gvr, labels=OURS, registry=registry)(job_index)
    kopf.index(c.SERVICE.version, c.SERVICE.plural, labels=OURS, registry=registry)(service_index)
    kopf.index(*c.TRAINJOB.gvr, registry=registry)(owner_index)
    kopf.on.event(*c.TRAINJOB.gvr, registry=registry)(on_trainjob_event)
    kopf.on.event(*c.WORKLOAD.gvr, registry=registry)(on_workload_event)
    kopf.on.event(*c.JOB.gvr, labels=OURS, registry=registry)(on_job_event)
    kopf.on.cleanup(registry=registry)(on_cleanup)
    operator.watch_synced(registry, INDEX_NAMES)
    return registry
