"""Writing a dependency's copy to a worker (dependencies.py decides which): the manager
object read at the moment of writing, the copy created, or ours brought up to date, never
anyone else's."""

from __future__ import annotations

import logging

from dispatcher import dependencies, metrics
from dispatcher.clusters import Registry
from dispatcher.decide import RemoteAction
from kubecontrol.client import ApiException
from kubecontrol.objects import Dict
from trainjob import constants as c

log = logging.getLogger("dispatcher.dependencies")


def ensure(registry: Registry, action: RemoteAction) -> bool | None:
    """A dependency's copy on `action.cluster`, made or brought up to date: True when it is
    in place; False when it cannot be (gone from the manager, its name taken there by an
    object that is not ours, the worker refuses it: noted as taken, so the job goes
    elsewhere); None when it failed and is to be tried again."""
    remote = registry.get(action.cluster)
    if remote is None:
        return False
    skeleton = action.obj
    meta = skeleton["metadata"]
    kind, namespace, name = skeleton["kind"], meta["namespace"], meta["name"]
    key = f"{kind}/{name}"
    owner = meta["ownerReferences"][0]["uid"]
    where = f"{kind} {namespace}/{name}"
    try:
        source = registry.manager.get_or_none(dependencies.KINDS[kind], name, namespace)
    except Exception as exc:
        log.warning("[manager] cannot read %s: %s", where, exc)
        return None
    if source is None or source.get("type") in dependencies.NEVER_COPIED_TYPES:
        return False  # the next pass sees it missing (or refused) from the cache
    source = {**source, "kind": kind}
    want = dependencies.filled(
        {
            **skeleton,
            "metadata": {
                **meta,
                "annotations": {
                    c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: source["metadata"].get("uid", ""),
                },
            },
        },
        source,
    )
    digest = want["metadata"]["annotations"][dependencies.DIGEST_ANNOTATION]
    api, origin = remote.cluster, meta["labels"][c.KUEUE_MULTIKUEUE_ORIGIN_LABEL]
    try:
        try:
            api.create(dependencies.KINDS[kind], want)
            result = "created"
            log.info("[%s] copied %s", action.cluster, where)
        except ApiException as exc:
            if exc.status != 409:
                raise
            found = api.get_or_none(dependencies.KINDS[kind], name, namespace)
            if found is None:
                return None  # deleted meanwhile: the next pass makes it
            if not _ours(found, origin):
                why = (
                    f"{where} exists there and is not a copy from this manager (it is left as "
                    "it is)"
                )
                registry.note_taken(action.cluster, namespace, key, why)
                log.warning("[%s] %s", action.cluster, why)
                metrics.DEPENDENCY_COPIES.labels(action.cluster, "refused").inc()
                return False
            body = dependencies.updated(found, want)
            result = "unchanged" if body is None else "updated"
            if body is not None:
                try:
                    api.replace(dependencies.KINDS[kind], body)
                except ApiException as gone:
                    if gone.status in (404, 409):
                        return None  # deleted or changed meanwhile: read again next pass
                    raise
                log.info("[%s] updated the copy of %s", action.cluster, where)
    except ApiException as exc:
        if exc.status == 404:
            registry.note_namespace_problem(
                action.cluster, namespace, f"namespace {namespace!r} not found"
            )
            return False
        if exc.status in (403, 422):
            why = f"{where} cannot be copied there: {_refusal(exc)}"
            registry.note_taken(action.cluster, namespace, key, why)
            log.warning("[%s] %s", action.cluster, why)
            metrics.DEPENDENCY_COPIES.labels(action.cluster, "refused").inc()
            return False
        log.warning("[%s] cannot copy %s: %s", action.cluster, where, exc.reason)
        return None
    except Exception as exc:  # an unreachable worker must not stop the others
        log.warning("[%s] cannot copy %s: %s", action.cluster, where, exc)
        return None
    registry.note_copied(action.cluster, namespace, key, owner, digest)
    metrics.DEPENDENCY_COPIES.labels(action.cluster, result).inc()
    return True


def _ours(found: Dict, origin: str) -> bool:
    """A copy of ours: made by this manager (our origin label)."""
    labels = (found.get("metadata") or {}).get("labels") or {}
    return labels.get(c.KUEUE_MULTIKUEUE_ORIGIN_LABEL) == origin


def _refusal(exc: ApiException) -> str:
    if exc.status == 403:
        return (
            "the dispatcher's identity on that worker may not write it (the worker chart's "
            "worker.multikueueIdentity.dependencies grants it)"
        )
    return f"the worker's API server refused it ({exc.reason})"
