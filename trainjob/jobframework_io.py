"""The Kueue integration's I/O, shared by the worker controller and the dispatcher: gather
what `jobframework.reconcile_queueing` looks at, and carry out the QueuePlan it returns."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import threading
import time
import weakref
from typing import Final

from kubebase.kinds import InvalidName, Kind
from kubebase.objects import Dict
from kubecontrol.admission import Getter
from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster, guarded_write
from kubecontrol.workqueue import WriteMemory
from trainjob.caches import Caches
from trainjob.jobframework import (
    CLASS_TTL,
    QueueObserved,
    QueuePlan,
    Shape,
    expected_workload_name,
    follows_label,
    observe,
    shape_of,
)
from trainjob.lru import LRU
from trainjob.models import TrainJob
from trainjob.queues import LocalQueueView
from trainjob.workload import ClassMissing, Priority
from trainjob_api import constants as c
from trainjob_api.views import RuntimeView, TrainJobView

log = logging.getLogger("trainjob.jobframework")


def observe_queueing(
    cluster: Cluster, caches: Caches, tj: TrainJob, runtime: RuntimeView | None, jobs_active: bool
) -> QueueObserved:
    """What the Kueue integration looks at for one TrainJob, from the caches: its Workload and
    the ResourceFlavors; and the priority Kueue would give it, asked of the API only while
    there is no Workload yet, or when its priority-class label names another class than its
    Workload has."""
    view = caches.workload(tj.namespace, expected_workload_name(tj.meta_view))
    now = dt.datetime.now(dt.UTC)
    shape = _shape(tj, runtime) if view is not None else None
    obs = observe(tj, runtime, view, caches.flavors(), None, jobs_active, now, shape)
    if not tj.queued:
        return obs
    makes = obs.finished is None and not tj.metadata.deletion_timestamp
    if view is None and obs.info is not None and tj.prebuilt_workload is None and makes:
        templates = [ps.pod_template for ps in obs.info.pod_sets]
        # the Workload keeps what it is made with: a class found missing is asked for again
        # (none is made for a finished or deleted TrainJob, nor a prebuilt one, a MultiKueue
        # copy's, which someone else makes: nothing is asked)
        obs.priority = extract_priority(cluster, _wpc_label(tj), templates, fresh=True)
    elif view is not None and not tj.prebuilt_workload and follows_label(view, _wpc_label(tj)):
        # (a prebuilt Workload, a MultiKueue copy, takes its priority from the manager's)
        templates = [ps.get("template") or {} for ps in view.pod_sets]
        obs.priority = extract_priority(cluster, _wpc_label(tj), templates)
    return obs


def _wpc_label(tj: TrainJob) -> str:
    return tj.metadata.labels.get(c.KUEUE_PRIORITY_CLASS_LABEL) or ""


def extract_priority(
    cluster: Cluster, wpc: str, templates: list[Dict], fresh: bool = False
) -> Priority | ClassMissing | None:
    """A Workload's priority as Kueue 0.19 takes it from its job: the WorkloadPriorityClass
    its label names; else the PriorityClass the first pod template names; else the cluster's
    default PriorityClass (globalDefault, the lowest if several); else none (0). The class
    named, when the API server says it does not exist (Kueue makes no Workload then: nor do
    we, jobframework step 3). None when it could not be read (an identity without the read,
    from an older install: a Workload is made without a priority). For a Workload about to be
    made (`fresh`), a read refused for any reason but a 403 (429, 5xx, no answer) fails the
    pass, tried again as Kueue's reconcile is: the Workload keeps the priority it is made
    with."""
    if wpc:
        found = _class(cluster, c.WORKLOAD_PRIORITY_CLASS, wpc, fresh)
        return _priority(found, c.WORKLOAD_PRIORITY_CLASS, wpc, f"metadata.labels[{_LABEL}]")
    named = next(
        (
            t["spec"]["priorityClassName"]
            for t in templates
            if isinstance((t.get("spec") or {}).get("priorityClassName"), str)
            and t["spec"]["priorityClassName"]
        ),
        None,
    )
    if named:
        found = _class(cluster, c.PRIORITY_CLASS, named, fresh)
        return _priority(found, c.PRIORITY_CLASS, named, "a pod template's priorityClassName")
    try:
        default = _default_priority_class(cluster)
    except (ApiException, OSError):
        if fresh:
            raise
        return None  # no answer: a Workload's priority is left as it is
    if default is None:
        return Priority(None, None, None, 0)
    return Priority(c.PRIORITY_CLASS.group, "PriorityClass", default[0], default[1])


_LABEL = c.KUEUE_PRIORITY_CLASS_LABEL


def _priority(
    found: Dict | None, kind: Kind, name: str, where: str
) -> Priority | ClassMissing | None:
    """The priority a class `_class` read gives, the class missing, or None (not read)."""
    if found is None:
        return None
    if found is _MISSING:
        return ClassMissing(kind.kind, name, where)
    return Priority(kind.group, kind.kind, name, int(found.get("value", 0)))


# Priority classes by name, found or not, read at most every CLASS_TTL seconds on each
# cluster: a TrainJob whose label names a class that does not exist would otherwise cost a GET
# and a warning on every pass while it waits for it (and every TrainJob naming it). The names
# are the tenants' (a label, a runtime's pod template): at most CLASSES_KEPT are kept, and
# only what the API server said (found, or 404: `_MISSING`), never a read that failed or a
# name no class can have.
CLASSES_KEPT = 1024
_MISSING: Final[Dict] = {}  # a class the API server said does not exist (compared by identity)
_classes: weakref.WeakKeyDictionary[Cluster, LRU[tuple[str, str], tuple[float, Dict]]]
_classes = weakref.WeakKeyDictionary()
_classes_lock = threading.Lock()


def _class(cluster: Cluster, kind: Kind, name: str, fresh: bool = False) -> Dict | None:
    """A priority class as last read within CLASS_TTL, else read now (`_read_class`):
    `_MISSING` when it does not exist, None when not read."""
    with _classes_lock:
        kept = _classes.setdefault(cluster, LRU(CLASSES_KEPT))
    cached = kept.get((kind.kind, name))
    if cached is not None and time.monotonic() - cached[0] < CLASS_TTL:
        return cached[1]
    found, said = _read_class(cluster, kind, name, fresh)
    if said and found is not None:
        kept.put((kind.kind, name), (time.monotonic(), found))
    return found


def _read_class(
    cluster: Cluster, kind: Kind, name: str, fresh: bool = False
) -> tuple[Dict | None, bool]:
    """A priority class; `_MISSING` (logged) when it does not exist, a name no class can have
    included (a runtime's pod template is the tenant's: never asked for); None (logged) when
    it cannot be read (an identity without the read, from an older install, never fails a
    pass; a failure of the API server's fails one about to make a Workload: `fresh`). And
    whether the API server said so (found, or 404)."""
    try:
        found = cluster.get_or_none(kind, name)
    except InvalidName:
        log.warning(
            "cannot exist: not a valid name",
            extra={"cluster": cluster.name, "kind": kind.kind, "object": name[:253]},
        )
        return _MISSING, False
    except ApiException as exc:
        if fresh and _failed(exc):
            raise
        log.warning(
            "not read",
            extra={"cluster": cluster.name, "kind": kind.kind, "object": name, "error": exc.reason},
        )
        return None, False
    if found is None:
        log.warning(
            "does not exist", extra={"cluster": cluster.name, "kind": kind.kind, "object": name}
        )
        return _MISSING, True
    return found, True


# The cluster's default PriorityClass, read at most every DEFAULT_PRIORITY_TTL seconds: one
# list per Workload made would cost a request per TrainJob for what rarely changes.
DEFAULT_PRIORITY_TTL = 30.0
_default_priority: dict[str, tuple[float, tuple[str, int] | None]] = {}


def _failed(exc: ApiException) -> bool:
    """A read that got no answer about the class (too many requests, the API server's own
    error, no answer, a proxy's or an authenticator's refusal), which a later pass may get:
    anything but a refusal of the read itself (403, an identity without it)."""
    return exc.status != 403


def _default_priority_class(cluster: Cluster) -> tuple[str, int] | None:
    """The cluster's default PriorityClass (name, value), or None. A list the API server
    failed raises and is not kept (a pass about to make a Workload fails; one following a
    label leaves its priority); one the identity may not make (an older install) counts as
    no default until the TTL has run."""
    cached = _default_priority.get(cluster.name)
    if cached is not None and time.monotonic() - cached[0] < DEFAULT_PRIORITY_TTL:
        return cached[1]
    try:
        listed = cluster.send("GET", c.PRIORITY_CLASS.path(None, None))
    except (ApiException, OSError) as exc:
        log.warning(
            "PriorityClasses not listed", extra={"cluster": cluster.name, "error": str(exc)}
        )
        if not isinstance(exc, ApiException) or _failed(exc):
            raise  # not kept: the next pass asks again
        listed = None
    defaults = [
        (int(pc.get("value", 0)), pc["metadata"]["name"])
        for pc in (listed or {}).get("items") or []
        if pc.get("globalDefault")
    ]
    found = (min(defaults)[1], min(defaults)[0]) if defaults else None
    _default_priority[cluster.name] = (time.monotonic(), found)
    return found


# A TrainJob's pod sets as Kueue counts them are a pure function of its spec (uid and
# generation name it), whether it is queued, and the runtime's version. Without this, every
# pass rebuilt the whole runtime info (templates copied and merged, policies applied) only to
# read a few counts. The entries are small (no templates), so one per TrainJob in flight fits.
_SHAPES: LRU[tuple[str, ...], Shape] = LRU(4096)


def _shape(tj: TrainJob, runtime: RuntimeView | None) -> Shape | None:
    uid, generation = tj.metadata.uid, tj.metadata.generation
    ruid, rversion = (None, None) if runtime is None else (runtime.uid, runtime.resource_version)
    if not uid or generation is None or (runtime is not None and not (ruid and rversion)):
        return None  # not a stored version: nothing names its content
    key = (uid, str(generation), str(tj.queued), str(ruid or ""), str(rversion or ""))
    return _SHAPES.get_or_make(key, lambda: shape_of(tj, runtime))


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
    ns = meta["namespace"]
    where = {"cluster": cluster.name, "trainjob": f"{ns}/{meta['name']}"}
    name = expected_workload_name(TrainJobView(trainjob))
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
                c.TRAINJOB,
                meta["name"],
                ns,
                {**patch, "metadata": {"resourceVersion": meta["resourceVersion"]}},
            ),
        ):
            return
    except ApiException as exc:
        if exc.status in (404, 409):
            log.debug(
                "write skipped: retrying on the next event", extra={**where, "error": exc.reason}
            )
            return
        raise
    for etype, reason, message, once in plan.events:
        cluster.post_event(trainjob, etype, reason, message, once)
        log.info("Event", extra={**where, "reason": reason, "note": message})


def _write_workload(
    cluster: Cluster,
    name: str,
    ns: str,
    plan: QueuePlan,
    memory: WriteMemory,
    where: dict[str, str],
) -> Dict | None:
    """The plan's writes of an existing Workload, in order; the last object one returned (None
    when none was sent)."""
    result = None
    if plan.delete_workload is not None:
        cluster.delete(c.WORKLOAD, plan.delete_workload, ns, uid=plan.delete_workload_uid)
        # Gone (or another of its name made since): a plan from the version it had would
        # delete it, and say so, again.
        result = {"metadata": {"resourceVersion": None}}
    if plan.workload_patch is not None and name:
        result = cluster.patch(c.WORKLOAD, name, ns, plan.workload_patch)
    if plan.workload_status is not None and name:
        status = {
            "metadata": {"resourceVersion": plan.workload_version},
            "status": plan.workload_status,
        }
        result = cluster.patch(c.WORKLOAD, name, ns, status, subresource="status")
    if plan.workload_readiness is not None and name:
        result = (
            _apply_readiness(cluster, name, ns, plan.workload_readiness, memory, where) or result
        )
    return result


def _create_workload(
    cluster: Cluster, trainjob: Dict, workload: Dict, refusals: WriteMemory, where: dict[str, str]
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
        cluster.create(c.WORKLOAD, workload)
    except ApiException as exc:
        if not _refused(exc):
            raise
        refusals.wrote(key, digest)
        message = (
            f"Kueue refused Workload {workload['metadata']['name']}: "
            f"{_api_message(exc)}; it is created again once the TrainJob or its runtime changes"
        )
        cluster.post_event(trainjob, "Warning", "WorkloadRefused", message)
        log.warning("Event", extra={**where, "reason": "WorkloadRefused", "note": message})
        return
    refusals.forget(key)
    message = (
        f"Created Workload {workload['metadata']['name']} in queue {workload['spec']['queueName']}"
    )
    cluster.post_event(trainjob, "Normal", "CreatedWorkload", message)
    log.info("Event", extra={**where, "reason": "CreatedWorkload", "note": message})


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
    cluster: Cluster,
    name: str,
    namespace: str,
    status: Dict,
    memory: WriteMemory,
    where: dict[str, str],
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
        result = cluster.apply(c.WORKLOAD, body, subresource="status")
        memory.wrote(key, digest)
    except ApiException as exc:
        if exc.status != 422:
            raise
        # Refused by Kueue's validation: the same write again cannot help, wait for a change.
        log.warning(
            "Workload refused PodsReady/reclaimablePods",
            extra={**where, "workload": name, "error": exc.reason},
        )
        return None
    pods_ready = status["conditions"][0]
    log.info(
        "Workload PodsReady written",
        extra={
            **where,
            "workload": name,
            "status": pods_ready["status"],
            "reason": pods_ready["reason"],
        },
    )
    return result


def local_queue(caches: Caches, namespace: str, name: str, get: Getter) -> LocalQueueView | None:
    """A LocalQueue from the watch cache; one made moments ago may not be there yet, so asked
    of `get` then (a review's: kubecontrol.admission.rate_limited)."""
    found = caches.local_queue(namespace, name)
    if found is not None:
        return found
    asked = get(c.LOCAL_QUEUE, name, namespace)
    return None if asked is None else LocalQueueView(asked)
