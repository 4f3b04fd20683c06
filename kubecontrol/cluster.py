"""Kubernetes I/O shared by both controllers: one client per cluster, apply, status, retries.

Every call goes through `Cluster`, built from that cluster's own kubeconfig (never a
process-global config), over `kubecontrol.client`. Transient failures (429, 5xx, timeouts,
connection errors) are retried with exponential backoff; 4xx answers are returned to the caller
as `ApiException` at once.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import orjson
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from kubebase.events import build_event
from kubebase.kinds import EVENT, Kind
from kubebase.objects import Dict
from kubebase.shares import Rates, Remembered
from kubecontrol import metrics
from kubecontrol.client import JSON, METADATA_LIST, ApiClient, ApiException
from kubecontrol.credentials import in_cluster_credentials, load_credentials
from kubecontrol.deadline import Deadline, DeadlinePassed
from kubecontrol.lists import decode_list
from kubecontrol.workqueue import WriteMemory

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
log = logging.getLogger(__name__)


def _name(obj: Dict) -> str:
    return str(obj["metadata"].get("name"))


def _unmanaged(obj: Dict) -> Dict:
    """A listed object's metadata without its managedFields."""
    obj["metadata"].pop("managedFields", None)
    return obj


def _version_of(obj: Dict) -> tuple[tuple[str | None, str], str]:
    """A listed object's (namespace, name) and resourceVersion."""
    meta = obj["metadata"]
    return (meta.get("namespace"), str(meta["name"])), str(meta["resourceVersion"])


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in (429, 500, 502, 503, 504)
    return isinstance(exc, ConnectionError | TimeoutError)  # client.TransportError included


_BACKOFF = wait_exponential_jitter(multiplier=0.2, max=5)
MAX_RETRY_AFTER = 10.0  # the longest a server's Retry-After holds a call up, per attempt
# Events, as client-go's recorder spam-filters them: per object (and per kind of Event: our
# own, or one recorded again from elsewhere under a name), 25 at once, then one per 5 min;
# at most EVENTS_QUEUED wait to be sent, EVENTS_QUEUED_EACH of one namespace (a tenant's
# crash-looping pods never push out another tenant's Events).
EVENT_BURST, EVENT_EVERY_SECONDS = 25, 300.0
EVENTS_QUEUED, EVENTS_QUEUED_EACH = 10_000, 1_000
# An Event said once (a `name`) and recorded (or found there, 409) is not sent again for
# ONCE_KEPT_SECONDS (less than an Event's hour on the API server): a pass that says it on
# every look would otherwise spend the object's rate on it. ONCE_KEPT names at most, kept per
# namespace: one that says many takes another's down no further than its own count.
ONCE_KEPT, ONCE_KEPT_SECONDS = 4096, 1800.0


def retry_after(exc: BaseException | None) -> float:
    """The seconds an answer's `Retry-After` asks for (429, 503), or 0."""
    if not isinstance(exc, ApiException):
        return 0.0
    try:
        return max(float(exc.headers.get("Retry-After", 0)), 0.0)
    except ValueError:  # an HTTP date: the API server sends seconds
        return 0.0


def _wait(state: RetryCallState) -> float:
    """Exponential backoff with jitter, or longer when the server asks for it (Retry-After,
    up to MAX_RETRY_AFTER), as client-go's rest client waits."""
    exc = state.outcome.exception() if state.outcome is not None else None
    return max(_BACKOFF(state), min(retry_after(exc), MAX_RETRY_AFTER))


# Transient failures only; "not found", "invalid" and conflicts are decisions for the caller.
_RETRYING = Retrying(
    retry=retry_if_exception(_transient),
    wait=_wait,
    stop=stop_after_attempt(5),
    reraise=True,
)


def io_retry(fn: Callable[P, R]) -> Callable[P, R]:
    """Retry `fn` on transient failures (`_RETRYING`: backoff, 5 attempts in all). The first
    attempt is a plain call: tenacity's bookkeeping per call (a copy of its settings, a call
    state, its actions) cost more than a request's own decoding, and nearly every call
    succeeds at once. Only a transient failure hands over to tenacity, which counts it as
    its first attempt and carries on from there. On a Cluster with a deadline (`within`), the
    waits between attempts end with it, and the next attempt then raises DeadlinePassed."""

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if not _transient(exc):
                raise
            failed: list[BaseException] = [exc]

        def attempt() -> R:
            if failed:
                raise failed.pop()  # the first attempt, as it went
            return fn(*args, **kwargs)

        deadline = getattr(args[0], "deadline", None) if args else None
        if isinstance(deadline, Deadline):
            return _RETRYING.copy(sleep=deadline.sleep)(attempt)
        return _RETRYING.copy()(attempt)

    return call


class NotLeader(RuntimeError):
    """A write refused because this replica does not lead (leader election)."""


class Cluster:
    """A connection to one cluster: its own ApiClient, its own name for the logs.

    `may_write`, when set, is asked before every write (create, patch, apply, replace, delete,
    Events): a replica that does not hold the leader Lease reads but never writes. And
    `write_budget`, when set, says how many seconds a write may still take: a write is sent
    with no longer a timeout than that (none at all when it is spent), so no write of ours
    can still be in flight once a standby may have taken the Lease over."""

    def __init__(
        self,
        name: str,
        api: ApiClient,
        field_manager: str,
        may_write: Callable[[], bool] | None = None,
    ) -> None:
        self.name = name
        self.api = api
        self.field_manager = field_manager
        self.may_write = may_write
        self.write_budget: Callable[[], float] | None = None
        # Events go out from one thread per connection, started with the first Event.
        self._events: queue.Queue[Dict] | None = None
        self._events_lock = threading.Lock()
        self._event_rates = Rates(1 / EVENT_EVERY_SECONDS, EVENT_BURST)
        self._queued: Counter[str] = Counter()  # Events waiting, by namespace
        self._said_once: Remembered[str] = Remembered(ONCE_KEPT)  # names, by namespace

    def writable(self) -> bool:
        return self.may_write is None or self.may_write()

    def follow_gate(self, other: Cluster) -> None:
        """Write only when `other` may, within its budget (the manager's leader election
        gates the dispatcher's writes to every worker too)."""
        self.may_write = other.writable
        self.write_budget = lambda: (
            other.write_budget() if other.write_budget is not None else float("inf")
        )

    def ungated(self) -> Cluster:
        """The same connection without the write gate (for the Lease itself)."""
        other = Cluster(self.name, self.api, self.field_manager)
        other.timeout = self.timeout
        return other

    @classmethod
    def from_kubeconfig(
        cls, name: str, kubeconfig: Path | str | Dict, field_manager: str, timeout: float = 15.0
    ) -> Cluster:
        cluster = cls(name, ApiClient(load_credentials(kubeconfig)), field_manager)
        cluster.timeout = timeout
        return cluster

    @classmethod
    def in_cluster(cls, name: str, field_manager: str) -> Cluster:
        return cls(name, ApiClient(in_cluster_credentials()), field_manager)

    timeout: float = 15.0
    deadline: Deadline | None = None  # see `within`

    def within(self, deadline: Deadline) -> Cluster:
        """The same connection, write gate and budget, for work that must end by `deadline`
        (a webhook's judge): every call checks it first (DeadlinePassed, never retried) and
        waits no longer than is left of it. Events go through the cluster itself."""
        other = Cluster(self.name, self.api, self.field_manager, self.may_write)
        other.write_budget = self.write_budget
        other.timeout = self.timeout
        other.deadline = deadline
        return other

    def send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Dict | None = None,
        content_type: str = JSON,
        accept: str = JSON,
        timeout: float | None = None,
        raw: bool = False,
    ) -> Any:
        """One request, one try (no retries: the typed calls below add them), within the write
        gate and budget, counted in the API metrics; its decoded answer, or with `raw` its
        bytes as they came (for a reader that decodes them its own way). `timeout`: shorter
        than the cluster's, for a caller with a deadline of its own (the Lease)."""
        timeout = min(timeout, self.timeout) if timeout is not None else self.timeout
        if self.deadline is not None:
            left = self.deadline.left()  # read once: given up between two reads, it is 0
            if left <= 0:
                raise DeadlinePassed(f"out of time before {method} {path}")
            timeout = min(timeout, left)
        if method != "GET":
            budget = self.write_budget() if self.write_budget is not None else timeout
            if budget <= 0 or not self.writable():
                raise NotLeader(f"[{self.name}] not the leader: {method} {path} refused")
            timeout = min(timeout, budget)
        metrics.API_REQUESTS.labels(self.name, method).inc()
        try:
            data = self.api.request(
                method,
                path,
                body=body,
                query=query,
                content_type=content_type,
                timeout=timeout,
                accept=accept,
            )
        except ApiException as exc:
            metrics.API_ERRORS.labels(self.name, str(exc.status)).inc()
            raise
        except OSError:  # no answer (client.TransportError)
            metrics.API_ERRORS.labels(self.name, "0").inc()
            raise
        if raw:
            return data
        return orjson.loads(data) if data else None

    @io_retry
    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Dict:
        result: Dict = self.send("GET", kind.object_path(namespace, name))
        return result

    def get_or_none(self, kind: Kind, name: str, namespace: str | None = None) -> Dict | None:
        try:
            return self.get(kind, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    @io_retry
    def list_metadata(
        self,
        kind: Kind,
        namespace: str | None = None,
        page: int = 500,
        label_selector: str | None = None,
    ) -> list[Dict]:
        """The metadata of every object of a kind (that `label_selector` selects), `page`
        objects per request: only `metadata` of each (no spec or status), and that without
        its managedFields, which no reader of ours needs."""
        return self._metadata_pages(kind, namespace, page, label_selector, _unmanaged)

    @io_retry
    def versions(
        self, kind: Kind, namespace: str | None = None, page: int = 500
    ) -> dict[tuple[str | None, str], str]:
        """The resourceVersion of every object of a kind, by (namespace, name): what a
        comparison with a cache needs, at any scale. Each answer is decoded an item at a time,
        each item cut to its key and version before the next, so a check of thousands of
        objects holds their keys and versions, never their metadata: a page of 500 Workloads'
        metadata decoded whole is about 17 MiB of small objects, and once it was dropped the
        allocator's pools it had used stayed the process's, pinned by the cached objects
        allocated meanwhile (+13 MiB of the dispatcher's resident memory at 1,000 TrainJobs
        in flight; docs/contributors/benchmarks.md)."""
        listed = self._metadata_pages(kind, namespace, page, None, _version_of)
        return dict(listed)

    def _metadata_pages(
        self,
        kind: Kind,
        namespace: str | None,
        page: int,
        label_selector: str | None,
        each: Callable[[Dict], T],
    ) -> list[T]:
        """What `each` makes of every object's metadata (as `PartialObjectMetadata`), the
        answers decoded an item at a time."""
        path = kind.path(namespace, None)
        made: list[T] = []
        token = None
        while True:
            query = {"limit": page, "continue": token, "labelSelector": label_selector}
            data = self.send("GET", path, query=query, accept=METADATA_LIST, raw=True)
            result = decode_list(data, each, whole_bytes=0)
            del data
            made += result["items"]
            token = (result.get("metadata") or {}).get("continue")
            if not token:
                return made

    @io_retry
    def apply(
        self, kind: Kind, obj: Dict, *, force: bool = True, subresource: str | None = None
    ) -> Dict:
        """Server-side apply with our field manager (creates when missing, unless applied to a
        subresource such as `status`: then a missing object is a 404)."""
        meta = obj["metadata"]
        result: Dict = self.send(
            "PATCH",
            kind.object_path(meta.get("namespace"), meta["name"], subresource),
            body=kind.stamped(obj),
            content_type="application/apply-patch+yaml",
            query={"fieldManager": self.field_manager, "force": "true" if force else "false"},
        )
        return result

    @io_retry
    def create(self, kind: Kind, obj: Dict) -> Dict:
        path = kind.path(obj["metadata"].get("namespace"), None)
        body = kind.stamped(obj)
        result: Dict = self.send(
            "POST", path, body=body, query={"fieldManager": self.field_manager}
        )
        return result

    @io_retry
    def replace(self, kind: Kind, obj: Dict) -> Dict:
        """PUT the whole object; its metadata.resourceVersion makes it a guarded write."""
        meta = obj["metadata"]
        path = kind.object_path(meta.get("namespace"), meta["name"])
        body = kind.stamped(obj)
        result: Dict = self.send("PUT", path, body=body, query={"fieldManager": self.field_manager})
        return result

    @io_retry
    def delete(
        self,
        kind: Kind,
        name: str,
        namespace: str | None = None,
        propagation: str = "Background",
        uid: str | None = None,
    ) -> None:
        """Delete, and do not mind that it is gone. With `uid`, only that very object: one of
        the same name made since (someone else's) is left alone (409, taken as gone)."""
        body: Dict = {"propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.send("DELETE", kind.object_path(namespace, name), body=body)
        except ApiException as exc:
            if exc.status == 409 and uid:
                return
            if exc.status != 404:
                raise

    @io_retry
    def patch(
        self,
        kind: Kind,
        name: str,
        namespace: str | None,
        patch: Dict,
        *,
        subresource: str | None = None,
    ) -> Dict:
        result: Dict = self.send(
            "PATCH",
            kind.object_path(namespace, name, subresource),
            body=patch,
            content_type="application/merge-patch+json",
            query={"fieldManager": self.field_manager},
        )
        return result

    def post_event(
        self, obj: Dict, etype: str, reason: str, message: str, name: str | None = None
    ) -> None:
        """Record an Event on `obj` in the background, in order. Events are best effort (as
        with client-go's recorder): a busy API server never holds up a reconcile, and an Event
        that cannot be written is logged and dropped, as is one over its object's rate or its
        namespace's share of the backlog (EVENT_BURST, EVENTS_QUEUED_EACH). One with a `name`
        is recorded once."""
        meta = obj.get("metadata") or {}
        if name and self._said(meta.get("namespace") or "default", name):
            return
        source = (meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}", bool(name))
        if not self._event_rates.take(source):
            log.debug(
                "Event over its rate: dropped",
                extra={"cluster": self.name, "reason": reason, "object": _name(obj)},
            )
            return
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = build_event(obj, etype, reason, message, self.field_manager, now, name)
        namespace = event["metadata"]["namespace"]
        with self._events_lock:
            if self._events is None:
                self._events = queue.Queue(maxsize=EVENTS_QUEUED)
                threading.Thread(
                    target=self._post_events, name=f"events-{self.name}", daemon=True
                ).start()
            if self._queued[namespace] < EVENTS_QUEUED_EACH and not self._events.full():
                self._events.put_nowait(event)  # room was checked under the lock: never Full
                self._queued[namespace] += 1
                return
        log.warning(
            "Event backlog full: dropped",
            extra={"cluster": self.name, "reason": reason, "object": _name(obj)},
        )

    def _said(self, namespace: str, name: str) -> bool:
        """Whether the Event of that name was recorded within ONCE_KEPT_SECONDS."""
        return self._said_once.holds(namespace, name, ONCE_KEPT_SECONDS)

    def _note_said(self, event: Dict) -> None:
        meta = event["metadata"]
        if "name" in meta:
            self._said_once.note(meta["namespace"], meta["name"], ONCE_KEPT_SECONDS)

    def _forget_queued(self, namespace: str) -> None:
        with self._events_lock:
            self._queued[namespace] -= 1
            if self._queued[namespace] <= 0:
                del self._queued[namespace]

    def _post_events(self) -> None:
        assert self._events is not None
        while True:
            event = self._events.get()
            self._forget_queued(event["metadata"]["namespace"])
            try:
                self.create(EVENT, event)
                self._note_said(event)
            except Exception as exc:
                if isinstance(exc, ApiException) and exc.status == 409:
                    self._note_said(event)
                    continue  # an Event of that name is there already: recorded once
                log.warning(
                    "Event not recorded",
                    extra={
                        "cluster": self.name,
                        "reason": event["reason"],
                        "object": event["involvedObject"].get("name"),
                        "error": str(getattr(exc, "reason", exc)),
                    },
                )

    def patch_status(self, kind: Kind, obj: Dict, status: Dict) -> Dict:
        """Merge-patch `status` via the status subresource, guarded by resourceVersion."""
        meta = obj["metadata"]
        return self.patch(
            kind,
            meta["name"],
            meta.get("namespace"),
            {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": status},
            subresource="status",
        )


def guarded_write(
    memory: WriteMemory, key: tuple[str, ...], version: str, write: Callable[[], Dict | None]
) -> bool:
    """A write (or several) planned from `version` of an object: False, with nothing sent,
    when that version is known to be old (we changed the object since, or the server said
    conflict), and False when the write conflicts or the object is gone. A write that changed
    the object (its result has another resourceVersion; None: nothing sent) makes `version`
    old: the cache has not caught up, and a plan from it would repeat or undo ours."""
    if memory.stale(key, version):
        return False
    try:
        result = write()
    except ApiException as exc:
        if exc.status == 409:
            memory.wrote(key, version)
        if exc.status in (404, 409):
            return False
        raise
    if result is not None and result.get("metadata", {}).get("resourceVersion") != version:
        memory.wrote(key, version)
    return True
