"""kopf wiring of the dispatcher on the manager: indexes, thin handlers, webhooks, resync + GC."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from typing import Any

import kopf

from dispatcher import service
from dispatcher.clusters import (
    Registry,
    check_active,
    down_since,
    parameters_problem,
    set_active_condition,
)
from dispatcher.dispatch import (
    AllAtOnce,
    DispatchObserved,
    Incremental,
    RemoteView,
    Strategy,
    reconcile_dispatch,
)
from dispatcher.intake import not_dispatchable, reconcile_intake
from dispatcher.settings import DispatcherSettings
from trainjob import admission, operator, queueing
from trainjob import conditions as cond
from trainjob import constants as c
from trainjob import workload as wlmod
from trainjob.conditions import trainjob_finished
from trainjob.kube import ApiException, Cluster
from trainjob.models import InvalidObject, parse_trainjob
from trainjob.queueing_io import execute_queue_plan, priority_of
from trainjob.runtime import RuntimeProblem
from trainjob.workqueue import WriteMemory

Dict = dict[str, Any]
log = logging.getLogger("dispatcher")


class Memo(operator.ControllerMemo):
    settings: DispatcherSettings
    manager: Cluster
    registry: Registry
    memory: WriteMemory
    resync_now: threading.Event


def _is_multikueue(body: Dict) -> bool:
    return (body.get("spec") or {}).get("managedBy") == c.MANAGED_BY_MULTIKUEUE


# ---- start-up -----------------------------------------------------------------------------------


def on_startup(settings: kopf.OperatorSettings, memo: Memo, **_: Any) -> None:
    operator.configure(settings, memo.settings, "dispatcher")
    memo.registry.watch_secrets(lambda name: on_secret_change(memo, name), memo.stop)
    memo.queue.start()
    threading.Thread(target=_resync_loop, args=(memo,), name="resync", daemon=True).start()
    operator.start_watchdog(memo, memo.manager)


def on_cleanup(memo: Memo, **_: Any) -> None:
    memo.resync_now.set()
    memo.shut_down()
    for remote in list(memo.registry.remotes.values()):
        remote.stop()


def on_login(memo: Memo, **kwargs: Any) -> kopf.ConnectionInfo:
    return operator.login(memo.settings, **kwargs)


def on_leading(memo: Memo) -> None:
    """A new leader looks at everything at once: the last one may have stopped mid-pass."""
    memo.resync_now.set()


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
    "localqueue_index",
    "clusterqueue_index",
)


def _indexes(kwargs: dict[str, Any]) -> dict[str, kopf.Index]:
    return {n: kwargs[n] for n in INDEX_NAMES}


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
    _checks_status(memo, _indexes(kwargs))


def on_secret_change(memo: Memo, name: str) -> None:
    """A Secret of our namespace changed: reconnect the clusters whose kubeconfig it holds."""
    if not memo.synced.is_set():
        return  # the first resync pass reads every cluster's Secret anyway
    for mkc in _all(memo.indexes["cluster_index"]):
        ref = ((mkc.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
        if ref.get("location") == name:
            memo.registry.reconcile_cluster(mkc)


def on_check_event(memo: Memo, **kwargs: Any) -> None:
    _checks_status(memo, _indexes(kwargs))


def _our_checks(memo: Memo, indexes: dict[str, kopf.Index]) -> dict[str, Dict]:
    return {
        ac["metadata"]["name"]: ac
        for ac in _all(indexes["check_index"])
        if (ac.get("spec") or {}).get("controllerName") == memo.settings.controller_name
    }


def _config_of(check: Dict, indexes: dict[str, kopf.Index]) -> tuple[Dict | None, str | None]:
    """The MultiKueueConfig an AdmissionCheck's parameters name, or why there is none."""
    params = (check.get("spec") or {}).get("parameters") or {}
    problem = parameters_problem(params)
    if problem:
        return None, problem
    config = _first(indexes["config_index"], params.get("name"))
    if config is None:
        return None, f"MultiKueueConfig {params.get('name')!r} not found"
    return config, None


def _config_clusters(check: Dict, indexes: dict[str, kopf.Index]) -> list[str] | None:
    config = _config_of(check, indexes)[0]
    return list((config.get("spec") or {}).get("clusters") or []) if config else None


def _checks_status(memo: Memo, indexes: dict[str, kopf.Index]) -> None:
    """AdmissionCheck Active, with Kueue's reasons: BadConfig, NoUsableClusters or
    SomeActiveClusters (naming the missing and the inactive clusters), Active."""
    for check in _our_checks(memo, indexes).values():
        config, problem = _config_of(check, indexes)
        states: dict[str, bool | None] = {}
        for name in (config or {}).get("spec", {}).get("clusters") or []:
            exists = _first(indexes["cluster_index"], name) is not None
            states[name] = _usable(memo, indexes, name) if exists else None
        set_active_condition(memo.manager, check, *check_active(problem, states))


def _usable(memo: Memo, indexes: dict[str, kopf.Index], cluster: str) -> bool:
    """Connected, or not known to be down: a cluster still being connected after start-up
    counts as it was, so a restart does not turn the check (and its ClusterQueues) inactive."""
    remote = memo.registry.get(cluster)
    if remote is not None and (remote.connected or remote.connecting):
        return True
    mkc = _first(indexes["cluster_index"], cluster)
    conditions = ((mkc or {}).get("status") or {}).get("conditions") or []
    return remote is None and mkc is not None and cond.is_true(conditions, "Active")


# ---- workloads and TrainJobs ---------------------------------------------------------------------
#
# Watch events (kopf's on the manager, ours on the workers) only put the TrainJob's key on the
# work queue; its workers reconcile from the caches. See trainjob/workqueue.py.


def _dispatch(
    memo: Memo, trainjob: Dict, wl_name: str, indexes: dict[str, kopf.Index]
) -> float | None:
    """The MultiKueue check of a TrainJob's Workload: dispatch, watch, sync back, retry."""
    namespace = trainjob["metadata"]["namespace"]
    wl = _first(indexes["workload_index"], (namespace, wl_name))
    if wl is None or operator.owner_name(wl) != trainjob["metadata"]["name"]:
        return None
    checks = _our_checks(memo, indexes)
    check = next(
        (
            s["name"]
            for s in (wl.get("status") or {}).get("admissionChecks") or []
            if s.get("name") in checks
        ),
        None,
    )
    status = wl.get("status") or {}
    if check is None and status.get("clusterName"):
        # Dispatched, then Kueue dropped our check from the Workload (it keeps only checks for
        # the flavours assigned, and a Workload that requests nothing is assigned none): keep
        # watching the worker that runs it through the check its ClusterQueue names.
        cq = (status.get("admission") or {}).get("clusterQueue", "")
        check = _our_check_on_cq(memo, cq, indexes)
    if check is None or check not in checks:
        return None
    remotes = []
    for cname in _config_clusters(checks[check], indexes) or []:
        remote = memo.registry.get(cname)
        if remote is None:
            remotes.append(RemoteView(cname, False, _lost_for(indexes, cname), None, None))
            continue
        remotes.append(
            RemoteView(
                cname,
                remote.connected,
                remote.disconnected_for(),
                remote.get("Workload", namespace, wl_name),
                remote.get("TrainJob", namespace, trainjob["metadata"]["name"]),
                memo.registry.namespace_problem(cname, namespace),
            )
        )
    wl.setdefault("apiVersion", c.KUEUE_API)
    wl.setdefault("kind", "Workload")
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
    plan = reconcile_dispatch(observed, strategy(memo.settings))
    retry = service.execute_dispatch(
        memo.manager, memo.registry, memo.memory, wl, trainjob, check, plan
    )
    return REMOTE_RETRY_SECONDS if retry else plan.requeue_after


def _lost_for(indexes: dict[str, kopf.Index], cluster: str) -> float:
    """How long a cluster the registry holds no connection for has been lost: since its
    MultiKueueCluster turned Active=False (the clock survives restarts), 0 while it was Active
    and is still being connected, forever when no such MultiKueueCluster exists."""
    mkc = _first(indexes["cluster_index"], cluster)
    if mkc is None:
        return float("inf")
    since = down_since(mkc)
    return 0.0 if since is None else max(0.0, time.time() - since)


def strategy(settings: DispatcherSettings) -> Strategy:
    if settings.strategy == "Incremental":
        return Incremental(settings.incremental_batch, settings.incremental_round_seconds)
    return AllAtOnce()


REMOTE_RETRY_SECONDS = 5.0  # a remote write failed: try again after the dedupe window


def sync_trainjob(memo: Memo, key: tuple[str, str]) -> float | None:
    """One pass for a manager TrainJob: finalizer, Kueue integration, dispatch. Returns the
    seconds after which it wants another pass, if time alone can change something."""
    indexes = memo.indexes
    body = _first(indexes["trainjob_index"], key)
    if body is None or not _is_multikueue(body):
        memo.memory.forget(("TrainJob", *key))
        return None
    body.setdefault("apiVersion", c.TRAINER_API)
    body.setdefault("kind", "TrainJob")
    if body["metadata"].get("deletionTimestamp"):
        return _finalize(memo, body)
    if not queueing.is_queued_body(body):
        return None
    if c.DISPATCHER_FINALIZER not in body["metadata"].get("finalizers") or []:
        _set_finalizer(memo.manager, body, add=True)
    try:
        tj = parse_trainjob(body)
    except InvalidObject as exc:
        log.warning("[%s] %s/%s: %s", memo.settings.cluster_name, *key, exc)
        return None
    ref = tj.spec.runtime_ref
    if ref.kind == c.TRAINING_RUNTIME_KIND:
        runtime = _first(indexes["runtime_index"], (tj.namespace, ref.name))
    else:
        runtime = _first(indexes["cluster_runtime_index"], ref.name)
    wl_name = queueing.expected_workload_name(tj)
    wl = _first(indexes["workload_index"], (tj.namespace, wl_name))
    pc = tj.metadata.labels.get(c.KUEUE_PRIORITY_CLASS_LABEL)
    priority = priority_of(memo.manager, pc) if wl is None and pc else None
    flavors = {f["metadata"]["name"]: f for f in _all(indexes["flavor_index"])}
    observed = queueing.observe(tj, runtime, wl, flavors, priority, False, dt.datetime.now(dt.UTC))
    observed.start_blocked = _admitted_without_our_check(memo, wl, indexes)
    plan = queueing.reconcile_queueing(observed)
    execute_queue_plan(memo.manager, body, plan, memo.memory)
    problem = observed.problem
    if observed.start_blocked is not None:
        problem = RuntimeProblem(NOT_DISPATCHABLE, observed.start_blocked)
    intake = reconcile_intake(body, problem, observed.now)
    if intake.status is not None or intake.events:
        service.execute_intake(memo.manager, memo.memory, body, intake)
    return _dispatch(memo, body, wl_name, indexes)


NOT_DISPATCHABLE = "NotDispatchable"


def _admitted_without_our_check(
    memo: Memo, wl: Dict | None, indexes: dict[str, kopf.Index]
) -> str | None:
    """`intake.not_dispatchable` from the caches."""
    return not_dispatchable(
        wl,
        set(_our_checks(memo, indexes)),
        lambda cq: _cq_has_our_check(memo, cq, indexes),
        memo.settings.controller_name,
    )


def _set_finalizer(manager: Cluster, body: Dict, *, add: bool) -> None:
    """Add or drop our finalizer, keeping everyone else's (guarded by resourceVersion)."""
    meta = body["metadata"]
    finalizers = [f for f in meta.get("finalizers") or [] if f != c.DISPATCHER_FINALIZER]
    if add:
        finalizers.append(c.DISPATCHER_FINALIZER)
    try:
        manager.patch(
            body["apiVersion"],
            "TrainJob",
            meta["name"],
            meta["namespace"],
            {"metadata": {"resourceVersion": meta["resourceVersion"], "finalizers": finalizers}},
        )
    except ApiException as exc:
        if exc.status not in (404, 409):
            raise


def _finalize(memo: Memo, body: Dict) -> float | None:
    """A deleted manager TrainJob: remove its remote objects, then let it go. A worker that is
    down is waited for: the TrainJob stays until its objects there are gone too."""
    if c.DISPATCHER_FINALIZER not in body["metadata"].get("finalizers") or []:
        return None
    pending = service.delete_remotes(memo.registry, body, _holders(memo, body))
    if pending:
        log.info(
            "[%s] %s/%s: workers %s unreachable; its remote objects go once they are back",
            memo.settings.cluster_name,
            body["metadata"]["namespace"],
            body["metadata"]["name"],
            pending,
        )
        return DELETE_RETRY_SECONDS
    _set_finalizer(memo.manager, body, add=False)
    return None


DELETE_RETRY_SECONDS = 10.0


def _holders(memo: Memo, body: Dict) -> set[str]:
    """Clusters that may hold a copy of a manager TrainJob's objects: those its Workload was
    sent to (nominated) or runs on. Deletion waits for these only; a cluster that held a copy
    once and is gone from the Workload's status is swept by the garbage collector instead."""
    wl_name = queueing.expected_workload_name_of(body)
    wl = _first(memo.indexes["workload_index"], (body["metadata"]["namespace"], wl_name))
    status = (wl or {}).get("status") or {}
    holders = set(status.get("nominatedClusterNames") or [])
    if status.get("clusterName"):
        holders.add(str(status["clusterName"]))
    return holders


def _enqueue_owner(memo: Memo, workloads: kopf.Index, namespace: str, wl_name: str) -> None:
    owner = operator.owner_name(_first(workloads, (namespace, wl_name)))
    if owner:
        memo.queue.add((namespace, owner))


def on_workload_event(namespace: str, name: str, memo: Memo, **kwargs: Any) -> None:
    _enqueue_owner(memo, kwargs["workload_index"], namespace, name)


def on_trainjob_event(type: str, namespace: str, name: str, memo: Memo, **_: Any) -> None:
    memo.queue.add((namespace, name))


def on_mutate(
    body: kopf.Body, namespace: str, patch: kopf.Patch, memo: Memo, **kwargs: Any
) -> None:
    indexes = _indexes(kwargs)
    queue = admission.queue_of(dict(body))
    multikueue = bool(queue) and _queue_has_multikueue(memo, namespace, str(queue), indexes)
    changes = admission.mutate_on_create(dict(body), multikueue_queue=multikueue)
    for key, value in changes.items():
        patch.spec[key] = value
    managed_by = changes.get("managedBy", (body.get("spec") or {}).get("managedBy"))
    if managed_by == c.MANAGED_BY_MULTIKUEUE:
        # Ours from the start: no extra write, and no window in which a delete could skip us.
        finalizers = list(body.get("metadata", {}).get("finalizers") or [])
        if c.DISPATCHER_FINALIZER not in finalizers:
            patch.metadata["finalizers"] = [*finalizers, c.DISPATCHER_FINALIZER]


def on_validate(body: kopf.Body, namespace: str, memo: Memo, **kwargs: Any) -> None:
    queue = admission.queue_of(dict(body))
    if queue is None:
        return
    lq = _local_queue(memo, namespace, queue, _indexes(kwargs))
    error = admission.validate_queue(dict(body), lq)
    if error:
        raise kopf.AdmissionError(error, code=422)


def _local_queue(
    memo: Memo, namespace: str, name: str, indexes: dict[str, kopf.Index]
) -> Dict | None:
    """From the watch cache; a queue made moments ago may not be there yet, so ask then."""
    found = _first(indexes["localqueue_index"], (namespace, name))
    return found or memo.manager.get_or_none(c.KUEUE_API, "LocalQueue", name, namespace)


def _queue_has_multikueue(
    memo: Memo, namespace: str, queue: str, indexes: dict[str, kopf.Index]
) -> bool:
    lq = _local_queue(memo, namespace, queue, indexes)
    if lq is None:
        return False
    return _cq_has_our_check(memo, lq["spec"]["clusterQueue"], indexes)


def _cq_has_our_check(memo: Memo, cq_name: str, indexes: dict[str, kopf.Index]) -> bool:
    return _our_check_on_cq(memo, cq_name, indexes) is not None


def _our_check_on_cq(memo: Memo, cq_name: str, indexes: dict[str, kopf.Index]) -> str | None:
    """The name of an admission check of ours a ClusterQueue uses, if any."""
    cq = _first(indexes["clusterqueue_index"], cq_name) or memo.manager.get_or_none(
        c.KUEUE_API, "ClusterQueue", cq_name
    )
    if cq is None:
        return None
    spec = cq.get("spec") or {}
    names = set(spec.get("admissionChecks") or [])
    names |= {
        a["name"] for a in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    }
    for name in sorted(names):
        check = _first(indexes["check_index"], name) or memo.manager.get_or_none(
            c.KUEUE_API, "AdmissionCheck", name
        )  # asked only for a check made moments ago, not cached yet
        if (
            check
            and (check.get("spec") or {}).get("controllerName") == memo.settings.controller_name
        ):
            return str(name)
    return None


# ---- remote changes, resync and garbage collection ----------------------------------------------


def on_remote_change(memo: Memo, namespace: str, name: str) -> None:
    """A worker's Workload or TrainJob changed: queue the manager TrainJob it belongs to. A
    remote TrainJob's change (status to bring back; on completion, manager quota to free)
    takes the fast lane."""
    if not memo.synced.is_set():
        return
    if _first(memo.indexes["trainjob_index"], (namespace, name)) is not None:
        memo.queue.add((namespace, name), urgent=True)
    else:
        _enqueue_owner(memo, memo.indexes["workload_index"], namespace, name)


def on_remote_state(memo: Memo, cluster: str) -> None:
    """A worker connected or went away: every TrainJob still in flight takes another look."""
    memo.resync_now.set()


def _settled(memo: Memo, body: Dict) -> bool:
    """Finished, its Workload finished, and nothing of it left on any worker: no pass can
    change anything, so periodic resyncs skip it (its own events still queue it)."""
    meta = body["metadata"]
    if meta.get("deletionTimestamp") or not trainjob_finished(
        (body.get("status") or {}).get("conditions") or []
    ):
        return False
    ns = meta["namespace"]
    wl_name = queueing.expected_workload_name_of(body)
    wl = _first(memo.indexes["workload_index"], (ns, wl_name))
    if wl is not None and not wlmod.is_finished(wl):
        return False
    return not any(
        remote.get("TrainJob", ns, meta["name"]) or remote.get("Workload", ns, wl_name)
        for remote in list(memo.registry.remotes.values())
    )


def _resync_loop(memo: Memo) -> None:
    """Level-based safety net: every TrainJob in flight each resync period (sooner when a
    worker's connection changed), plus the orphan sweep on the workers."""
    last_gc = time.monotonic()
    while not memo.stop.is_set():
        memo.resync_now.wait(memo.settings.resync_seconds)
        memo.resync_now.clear()
        indexes = memo.indexes
        if not memo.synced.is_set() or memo.stop.is_set() or not memo.leads():
            continue
        memo.queue.log_stats(memo.settings.cluster_name)
        try:
            for mkc in _all(indexes["cluster_index"]):
                try:  # one broken MultiKueueCluster must not hold up the others, or the pass
                    memo.registry.reconcile_cluster(mkc)
                except Exception:
                    log.exception(
                        "[%s] MultiKueueCluster %s: cannot reconcile",
                        memo.settings.cluster_name,
                        mkc["metadata"]["name"],
                    )
            _checks_status(memo, indexes)
            for key in [k for k in indexes["trainjob_index"] if isinstance(k, tuple)]:
                body = _first(indexes["trainjob_index"], key)
                if body is not None and _is_multikueue(body) and not _settled(memo, body):
                    memo.queue.resync(key)
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
    kopf.on.event(*c.MULTIKUEUE_CLUSTER.gvr, registry=registry)(on_cluster_event)
    kopf.on.event(*c.ADMISSION_CHECK.gvr, registry=registry)(on_check_event)
    kopf.on.event(*c.MULTIKUEUE_CONFIG.gvr, registry=registry)(on_check_event)
    kopf.on.event(*c.WORKLOAD.gvr, registry=registry)(on_workload_event)
    kopf.on.event(*c.TRAINJOB.gvr, registry=registry)(on_trainjob_event)
    operator.watch_synced(registry, INDEX_NAMES)
    if settings.webhook_port:
        # Persistent (kept registered while we are down, failurePolicy Fail), as Kueue's are:
        # a TrainJob created meanwhile is refused, not accepted without managedBy, which is
        # immutable and would leave it on the manager with nobody to run it.
        webhook = {"operation": "CREATE", "persistent": True, "registry": registry}
        kopf.on.mutate(*c.TRAINJOB.gvr, id="suspend-and-route", **webhook)(on_mutate)
        kopf.on.validate(*c.TRAINJOB.gvr, id="queue-exists", **webhook)(on_validate)
    return registry
