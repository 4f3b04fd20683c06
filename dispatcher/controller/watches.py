"""What the dispatcher watches on the manager (`watches`: one table), and what each event
does. Every handler here is a few lines: it queues a TrainJob's key (the pass itself is
`reconcile.sync_trainjob`), or hands over to the module that owns the behaviour. The workers'
objects are watched per cluster (dispatcher/workers/remote.py), their events handed to
`on_remote_*`.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from dispatcher.controller import admissionchecks, resync
from dispatcher.controller.context import Context
from dispatcher.decisions import dependencies
from dispatcher.decisions.mirror import mirror
from kubebase.kinds import CONFIG_MAP, NAMESPACE, SECRET
from kubebase.objects import Dict
from kubecontrol import controller
from kubecontrol.controller import Watch
from kubecontrol.informer import TENANT_SIZED_PAGE
from trainjob import jobframework
from trainjob.caches import WATCHDOG_CACHES, Index
from trainjob.naming import name_prefixes, owner_name
from trainjob.queues import MultiKueueClusterView
from trainjob_api import constants as c
from trainjob_api.views import EventView, ObjectView, TrainJobView, WorkloadView


def watches(ctx: Context) -> list[Watch]:
    """Every kind the dispatcher keeps on the manager, and what a change of each does."""

    def trainjob_changed(_type: str, trainjob: Dict) -> None:
        ctx.queue.add((trainjob["metadata"]["namespace"], trainjob["metadata"]["name"]))

    def check_changed(_type: str, _obj: Dict) -> None:
        admissionchecks.queue_checks(ctx)

    generations: dict[tuple[str, str], object] = {}

    def runtime_changed(kind: str, runtime: Dict) -> None:
        # A runtime of an opted-in namespace follows its TrainJobs: a change of its spec (a new
        # generation; labels and annotations are not copied) has them bring its copies in
        # step (reconcile._needs).
        meta = runtime["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if kind == "DELETED":
            generations.pop(key, None)
            return
        before, generations[key] = generations.get(key), meta.get("generation")
        if before == meta.get("generation") or not ctx.synced.is_set():
            return
        if dependencies.opted_in(ctx.caches.namespace_labels(key[0])):
            for trainjob in ctx.caches.runtime_users(*key):
                trainjob_changed("MODIFIED", trainjob)

    copying = ctx.settings.copy_dependencies
    table = [
        Watch(
            Index.TRAINJOBS,
            c.TRAINJOB,
            trainjob_changed,
            page=TENANT_SIZED_PAGE,
            groups_of=_runtime_named_by if copying else None,
            groups=Index.RUNTIME_USERS if copying else "",
        ),
        Watch(
            Index.WORKLOADS,
            c.WORKLOAD,
            lambda _type, wl: _enqueue_owner(ctx, wl),
            page=TENANT_SIZED_PAGE,
            # Which Workloads reference each Secret and ConfigMap (dependency_watches).
            groups_of=_named_by if copying else None,
            groups=Index.DEPENDENTS if copying else "",
        ),
        Watch(Index.CLUSTERS, c.MULTIKUEUE_CLUSTER, lambda t, mkc: on_cluster_event(ctx, t, mkc)),
        Watch(Index.CHECKS, c.ADMISSION_CHECK, check_changed),
        Watch(Index.CONFIGS, c.MULTIKUEUE_CONFIG, check_changed),
        # Read from the cache only: their changes queue nothing.
        Watch(Index.LOCAL_QUEUES, c.LOCAL_QUEUE),
        Watch(Index.CLUSTER_QUEUES, c.CLUSTER_QUEUE),
        Watch(Index.FLAVORS, c.RESOURCE_FLAVOR),
        Watch(
            Index.RUNTIMES,
            c.TRAINING_RUNTIME,
            runtime_changed if copying else None,
            page=TENANT_SIZED_PAGE,
        ),
        Watch(Index.CLUSTER_RUNTIMES, c.CLUSTER_TRAINING_RUNTIME),
    ]
    if ctx.settings.copy_dependencies:
        table += dependency_watches(ctx)
    return table


def dependency_watches(ctx: Context) -> list[Watch]:
    """Secrets and ConfigMaps (who they are and a digest, never their content) and the
    namespaces' labels: a change of one in a namespace whose dependencies follow its
    TrainJobs has the TrainJobs that reference it take another look (a missing one appeared,
    a running job's copy is out of date), found in the Workloads' index of what they
    reference; a change of a namespace's labels, all of its TrainJobs. Optional: without the
    RBAC to read them the dispatcher runs all the same, and a job whose namespace opted in
    waits, saying that they cannot be read (reconcile._needs)."""

    def source_changed(_type: str, obj: Dict) -> None:
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        if ctx.synced.is_set() and dependencies.opted_in(ctx.caches.namespace_labels(namespace)):
            for workload in ctx.caches.dependents(namespace, obj["kind"], meta["name"]):
                _enqueue_owner(ctx, workload)

    def namespace_changed(_type: str, obj: Dict) -> None:
        if ctx.synced.is_set():
            _enqueue_namespace(ctx, obj["metadata"]["name"])

    # Helm's release records (up to 1 MiB each) are never a pod's to reference.
    sources = (
        (Index.SECRETS, SECRET, "type!=helm.sh/release.v1"),
        (Index.CONFIG_MAPS, CONFIG_MAP, ""),
    )
    return [
        *(
            Watch(
                index,
                kind,
                source_changed,
                field_selector=fields,
                transform=functools.partial(dependencies.source_seen, kind.kind),
                fallback=functools.partial(dependencies.source_unread, kind.kind),
                optional=True,
                page=TENANT_SIZED_PAGE,  # a tenant's ConfigMap may be 1 MiB
            )
            for index, kind, fields in sources
        ),
        Watch(
            Index.NAMESPACES,
            NAMESPACE,
            namespace_changed,
            transform=_namespace_seen,
            optional=True,
        ),
    ]


def _runtime_named_by(obj: Dict) -> list[tuple[str, str]]:
    """The index of a runtime's users, of a TrainJob as the informer holds it."""
    return dependencies.runtime_named_by(TrainJobView(obj))


def _named_by(obj: Dict) -> list[tuple[str, str, str]]:
    """The index of a Secret's or ConfigMap's dependents, of a Workload as the informer holds
    it."""
    return dependencies.named_by(WorkloadView(obj))


def _namespace_seen(obj: Dict) -> Dict:
    meta = obj.get("metadata") or {}
    kept = ("name", "uid", "resourceVersion", "labels")
    return {"metadata": {k: meta[k] for k in kept if k in meta}}


def _enqueue_namespace(ctx: Context, namespace: str) -> None:
    for key in ctx.caches.trainjob_keys():
        if key[0] == namespace:
            ctx.queue.add(key)


# ---- start-up ---------------------------------------------------------------------------------


def on_synced(ctx: Context) -> None:
    """Once the caches are in: the workers' Secrets, the work queue, the resync loop and the
    watchdog."""
    resync.check_trainjob_crd(ctx)
    ctx.workers.watch_secrets(lambda name: on_source_change(ctx, "kubeConfig", name))
    if ctx.settings.cluster_profiles:
        ctx.workers.watch_cluster_profiles(
            lambda name: on_source_change(ctx, "clusterProfileRef", name)
        )
    ctx.queue.start()
    threading.Thread(target=resync.resync_loop, args=(ctx,), name="resync", daemon=True).start()
    controller.start_watchdog(ctx, ctx.manager, WATCHDOG_CACHES)


def on_leading(ctx: Context) -> None:
    """A new leader looks at everything at once: the last one may have stopped mid-pass."""
    ctx.resync_now.set()


# ---- MultiKueueClusters, their kubeconfig Secrets, AdmissionChecks and configs -------------


def on_cluster_event(ctx: Context, etype: str, raw: Dict) -> None:
    """A MultiKueueCluster changed: every replica connects to its worker (or lets it go); its
    status and our checks' are queued."""
    mkc = MultiKueueClusterView(raw)
    name = mkc.name
    if etype == "DELETED":
        ctx.workers.forget(name)
        admissionchecks.queue_checks(ctx)
        return
    ctx.workers.connect(mkc)
    admissionchecks.queue_cluster(ctx, name)
    admissionchecks.queue_checks(ctx)
    if ctx.workers.labels_changed(name, mkc.labels):
        ctx.resync_now.set()  # TrainJobs choosing clusters by label take another look


def on_source_change(ctx: Context, source: str, name: str) -> None:
    """A Secret (`source` kubeConfig) or a ClusterProfile (clusterProfileRef) of our namespace
    changed: reconnect the clusters it is the source of."""
    if not ctx.synced.is_set():
        return  # the first resync pass reads every cluster's source anyway
    for mkc in ctx.caches.clusters():
        if mkc.source_name(source) == name:
            ctx.workers.connect(mkc)
            admissionchecks.queue_cluster(ctx, mkc.name)


# ---- Workloads and TrainJobs, here and on the workers: queue the TrainJob ------------------
#
# Watch events only put the TrainJob's key on the work queue; its workers reconcile from the
# caches (kubecontrol/workqueue.py).


def _enqueue_owner(ctx: Context, workload: dict[str, Any] | None) -> None:
    if workload is None:
        return
    seen = ObjectView(workload)
    owner = owner_name(seen)
    if owner:
        ctx.queue.add((seen.namespace, owner))


def on_remote_change(ctx: Context, namespace: str, name: str, urgent: bool = False) -> None:
    """A worker's Workload or TrainJob changed: queue the manager TrainJob it belongs to. A
    remote TrainJob whose run ended (`urgent`: its end to bring back, manager quota to free)
    takes the fast lane; other changes queue as usual, so the fast lane stays short."""
    if not ctx.synced.is_set():
        return  # the first resync pass looks at everything
    caches = ctx.caches
    if caches.trainjob(namespace, name) is not None:
        ctx.queue.add((namespace, name), urgent=urgent)
    elif (wl := caches.workload(namespace, name)) is not None:
        _enqueue_owner(ctx, wl.raw)


def on_remote_room(ctx: Context, cluster: str) -> None:
    """A worker may take a copy held back from it now (a ClusterQueue there has more room, or
    a queue or a runtime appeared or changed): the TrainJobs that sent it none take another
    look (reconcile.py keeps `ctx.withheld`)."""
    if not ctx.synced.is_set():
        return
    for key, clusters in list(ctx.withheld.items()):
        if cluster in clusters:
            ctx.queue.add(key)


def on_remote_event(ctx: Context, cluster: str, event: dict[str, Any]) -> None:
    """A worker's Event about a TrainJob or a pod's warning: recorded again on the manager
    TrainJob it is about (mirror.py), by the leader, once."""
    if not ctx.synced.is_set() or not ctx.leads():
        return
    remote = ctx.workers.get(cluster)
    seen = EventView(event)
    namespace = seen.namespace
    if remote is None:
        return
    if seen.about_kind == "TrainJob":
        ours = [seen.about_name]  # the manager's TrainJob of that name says if ours
    else:  # a pod's: the TrainJobs here its name could be of, each looked up (not a scan)
        ours = [
            name
            for name in name_prefixes(seen.about_name)
            if remote.get(c.TRAINJOB.kind, namespace, name) is not None
        ]
    found = mirror(seen, cluster, ours, ctx.settings.mirror_events == "Warning")
    if found is None:
        return
    caches = ctx.caches
    tj = caches.trainjob(namespace, found.trainjob)
    if tj is None:
        return
    wl = caches.workload(namespace, jobframework.expected_workload_name(tj))
    if cluster not in (tj.cluster_name, wl.cluster_name if wl is not None else None):
        return  # only the worker that runs it speaks for it
    ctx.manager.post_event(tj.with_kind(), found.type, found.reason, found.message, found.name)


def on_remote_state(ctx: Context, cluster: str) -> None:
    """A worker connected or went away: every TrainJob still in flight takes another look."""
    ctx.resync_now.set()
