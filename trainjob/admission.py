"""Admission decisions for TrainJobs (pure): what the mutating and validating webhooks do
(their answer is a `kubecontrol.admission.Verdict`)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from trainjob import conditions as cond
from trainjob import constants as c
from trainjob.models import queue_label

Dict = dict[str, Any]


def queue_of(body: Dict) -> str | None:
    """The queue a TrainJob under admission names (not parsed yet: the API judges it)."""
    return queue_label((body.get("metadata") or {}).get("labels"))


def stamp_patch_times(patches: list[Dict], now: str) -> list[Dict]:
    """`patches` as Trainer v2.3's webhook leaves them on create: an entry without a `time`
    gets `now`. (On update Trainer also re-stamps changed entries; our webhooks run on create
    only, so that a replica being down never blocks a TrainJob's updates.)"""
    return [p if p.get("time") else {**p, "time": now} for p in patches]


def mutate_on_create(body: Dict, now: dt.datetime, *, multikueue_queue: bool = False) -> Dict:
    """The spec fields to set on a new TrainJob: queued ones start suspended; runtimePatches
    entries without a time get `now` (Trainer's webhook does that on create); and on a manager
    whose queue leads to a MultiKueue check a managedBy that is unset, or the built-in value
    (which Trainer's own CRD stamps as its default), becomes MultiKueue, as Kueue's webhook
    does."""
    spec = body.get("spec") or {}
    changes: Dict = {}
    if queue_of(body) and not spec.get("suspend"):
        changes["suspend"] = True
    patches = spec.get("runtimePatches") or []
    stamped = stamp_patch_times(patches, cond.now_rfc3339(now))
    if stamped != patches:
        changes["runtimePatches"] = stamped
    # Any other value ("" included) is the user's, and the API judges it.
    routable = "managedBy" not in spec or spec["managedBy"] == c.MANAGED_BY_BUILTIN
    if multikueue_queue and queue_of(body) and routable:
        changes["managedBy"] = c.MANAGED_BY_MULTIKUEUE
    return changes


def validate_queue(body: Dict, local_queue: Dict | None) -> str | None:
    """An error message when the queue-name label names no LocalQueue in the namespace."""
    queue = queue_of(body)
    if queue is None or local_queue is not None:
        return None
    namespace = (body.get("metadata") or {}).get("namespace", "")
    return (
        f"metadata.labels[{c.KUEUE_QUEUE_NAME_LABEL}]: LocalQueue {queue!r} does not exist "
        f"in namespace {namespace!r}; create it or use an existing queue"
    )


def trainjob_patch(obj: Dict, spec: Dict, finalizers: list[str] | None = None) -> tuple[Dict, ...]:
    """JSON patch operations that set the `spec` fields given (and `metadata.finalizers`).
    "add" on an object member replaces a value already there (RFC 6902), so one operation per
    field serves both; a missing `spec` is added whole."""
    ops: list[Dict] = []
    if spec and not isinstance(obj.get("spec"), dict):
        ops.append({"op": "add", "path": "/spec", "value": spec})
    else:
        ops += [{"op": "add", "path": f"/spec/{_pointer(k)}", "value": v} for k, v in spec.items()]
    if finalizers is not None:
        ops.append({"op": "add", "path": "/metadata/finalizers", "value": finalizers})
    return tuple(ops)


def _pointer(key: str) -> str:
    """One JSON pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")
