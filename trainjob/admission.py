"""Admission decisions for TrainJobs (pure): what the mutating and validating webhooks do
(their answer is a `kubecontrol.admission.Verdict`)."""

from __future__ import annotations

import datetime as dt

from kubecontrol.objects import Dict
from trainjob import conditions as cond
from trainjob import constants as c
from trainjob.models import InvalidObject, parse_trainjob, prebuilt_workload_of, queue_label
from trainjob.runtime import resolve_runtime_info


def queue_of(body: Dict) -> str | None:
    """The queue a TrainJob under admission names (not parsed yet: the API judges it)."""
    return queue_label((body.get("metadata") or {}).get("labels"))


def stamp_patch_times(patches: list[Dict], now: str) -> list[Dict]:
    """`patches` as Trainer v2.3's webhook leaves them on create: an entry without a `time`
    gets `now`. (On update Trainer also re-stamps changed entries; our webhooks run on create
    only, so that a replica being down never blocks a TrainJob's updates.)"""
    return [p if p.get("time") else {**p, "time": now} for p in patches]


# Kueue's shipped managedJobsNamespaceSelector leaves these out, so its default LocalQueue
# is never applied there.
UNMANAGED_NAMESPACES = frozenset({"kube-system", "kueue-system"})


def defaults_to_queue(body: Dict, namespace: str, default_queue_exists: bool) -> str | None:
    """Kueue's LocalQueue defaulting: a TrainJob without a queue-name label, in a namespace
    that has a LocalQueue named `default` (and that Kueue's shipped namespace selector
    manages), is queued to it. The queue to label it with, or None."""
    if queue_of(body) is not None or not default_queue_exists:
        return None
    if prebuilt_workload_of(body.get("metadata")):  # a MultiKueue copy: its Workload is made
        return None
    return None if namespace in UNMANAGED_NAMESPACES else c.DEFAULT_LOCAL_QUEUE


def held_without_queue(body: Dict, namespace: str, manage_without_queue: bool) -> bool:
    """Kueue's manageJobsWithoutQueueName: a TrainJob that names no queue (and is no
    MultiKueue copy) is Kueue's all the same, in the namespaces its shipped selector manages,
    and waits suspended."""
    return (
        manage_without_queue
        and queue_of(body) is None
        and not prebuilt_workload_of(body.get("metadata"))
        and namespace not in UNMANAGED_NAMESPACES
    )


def mutate_on_create(
    body: Dict,
    now: dt.datetime,
    *,
    multikueue_queue: bool = False,
    queue: str | None = None,
    hold: bool = False,
) -> Dict:
    """The spec fields to set on a new TrainJob: queued ones start suspended; runtimePatches
    entries without a time get `now` (Trainer's webhook does that on create); and on a manager
    whose queue leads to a MultiKueue check a managedBy that is unset, or the built-in value
    (which Trainer's own CRD stamps as its default), becomes MultiKueue, as Kueue's webhook
    does."""
    spec = body.get("spec") or {}
    queue = queue or queue_of(body)  # `queue`: one the webhook defaults it to
    changes: Dict = {}
    if (queue or hold) and not spec.get("suspend"):  # `hold`: held_without_queue
        changes["suspend"] = True
    patches = spec.get("runtimePatches") or []
    stamped = stamp_patch_times(patches, cond.now_rfc3339(now))
    if stamped != patches:
        changes["runtimePatches"] = stamped
    # Any other value ("" included) is the user's, and the API judges it.
    routable = "managedBy" not in spec or spec["managedBy"] == c.MANAGED_BY_BUILTIN
    if multikueue_queue and queue and routable:
        changes["managedBy"] = c.MANAGED_BY_MULTIKUEUE
    return changes


def trainjob_patch(
    obj: Dict, spec: Dict, finalizers: list[str] | None = None, queue: str | None = None
) -> tuple[Dict, ...]:
    """JSON patch operations that set the `spec` fields given (and `metadata.finalizers`, and
    the queue-name label to a defaulted `queue`).
    "add" on an object member replaces a value already there (RFC 6902), so one operation per
    field serves both; a missing `spec` is added whole."""
    ops: list[Dict] = []
    if spec and not isinstance(obj.get("spec"), dict):
        ops.append({"op": "add", "path": "/spec", "value": spec})
    else:
        ops += [{"op": "add", "path": f"/spec/{_pointer(k)}", "value": v} for k, v in spec.items()]
    if finalizers is not None:
        ops.append({"op": "add", "path": "/metadata/finalizers", "value": finalizers})
    if queue is not None:
        if not isinstance((obj.get("metadata") or {}).get("labels"), dict):
            ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
        label = _pointer(c.KUEUE_QUEUE_NAME_LABEL)
        ops.append({"op": "add", "path": f"/metadata/labels/{label}", "value": queue})
    return tuple(ops)


def _pointer(key: str) -> str:
    """One JSON pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def runtime_refusal(body: Dict, namespace: str, runtime: Dict | None) -> str | None:
    """Why a TrainJob under admission cannot run on its runtime, as Trainer's webhook refuses
    it on create (it resolves the runtime there): reserved env names, node counts, names too
    long for their Jobs and pods, an MPI hostfile no ConfigMap holds. None when it fits, or
    when the runtime does not exist yet (the TrainJob waits for it, and a runtime made or
    changed later is judged by the controllers, as a condition)."""
    if runtime is None:
        return None
    meta = {**(body.get("metadata") or {}), "namespace": namespace}
    if not meta.get("name"):  # generateName: the API server adds 5 characters
        meta["name"] = f"{meta.get('generateName') or ''}xxxxx"
    try:
        trainjob = parse_trainjob({**body, "metadata": meta})
    except InvalidObject as exc:
        return str(exc)
    _, problem = resolve_runtime_info(trainjob, runtime)
    return None if problem is None else problem.message
