"""The dispatcher's admission webhooks for TrainJobs on the manager: on CREATE, route a
TrainJob queued to a MultiKueue ClusterQueue to us (managedBy, suspended, our finalizer), stamp
its runtimePatches' times, and refuse one whose queue does not exist, or whose choice of
clusters (selection.py) cannot be read, naming it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import kopf

from dispatcher.admissionchecks import cq_has_our_check
from dispatcher.memo import Memo
from dispatcher.selection import SelectionError, selection_of
from trainjob import admission
from trainjob import constants as c
from trainjob.caches import Caches

Dict = dict[str, Any]


def on_mutate(
    body: kopf.Body, namespace: str, patch: kopf.Patch, memo: Memo, **kwargs: Any
) -> None:
    caches = memo.caches_of(kwargs)
    queue = admission.queue_of(dict(body))
    multikueue = bool(queue) and _queue_has_multikueue(memo, namespace, str(queue), caches)
    now = dt.datetime.now(dt.UTC)
    changes = admission.mutate_on_create(dict(body), now, multikueue_queue=multikueue)
    for key, value in changes.items():
        patch.spec[key] = value
    managed_by = changes.get("managedBy", (body.get("spec") or {}).get("managedBy"))
    if managed_by == c.MANAGED_BY_MULTIKUEUE:
        # Ours from the start: no extra write, and no window in which a delete could skip us.
        finalizers = list(body.get("metadata", {}).get("finalizers") or [])
        if c.DISPATCHER_FINALIZER not in finalizers:
            patch.metadata["finalizers"] = [*finalizers, c.DISPATCHER_FINALIZER]


def on_validate(body: kopf.Body, namespace: str, memo: Memo, **kwargs: Any) -> None:
    try:
        selection_of(body.get("metadata", {}).get("annotations"))
    except SelectionError as exc:
        raise kopf.AdmissionError(str(exc), code=422) from None
    queue = admission.queue_of(dict(body))
    if queue is None:
        return
    lq = _local_queue(memo, namespace, queue, memo.caches_of(kwargs))
    error = admission.validate_queue(dict(body), lq)
    if error:
        raise kopf.AdmissionError(error, code=422)


def _local_queue(memo: Memo, namespace: str, name: str, caches: Caches) -> Dict | None:
    """From the watch cache; a queue made moments ago may not be there yet, so ask then."""
    found = caches.first("localqueue_index", (namespace, name))
    return found or memo.manager.get_or_none(c.KUEUE_API, "LocalQueue", name, namespace)


def _queue_has_multikueue(memo: Memo, namespace: str, queue: str, caches: Caches) -> bool:
    lq = _local_queue(memo, namespace, queue, caches)
    if lq is None:
        return False
    return cq_has_our_check(memo, lq["spec"]["clusterQueue"], caches)
