"""Admission decisions for TrainJobs (pure): what the mutating and validating webhooks do."""

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


def stamp_patch_times(patches: list[Dict], now: str, old: list[Dict] | None = None) -> list[Dict]:
    """`patches` with each entry's `time` as Trainer v2.3's webhook sets it: an entry new to
    the object and without a time gets `now`; with `old` (the entries before an update), an
    entry whose content (time aside) is unchanged keeps its old time, a changed one gets
    `now`."""
    before = {p.get("manager"): p for p in old or []}
    out = []
    for patch in patches:
        patch = dict(patch)
        prior = before.get(patch.get("manager"))
        if prior is None:
            patch.setdefault("time", now)
        elif _without_time(prior) == _without_time(patch):
            if prior.get("time"):
                patch["time"] = prior["time"]
        else:
            patch["time"] = now
        out.append(patch)
    return out


def _without_time(patch: Dict) -> Dict:
    return {k: v for k, v in patch.items() if k != "time"}


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
