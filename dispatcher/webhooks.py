"""The dispatcher's admission webhooks for TrainJobs on the manager: on CREATE, route a
TrainJob queued to a MultiKueue ClusterQueue to us (managedBy, suspended, our finalizer), stamp
its runtimePatches' times, and refuse one whose queue does not exist, or whose choice of
clusters (selection.py) cannot be read, naming it."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any, TypeVar

import kopf

from dispatcher.admissionchecks import Getter, cq_has_our_check
from dispatcher.memo import Memo
from dispatcher.selection import SelectionError, selection_of
from trainjob import admission
from trainjob import constants as c
from trainjob.caches import Caches

Dict = dict[str, Any]
T = TypeVar("T")


async def on_mutate(
    body: kopf.Body, namespace: str, patch: kopf.Patch, memo: Memo, **kwargs: Any
) -> None:
    caches = memo.caches_of(kwargs)
    queue = admission.queue_of(dict(body))
    multikueue = bool(queue) and await _answer(
        memo, lambda get: _queue_has_multikueue(memo, namespace, str(queue), caches, get)
    )
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


async def on_validate(body: kopf.Body, namespace: str, memo: Memo, **kwargs: Any) -> None:
    try:
        selection_of(body.get("metadata", {}).get("annotations"))
    except SelectionError as exc:
        raise kopf.AdmissionError(str(exc), code=422) from None
    queue = admission.queue_of(dict(body))
    if queue is None:
        return
    caches = memo.caches_of(kwargs)
    lq = await _answer(memo, lambda get: _local_queue(namespace, queue, caches, get))
    error = admission.validate_queue(dict(body), lq)
    if error:
        raise kopf.AdmissionError(error, code=422)


# The handlers are coroutines: kopf runs them on its event loop, where a plain function
# would be handed to a thread and back for every admission call. They answer from the
# watch caches there; an object made moments ago that the caches do not hold yet is read
# from the API server in a thread (`_answer`), so the loop never waits on the network.


class _NotCached(LookupError):
    pass


def _not_cached(api_version: str, kind: str, name: str, namespace: str | None) -> Dict | None:
    raise _NotCached(kind, name)


async def _answer(memo: Memo, question: Callable[[Getter], T]) -> T:
    """`question(get)` from the caches alone, on the loop; asked again in a thread, where
    `get` reads from the API server, when it needs an object the caches do not hold."""
    try:
        return question(_not_cached)
    except _NotCached:
        return await asyncio.to_thread(question, memo.manager.get_or_none)


def _local_queue(namespace: str, name: str, caches: Caches, get: Getter) -> Dict | None:
    """From the watch cache; a queue made moments ago may not be there yet, so ask then."""
    found = caches.first("localqueue_index", (namespace, name))
    return found or get(c.KUEUE_API, "LocalQueue", name, namespace)


def _queue_has_multikueue(
    memo: Memo, namespace: str, queue: str, caches: Caches, get: Getter
) -> bool:
    lq = _local_queue(namespace, queue, caches, get)
    if lq is None:
        return False
    return cq_has_our_check(memo, lq["spec"]["clusterQueue"], caches, get)
