"""A lean list + watch of one kind into a cache, on a thread of its own (client-go's informer,
in small): list, remember the list's resourceVersion, watch from there; on any failure (API
server away, 410 Gone, a broken stream) back off and list again, so the cache is never left
stale and the watch is never given up.

Each event updates the cache first, then calls `on_event(type, obj)` (`ADDED`, `MODIFIED`,
`DELETED`; after a re-list, one call per object that changed or went while nobody watched).
`on_state(ok, error)` reports each list's success and each failure. Both must return quickly
(queue a key, set a flag): a list's run on the informer's thread, a watch's on the thread that
carries the cluster's streams (`ApiClient.watch`), one watch's at a time.

Every watch of both controllers is one of these: the kinds each keeps are listed in one table
(`kubecontrol.controller.Watch`), and the dispatcher's copies on every worker and the Secrets of its
own namespace (`namespace`: RBAC allows it no other) are watched the same way. Selectors go to
the API server, so a filtered watch streams only what it keeps.

`transform` is what the cache keeps of each object (it must keep `metadata.resourceVersion`).
A change that leaves what it keeps as it was (only the resourceVersion moved) updates the cache
and calls nobody: a transform that keeps only what its readers read also spares them the
changes they would not act on. `group_by` keeps a second index, group key -> the objects in it
(client-go's indexers, one); `groups_of` does the same for an object that sits in several
groups at once (controller-runtime's field indexes, which give each object several values).
"""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kubebase.kinds import Kind
from kubebase.objects import Dict
from kubecontrol.client import ApiClient, ApiException
from kubecontrol.lists import decode_list

Key = Any  # (namespace, name) for namespaced kinds, name for cluster-scoped ones
log = logging.getLogger(__name__)
# Objects a list asks for at a time: client-go's pager's 500, and 50 for kinds whose objects a
# tenant sizes (a TrainJob, a runtime, a Workload or a pod may be as large as etcd stores,
# 1.5 MiB, and an env value has no length limit). A page is held whole as bytes (50 such
# objects: up to ~75 MB), and one larger than 4 MiB is decoded an object at a time, each cut
# down by the transform before the next (kubecontrol/lists.py): never a page decoded whole,
# which for 50 pods of many small env entries was over a gigabyte.
PAGE = 500
TENANT_SIZED_PAGE = 50


def slim(obj: Dict) -> Dict:
    """What the cache keeps of an object: all but `metadata.managedFields`, which nothing of
    ours reads (server-side apply is judged by the API server) and which is a good part of a
    Workload's size (client-go's informers are commonly given the same transform)."""
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


# Strings and containers `Strings.share` visits per object at most: a tenant's object of a
# million tiny strings costs the walk no more than an ordinary one, and the table no more
# than this many entries (the rest of it stays as decoded).
SHARED_PER_OBJECT = 4096
# Entries the table may gain past twice its size after the last sweep before it is swept, and
# characters past twice its characters then: a tenant who rewrites one large value again and
# again leaves few entries but many bytes behind.
SWEEP_SLACK = 4096
SWEEP_SLACK_CHARS = 16 * 2**20


class Strings:
    """One instance of each string value the caches of a process hold. Objects of one kind
    repeat the same values (a runtime's image and command, conditions' types and reasons,
    namespaces, owners' UIDs), and caches that keep each object as decoded hold a copy of each
    per object: a Workload made from the example torch runtime holds its 7.7 KB training
    script in its pod template. `share` replaces each string value of an object, in place,
    by the instance the table holds (dict keys are the decoder's: orjson keeps one instance
    of each short key).

    The table is the process's own, not the interpreter's (`sys.intern`'s strings are
    immortal in CPython 3.12): a string nothing but the table holds any more is swept out,
    once the table has doubled since the last sweep, so what a tenant wrote stays no longer
    than a cache holds it (or, for one large value rewritten again and again, until the
    characters added reach twice those kept). Each object shares at most SHARED_PER_OBJECT of
    its values."""

    def __init__(self) -> None:
        self._table: dict[str, str] = {}
        self._lock = threading.Lock()
        self._kept_after_sweep = 0
        self._chars_after_sweep = 0  # the characters of what the last sweep kept
        self._chars_added = 0  # those of the strings added since

    def __len__(self) -> int:
        return len(self._table)

    def share(self, obj: object) -> None:
        """`obj` (JSON as decoded: dicts, lists, scalars) with its string values shared."""
        if type(obj) is not dict and type(obj) is not list:
            return
        todo: list[Any] = [obj]  # a stack, not recursion: no RecursionError however deep
        budget = SHARED_PER_OBJECT
        with self._lock:
            table = self._table
            while todo and budget > 0:
                node = todo.pop()
                pairs = node.items() if type(node) is dict else enumerate(node)
                for at, value in pairs:
                    budget -= 1
                    if budget < 0:
                        break
                    if type(value) is str:
                        shared = table.get(value)
                        if shared is None:
                            table[value] = shared = value
                            self._chars_added += len(value)
                        node[at] = shared
                    elif type(value) is dict or type(value) is list:
                        todo.append(value)
            if (
                len(table) > 2 * self._kept_after_sweep + SWEEP_SLACK
                or self._chars_added > self._chars_after_sweep + SWEEP_SLACK_CHARS
            ):
                self._sweep()

    def _sweep(self) -> None:
        """Out with each string nothing but the table holds: one with no more references
        than a fresh string put in the table now (counted the same way)."""
        table = self._table
        probe = str(object())  # a string of its own, held by the table and this frame alone
        table[probe] = probe
        held = list(table)
        alone = sys.getrefcount(probe)  # the table's two, the list's, the name's, the call's
        for value in held:
            if sys.getrefcount(value) <= alone:
                del table[value]
        del table[probe]
        self._kept_after_sweep = len(table)
        self._chars_after_sweep, self._chars_added = sum(map(len, table)), 0


STRINGS = Strings()  # the process's table, shared by every informer


def same_apart_from_version(old: Dict | None, new: Dict) -> bool:
    """Whether two versions of an object (as a cache keeps them) differ in nothing but
    `metadata.resourceVersion`."""
    if old is None or old.keys() != new.keys():
        return False
    # Last key first: `status`, where most changes are, ends an object as the API sends it.
    if any(old[k] != new[k] for k in reversed(old) if k != "metadata"):
        return False
    before, after = old["metadata"], new["metadata"]
    return before.keys() == after.keys() and all(
        before[k] == after[k] for k in before if k != "resourceVersion"
    )


def key_of(obj: Dict) -> Key:
    meta = obj["metadata"]
    return (meta["namespace"], meta["name"]) if meta.get("namespace") else meta["name"]


class IndexView(Mapping[Key, tuple[Dict, ...]]):
    """An informer's cache as a mapping key -> the objects under it (one), the shape
    `kubecontrol.caches.Caches` and the watchdog read (the same as a `GroupView`'s)."""

    def __init__(self, store: dict[Key, Dict]) -> None:
        self._store = store

    def __getitem__(self, key: Key) -> tuple[Dict, ...]:
        return (self._store[key],)

    def __iter__(self) -> Iterator[Key]:
        return iter(list(self._store))

    def __len__(self) -> int:
        return len(self._store)


class GroupView(Mapping[Key, tuple[Dict, ...]]):
    """An informer's second index (`group_by`) as a mapping: group key -> the objects in it."""

    def __init__(self, informer: Informer) -> None:
        self._informer = informer

    def __getitem__(self, key: Key) -> tuple[Dict, ...]:
        found = tuple(self._informer.group(key))
        if not found:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[Key]:
        return iter(self._informer.group_keys())

    def __len__(self) -> int:
        return len(self._informer.group_keys())


STILL_FAILING_EVERY = 60.0  # seconds between the lines that say an outage goes on


class _Streak:
    """What an informer says of a run of failures: the first one as a warning, then a line a
    minute while it goes on (how many tries, for how long, the last error), and once it can
    list or watch again; the retries in between at debug level."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.began = self.said = 0.0
        self.open = False  # a warning was given and its end not yet told

    def failed(self, failures: int, error: str) -> None:
        now = time.monotonic()
        if failures == 0:
            self.began = self.said = now
            self.open = True
            log.warning("watch failed", extra={"informer": self.name, "error": error})
        elif now - self.said >= STILL_FAILING_EVERY:
            self.said, self.open = now, True
            log.warning(
                "watch still failing",
                extra={
                    "informer": self.name,
                    "tries": failures + 1,
                    "seconds": round(now - self.began),
                    "error": error,
                },
            )
        else:
            log.debug("watch failed again", extra={"informer": self.name, "error": error})

    def ended(self, failures: int) -> None:
        if self.open:
            self.open = False
            log.info(
                "listing and watching again",
                extra={
                    "informer": self.name,
                    "failedTries": failures,
                    "seconds": round(time.monotonic() - self.began),
                },
            )


class Informer:
    def __init__(
        self,
        api: ApiClient,
        kind: Kind,
        on_event: Callable[[str, Dict], None] = lambda type, obj: None,
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        on_state: Callable[[bool, str], None] = lambda ok, error: None,
        name: str = "",
        list_timeout: float = 30.0,
        page: int = PAGE,
        transform: Callable[[Dict], Dict] = slim,
        fallback: Callable[[Dict], Dict] = slim,
        group_by: Callable[[Dict], Key] | None = None,
        groups_of: Callable[[Dict], Iterable[Key]] | None = None,
        keep: Callable[[Dict], bool] | None = None,
    ) -> None:
        self.kind = kind
        self._api = api
        # Every namespace, or the one given (where RBAC allows no more).
        self._path = kind.path(namespace or None, None)
        self._on_event, self._on_state = on_event, on_state
        self._selector = label_selector
        self._fields = field_selector
        self._name = name or kind.kind
        self._list_timeout = list_timeout  # how long a list may take before it counts as failed
        self._page = page  # objects a list asks for at a time (client-go's pager: 500)
        self._last = ""  # the last resourceVersion a watch delivered
        self.lists = 0  # lists made (the first, and one after each 410)
        self._failing = False  # the last request failed (`on_state(False)` said so)
        # Changed key by key (by events and by a re-list alike); readers take a key or a list
        # of keys at a time (atomic under the GIL).
        self._store: dict[Key, Dict] = {}
        self.view = IndexView(self._store)
        self._transform, self._fallback = transform, fallback
        # Which objects the cache holds at all (after the transform), where no selector the
        # API server knows can say it: one that stops being kept leaves as if deleted.
        self._keep = keep
        self._grouped = group_by is not None or groups_of is not None
        self._group_keys: Callable[[Dict], Iterable[Key]] = (
            (lambda obj: (group_by(obj),)) if group_by is not None else groups_of or (lambda _: ())
        )
        self._groups: dict[Key, dict[Key, Dict]] = {}  # group key -> object key -> object
        self.groups = GroupView(self)
        self._groups_lock = threading.Lock()
        self.synced = threading.Event()  # the first list is in
        self._stop = threading.Event()
        self._abort = threading.Event()  # ends the running watch (stop, relist)
        self._relist = False  # the next round lists (`relist`)

    @property
    def page(self) -> int:
        """Objects a list of this kind asks for at a time."""
        return self._page

    def get(self, key: Key) -> Dict | None:
        return self._store.get(key)

    def items(self) -> list[Dict]:
        return list(self._store.values())

    def group(self, key: Key) -> list[Dict]:
        """The objects `group_by` (or `groups_of`) puts under `key` (none without either)."""
        with self._groups_lock:
            return list(self._groups.get(key, {}).values())

    def group_keys(self) -> list[Key]:
        with self._groups_lock:
            return list(self._groups)

    def _put(self, key: Key, obj: Dict) -> None:
        STRINGS.share(obj)  # before readers see it (they would see the same values)
        old = self._store.get(key)
        self._store[key] = obj
        if self._grouped:
            with self._groups_lock:
                if old is not None:
                    self._ungroup(key, old)
                for group in self._groups_of(obj):
                    self._groups.setdefault(group, {})[key] = obj

    def _drop(self, key: Key) -> None:
        old = self._store.pop(key, None)
        if old is not None and self._grouped:
            with self._groups_lock:
                self._ungroup(key, old)

    def _groups_of(self, obj: Dict) -> set[Key]:
        """The groups `obj` sits in; none, the failure logged, for an object the index
        function fails on (a shape it did not foresee): taken for the list's or the watch's,
        it would stop the cache for every object of the kind, as a transform's would."""
        try:
            return set(self._group_keys(obj))
        except Exception:
            log.exception(
                "index failed: the object is filed under no group",
                extra={"informer": self._name, "object": str(key_of(obj))},
            )
            return set()

    def _ungroup(self, key: Key, obj: Dict) -> None:
        for group in self._groups_of(obj):
            members = self._groups.get(group)
            if members is not None:
                members.pop(key, None)
                if not members:
                    del self._groups[group]

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True, name=f"informer-{self._name}").start()

    def stop(self) -> None:
        self._stop.set()
        self._abort.set()

    def replay(self) -> None:
        """Hand every cached object to `on_event` as ADDED (a controller's first look, once
        all its caches are in)."""
        for obj in self.items():
            self._notify("ADDED", obj)

    def relist(self) -> None:
        """End the running watch, whatever state it is in (a frozen one included), and list
        again: what the watchdog does with a cache it found out of date."""
        self._relist = True
        self._abort.set()

    def list_now(self) -> bool:
        """List into the cache on the caller's thread, without a watch (a whole-pass test
        fills its controller's caches so between passes); a failure is reported as the watch
        loop reports it (`on_state`). True when the list came in."""
        try:
            self._list()
        except Exception as exc:
            self._failing = True
            self._on_state(False, f"{type(exc).__name__}: {str(exc)[:200]}")
            return False
        return True

    def _cached(self, obj: Dict) -> Dict:
        """What the cache keeps of a listed object. A list's items carry no apiVersion and
        kind (a watch event's object does): each gets them, so every cached object says what
        it is, however it came in."""
        obj["apiVersion"], obj["kind"] = self.kind.api_version, self.kind.kind
        return self._kept(obj)

    def _kept(self, obj: Dict) -> Dict:
        """What the cache keeps of `obj`: what the transform keeps. An object the transform
        fails on (a shape it did not foresee) is kept as the fallback keeps it (by default
        whole but its managedFields; a kind whose content must never be held keeps less), and
        the failure logged: taken for the list's or the watch's, it would fail every list and
        watch again on the same object, and the cache would stop for every object of the
        kind."""
        try:
            return self._transform(obj)
        except Exception:
            log.exception(
                "transform failed: the object is kept as its fallback keeps it",
                extra={"informer": self._name, "object": str(key_of(obj))},
            )
            return self._fallback(obj)

    def _list(self) -> str:
        """List everything into the cache, a page at a time; report what changed since;
        return the list's resourceVersion."""
        fresh: dict[Key, Dict] = {}
        query = {**self._selectors(), "limit": self._page}
        version = ""
        while True:
            data = self._api.request("GET", self._path, query=query, timeout=self._list_timeout)
            # Each page is cut down by the transform as it comes, a large one an object at a
            # time as it is decoded (kubecontrol/lists.py): a list of large objects of which
            # the cache keeps little (pods, Secrets) holds one page's bytes at a time, never
            # all of them, nor a page of them decoded whole.
            page = decode_list(data, self._cached)
            del data
            for o in page["items"]:
                if self._keep is None or self._keep(o):
                    fresh[key_of(o)] = o
            meta = page["metadata"]
            version = version or str(meta["resourceVersion"])  # the first page's snapshot
            if not meta.get("continue"):
                break
            query = {**query, "continue": meta["continue"]}
            del page
        gone = [obj for key, obj in list(self._store.items()) if key not in fresh]
        changed = [
            o for k, o in fresh.items() if not same_apart_from_version(self._store.get(k), o)
        ]
        # Key by key, never cleared: a reader must not see a cached object vanish for a moment.
        for obj in gone:
            self._drop(key_of(obj))
        for key, obj in fresh.items():
            self._put(key, obj)
        self.synced.set()
        self._on_state(True, "")
        for obj in gone:
            self._notify("DELETED", obj)
        for obj in changed:
            self._notify("MODIFIED", obj)
        return version

    def _selectors(self) -> Dict:
        return {"labelSelector": self._selector, "fieldSelector": self._fields}

    def _run(self) -> None:
        """List, then watch from the list's resourceVersion; a watch the server ends, or whose
        connection breaks, goes on from the last resourceVersion seen. Only a watch the server
        refuses (410 Gone above all) lists again (`_needs_list`)."""
        failures = 0
        streak = _Streak(self._name)
        since = ""  # resourceVersion to watch from; empty: list first
        while not self._stop.is_set():
            listing = not since or self._relist
            try:
                if listing:
                    self._relist = False
                    self._abort.clear()
                    since = self._list()
                    self.lists += 1
                    self._failing = listing = False
                    streak.ended(failures)
                since = self._watch(since)  # the server ended it (timeout): watch on from there
                streak.ended(failures)
                failures = 0
            except Exception as exc:
                if self._relist or self._stop.is_set():  # ended on purpose: list at once
                    since = ""
                    continue
                relist = _needs_list(exc)
                since = "" if relist or listing else self._last
                error = f"{type(exc).__name__}: {str(exc)[:200]}"
                what = "listing again" if not since else f"watching on from {since}"
                # 410 Gone is routine (the watch was away longer than the server keeps
                # history): a list at once. Anything else is a failure, backed off.
                gone = isinstance(exc, ApiException) and exc.status == 410
                if gone:
                    log.debug(
                        "watch failed", extra={"informer": self._name, "what": what, "error": error}
                    )
                else:
                    streak.failed(failures, f"{what}: {error}")
                if not gone:
                    self._failing = True
                    self._on_state(False, error)
                    failures += 1
                # Jittered, so the informers of many replicas do not come back in step.
                delay = min(2.0**failures / 2, 10.0) * random.uniform(1.0, 1.5) if failures else 0
                self._stop.wait(delay or random.random())

    def _watch(self, since: str) -> str:
        """Apply events from `since` until the server ends the watch; return the last
        resourceVersion seen (kept in `_last` as it goes, for a watch that breaks)."""
        query = {
            **self._selectors(),
            "resourceVersion": since,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": 60,
        }
        self._last = since

        def on_event(event: Dict) -> bool:
            if self._stop.is_set():
                return False
            etype, obj = event["type"], event["object"]
            if etype == "ERROR":  # a Status; 410 Gone: `since` is too old to watch from
                code = int(obj.get("code") or 0)
                raise ApiException(code, str(obj.get("reason", "")), str(obj.get("message", obj)))
            if etype != "BOOKMARK":
                self._apply(etype, self._kept(obj))
            self._last = str(obj["metadata"]["resourceVersion"])
            return True

        self._api.watch(
            self._path, query, on_event, timeout=75, on_open=self._opened, abort=self._abort
        )
        return self._last

    def _opened(self) -> None:
        """A watch was answered: after failures, the API is back (as a list would say)."""
        if self._failing:
            self._failing = False
            self._on_state(True, "")

    def _apply(self, etype: str, obj: Dict) -> None:
        """One watch event into the cache; then `on_event`, unless only the version moved (or
        the object is not one the cache keeps, nor was)."""
        key = key_of(obj)
        if self._keep is not None and (etype == "DELETED" or not self._keep(obj)):
            # One the cache does not hold is no event; one it holds leaves as it was held
            # (what it said of its groups then: its handler finds whom it concerned).
            held = self._store.get(key)
            if held is None:
                return
            etype, obj = "DELETED", obj if etype == "DELETED" else held
        if etype == "DELETED":
            self._drop(key)
        else:
            unchanged = etype == "MODIFIED" and same_apart_from_version(self._store.get(key), obj)
            self._put(key, obj)
            if unchanged:
                return
        self._notify(etype, obj)

    def _notify(self, etype: str, obj: Dict) -> None:
        """`on_event`, whose failure is logged: it is the handler's, not the watch's (taken
        for the watch's, it would break the watch over and over on the same event)."""
        try:
            self._on_event(etype, obj)
        except Exception:
            log.exception(
                "event handler failed",
                extra={"informer": self._name, "event": etype, "object": str(key_of(obj))},
            )


def _needs_list(exc: Exception) -> bool:
    """Whether only a list helps: the server refused the watch from our resourceVersion (410
    Gone: too old; 504: too large, as after the server lost its data; any other error answer
    but 429, Too Many Requests). A stream that broke, or a server that did not answer, is
    watched again from the last resourceVersion."""
    return isinstance(exc, ApiException) and exc.status != 429
