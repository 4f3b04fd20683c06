"""The last lines of a TrainJob's pods, kept on the manager once its copy leaves the worker.

A worker removes a TrainJob's pods with its copy (retention 0 by default), and with them what
a failed job last said. So, before the leader deletes a TrainJob copy that has pods, it reads
the tail of each container's log, on a thread of its own (`Captures`; the delete waits for it
and is tried again meanwhile, so no reconcile thread reads a tail), and keeps them in one
immutable ConfigMap in its own namespace, named after the manager TrainJob's UID: never in the
tenant's namespace, never in memory. The view.trainjob.dev API serves them when the pods are
gone.

What a tenant's pods print lands in the manager's etcd, so every bound is the platform's:
- one TrainJob's record is at most `MAX_RECORD_BYTES`: `TAIL_BYTES` of each container's last
  `TAIL_LINES` lines, `TOTAL_BYTES` in all, `MAX_CONTAINERS` containers of `MAX_PODS` pods
  (failed pods first), read within `CAPTURE_SECONDS`;
- one namespace keeps the records of its newest `--log-tails-per-namespace` TrainJobs, trimmed
  as each is kept;
- all of them: at most `--log-tails-kept` records and `--log-tails-bytes` bytes. Beyond either,
  the namespace holding the most bytes loses its oldest: a tenant that fills the store evicts
  its own records, never another's below its share.
A TrainJob annotated `trainjob.dev/log-tails: "off"` (on the manager) has none kept. The
resync loop deletes the records of TrainJobs that are gone, and applies the bounds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from dispatcher.workers import copy_pods
from kubebase.kinds import CONFIG_MAP, POD
from kubebase.objects import Dict
from kubecontrol.client import ApiException, TransportError
from kubecontrol.controller import own_namespace
from trainjob.ownership import origin_uid
from trainjob_api import constants as c

if TYPE_CHECKING:
    from dispatcher.settings import DispatcherSettings
    from dispatcher.workers.remote import RemoteCluster
    from kubecontrol.cluster import Cluster
    from trainjob.caches import Caches

log = logging.getLogger(__name__)

PREFIX = "log-tail-"
LABEL = f"{c.DOMAIN}/log-tail-of"  # the manager TrainJob's UID
TRAINJOB_ANNOTATION = f"{c.DOMAIN}/log-tail-trainjob"  # NAMESPACE/NAME, for people
BYTES_ANNOTATION = f"{c.DOMAIN}/log-tail-bytes"  # the record's size, for the bounds
OPT_OUT_ANNOTATION = c.LOG_TAILS_ANNOTATION  # on a TrainJob: "off", none kept
PODS_KEY = "pods.json"
TAIL_LINES = 100
TAIL_BYTES = 8 * 1024  # kept per container, at most (UTF-8, as stored)
READ_BYTES = 64 * 1024  # read per container (a line may be long; the end is what is kept)
TOTAL_BYTES = 64 * 1024  # all of one TrainJob's tails
MAX_PODS = 32
MAX_CONTAINERS = 64  # of all its pods (a tenant's runtime chooses how many a pod has)
# All of a capture, its lists included, within this; one tail within TAIL_SECONDS. A capture
# runs on a thread of its own (`Captures`: CAPTURES_AT_ONCE at once, CAPTURES_WAITING more
# queued or waiting, CAPTURES_PER_NAMESPACE of one namespace), never a reconcile thread's: the
# copy's delete waits for it, tried again meanwhile, and goes ahead without tails when none
# could be started, or one ran or waited its namespace's turn past GIVE_UP_SECONDS.
CAPTURE_SECONDS = 15.0
TAIL_SECONDS = 5.0
CAPTURES_AT_ONCE = 2
CAPTURES_WAITING = 64
CAPTURES_PER_NAMESPACE = 1  # fewer than run at once: another namespace finds a thread free
GIVE_UP_SECONDS = 3 * CAPTURE_SECONDS
REMEMBER_SECONDS = 3600.0  # a copy's capture once over, not made again (at most REMEMBERED)
REMEMBERED = 4096
# One record at most: the tails, a placeholder for each container not kept, pods.json (names
# are at most 253 characters, container names 63) and the keys. tests/unit holds it to this.
MAX_RECORD_BYTES = 160 * 1024
# A record made before its size was written on it: counted as large as a ConfigMap may be.
UNKNOWN_RECORD_BYTES = 1024 * 1024


def name_of(trainjob_uid: str) -> str:
    return f"{PREFIX}{trainjob_uid}"


def _entry(pod: Dict, worker: str, containers: list[str] | None = None) -> Dict:
    """What is kept of a pod: enough to pick it again (name, role, index, its `containers`
    whose tails are kept, all by default) and say how it ended."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    labels = meta.get("labels") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "creationTimestamp": meta.get("creationTimestamp"),
            "labels": {
                k: labels[k]
                for k in (c.REPLICATED_JOB_NAME_LABEL, c.JOB_COMPLETION_INDEX)
                if k in labels
            },
        },
        "spec": {
            "containers": [
                {"name": x.get("name")}
                for x in spec.get("containers") or []
                if containers is None or x.get("name") in containers
            ],
            "nodeName": spec.get("nodeName"),
        },
        "status": {
            "phase": (pod.get("status") or {}).get("phase"),
            "containerStatuses": [
                {"ready": False, "restartCount": s.get("restartCount") or 0}
                for s in (pod.get("status") or {}).get("containerStatuses") or []
                if containers is None or s.get("name") in containers
            ],
        },
        "worker": worker,
    }


def key_of(pod: str, container: str) -> str:
    return f"{pod}.{container}"


def capture(remote: RemoteCluster, copy: Dict) -> Dict | None:
    """The ConfigMap of the tails of our copy's pods on `remote`, or None when it has none
    (a copy that never ran, or names no TrainJob it was made for) or the worker cannot say
    which."""
    meta = copy["metadata"]
    made_for = origin_uid(copy)
    # (the manager TrainJob's opting out is decide's to read: the watch keeps none of the
    # copy's own annotations but the origin's UID)
    if not made_for or not meta.get("uid"):
        return None
    namespace, name = meta["namespace"], meta["name"]
    deadline = time.monotonic() + CAPTURE_SECONDS  # the lists' time counts too
    try:
        _, pods = copy_pods.read(remote, namespace, name, meta["uid"], until=deadline)
    except (ApiException, TransportError) as exc:
        log.info("log tails not kept", extra={"copy": f"{namespace}/{name}", "why": str(exc)})
        return None
    if not pods:
        return None
    chosen = choose(pods)
    data: dict[str, str] = {}
    room = TOTAL_BYTES
    for pod, containers in chosen:
        for container in containers:
            key = key_of(pod["metadata"]["name"], container)
            left = deadline - time.monotonic()
            if left < 0.5:
                data[key] = f"(not kept: no time left within {CAPTURE_SECONDS:g}s)\n"
            elif room <= 0:
                data[key] = f"(not kept: the TrainJob's tails reached {TOTAL_BYTES // 1024} KiB)\n"
            else:
                tail = _tail(remote, namespace, pod["metadata"]["name"], container, left)
                data[key] = _fit(tail, room)
                room -= len(data[key].encode())
    data[PODS_KEY] = orjson.dumps([_entry(p, remote.name, kept) for p, kept in chosen]).decode()
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name_of(made_for),
            "namespace": own_namespace(),
            "labels": {LABEL: made_for},
            "annotations": {
                TRAINJOB_ANNOTATION: f"{namespace}/{name}",
                BYTES_ANNOTATION: str(size),
            },
        },
        "immutable": True,
        "data": data,
    }


def choose(pods: list[Dict]) -> list[tuple[Dict, list[str]]]:
    """The pods whose tails are kept, each with the names of its containers kept: failed pods
    first (what a failed job last said is what is looked for), then by name; at most
    MAX_PODS pods and MAX_CONTAINERS containers in all."""

    def order(pod: Dict) -> tuple[bool, str]:
        return (((pod.get("status") or {}).get("phase") != "Failed"), pod["metadata"]["name"])

    chosen: list[tuple[Dict, list[str]]] = []
    left = MAX_CONTAINERS
    for pod in sorted(pods, key=order)[:MAX_PODS]:
        names = [str(x.get("name")) for x in (pod.get("spec") or {}).get("containers") or []]
        if left <= 0:
            break
        chosen.append((pod, names[:left]))
        left -= len(names[:left])
    return chosen


def _fit(text: str, room: int) -> str:
    """The end of `text` in at most TAIL_BYTES and `room` bytes of UTF-8 (a character cut
    at the start is dropped)."""
    encoded = text.encode()
    limit = min(TAIL_BYTES, room)
    if len(encoded) <= limit:
        return text
    return encoded[-limit:].decode(errors="ignore")


def _tail(remote: RemoteCluster, namespace: str, pod: str, container: str, left: float) -> str:
    """A container's tail, read within `left` seconds (at most TAIL_SECONDS)."""
    path = POD.object_path(namespace, pod, "log")
    query = {"container": container, "tailLines": TAIL_LINES, "limitBytes": READ_BYTES}
    try:
        text = remote.cluster.api.request(
            "GET", path, query=query, timeout=min(TAIL_SECONDS, left), accept="*/*"
        )
    except (ApiException, TransportError) as exc:
        return f"(not kept: {str(exc)[:200]})\n"
    return text[-TAIL_BYTES:].decode(errors="replace")


def keep(manager: Cluster, remote: RemoteCluster, copy: Dict, bounds: Bounds) -> None:
    """Capture and keep the tails of `copy`'s pods, then trim the store to `bounds` (its
    TrainJob is alive: the gone are the resync's to find). Best effort: a failure is
    logged, and the copy is deleted all the same."""
    try:
        found = capture(remote, copy)
        if found is None:
            return
        try:
            manager.create(CONFIG_MAP, found)
        except ApiException as exc:
            if exc.status != 409:
                raise
            # an earlier run's (it was sent back, and ran again elsewhere): the last run's
            # words are the ones to keep
            meta = found["metadata"]
            manager.delete(CONFIG_MAP, meta["name"], meta["namespace"])
            manager.create(CONFIG_MAP, found)
        trim(manager, bounds)
        log.info(
            "log tails kept",
            extra={
                "copy": f"{copy['metadata']['namespace']}/{copy['metadata']['name']}",
                "containers": len(found["data"]) - 1,
                "cluster": remote.name,
            },
        )
    except ApiException as exc:
        log.warning(
            "log tails not kept", extra={"copy": copy["metadata"].get("name"), "why": str(exc)}
        )
    except Exception:
        log.exception("log tails not kept", extra={"copy": copy["metadata"].get("name")})


@dataclass(frozen=True)
class _Capture:
    future: Future[None]
    since: float
    namespace: str


def _not_kept(namespace: str, uid: str, why: str) -> bool:
    """A copy whose tails are not read (it goes without them), logged: True (it is over)."""
    log.warning("log tails not kept", extra={"namespace": namespace, "uid": uid, "why": why})
    return True


class Captures:
    """The captures under way, by the UID of the copy whose tails they read, each on a thread
    of a pool of its own: a copy's delete asks `over` until its capture is, and a reconcile
    thread never reads a tail. One namespace has at most `each` under way (fewer than run at
    once, so another namespace always finds a thread): its copies beyond wait their turn, up
    to `give_up` seconds from the first ask, then go without tails; at most `waiting // 8` of
    one namespace wait (beyond, its own copies go without tails at once, never another
    namespace's). A capture that ran past `give_up` lets its copy go, and still counts
    against its namespace and the pool until its thread ends. A capture that ended is
    remembered for REMEMBER_SECONDS (a delete tried again reads nothing twice). Copies under
    way, waiting or still running past their time are at most `at_once + waiting`; a copy
    beyond that goes without tails at once."""

    def __init__(
        self,
        at_once: int = CAPTURES_AT_ONCE,
        waiting: int = CAPTURES_WAITING,
        give_up: float = GIVE_UP_SECONDS,
        each: int = CAPTURES_PER_NAMESPACE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="log-tails")
        self._room, self._each = at_once + waiting, each
        self._give_up, self._clock = give_up, clock
        self._under_way: dict[str, _Capture] = {}
        self._past_time: dict[str, _Capture] = {}  # let go, their threads still running
        self._waiting: dict[str, tuple[float, str]] = {}  # uid -> (since, namespace)
        self._waiting_each = max(1, waiting // 8)  # one namespace's waiting copies, at most
        self._over: OrderedDict[str, float] = OrderedDict()  # uid -> when it was over
        self._lock = threading.Lock()

    def over(self, uid: str, namespace: str, capture: Callable[[], None]) -> bool:
        """Whether the capture of copy `uid` (of `namespace`) is over: False while it runs or
        waits its namespace's turn (the first ask with a turn starts it), True once it ended,
        ran or waited past its time, and True at once when the pool has no room (the copy
        goes without its tails: logged)."""
        now = self._clock()
        with self._lock:
            self._settle(now)
            if uid in self._over:
                return True
            if uid in self._under_way:
                return False
            busy = [*self._under_way.values(), *self._past_time.values()]
            held = Counter(x.namespace for x in busy)
            if uid not in self._waiting and len(busy) + len(self._waiting) >= self._room:
                return _not_kept(namespace, uid, f"{self._room} captures under way or waiting")
            if held[namespace] >= self._each:
                if uid not in self._waiting:
                    queued = sum(1 for _, ns in self._waiting.values() if ns == namespace)
                    if queued >= self._waiting_each:
                        return _not_kept(namespace, uid, f"{queued} of its namespace's wait")
                    self._waiting[uid] = (now, namespace)  # its namespace's turn comes
                return False
            self._waiting.pop(uid, None)
            self._under_way[uid] = _Capture(self._pool.submit(capture), now, namespace)
            return False

    def _settle(self, now: float) -> None:
        """Captures that ended, ran or waited past their time are over (one still queued is
        never run); what is remembered of those over is bounded in time and count."""
        for uid, found in list(self._under_way.items()):
            if found.future.done() or now - found.since > self._give_up:
                if not found.future.cancel() and not found.future.done():
                    self._past_time[uid] = found  # its thread runs on: still counted
                del self._under_way[uid]
                self._over[uid] = now
        for uid, found in list(self._past_time.items()):
            if found.future.done():
                del self._past_time[uid]
        for uid, (since, _) in list(self._waiting.items()):
            if now - since > self._give_up:
                del self._waiting[uid]
                self._over[uid] = now
                log.warning(
                    "log tails not kept",
                    extra={"uid": uid, "why": "its namespace's turn never came"},
                )
        while self._over and (
            len(self._over) > REMEMBERED or now - next(iter(self._over.values())) > REMEMBER_SECONDS
        ):
            self._over.popitem(last=False)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def read(manager: Cluster, trainjob_uid: str) -> tuple[list[Dict], dict[str, str]] | None:
    """(kept pods, tails by `key_of(pod, container)`) of a TrainJob, or None."""
    found = manager.get_or_none(CONFIG_MAP, name_of(trainjob_uid), own_namespace())
    if found is None:
        return None
    data: dict[str, str] = dict(found.get("data") or {})
    try:
        pods = orjson.loads(data.pop(PODS_KEY, "[]"))
    except orjson.JSONDecodeError:
        return None
    return (pods if isinstance(pods, list) else []), data


@dataclass(frozen=True)
class Records:
    """A kind of record the leader keeps of a TrainJob in its own namespace: ConfigMaps
    labelled `label` with the manager TrainJob's UID, whose `annotation` names it
    NAMESPACE/NAME."""

    label: str
    annotation: str


TAILS = Records(LABEL, TRAINJOB_ANNOTATION)


@dataclass(frozen=True)
class Bounds:
    """How much the store keeps: records in all, bytes in all, records per namespace."""

    kept: int
    total_bytes: int | None = None
    per_namespace: int | None = None


def bounds(settings: DispatcherSettings) -> Bounds:
    """The tails' bounds the settings give."""
    return Bounds(
        kept=settings.log_tails_kept,
        total_bytes=settings.log_tails_bytes,
        per_namespace=settings.log_tails_per_namespace,
    )


def sweep(manager: Cluster, caches: Caches, bounds: Bounds, records: Records = TAILS) -> int:
    """Delete the `records` (the tails, by default) of TrainJobs that are gone, then those
    beyond `bounds`; how many were deleted."""
    alive = set()
    for key in caches.trainjob_keys():
        tj = caches.trainjob(*key)
        if tj is not None and tj.uid:
            alive.add(tj.uid)
    return _delete(manager, records, lambda items: doomed(items, alive, bounds, records))


def trim(manager: Cluster, bounds: Bounds) -> int:
    """Delete the records beyond `bounds`."""
    return _delete(manager, TAILS, lambda items: beyond(items, bounds))


def _delete(manager: Cluster, records: Records, pick: _Picker) -> int:
    # Their metadata only: the tails themselves are not read to be deleted.
    items = manager.list_metadata(CONFIG_MAP, own_namespace(), label_selector=records.label)
    going = pick(items)
    for item in going:
        meta = item["metadata"]
        manager.delete(CONFIG_MAP, meta["name"], meta["namespace"], uid=meta.get("uid"))
    return len(going)


def doomed(
    items: list[Dict], alive: set[str], bounds: Bounds, records: Records = TAILS
) -> list[Dict]:
    """The records to delete: those of TrainJobs not `alive`, then those beyond `bounds`."""
    label = records.label
    gone = [i for i in items if (i["metadata"].get("labels") or {}).get(label) not in alive]
    going = {id(i) for i in gone}
    return gone + beyond([i for i in items if id(i) not in going], bounds, records)


def beyond(items: list[Dict], bounds: Bounds, records: Records = TAILS) -> list[Dict]:
    """The records beyond `bounds`, oldest first within a namespace: each namespace's beyond
    `per_namespace`, then, while the rest is beyond `kept` records or `total_bytes`, the
    oldest of the namespace holding the most bytes (so a namespace that fills the store
    loses its own records first)."""
    rest = sorted(items, key=lambda i: str(i["metadata"].get("creationTimestamp") or ""))
    going: list[Dict] = []
    if bounds.per_namespace is not None:
        seen: Counter[str] = Counter()
        for item in reversed(rest):  # newest first: the newest per_namespace stay
            seen[namespace_of(item, records)] += 1
            if seen[namespace_of(item, records)] > bounds.per_namespace:
                going.append(item)
        trimmed = {id(i) for i in going}
        rest = [i for i in rest if id(i) not in trimmed]
    # each namespace's records, oldest first, and the bytes they hold
    queues: dict[str, list[Dict]] = {}
    for item in rest:
        queues.setdefault(namespace_of(item, records), []).append(item)
    held = Counter({ns: sum(size_of(i) for i in q) for ns, q in queues.items()})
    count, total = len(rest), sum(held.values())
    limit = bounds.total_bytes if bounds.total_bytes is not None else total
    while count and (count > bounds.kept or total > limit):
        heaviest = max(held, key=lambda ns: (held[ns], len(queues[ns])))
        victim = queues[heaviest].pop(0)  # its oldest
        going.append(victim)
        held[heaviest] -= size_of(victim)
        count, total = count - 1, total - size_of(victim)
        if not queues[heaviest]:
            del held[heaviest], queues[heaviest]
    return going


def namespace_of(item: Dict, records: Records = TAILS) -> str:
    """The namespace of a record's TrainJob ("" when it does not say)."""
    said = str((item["metadata"].get("annotations") or {}).get(records.annotation) or "")
    return said.split("/", 1)[0] if "/" in said else ""


def size_of(item: Dict) -> int:
    said = (item["metadata"].get("annotations") or {}).get(BYTES_ANNOTATION)
    try:
        return int(said) if said is not None else UNKNOWN_RECORD_BYTES
    except ValueError:
        return UNKNOWN_RECORD_BYTES


_Picker = Callable[[list[Dict]], list[Dict]]
