"""Writing a dependency's copy to a worker (dependencies.py decides which): the manager
object read at the moment of writing, the copy created, or ours brought up to date, never
anyone else's (a worker's own runtime with the manager's spec serves as it is)."""

from __future__ import annotations

import logging

from dispatcher import metrics
from dispatcher.decisions import dependencies
from dispatcher.decisions.decide import REMOTE_DEPENDENCY_REFUSED, REMOTE_NAME_TAKEN, RemoteAction
from dispatcher.workers.connections import WorkerConnections
from kubebase.objects import Dict
from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster
from trainjob.ownership import is_dependency_copy
from trainjob_api import constants as c

log = logging.getLogger(__name__)


def ensure(workers: WorkerConnections, action: RemoteAction) -> bool | None:
    """A dependency's copy on `action.cluster`, made or brought up to date: True when it is
    in place; False when it cannot be (gone from the manager, its name taken there by an
    object that is not ours, the worker refuses it: noted as taken, so the job goes
    elsewhere); None when it is to be tried again (it failed, another pass is writing it, or
    the namespace has had its share of copy refreshes for now). Only a write spends the
    namespace's share: a copy found current, in the ledger or on the worker, spends none."""
    remote = workers.get(action.cluster)
    if remote is None:
        return False
    meta = action.obj["metadata"]
    namespace, key = meta["namespace"], f"{action.obj['kind']}/{meta['name']}"
    where = (action.cluster, namespace, key)
    with workers.copies.writing(where) as mine:
        owner = meta["ownerReferences"][0]["uid"]
        held = workers.copies.current(action.cluster, namespace, [key], owner).get(key)
        if held == meta["annotations"][dependencies.DIGEST_ANNOTATION]:
            return True  # brought up to date by another job's pass on that worker
        if not mine:
            return None  # another pass writes it this moment: the next finds it done
        try:
            return _look_then_write(workers, remote.cluster, action)
        except ApiException as exc:
            return _refused(workers, action, exc)
        except Exception as exc:  # an unreachable worker must not stop the others
            log.warning(
                "dependency not copied",
                extra={
                    "cluster": action.cluster,
                    "object": f"{namespace}/{key}",
                    "error": str(exc),
                },
            )
            return None


def _look_then_write(workers: WorkerConnections, api: Cluster, action: RemoteAction) -> bool | None:
    """`ensure`'s reads and write: the copy on the worker read first when the dispatcher does
    not remember it (ours, current and owned by this job: in place, nothing spent), then, for
    a write, one of the namespace's copy refreshes taken, the manager object read and the copy
    made or brought up to date. A copy it remembers needing a write for this job (other
    content, or all its owners known and this job not among them) takes its turn before any
    read, and one read while the namespace had no turn left is remembered as found: a
    namespace whose objects or jobs come faster than its allowance waits without its passes
    reading the worker again and again."""
    meta = action.obj["metadata"]
    kind, namespace, name = action.obj["kind"], meta["namespace"], meta["name"]
    where = (action.cluster, namespace, f"{kind}/{name}")
    digest, owner = meta["annotations"][dependencies.DIGEST_ANNOTATION], _owner(action)
    known = workers.copies.needs_write(where, digest, owner)
    if known and not _turn(workers, action):
        return None
    found = api.get_or_none(dependencies.KINDS[kind], name, namespace)
    if found is not None:
        if not is_dependency_copy(found, meta["labels"][c.KUEUE_MULTIKUEUE_ORIGIN_LABEL]):
            served = _served_as_is(workers, action, found)
            return _foreign(workers, action) if served is False else served
        if dependencies.updated(found, action.obj) is None:
            return _done(workers, action, found, "unchanged")
    if not known and not _turn(workers, action):
        _remember(workers, where, found)
        return None
    try:
        source = workers.manager.get_or_none(dependencies.KINDS[kind], name, namespace)
    except Exception as exc:
        _unread(kind, namespace, name, exc)
        return None
    if source is None or source.get("type") in dependencies.NEVER_COPIED_TYPES:
        return False  # the next pass sees it missing (or refused) from the cache
    want = _wanted(action.obj, {**source, "kind": kind})
    return _put(workers, api, action, want, found)


def _fields(action: RemoteAction) -> dict[str, object]:
    """A dependency copy's log fields: the worker and the object."""
    meta = action.obj["metadata"]
    return {
        "cluster": action.cluster,
        "kind": action.obj["kind"],
        "object": f"{meta['namespace']}/{meta['name']}",
    }


def _unread(kind: str, namespace: str, name: str, exc: Exception) -> None:
    """The manager's object a copy is made from could not be read (the next pass asks again)."""
    log.warning(
        "dependency not read",
        extra={
            "cluster": "manager",
            "kind": kind,
            "object": f"{namespace}/{name}",
            "error": str(exc),
        },
    )


def _owner(action: RemoteAction) -> str:
    """The UID of the Workload copy the copy is made for (its owner on the worker)."""
    uid: str = action.obj["metadata"]["ownerReferences"][0]["uid"]
    return uid


def _remember(workers: WorkerConnections, where: tuple[str, str, str], found: Dict | None) -> None:
    """What a read found of a copy (nothing: an empty digest, no owners), for the passes that
    wait their namespace's turn to take it before they read again."""
    meta = (found or {}).get("metadata") or {}
    kind = where[2].split("/", 1)[0]
    held = dependencies.digest({**found, "kind": kind}) if found is not None else ""
    owners = [o.get("uid", "") for o in meta.get("ownerReferences") or []]
    workers.copies.note(where, held, owners)  # what it holds, never what it claims


def _turn(workers: WorkerConnections, action: RemoteAction) -> bool:
    """One of the namespace's copy refreshes, taken; False (counted as held) when it has none
    left now."""
    meta = action.obj["metadata"]
    if workers.copies.allowed(meta["namespace"]):
        return True
    log.debug("dependency waits for its namespace's turn", extra=_fields(action))
    metrics.DEPENDENCY_COPIES.labels(action.cluster, "held").inc()
    return False


def _wanted(skeleton: Dict, source: Dict) -> Dict:
    """The copy as it must be: the skeleton holding the manager object's content, marked
    with that object's UID and content digest."""
    meta = skeleton["metadata"]
    annotations = {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: source["metadata"].get("uid", "")}
    return dependencies.filled(
        {**skeleton, "metadata": {**meta, "annotations": annotations}}, source
    )


def _put(
    workers: WorkerConnections, api: Cluster, action: RemoteAction, want: Dict, found: Dict | None
) -> bool | None:
    """The copy created (none `found` on the worker), or ours there brought to `want`."""
    meta = want["metadata"]
    kind, namespace, name = want["kind"], meta["namespace"], meta["name"]
    if found is None:
        try:
            api.create(dependencies.KINDS[kind], want)
        except ApiException as exc:
            if exc.status != 409:
                raise
            found = api.get_or_none(dependencies.KINDS[kind], name, namespace)
            if found is None:
                return None  # deleted meanwhile: the next pass makes it
            if not is_dependency_copy(found, meta["labels"][c.KUEUE_MULTIKUEUE_ORIGIN_LABEL]):
                return _foreign(workers, action)
        else:
            log.info("dependency copied", extra=_fields(action))
            return _done(workers, action, want, "created")
    body = dependencies.updated(found, want)
    if body is None:
        return _done(workers, action, found, "unchanged")
    try:
        api.replace(dependencies.KINDS[kind], body)
    except ApiException as gone:
        if gone.status in (404, 409):
            return None  # deleted or changed meanwhile: read again next pass
        raise
    log.info("dependency copy updated", extra=_fields(action))
    return _done(workers, action, body, "updated")


def _served_as_is(workers: WorkerConnections, action: RemoteAction, found: Dict) -> bool | None:
    """Whether the worker's own object of the copy's name serves the job as it is (a
    TrainingRuntime with the manager's spec: dependencies.usable_as_is); never written. None
    when the manager's runtime could not be read: tried again, never counted as taken."""
    meta = action.obj["metadata"]
    kind = action.obj["kind"]
    if kind != c.TRAINING_RUNTIME_KIND:
        return False
    try:
        source = workers.manager.get_or_none(
            dependencies.KINDS[kind], meta["name"], meta["namespace"]
        )
    except Exception as exc:
        _unread(kind, meta["namespace"], meta["name"], exc)
        return None
    return source is not None and dependencies.usable_as_is(found, {**source, "kind": kind})


def _foreign(workers: WorkerConnections, action: RemoteAction) -> bool:
    """An object of the copy's name on the worker that is not ours: left as it is, the name
    noted as taken there."""
    meta = action.obj["metadata"]
    kind, namespace, name = action.obj["kind"], meta["namespace"], meta["name"]
    why = (
        f"{kind} {namespace}/{name} exists there and is not a copy from this manager (it "
        "is left as it is)"
    )
    return _taken(workers, action, f"{kind}/{name}", why)


def _done(workers: WorkerConnections, action: RemoteAction, copy: Dict, result: str) -> bool:
    """The copy as it now is on the worker, noted in the ledger for every job it serves."""
    meta = copy["metadata"]
    owners = [o.get("uid", "") for o in meta.get("ownerReferences") or []]
    digest = (meta.get("annotations") or {}).get(dependencies.DIGEST_ANNOTATION, "")
    key = f"{action.obj['kind']}/{meta['name']}"
    ours = action.obj["metadata"]["ownerReferences"][0]["uid"]
    workers.copies.note((action.cluster, meta["namespace"], key), digest, [ours, *owners])
    metrics.DEPENDENCY_COPIES.labels(action.cluster, result).inc()
    return True


def _taken(
    workers: WorkerConnections,
    action: RemoteAction,
    key: str,
    why: str,
    reason: str = REMOTE_NAME_TAKEN,
) -> bool:
    namespace = action.obj["metadata"]["namespace"]
    workers.note_taken(action.cluster, namespace, key, why, reason)
    log.warning("dependency not copied", extra={"cluster": action.cluster, "why": why})
    metrics.DEPENDENCY_COPIES.labels(action.cluster, "refused").inc()
    return False


def _refused(workers: WorkerConnections, action: RemoteAction, exc: ApiException) -> bool | None:
    """What a worker's refusal means: its namespace missing (the job goes elsewhere), the
    copy refused (noted as taken), or a failure to try again."""
    meta = action.obj["metadata"]
    kind, namespace, name = action.obj["kind"], meta["namespace"], meta["name"]
    if exc.status == 404:
        workers.note_namespace_problem(
            action.cluster, namespace, f"namespace {namespace!r} not found"
        )
        return False
    if exc.status in (403, 422):
        why = f"{kind} {namespace}/{name} cannot be copied there: {_refusal(exc)}"
        return _taken(workers, action, f"{kind}/{name}", why, REMOTE_DEPENDENCY_REFUSED)
    log.warning("dependency not copied", extra={**_fields(action), "error": exc.reason})
    return None


def _refusal(exc: ApiException) -> str:
    if exc.status == 403:
        return (
            "the dispatcher's identity on that worker may not write it (the worker chart's "
            "worker.multikueueIdentity.dependencies grants it)"
        )
    return f"the worker's API server refused it ({exc.reason})"
