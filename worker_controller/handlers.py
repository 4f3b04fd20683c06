"""kopf wiring of the worker controller: indexes (caches), thin handlers, start-up settings.

Every handler does the same three things: gather the observation from kopf's in-memory
indexes, call the pure `reconcile_trainjob`, and hand the Plan to `service.execute`.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

import kopf

from trainjob import constants as c
from trainjob.kube import Cluster, connection_from_kubeconfig, read_kubeconfig
from worker_controller import service
from worker_controller.reconcile import Observed, is_finished, reconcile_trainjob
from worker_controller.settings import WorkerSettings

Dict = dict[str, Any]
TRAINJOBS = (c.TRAINER_GROUP, c.TRAINER_VERSION, c.TRAINJOB_PLURAL)
OURS = {c.TRAINJOB_NAME_LABEL: kopf.PRESENT}


class Memo(kopf.Memo):
    settings: WorkerSettings
    cluster: Cluster
    locks: dict[tuple[str, str], threading.Lock]
    locks_guard: threading.Lock


# ---- start-up ---------------------------------------------------------------------------------


def on_startup(settings: kopf.OperatorSettings, memo: Memo, **_: Any) -> None:
    # Our own domain for kopf's bookkeeping, so nothing on user objects says "zalando".
    settings.persistence.finalizer = f"{c.DOMAIN}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=c.DOMAIN)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=c.DOMAIN, key="last-handled-configuration"
    )
    # We post our own Events for each transition; kopf's per-log-line Events would flood.
    settings.posting.level = logging.WARNING
    # Threads for the sync handlers (each reconcile is short and mostly in memory).
    settings.execution.max_workers = memo.settings.workers
    # Re-establish watches regularly so a silently dead connection is noticed.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 30


def on_login(memo: Memo, **kwargs: Any) -> kopf.ConnectionInfo:
    if memo.settings.kubeconfig is None:
        info = kopf.login_with_service_account(**kwargs)
        if info is None:
            raise kopf.LoginError("no --kubeconfig given and not running in a cluster")
        return info
    return kopf.ConnectionInfo(
        **connection_from_kubeconfig(read_kubeconfig(memo.settings.kubeconfig))
    )


# ---- indexes: kopf keeps them current from its watches -------------------------------------------


def trainjob_index(namespace: str, name: str, body: kopf.Body, **_: Any) -> Dict:
    return {(namespace, name): dict(body)}


def job_index(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> Dict:
    return {(namespace, labels[c.TRAINJOB_NAME_LABEL]): dict(body)}


def service_index(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> Dict:
    return {(namespace, labels[c.TRAINJOB_NAME_LABEL]): dict(body)}


def runtime_index(namespace: str, name: str, body: kopf.Body, **_: Any) -> Dict:
    return {(namespace, name): dict(body)}


def cluster_runtime_index(name: str, body: kopf.Body, **_: Any) -> Dict:
    return {name: dict(body)}


# ---- handlers -----------------------------------------------------------------------------------


def _first(index: kopf.Index, key: Any) -> Dict | None:
    store = index.get(key)
    return next(iter(store), None) if store else None


def _reconcile(
    memo: Memo, namespace: str, name: str, logger: logging.Logger, **indexes: kopf.Index
) -> None:
    key = (namespace, name)
    with memo.locks_guard:
        lock = memo.locks.setdefault(key, threading.Lock())
    with lock:
        trainjob = _first(indexes["trainjob_index"], key)
        if trainjob is None:
            memo.locks.pop(key, None)
            return
        trainjob.setdefault("apiVersion", f"{c.TRAINER_GROUP}/{c.TRAINER_VERSION}")
        trainjob.setdefault("kind", "TrainJob")
        ref = trainjob.get("spec", {}).get("runtimeRef") or {}
        if ref.get("kind") == c.TRAINING_RUNTIME_KIND:
            runtime = _first(indexes["runtime_index"], (namespace, ref.get("name")))
        else:
            runtime = _first(indexes["cluster_runtime_index"], ref.get("name"))
        jobs = {j["metadata"]["name"]: j for j in indexes["job_index"].get(key, [])}
        services = list(indexes["service_index"].get(key, []))
        named = None
        if (
            not services
            and runtime is not None
            and not is_finished((trainjob.get("status") or {}).get("conditions") or [])
        ):
            # Only then can a foreign Service block ours: ask the API.
            named = memo.cluster.get_or_none("v1", "Service", name, namespace)
        observed = Observed(
            trainjob=trainjob,
            runtime=runtime,
            jobs=jobs,
            services=services,
            service_named=named,
            now=dt.datetime.now(dt.UTC),
        )
        plan = reconcile_trainjob(observed)
        service.execute(memo.cluster, trainjob, plan)


def on_trainjob_event(
    type: str, namespace: str, name: str, memo: Memo, logger: logging.Logger, **kwargs: Any
) -> None:
    if type == "DELETED":
        memo.locks.pop((namespace, name), None)
        return
    _reconcile(memo, namespace, name, logger, **_indexes(kwargs))


def on_trainjob_timer(
    namespace: str, name: str, memo: Memo, logger: logging.Logger, **kwargs: Any
) -> None:
    # Drift, deadlines and runtimes that appeared: a periodic level-based pass.
    _reconcile(memo, namespace, name, logger, **_indexes(kwargs))


def on_job_event(
    type: str,
    namespace: str,
    labels: kopf.Labels,
    memo: Memo,
    logger: logging.Logger,
    **kwargs: Any,
) -> None:
    _reconcile(memo, namespace, labels[c.TRAINJOB_NAME_LABEL], logger, **_indexes(kwargs))


def _indexes(kwargs: dict[str, Any]) -> dict[str, kopf.Index]:
    names = (
        "trainjob_index",
        "job_index",
        "service_index",
        "runtime_index",
        "cluster_runtime_index",
    )
    return {n: kwargs[n] for n in names}


def register(settings: WorkerSettings) -> kopf.OperatorRegistry:
    """A registry with every handler, tuned by `settings` (no import-time globals)."""
    registry = kopf.OperatorRegistry()
    kopf.on.startup(registry=registry)(on_startup)
    kopf.on.login(registry=registry)(on_login)
    kopf.index(*TRAINJOBS, registry=registry)(trainjob_index)
    kopf.index("batch", "v1", "jobs", labels=OURS, registry=registry)(job_index)
    kopf.index("v1", "services", labels=OURS, registry=registry)(service_index)
    kopf.index(c.TRAINER_GROUP, c.TRAINER_VERSION, "trainingruntimes", registry=registry)(
        runtime_index
    )
    kopf.index(c.TRAINER_GROUP, c.TRAINER_VERSION, "clustertrainingruntimes", registry=registry)(
        cluster_runtime_index
    )
    kopf.on.event(*TRAINJOBS, registry=registry)(on_trainjob_event)
    kopf.on.event("batch", "v1", "jobs", labels=OURS, registry=registry)(on_job_event)
    kopf.timer(*TRAINJOBS, interval=settings.resync_seconds, registry=registry)(on_trainjob_timer)
    return registry
