"""kopf wiring of the dispatcher on the manager: what it watches and caches, and what each
event does. Every handler here is a few lines: it queues a TrainJob's key (the pass itself is
`reconcile.sync_trainjob`), or hands over to the module that owns the behaviour.
"""

from __future__ import annotations

import threading
from typing import Any

import kopf

from dispatcher import admissionchecks, gc
from dispatcher.clusters import manager_runtimes
from dispatcher.memo import Memo
from dispatcher.mirror import mirror
from trainjob import constants as c
from trainjob import operator, queueing
from trainjob.informer import Informer

# The watch caches the dispatcher keeps with kopf (operator.INDEXES says what each holds) ...
INDEX_NAMES = (
    "check_index",
    "config_index",
    "cluster_index",
    "flavor_index",
    "runtime_index",
    "cluster_runtime_index",
)
# ... and with informers of its own (`_start_informers`), by the index name `Caches` reads.
INFORMED = {
    "trainjob_index": c.TRAINJOB,
    "workload_index": c.WORKLOAD,
    "localqueue_index": c.LOCAL_QUEUE,
    "clusterqueue_index": c.CLUSTER_QUEUE,
}


# ---- start-up and shut-down -----------------------------------------------------------------


def on_startup(settings: kopf.OperatorSettings, memo: Memo, **_: Any) -> None:
    operator.configure(settings, "dispatcher")
    _start_informers(memo)
    memo.registry.watch_secrets(lambda name: on_secret_change(memo, name))
    memo.queue.start()
    threading.Thread(target=gc.resync_loop, args=(memo,), name="resync", daemon=True).start()
    operator.start_watchdog(memo, memo.manager)


def on_cleanup(memo: Memo, **_: Any) -> None:
    memo.resync_now.set()
    memo.shut_down()
    memo.registry.stop()
    for informer in memo.informers:
        informer.stop()


def on_login(memo: Memo, **kwargs: Any) -> kopf.ConnectionInfo:
    return operator.login(memo.settings, **kwargs)


def on_leading(memo: Memo) -> None:
    """A new leader looks at everything at once: the last one may have stopped mid-pass."""
    memo.resync_now.set()


# ---- MultiKueueClusters, their kubeconfig Secrets, AdmissionChecks and configs -------------


def on_cluster_event(type: str, body: kopf.Body, name: str, memo: Memo, **kwargs: Any) -> None:
    if type == "DELETED":
        memo.registry.forget(name)
        return
    caches = memo.caches_of(kwargs)
    runtimes = manager_runtimes(caches) if memo.settings.check_runtimes else None
    memo.registry.reconcile_cluster(dict(body), runtimes)
    admissionchecks.update_checks(memo, caches)
    if memo.registry.labels_changed(name, dict(body.get("metadata", {}).get("labels") or {})):
        memo.resync_now.set()  # TrainJobs choosing clusters by label take another look


def on_secret_change(memo: Memo, name: str) -> None:
    """A Secret of our namespace changed: reconnect the clusters whose kubeconfig it holds."""
    if not memo.synced.is_set():
        return  # the first resync pass reads every cluster's Secret anyway
    for mkc in memo.caches.all("cluster_index"):
        ref = ((mkc.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
        if ref.get("location") == name:
            memo.registry.reconcile_cluster(mkc)


def on_check_event(memo: Memo, **kwargs: Any) -> None:
    admissionchecks.update_checks(memo, memo.caches_of(kwargs))


# ---- Workloads and TrainJobs, here and on the workers: queue the TrainJob ------------------
#
# Watch events only put the TrainJob's key on the work queue; its workers reconcile from the
# caches (trainjob/workqueue.py). The busiest kinds on the manager (TrainJobs and Workloads,
# and the queues whose status Kueue rewrites at every admission) are watched by our own
# informers, not by kopf: kopf's per-event machinery cost more than the key an event queues
# (about a third of the dispatcher's CPU in py-spy profiles).


def _start_informers(memo: Memo) -> None:
    """Watch the manager's TrainJobs, Workloads, LocalQueues and ClusterQueues into
    `memo.indexes` (shaped as kopf's, so `Caches` reads them alike); return once all have
    listed (kopf starts its own watches, and so calls no handler, only after this returns)."""

    def on_workload(_type: str, obj: dict[str, Any]) -> None:
        _enqueue_owner(memo, obj)

    def on_trainjob(_type: str, obj: dict[str, Any]) -> None:
        memo.queue.add((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    on_event = {"trainjob_index": on_trainjob, "workload_index": on_workload}
    informers = {
        index: Informer(memo.manager.api, kind, on_event.get(index, _no_action))
        for index, kind in INFORMED.items()
    }
    for index, informer in informers.items():
        memo.indexes[index] = informer.view
        memo.informers.append(informer)
        informer.start()
    for informer in informers.values():
        while not informer.synced.wait(1.0) and not memo.stop.is_set():
            pass


def _no_action(_type: str, _obj: dict[str, Any]) -> None:
    """Kinds only read from the cache: their changes queue nothing."""


def _enqueue_owner(memo: Memo, workload: dict[str, Any] | None) -> None:
    owner = operator.owner_name(workload)
    if workload is not None and owner:
        memo.queue.add((workload["metadata"]["namespace"], owner))


def on_remote_change(memo: Memo, namespace: str, name: str, urgent: bool = False) -> None:
    """A worker's Workload or TrainJob changed: queue the manager TrainJob it belongs to. A
    remote TrainJob whose run ended (`urgent`: its end to bring back, manager quota to free)
    takes the fast lane; other changes queue as usual, so the fast lane stays short."""
    if not memo.synced.is_set():
        return  # the first resync pass looks at everything
    caches = memo.caches
    if caches.trainjob(namespace, name) is not None:
        memo.queue.add((namespace, name), urgent=urgent)
    else:
        _enqueue_owner(memo, caches.workload(namespace, name))


def on_remote_room(memo: Memo, cluster: str) -> None:
    """A worker may take a copy held back from it now (a ClusterQueue there has more room, or
    a queue or a runtime appeared or changed): the TrainJobs that sent it none take another
    look (reconcile.py keeps `memo.withheld`)."""
    if not memo.synced.is_set():
        return
    for key, clusters in list(memo.withheld.items()):
        if cluster in clusters:
            memo.queue.add(key)


def on_remote_event(memo: Memo, cluster: str, event: dict[str, Any]) -> None:
    """A worker's Event about a TrainJob or a pod's warning: recorded again on the manager
    TrainJob it is about (mirror.py), by the leader, once."""
    if not memo.synced.is_set() or not memo.leads():
        return
    remote = memo.registry.get(cluster)
    namespace = (event.get("metadata") or {}).get("namespace", "")
    involved = event.get("involvedObject") or {}
    if remote is None:
        return
    if involved.get("kind") == "TrainJob":
        ours = [str(involved.get("name"))]  # the manager's TrainJob of that name says if ours
    else:
        ours = [
            t["metadata"]["name"]
            for t in remote.items("TrainJob")
            if t["metadata"].get("namespace") == namespace
        ]
    found = mirror(event, cluster, ours, memo.settings.mirror_events == "Warning")
    if found is None:
        return
    caches = memo.caches
    body = caches.trainjob(namespace, found.trainjob)
    if body is None:
        return
    wl = caches.workload(namespace, queueing.expected_workload_name_of(body)) or {}
    if cluster not in (
        (body.get("status") or {}).get("clusterName"),
        (wl.get("status") or {}).get("clusterName"),
    ):
        return  # only the worker that runs it speaks for it
    body = {"apiVersion": c.TRAINER_API, "kind": c.TRAINJOB.kind, **body}
    memo.manager.post_event(body, found.type, found.reason, found.message, found.name)


def on_remote_state(memo: Memo, cluster: str) -> None:
    """A worker connected or went away: every TrainJob still in flight takes another look."""
    memo.resync_now.set()


def register() -> kopf.OperatorRegistry:
    """Every handler of the dispatcher, registered at start-up (no import-time globals)."""
    registry = kopf.OperatorRegistry()
    kopf.on.startup(registry=registry)(on_startup)
    kopf.on.cleanup(registry=registry)(on_cleanup)
    kopf.on.login(registry=registry)(on_login)
    operator.add_indexes(registry, *INDEX_NAMES)
    kopf.on.event(*c.MULTIKUEUE_CLUSTER.gvr, registry=registry)(on_cluster_event)
    kopf.on.event(*c.ADMISSION_CHECK.gvr, registry=registry)(on_check_event)
    kopf.on.event(*c.MULTIKUEUE_CONFIG.gvr, registry=registry)(on_check_event)
    operator.watch_synced(registry, INDEX_NAMES)
    return registry
