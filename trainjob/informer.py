"""A lean list + watch of one kind into a cache, on a thread of its own (client-go's informer,
in small): list, remember the list's resourceVersion, watch from there; on any failure (API
server away, 410 Gone, a broken stream) back off and list again, so the cache is never left
stale and the watch is never given up.

Each event updates the cache first, then calls `on_event(type, obj)` (`ADDED`, `MODIFIED`,
`DELETED`; after a re-list, one call per object that changed or went while nobody watched).
`on_state(ok, error)` reports each list's success and each failure. Both run on the informer's
thread and must return quickly (queue a key, set a flag).

Used where kopf's per-event machinery costs more than the work an event causes (the manager's
TrainJobs and Workloads, the dispatcher's copies on every worker), and where a watch must be
filtered by the API server (kopf filters labels on its side): the worker controller's pods,
and the Secrets of the dispatcher's own namespace (`namespace`: RBAC allows it no other).

`transform` is what the cache keeps of each object (it must keep `metadata.resourceVersion`).
A change that leaves what it keeps as it was (only the resourceVersion moved) updates the cache
and calls nobody: a transform that keeps only what its readers read also spares them the
changes they would not act on. `group_by` keeps a second index, group key -> the objects in it
(client-go's indexers, one).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from trainjob import constants as c
from trainjob.kubeclient import ApiClient

Dict = dict[str, Any]
Key = Any  # (namespace, name) for namespaced kinds, name for cluster-scoped ones
log = logging.getLogger("trainjob.informer")


def slim(obj: Dict) -> Dict:
    """What the cache keeps of an object: all but `metadata.managedFields`, which nothing of
    ours reads (server-side apply is judged by the API server) and which is a good part of a
    Workload's size (client-go's informers are commonly given the same transform)."""
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


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
    """An informer's cache shaped like a kopf index (key -> the objects under it), so
    `trainjob.caches.Caches` and the watchdog read both alike."""

    def __init__(self, store: dict[Key, Dict]) -> None:
        self._store = store

    def __getitem__(self, key: Key) -> tuple[Dict, ...]:
        return (self._store[key],)

    def __iter__(self) -> Iterator[Key]:
        return iter(list(self._store))

    def __len__(self) -> int:
        return len(self._store)


class Informer:
    def __init__(
        self,
        api: ApiClient,
        kind: c.Kind,
        on_event: Callable[[str, Dict], None] = lambda type, obj: None,
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        on_state: Callable[[bool, str], None] = lambda ok, error: None,
        name: str = "",
        list_timeout: float = 30.0,
        transform: Callable[[Dict], Dict] = slim,
        group_by: Callable[[Dict], Key] | None = None,
    ) -> None:
        self.kind = kind
        self._api = api
        # Every namespace, or the one given (where RBAC allows no more).
        where = f"/namespaces/{namespace}" if namespace else ""
        root = f"/apis/{kind.group}" if kind.group else "/api"
        self._path = f"{root}/{kind.version}{where}/{kind.plural}"
        self._on_event, self._on_state = on_event, on_state
        self._selector = label_selector
        self._fields = field_selector
        self._name = name or kind.kind
        self._list_timeout = list_timeout  # how long a list may take before it counts as failed
        # Changed key by key (by events and by a re-list alike); readers take a key or a list
        # of keys at a time (atomic under the GIL), as they do with kopf's indexes.
        self._store: dict[Key, Dict] = {}
        self.view = IndexView(self._store)
        self._transform, self._group_by = transform, group_by
        self._groups: dict[Key, dict[Key, Dict]] = {}  # group key -> object key -> object
        self._groups_lock = threading.Lock()
        self.synced = threading.Event()  # the first list is in
        self._stop = threading.Event()

    def get(self, key: Key) -> Dict | None:
        return self._store.get(key)

    def items(self) -> list[Dict]:
        return list(self._store.values())

    def group(self, key: Key) -> list[Dict]:
        """The objects `group_by` puts under `key` (none without a `group_by`)."""
        with self._groups_lock:
            return list(self._groups.get(key, {}).values())

    def _put(self, key: Key, obj: Dict) -> None:
        old = self._store.get(key)
        self._store[key] = obj
        if self._group_by is not None:
            with self._groups_lock:
                if old is not None:
                    self._ungroup(key, old)
                self._groups.setdefault(self._group_by(obj), {})[key] = obj

    def _drop(self, key: Key) -> None:
        old = self._store.pop(key, None)
        if old is not None and self._group_by is not None:
            with self._groups_lock:
                self._ungroup(key, old)

    def _ungroup(self, key: Key, obj: Dict) -> None:
        group = self._group_by(obj) if self._group_by is not None else None
        members = self._groups.get(group)
        if members is not None:
            members.pop(key, None)
            if not members:
                del self._groups[group]

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True, name=f"informer-{self._name}").start()

    def stop(self) -> None:
        self._stop.set()

    def _list(self) -> str:
        """List everything into the cache; report what changed since; return the list's
        resourceVersion."""
        listed = self._api.get_json(self._path, query=self._selectors(), timeout=self._list_timeout)
        fresh = {key_of(o): self._transform(o) for o in listed["items"]}
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
            self._on_event("DELETED", obj)
        for obj in changed:
            self._on_event("MODIFIED", obj)
        return str(listed["metadata"]["resourceVersion"])

    def _selectors(self) -> Dict:
        return {"labelSelector": self._selector, "fieldSelector": self._fields}

    def _run(self) -> None:
        backoff = 1.0
        since = ""  # resourceVersion to watch from; empty: list first
        while not self._stop.is_set():
            try:
                if not since:
                    since = self._list()
                    backoff = 1.0
                since = self._watch(since)  # the server ended it (timeout): watch on from there
            except Exception as exc:  # any failure (410 Gone included): back off, list again
                since = ""
                error = f"{type(exc).__name__}: {str(exc)[:200]}"
                # The first failure of a streak is a warning; the retries of an outage are not.
                level = logging.WARNING if backoff == 1.0 else logging.DEBUG
                log.log(level, "[%s] watch failed (listing again): %s", self._name, error)
                self._on_state(False, error)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)

    def _watch(self, since: str) -> str:
        """Apply events from `since` until the server ends the watch; return the last
        resourceVersion seen."""
        query = {
            **self._selectors(),
            "resourceVersion": since,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": 60,
        }
        last = since

        def on_event(event: Dict) -> bool:
            nonlocal last
            if self._stop.is_set():
                return False
            etype, obj = event["type"], event["object"]
            if etype == "ERROR":  # 410 Gone: `since` is too old; the caller lists again
                raise RuntimeError(f"watch error: {obj.get('message', obj)}")
            last = str(obj["metadata"]["resourceVersion"])
            if etype != "BOOKMARK":
                self._apply(etype, self._transform(obj))
            return True

        self._api.watch(self._path, query, on_event, timeout=75)
        return last

    def _apply(self, etype: str, obj: Dict) -> None:
        """One watch event into the cache; then `on_event`, unless only the version moved."""
        key = key_of(obj)
        if etype == "DELETED":
            self._drop(key)
        else:
            unchanged = etype == "MODIFIED" and same_apart_from_version(self._store.get(key), obj)
            self._put(key, obj)
            if unchanged:
                return
        self._on_event(etype, obj)
