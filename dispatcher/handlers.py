"""kopf wiring of the dispatcher on the manager: indexes, thin handlers, webhooks, resync + GC."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from typing import Any

import kopf

from dispatcher import service
from dispatcher.clusters import Registry, set_active_condition
from dispatcher.dispatch import STRATEGIES, DispatchObserved, RemoteView, reconcile_dispatch
from dispatcher.settings import DispatcherSettings
from trainjob import admission, operator, queueing
from trainjob import constants as c
from trainjob.kube import Cluster
from trainjob.models import InvalidObject, parse_trainjob
from trainjob.queueing_io import execute_queue_plan, priority_of
from trainjob.workload import KUEUE_API

Dict = dict[str, Any]
TRAINJOBS = (c.TRAINER_GROUP, c.TRAINER_VERSION, c.TRAINJOB_PLURAL)
WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")
log = logging.getLogger("dispatcher")


class Memo(kopf.Memo):
    settings: DispatcherSettings
    manager: Cluster
    registry: Registry
    locks: dict[tuple[str, str], threading.Lock]
    locks_guard: threading.Lock
    indexes: dict[str, kopf.Index]  # shared by reference: kopf copies the memo per object
    stop: threading.Event


def _is_multikueue(body: Dict) -> bool:
    return (body.get("spec") or {}).get("managedBy") == c.MANAGED_BY_MULTIKUEUE


# ---- start-up -----------------------------------------------------------------------------------


def on_startup(settings: kopf.OperatorSettings, memo: Memo, **_: Any) -> None:
    s = memo.settings
    webhook = (
        (s.webhook_port, s.webhook_cert, s.webhook_key, s.webhook_ca) if s.webhook_port else None
    )
    operator.configure(
        settings,
        finalizer="dispatcher-cleanup",
        workers=16,
        webhook=webhook,
        webhook_name="dispatcher",
    )
    threading.Thread(target=_resync_loop, args=(memo,), name="resync", daemon=True).start()


def on_cleanup(memo: Memo, **_: Any) -> None:
    memo.stop.set()
    for remote in list(memo.registry.remotes.values()):
        remote.stop()


def on_login(memo: Memo, **kwargs: Any) -> kopf.ConnectionInfo:
    return operator.login(memo.settings.kubeconfig, **kwargs)


# ---- indexes ------------------------------------------------------------------------------------


INDEX_NAMES = (
    "workload_index",
    "trainjob_index",
    "check_index",
    "config_index",
    "cluster_index",
    "flavor_index",
    "runtime_index",
    "cluster_runtime_index",
)


def _indexes(kwargs: dict[str, Any], memo: Memo) -> dict[str, kopf.Index]:
    indexes = {n: kwargs[n] for n in INDEX_NAMES}
    if not memo.indexes:
        memo.indexes.update(indexes)
    return indexes


def _first(index: kopf.Index, key: Any) -> Dict | None:
    store = index.get(key)
    return next(iter(store), None) if store else None


def _all(index: kopf.Index) -> list[Dict]:
    return [v for k in index for v in index[k]]


# ---- cluster registry and admission checks -------------------------------------------------------


def on_cluster_event(type: str, body: kopf.Body, name: str, memo: Memo, **kwargs: Any) -> None:
    if type == "DELETED":
        memo.registry.forget(name)
        return
    memo.registry.reconcile_cluster(dict(body))
    _checks_status(memo, _indexes(kwargs, memo))


def on_secret_event(name: str, memo: Memo, **kwargs: Any) -> None:
    indexes = _indexes(kwargs, memo)
    for mkc in _all(indexes["cluster_index"]):
        ref = ((mkc.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
        if ref.get("location") == name:
            memo.registry.reconcile_cluster(mkc)


def on_check_event(memo: Memo, **kwargs: Any) -> None:
    _checks_status(memo, _indexes(kwargs, memo))


def _our_checks(memo: Memo, indexes: dict[str, kopf.Index]) -> dict[str, Dict]:
    return {
        ac["metadata"]["name"]: ac
        for ac in _all(indexes["check_index"])
        if (ac.get("spec") or {}).get("controllerName") == memo.settings.controller_name
    }


def _config_clusters(check: Dict, indexes: dict[str, kopf.Index]) -> list[str] | None:
    params = (check.get("spec") or {}).get("parameters") or {}
    config = _first(indexes["config_index"], params.get("name"))
    return list((config.get("spec") or {}).get("clusters") or []) if config else None


def _checks_status(memo: Memo, indexes: dict[str, kopf.Index]) -> None:
    """AdmissionCheck Active: its MultiKueueConfig exists and names a connected cluster."""
    for check in _our_checks(memo, indexes).values():
        clusters = _config_clusters(check, indexes)
        params = (check.get("spec") or {}).get("parameters") or {}
        if clusters is None:
            args = (False, "BadConfig", f"MultiKueueConfig {params.get('name')!r} not found")
        elif not any((r := memo.registry.get(n)) is not None and r.connected for n in clusters):
            args = (False, "NoUsableClusters", f"none of the clusters {clusters} is connected")
        else:
            args = (True, "Active", "The admission check is active")
        set_active_condition(memo.manager, check, *args)


# ---- workloads and TrainJobs ---------------------------------------------------------------------


def _lock(memo: Memo, key: tuple[str, str]) -> threading.Lock:
    with memo.locks_guard:
        return memo.locks.setdefault(key, threading.Lock())


def reconcile_workload(
    memo: Memo, namespace: str, name: str, indexes: dict[str, kopf.Index]
) -> None:
    wl = _first(indexes["workload_index"], (namespace, name))
    if wl is None:
        return
    owner = next(
        (r for r in wl["metadata"].get("ownerReferences") or [] if r.get("kind") == "TrainJob"),
        None,
    )
    if owner is None:
        return  # not a TrainJob's Workload: not ours
    trainjob = _first(indexes["trainjob_index"], (namespace, owner["name"]))
    if trainjob is None or not _is_multikueue(trainjob):
        return
    checks = _our_checks(memo, indexes)
    check = next(
        (
            s["name"]
            for s in (wl.get("status") or {}).get("admissionChecks") or []
            if s.get("name") in checks
        ),
        None,
    )
    if check is None:
        return
    clusters = _config_clusters(checks[check], indexes) or []
    remotes = []
    for cname in clusters:
        remote = memo.registry.get(cname)
        if remote is None:
            remotes.append(RemoteView(cname, False, float("inf"), None, None))
            continue
        remotes.append(
            RemoteView(
                cname,
                remote.connected,
                remote.disconnected_for(),
                remote.get("Workload", namespace, name),
                remote.get("TrainJob", namespace, owner["name"]),
            )
        )
    wl.setdefault("apiVersion", KUEUE_API)
    wl.setdefault("kind", "Workload")
    trainjob.setdefault("apiVersion", f"{c.TRAINER_GROUP}/{c.TRAINER_VERSION}")
    trainjob.setdefault("kind", "TrainJob")
    observed = DispatchObserved(
        workload=wl,
        trainjob=trainjob,
        check=check,
        remotes=remotes,
        origin=memo.settings.origin,
        worker_lost_timeout=memo.settings.worker_lost_timeout,
        now=dt.datetime.now(dt.UTC),
        retention=memo.settings.retention_seconds,
    )
    plan = reconcile_dispatch(observed, STRATEGIES[memo.settings.strategy])
    service.execute_dispatch(memo.manager, memo.registry, wl, trainjob, check, plan)


def reconcile_trainjob(
    memo: Memo, namespace: str, name: str, indexes: dict[str, kopf.Index]
) -> None:
    """The shared Kueue integration for a MultiKueue TrainJob, then its Workload's dispatch."""
    with _lock(memo, (namespace, name)):
        body = _first(indexes["trainjob_index"], (namespace, name))
        if body is None or not _is_multikueue(body) or not queueing.is_queued_body(body):
            return
        body.setdefault("apiVersion", f"{c.TRAINER_GROUP}/{c.TRAINER_VERSION}")
        body.setdefault("kind", "TrainJob")
        try:
            tj = parse_trainjob(body)
        except InvalidObject as exc:
            log.warning("[%s] %s/%s: %s", memo.settings.cluster_name, namespace, name, exc)
            return
        ref = tj.spec.runtime_ref
        if ref.kind == c.TRAINING_RUNTIME_KIND:
            runtime = _first(indexes["runtime_index"], (namespace, ref.name))
        else:
            runtime = _first(indexes["cluster_runtime_index"], ref.name)
        wl_name = queueing.expected_workload_name(tj)
        wl = _first(indexes["workload_index"], (namespace, wl_name))
        pc = tj.metadata.labels.get(c.KUEUE_PRIORITY_CLASS_LABEL)
        priority = priority_of(memo.manager, pc) if wl is None and pc else None
        flavors = {f["metadata"]["name"]: f for f in _all(indexes["flavor_index"])}
        observed = queueing.observe(
            tj, runtime, wl, flavors, priority, False, dt.datetime.now(dt.UTC)
        )
        execute_queue_plan(memo.manager, body, queueing.reconcile_queueing(observed))
        reconcile_workload(memo, namespace, wl_name, indexes)


def on_workload_event(namespace: str, name: str, memo: Memo, **kwargs: Any) -> None:
    indexes = _indexes(kwargs, memo)
    wl = _first(indexes["workload_index"], (namespace, name))
    owner = operator.owner_name(wl)
    if owner:
        reconcile_trainjob(memo, namespace, owner, indexes)


def on_trainjob_event(type: str, namespace: str, name: str, memo: Memo, **kwargs: Any) -> None:
    if type != "DELETED":
        reconcile_trainjob(memo, namespace, name, _indexes(kwargs, memo))


def on_trainjob_delete(namespace: str, name: str, body: kopf.Body, memo: Memo, **_: Any) -> None:
    """Remote objects go with the manager TrainJob; a worker that is down is waited for."""
    pending = service.delete_remotes(memo.registry, dict(body), memo.settings.origin)
    if pending:
        raise kopf.TemporaryError(
            f"workers {pending} unreachable; remote objects of "
            f"{namespace}/{name} are deleted once they are back",
            delay=10,
        )


def on_mutate(body: kopf.Body, namespace: str, patch: kopf.Patch, memo: Memo, **_: Any) -> None:
    queue = admission.queue_of(dict(body))
    multikueue = bool(queue) and _queue_has_multikueue(memo, namespace, str(queue))
    for key, value in admission.mutate_on_create(dict(body), multikueue_queue=multikueue).items():
        patch.spec[key] = value


def on_validate(body: kopf.Body, namespace: str, memo: Memo, **_: Any) -> None:
    queue = admission.queue_of(dict(body))
    if queue is None:
        return
    lq = memo.manager.get_or_none(KUEUE_API, "LocalQueue", queue, namespace)
    error = admission.validate_queue(dict(body), lq)
    if error:
        raise kopf.AdmissionError(error, code=422)


def _queue_has_multikueue(memo: Memo, namespace: str, queue: str) -> bool:
    lq = memo.manager.get_or_none(KUEUE_API, "LocalQueue", queue, namespace)
    if lq is None:
        return False
    cq = memo.manager.get_or_none(KUEUE_API, "ClusterQueue", lq["spec"]["clusterQueue"])
    if cq is None:
        return False
    spec = cq.get("spec") or {}
    names = set(spec.get("admissionChecks") or [])
    names |= {
        a["name"] for a in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    }
    for name in names:
        ac = memo.manager.get_or_none(KUEUE_API, "AdmissionCheck", name)
        if ac and (ac.get("spec") or {}).get("controllerName") == memo.settings.controller_name:
            return True
    return False


# ---- resync and garbage collection ------------------------------------------------------------


def on_remote_change(memo: Memo, namespace: str, name: str) -> None:
    """A worker's Workload or TrainJob changed: reconcile the manager TrainJob it belongs to."""
    indexes = memo.indexes
    if not indexes:
        return
    if _first(indexes["trainjob_index"], (namespace, name)) is not None:
        reconcile_trainjob(memo, namespace, name, indexes)
        return
    wl = _first(indexes["workload_index"], (namespace, name))
    owner = operator.owner_name(wl)
    if owner:
        reconcile_trainjob(memo, namespace, owner, indexes)


def _resync_loop(memo: Memo) -> None:
    last_gc = time.monotonic()
    while not memo.stop.wait(memo.settings.resync_seconds):
        indexes = memo.indexes
        if not indexes:
            continue
        try:
            for mkc in _all(indexes["cluster_index"]):
                memo.registry.reconcile_cluster(mkc)
            _checks_status(memo, indexes)
            for key in [k for k in indexes["trainjob_index"] if isinstance(k, tuple)]:
                reconcile_trainjob(memo, key[0], key[1], indexes)
            if time.monotonic() - last_gc >= memo.settings.gc_interval:
                last_gc = time.monotonic()
                service.collect_garbage(
                    memo.registry, indexes["trainjob_index"], indexes["workload_index"]
                )
        except Exception:  # keep resyncing whatever one pass hit
            log.exception("[%s] resync pass failed", memo.settings.cluster_name)


def register(settings: DispatcherSettings) -> kopf.OperatorRegistry:
    """Every handler of the dispatcher, registered at start-up (no import-time globals)."""
    registry = kopf.OperatorRegistry()
    kopf.on.startup(registry=registry)(on_startup)
    kopf.on.cleanup(registry=registry)(on_cleanup)
    kopf.on.login(registry=registry)(on_login)
    operator.add_indexes(registry, *INDEX_NAMES)
    kopf.on.event("kueue.x-k8s.io", "v1beta2", "multikueueclusters", registry=registry)(
        on_cluster_event
    )
    kopf.on.event(
        "v1",
        "secrets",
        registry=registry,
        when=lambda namespace, **_: namespace == settings.namespace,
    )(on_secret_event)
    kopf.on.event("kueue.x-k8s.io", "v1beta2", "admissionchecks", registry=registry)(on_check_event)
    kopf.on.event("kueue.x-k8s.io", "v1beta2", "multikueueconfigs", registry=registry)(
        on_check_event
    )
    kopf.on.event(*WORKLOADS, registry=registry)(on_workload_event)
    kopf.on.event(*TRAINJOBS, registry=registry)(on_trainjob_event)
    kopf.on.delete(
        *TRAINJOBS, registry=registry, when=lambda body, **_: _is_multikueue(dict(body))
    )(on_trainjob_delete)
    if settings.webhook_port:
        kopf.on.mutate(*TRAINJOBS, operation="CREATE", id="suspend-and-route", registry=registry)(
            on_mutate
        )
        kopf.on.validate(*TRAINJOBS, operation="CREATE", id="queue-exists", registry=registry)(
            on_validate
        )
    return registry
