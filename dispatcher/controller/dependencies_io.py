"""Writing a dependency's copy to a worker: the plan says which copies a job needs
(dependencies.py), and here the worker's object and the manager's are read at the moment of
writing, and each write is the one `dependencies.copy_step` chooses from what was read (the
copy created, or ours brought up to date, never anyone else's). What is decided here is only
when to spend a read or a write: the ledger's memory and the namespace's turns."""

from __future__ import annotations

import logging
from typing import assert_never

from dispatcher import metrics
from dispatcher.decisions import dependencies
from dispatcher.decisions.decide import REMOTE_DEPENDENCY_REFUSED, REMOTE_NAME_TAKEN, RemoteAction
from dispatcher.workers.connections import WorkerConnections
from kubebase.objects import Dict
from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster
from trainjob_api.views import ObjectView

log = logging.getLogger(__name__)

# The most steps one copy takes in a pass: the manager object read, a create that meets an
# object made meanwhile, and what is done with that object (the source is never read twice,
# and nothing is created twice). A bound all the same: a pass never loops on a worker.
MOST_STEPS = 3


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
    """`ensure`'s reads and writes, each step chosen by `dependencies.copy_step` from what was
    read: the copy on the worker read first when the dispatcher does not remember it (ours,
    current and owned by this job: in place, nothing spent), the manager object read when the
    step needs it and, for a write, one of the namespace's copy refreshes taken first. A copy
    it remembers needing a write for this job (other content, or all its owners known and this
    job not among them) takes its turn before any read, and one read while the namespace had
    no turn left is remembered as found: a namespace whose objects or jobs come faster than
    its allowance waits without its passes reading the worker again and again."""
    want = action.obj
    meta = want["metadata"]
    kind, namespace, name = want["kind"], meta["namespace"], meta["name"]
    where = (action.cluster, namespace, f"{kind}/{name}")
    digest, owner = meta["annotations"][dependencies.DIGEST_ANNOTATION], _owner(action)
    turned = workers.copies.needs_write(where, digest, owner)
    if turned and not _turn(workers, action):
        return None
    found = _read(api, kind, namespace, name)
    source: ObjectView | dependencies.Unread | None = dependencies.UNREAD
    for _ in range(MOST_STEPS):
        match dependencies.copy_step(want, found, source):
            case dependencies.ReadSource(write=write):
                if write and not turned and not _turn(workers, action):
                    _remember(workers, where, found)
                    return None
                source = _source(workers, kind, namespace, name)
                if isinstance(source, dependencies.Unread):
                    return None  # not read: the next pass asks again
            case dependencies.InPlace(copy=copy):
                return _done(workers, action, copy, "unchanged")
            case dependencies.ServedAsIs():
                workers.copies.forget(where)  # not ours: nothing to remember of it
                return True
            case dependencies.Taken(why=why):
                workers.copies.forget(where)
                return _taken(workers, action, f"{kind}/{name}", why)
            case dependencies.Gone():
                return False
            case dependencies.Create(body=body):
                if _created(api, body):
                    log.info("dependency copied", extra=_fields(action))
                    return _done(workers, action, body, "created")
                found = _read(api, kind, namespace, name)
                if found is None:
                    return None  # deleted meanwhile: the next pass makes it
                # made meanwhile: judged as found
            case dependencies.Replace(body=body):
                return _replaced(workers, api, action, body)
            case unknown:
                assert_never(unknown)
    return None  # never reached (see MOST_STEPS): the next pass goes on


def _read(api: Cluster, kind: str, namespace: str, name: str) -> ObjectView | None:
    """The object of a copy's kind and name on `api` (with its kind), None when none is."""
    found = api.get_or_none(dependencies.KINDS[kind], name, namespace)
    return None if found is None else ObjectView({**found, "kind": kind})


def _source(
    workers: WorkerConnections, kind: str, namespace: str, name: str
) -> ObjectView | dependencies.Unread | None:
    """The manager's object a copy is made from (with its kind), None when it is not there,
    UNREAD when it could not be read (logged)."""
    try:
        return _read(workers.manager, kind, namespace, name)
    except Exception as exc:
        _unread(kind, namespace, name, exc)
        return dependencies.UNREAD


def _created(api: Cluster, body: Dict) -> bool:
    """The copy created; False when its name was taken meanwhile (409)."""
    try:
        api.create(dependencies.KINDS[body["kind"]], body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        return False
    return True


def _replaced(
    workers: WorkerConnections, api: Cluster, action: RemoteAction, body: Dict
) -> bool | None:
    """Our copy brought up to date; None when it was deleted or changed meanwhile (read
    again next pass)."""
    try:
        api.replace(dependencies.KINDS[body["kind"]], body)
    except ApiException as gone:
        if gone.status in (404, 409):
            return None
        raise
    log.info("dependency copy updated", extra=_fields(action))
    return _done(workers, action, body, "updated")


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


def _remember(
    workers: WorkerConnections, where: tuple[str, str, str], found: ObjectView | None
) -> None:
    """What a read found of a copy (nothing: an empty digest, no owners), for the passes that
    wait their namespace's turn to take it before they read again."""
    if found is None:
        workers.copies.note(where, "", [])
        return
    owners = [o.get("uid", "") for o in found.owner_references]
    workers.copies.note(where, dependencies.digest(found.raw), owners)  # never what it claims


def _turn(workers: WorkerConnections, action: RemoteAction) -> bool:
    """One of the namespace's copy refreshes, taken; False (counted as held) when it has none
    left now."""
    meta = action.obj["metadata"]
    if workers.copies.allowed(meta["namespace"]):
        return True
    log.debug("dependency waits for its namespace's turn", extra=_fields(action))
    metrics.DEPENDENCY_COPIES.labels(action.cluster, "held").inc()
    return False


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
