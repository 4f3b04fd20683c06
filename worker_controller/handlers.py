"""kopf wiring of the worker controller: indexes (caches), thin handlers, start-up settings.

Watch events only put the TrainJob's key on a work queue (trainjob/workqueue.py). A pass
for a key does the same three things: gather the observation from kopf's in-memory indexes,
call the pure `reconcile_trainjob`, and hand the Plan to `service.execute`.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

import kopf

from trainjob import admission, operator, queueing
from trainjob import constants as c
from trainjob.conditions import trainjob_finished
from trainjob.kube import ApiException, Cluster
from trainjob.models import parse_trainjob
from trainjob.queueing_io import execute_queue_plan, priority_of
from trainjob.workload import workload_name
from trainjob.workqueue import WriteMemory
from worker_controller import service, status
from worker_controller.reconcile import Observed, reconcile_trainjob
from worker_controller.settings import WorkerSettings

Dict = dict[str, Any]
OURS = {c.TRAINJOB_NAME_LABEL: kopf.PRESENT}
log = logging.getLogger("worker_controller")


class Memo(operator.ControllerMemo):
    settings: WorkerSettings
    cluster: Cluster
    # UIDs of TrainJobs the API says are gone while the watch cache still holds them (a watch
    # resumed after an API-server outage may never deliver their deletion).
    gone: set[str]
    memory: WriteMemory  # Workloads the API refused, so the same one is not sent again


# ---- start-up ---------------------------------------------------------------------------------


def on_startup(settings: kopf.OperatorSettings, memo: Memo, **_: Any) -> None:
    operator.configure(settings, memo.settings, "worker-controller")
    memo.queue.start()
    threading.Thread(target=_resync_loop, args=(memo,), name="resync", daemon=True).start()
    operator.start_watchdog(memo, memo.cluster)


def on_cleanup(memo: Memo, **_: Any) -> None:
    memo.shut_down()


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
    indexes = memo.indexes
    for key in [k for k in indexes["trainjob_index"] if isinstance(k, tuple)]:
        body = _first(indexes["trainjob_index"], key)
        if (
            body is not None
            and body["metadata"].get("uid") not in memo.gone
            and (everything or not _settled(body, indexes["job_index"].get(key, [])))
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


def job_index(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> Dict:
    return {(namespace, labels[c.TRAINJOB_NAME_LABEL]): dict(body)}


def service_index(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> Dict:
    return {(namespace, labels[c.TRAINJOB_NAME_LABEL]): dict(body)}


def owner_index(namespace: str, name: str, labels: kopf.Labels, uid: str, **_: Any) -> Dict:
    """Which TrainJob a Workload belongs to: by its deterministic or its prebuilt name."""
    prebuilt = labels.get(c.KUEUE_PREBUILT_WORKLOAD_LABEL)
    return {(namespace, prebuilt or workload_name(name, uid)): name}


# ---- handlers -----------------------------------------------------------------------------------


def _first(index: kopf.Index, key: Any) -> Dict | None:
    store = index.get(key)
    return next(iter(store), None) if store else None


def sync_trainjob(memo: Memo, key: tuple[str, str]) -> float | None:
    """One pass for a TrainJob; returns the seconds after which it wants another (deadlines)."""
    trainjob = _first(memo.indexes["trainjob_index"], key)
    if trainjob is None or trainjob["metadata"].get("uid") in memo.gone:
        return None
    try:
        return _sync(memo, key, trainjob)
    except ApiException as exc:
        if exc.status in (400, 403, 404, 422) and _gone(memo.cluster, trainjob):
            memo.gone.add(trainjob["metadata"]["uid"])
            log.warning(
                "[%s] %s/%s: gone from the API but still in the watch cache; forgotten",
                memo.settings.cluster_name,
                *key,
            )
            return None
        raise


def _gone(cluster: Cluster, trainjob: Dict) -> bool:
    """Whether this very TrainJob (same UID) no longer exists, asked of the API itself."""
    meta = trainjob["metadata"]
    found = cluster.get_or_none(c.TRAINER_API, "TrainJob", meta["name"], meta["namespace"])
    return found is None or found["metadata"].get("uid") != meta.get("uid")


def _sync(memo: Memo, key: tuple[str, str], trainjob: Dict) -> float | None:
    indexes = memo.indexes
    namespace, name = key
    trainjob.setdefault("apiVersion", c.TRAINER_API)
    trainjob.setdefault("kind", "TrainJob")
    ref = trainjob.get("spec", {}).get("runtimeRef") or {}
    if ref.get("kind") == c.TRAINING_RUNTIME_KIND:
        runtime = _first(indexes["runtime_index"], (namespace, ref.get("name")))
    else:
        runtime = _first(indexes["cluster_runtime_index"], ref.get("name"))
    jobs = {j["metadata"]["name"]: j for j in indexes["job_index"].get(key, [])}
    if queueing.is_queued_body(trainjob):
        qplan = _queue_plan(memo, trainjob, runtime, jobs, indexes)
        execute_queue_plan(memo.cluster, trainjob, qplan, memo.memory)
        if qplan.changes_trainjob:
            return None  # the TrainJob's own update event continues from the new spec
    services = list(indexes["service_index"].get(key, []))
    named = None
    if (
        not services
        and runtime is not None
        and not trainjob_finished((trainjob.get("status") or {}).get("conditions") or [])
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
    return plan.requeue_after


def on_trainjob_event(type: str, namespace: str, name: str, memo: Memo, **_: Any) -> None:
    if type != "DELETED":
        memo.queue.add((namespace, name))


def on_job_event(namespace: str, labels: kopf.Labels, memo: Memo, **_: Any) -> None:
    memo.queue.add((namespace, labels[c.TRAINJOB_NAME_LABEL]))


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


def _queue_plan(
    memo: Memo,
    trainjob: Dict,
    runtime: Dict | None,
    jobs: dict[str, Dict],
    indexes: dict[str, kopf.Index],
) -> queueing.QueuePlan:
    tj = parse_trainjob(trainjob)
    wl = _first(indexes["workload_index"], (tj.namespace, queueing.expected_workload_name(tj)))
    priority = None
    pc_name = tj.metadata.labels.get(c.KUEUE_PRIORITY_CLASS_LABEL)
    if wl is None and pc_name:
        priority = priority_of(memo.cluster, pc_name)
    flavors = {k: v for k in indexes["flavor_index"] for v in indexes["flavor_index"][k]}
    active = any(int(j.get("status", {}).get("active") or 0) > 0 for j in jobs.values())
    observed = queueing.observe(tj, runtime, wl, flavors, priority, active, dt.datetime.now(dt.UTC))
    return queueing.reconcile_queueing(observed)


def on_trainjob_mutate(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    changes = admission.mutate_on_create(dict(body))
    for key, value in changes.items():
        patch.spec[key] = value


def on_trainjob_validate(body: kopf.Body, namespace: str, memo: Memo, **_: Any) -> None:
    queue = admission.queue_of(dict(body))
    if queue is None:
        return
    local_queue = memo.cluster.get_or_none(c.KUEUE_API, "LocalQueue", queue, namespace)
    error = admission.validate_queue(dict(body), local_queue)
    if error:
        raise kopf.AdmissionError(error, code=422)


def on_workload_event(namespace: str, name: str, memo: Memo, **kwargs: Any) -> None:
    owner = _first(kwargs["owner_index"], (namespace, name))
    if owner is not None:
        memo.queue.add((namespace, str(owner)))


def register(settings: WorkerSettings) -> kopf.OperatorRegistry:
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
    if settings.webhook_port:
        kopf.on.mutate(*c.TRAINJOB.gvr, operation="CREATE", id="suspend-queued", registry=registry)(
            on_trainjob_mutate
        )
        kopf.on.validate(*c.TRAINJOB.gvr, operation="CREATE", id="queue-exists", registry=registry)(
            on_trainjob_validate
        )
    return registry
