"""The Kueue integration's I/O, shared by the worker controller and the dispatcher: gather
what `jobframework.reconcile_queueing` looks at, and carry out the QueuePlan it returns."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from typing import Any

from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster, guarded_write
from kubecontrol.workqueue import WriteMemory
from trainjob import constants as c
from trainjob.caches import Caches
from trainjob.jobframework import (
    QueueObserved,
    QueuePlan,
    Shape,
    expected_workload_name,
    expected_workload_name_of,
    observe,
    shape_of,
)
from trainjob.lru import LRU
from trainjob.models import TrainJob

Dict = dict[str, Any]
log = logging.getLogger("trainjob.jobframework")


def observe_queueing(
    cluster: Cluster, caches: Caches, tj: TrainJob, runtime: Dict | None, jobs_active: bool
) -> QueueObserved:
    """What the Kueue integration looks at for one TrainJob, from the caches: its Workload,
    the ResourceFlavors, and (only while there is no Workload yet to build) the priority its
    WorkloadPriorityClass label names, asked of the API."""
    wl = caches.workload(tj.namespace, expected_workload_name(tj))
    pc = tj.metadata.labels.get(c.KUEUE_PRIORITY_CLASS_LABEL)
    priority = _priority_of(cluster, pc) if wl is None and pc else None
    now = dt.datetime.now(dt.UTC)
    shape = _shape(tj, runtime) if wl is not None else None
    return observe(tj, runtime, wl, caches.flavors(), priority, jobs_active, now, shape)


# A TrainJob's pod sets as Kueue counts them are a pure function of its spec (uid and
# generation name it), whether it is queued, and the runtime's version. Without this, every
# pass rebuilt the whole runtime info (templates copied and merged, policies applied) only to
# read a few counts. The entries are small (no templates), so one per TrainJob in flight fits.
_SHAPES: LRU[tuple[str, ...], Shape] = LRU(4096)


def _shape(tj: TrainJob, runtime: Dict | None) -> Shape | None:
    rmeta = (runtime or {}).get("metadata") or {}
    uid, generation = tj.metadata.uid, tj.metadata.generation
    ruid, rversion = rmeta.get("uid"), rmeta.get("resourceVersion")
    if not uid or generation is None or (runtime is not None and not (ruid and rversion)):
        return None  # not a stored version: nothing names its content
    key = (uid, str(generation), str(tj.queued), str(ruid or ""), str(rversion or ""))
    return _SHAPES.get_or_make(key, lambda: shape_of(tj, runtime))


def _priority_of(cluster: Cluster, name: str) -> tuple[str, int] | None:
    """(name, value) of a WorkloadPriorityClass, or None when it does not exist."""
    pc = cluster.get_or_none(c.KUEUE_API, "WorkloadPriorityClass", name)
    return (name, int(pc.get("value", 0))) if pc is not None else None


def execute_queue_plan(
    cluster: Cluster, trainjob: Dict, plan: QueuePlan, memory: WriteMemory
) -> None:
    """Carry out the Kueue integration's plan; conflicts wait for the next watch event.

    The Workload's writes and the TrainJob's are each guarded by the version they were
    planned from (`guarded_write`): a plan made from a version we have changed since (the
    cache has not caught up) is dropped, as its write would conflict or repeat ours, and the
    watch brings the new one. `memory` also remembers Workloads refused as invalid, so the same
    one is not sent again until the TrainJob or its runtime changes what we would build."""
    meta = trainjob["metadata"]
    ns, where = meta["namespace"], f"[{cluster.name}] {meta['namespace']}/{meta['name']}"
    name = expected_workload_name_of(trainjob)
    if plan.trainjob_patch is not None and memory.stale(
        ("TrainJob", ns, meta["name"]), meta["resourceVersion"]
    ):
        return  # everything here was planned from that TrainJob
    try:
        if plan.create_workload is not None:
            _create_workload(cluster, trainjob, plan.create_workload, memory, where)
        if plan.workload_version and not guarded_write(
            memory,
            ("Workload", ns, name),
            plan.workload_version,
            lambda: _write_workload(cluster, name, ns, plan, memory, where),
        ):
            return
        patch = plan.trainjob_patch
        if patch is not None and not guarded_write(
            memory,
            ("TrainJob", ns, meta["name"]),
            meta["resourceVersion"],
            lambda: cluster.patch(
                trainjob["apiVersion"],
                "TrainJob",
                meta["name"],
                ns,
                {**patch, "metadata": {"resourceVersion": meta["resourceVersion"]}},
            ),
        ):
            return
    except ApiException as exc:
        if exc.status in (404, 409):
            log.debug("%s: %s, retrying on the next event", where, exc.reason)
            return
        raise
    for etype, reason, message in plan.events:
        cluster.post_event(trainjob, etype, reason, message)
        log.info("%s: %s: %s", where, reason, message)


def _write_workload(
    cluster: Cluster, name: str, ns: str, plan: QueuePlan, memory: WriteMemory, where: str
) -> Dict | None:
    """The plan's writes of an existing Workload, in order; the last object one returned (None
    when none was sent)."""
    result = None
    if plan.delete_workload is not None:
        cluster.delete(c.KUEUE_API, "Workload", plan.delete_workload, ns)
    if plan.workload_patch is not None and name:
        result = cluster.patch(c.KUEUE_API, "Workload", name, ns, plan.workload_patch)
    if plan.workload_status is not None and name:
        status = {
            "metadata": {"resourceVersion": plan.workload_version},
            "status": plan.workload_status,
        }
        result = cluster.patch(c.KUEUE_API, "Workload", name, ns, status, subresource="status")
    if plan.workload_readiness is not None and name:
        result = (
            _apply_readiness(cluster, name, ns, plan.workload_readiness, memory, where) or result
        )
    return result


def _create_workload(
    cluster: Cluster, trainjob: Dict, workload: Dict, refusals: WriteMemory, where: str
) -> None:
    """Create the Workload and record it on the TrainJob (a 409, planned from a cache that
    lags, goes to the caller). When the API or Kueue's webhook refuses it as invalid, a
    Warning Event gives the API's reason, once per distinct Workload, and nothing sends it
    again until what we would build changes."""
    key = ("WorkloadRefused", trainjob["metadata"].get("uid"))
    digest = hashlib.sha256(json.dumps(workload.get("spec"), sort_keys=True).encode()).hexdigest()
    if refusals.stale(key, digest):
        return
    try:
        cluster.create(workload)
    except ApiException as exc:
        if not _refused(exc):
            raise
        refusals.wrote(key, digest)
        message = (
            f"Kueue refused Workload {workload['metadata']['name']}: "
            f"{_api_message(exc)}; it is created again once the TrainJob or its runtime changes"
        )
        cluster.post_event(trainjob, "Warning", "WorkloadRefused", message)
        log.warning("%s: %s", where, message)
        return
    refusals.forget(key)
    message = (
        f"Created Workload {workload['metadata']['name']} in queue {workload['spec']['queueName']}"
    )
    cluster.post_event(trainjob, "Normal", "CreatedWorkload", message)
    log.info("%s: CreatedWorkload: %s", where, message)


def _refused(exc: ApiException) -> bool:
    """The API or an admission webhook judged the object itself invalid: 422, or the 403 with
    which a validating webhook denies (an RBAC 403 is not about the object: retried)."""
    return exc.status == 422 or (
        exc.status == 403 and _api_message(exc).startswith("admission webhook")
    )


def _api_message(exc: ApiException) -> str:
    """The `message` of the API's Status body (it names the field), else the HTTP reason."""
    try:
        return str(json.loads(exc.body or "")["message"])
    except (ValueError, KeyError, TypeError):
        return str(exc.reason)


# How long the same PodsReady / reclaimablePods apply is not sent again while the cache does
# not show it yet (Kueue's write of the Workload can land between ours and its watch event).
READINESS_REPEAT_SECONDS = 5.0


def _apply_readiness(
    cluster: Cluster, name: str, namespace: str, status: Dict, memory: WriteMemory, where: str
) -> Dict | None:
    """Server-side apply of the Workload status fields we own (PodsReady, reclaimablePods):
    Kueue writes the other conditions of the same list meanwhile, and an apply touches only
    our entries, so neither write can undo the other's. The same content (times aside) is
    sent once within READINESS_REPEAT_SECONDS; None when nothing was sent."""
    key = ("Readiness", namespace, name)
    digest = json.dumps(
        {
            **status,
            "conditions": [
                {k: v for k, v in x.items() if k != "lastTransitionTime"}
                for x in status.get("conditions") or []
            ],
        },
        sort_keys=True,
    )
    ago = memory.written_ago(key)
    if memory.stale(key, digest) and ago is not None and ago < READINESS_REPEAT_SECONDS:
        return None
    body = {
        "apiVersion": c.KUEUE_API,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "status": status,
    }
    try:
        result = cluster.apply(body, subresource="status")
        memory.wrote(key, digest)
    except ApiException as exc:
        if exc.status != 422:
            raise
        # Refused by Kueue's validation: the same write again cannot help, wait for a change.
        log.warning(
            "%s: Workload %s refused PodsReady/reclaimablePods: %s", where, name, exc.reason
        )
        return None
    pods_ready = status["conditions"][0]
    log.info(
        "%s: Workload %s PodsReady=%s (%s)", where, name, pods_ready["status"], pods_ready["reason"]
    )
    return result
