"""An API server in memory, for whole-pass tests of the controllers in milliseconds.

`MemoryApi` answers the requests `kubecontrol.cluster.Cluster` and `kubecontrol.informer`
send (the surface of `kubecontrol.client.ApiClient`: `request`, `get_json`), from a store of
objects, with the rules a controller's pass leans on: resourceVersion on every write and
guarded writes (409), AlreadyExists (409) and NotFound (404), the status subresource apart
from the rest, generation bumped by a spec change, finalizers holding a deletion, UID
preconditions on delete, dependents removed with their owner (the garbage collector's work,
done at once), generateName, label and field selectors. Faults are injected per request
(`fail`) or for the whole cluster (`unreachable`).

It is ours and small; it never stands in for what only an API server decides. Known
simplifications: server-side apply merges the applied object into the stored one (maps
merged, lists replaced; fields an apply stops setting stay, and no managedFields conflict is
raised); no admission, defaulting or schema validation; watches that deliver nothing (tests
list the caches again between passes: `tests/support/whole_pass.py`).
"""

from __future__ import annotations

import copy
import itertools
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from kubecontrol.client import ApiException, TransportError
from kubecontrol.kinds import Kind
from kubecontrol.objects import Dict
from trainjob.runtime.patches import merge_struct

# Kinds with no status subresource: a write to the object itself writes all of it.
_NO_STATUS = {"configmaps", "secrets", "events", "leases", "serviceaccounts"}
Coordinates = tuple[str, str]  # (API group, plural)
ObjectKey = tuple[str, str]  # (namespace or "", name)


_FIRST_VERSIONS = itertools.count(1000, 1_000_000)


@dataclass
class Fault:
    """Answer `status` instead of serving the request, `times` times (None: always), for
    requests of `method` (any when None) on `plural` (any when None) and `subresource`."""

    status: int
    method: str | None = None
    plural: str | None = None
    subresource: str | None = None
    times: int | None = 1

    def matches(self, method: str, plural: str, subresource: str | None) -> bool:
        return (
            (self.method is None or self.method == method)
            and (self.plural is None or self.plural == plural)
            and (self.subresource is None or self.subresource == subresource)
        )


@dataclass(frozen=True)
class _Path:
    group: str
    version: str
    plural: str
    namespace: str
    name: str | None
    subresource: str | None


def parse_path(path: str) -> _Path:
    """/api/v1[/namespaces/NS]/PLURAL[/NAME[/SUB]] or /apis/GROUP/VERSION/..."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise ApiException(404, "NotFound", f"no such path {path}")
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    elif len(rest) == 2 and rest[0] == "namespaces":  # the Namespace object itself
        pass
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    return _Path(group, version, plural, namespace, name, subresource)


def _apply_merge(target: Any, applied: Any) -> Any:
    """The stand-in for server-side apply: maps merged, everything else replaced."""
    if not (isinstance(target, dict) and isinstance(applied, dict)):
        return copy.deepcopy(applied)
    out = dict(target)
    for key, value in applied.items():
        out[key] = _apply_merge(out.get(key), value)
    return out


def _field(obj: Dict, dotted: str) -> str:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def selects(obj: Dict, label_selector: str = "", field_selector: str = "") -> bool:
    """Whether an object matches a label selector (`k`, `!k`, `k=v`, `k==v`, `k!=v`, joined
    by commas) and a field selector (`a.b=v`, `a.b!=v`, joined by commas)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (t.strip() for t in label_selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    for term in filter(None, (t.strip() for t in field_selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if _field(obj, key) == value:
                return False
        else:
            key, value = term.replace("==", "=").split("=", 1)
            if _field(obj, key) != value:
                return False
    return True


class MemoryApi:
    """The objects of one cluster, served as its API server would serve them (see above)."""

    def __init__(self, name: str = "cluster", objects: list[Dict] = ()) -> None:  # type: ignore[assignment]
        self.name = name
        self._lock = threading.RLock()
        self._store: dict[Coordinates, dict[ObjectKey, Dict]] = {}
        # Versions never repeat across the clusters of a test run, as an etcd's never do: the
        # process-wide caches keyed by (uid, resourceVersion) (trainjob/lru.py) must not take
        # an object of an earlier test, seeded with the same uid, for this one.
        self._version = next(_FIRST_VERSIONS)
        self._faults: list[Fault] = []
        self._down = False
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request served
        self.refused: list[tuple[str, str, int]] = []  # (method, path, status) of the others
        self._names = 0
        # What discovery (`/apis/GROUP/VERSION`) lists, by group-version: its resources'
        # plurals. A group-version not here answers 404, as for an API not installed.
        self.discovery: dict[str, list[str]] = {}
        for obj in objects:
            self.put(obj)

    # ---- the test's side: seed, read, inject ---------------------------------------------

    def put(self, obj: Dict) -> Dict:
        """Store an object as it is (status included), filling what the API server would."""
        with self._lock:
            stored = copy.deepcopy(obj)
            meta = stored.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
            meta.setdefault("generation", 1)
            meta["resourceVersion"] = self._next_version()
            self._objects(_coordinates(stored))[_key_of(stored)] = stored
            return copy.deepcopy(stored)

    def objects(self, kind: Kind, namespace: str | None = None) -> list[Dict]:
        """Copies of every stored object of a kind (in a namespace), by name."""
        with self._lock:
            found = self._store.get((kind.group, kind.plural), {})
            return [
                copy.deepcopy(o)
                for k, o in sorted(found.items())
                if namespace is None or k[0] == namespace
            ]

    def object(self, kind: Kind, name: str, namespace: str | None = None) -> Dict | None:
        with self._lock:
            found = self._store.get((kind.group, kind.plural), {}).get((namespace or "", name))
            return copy.deepcopy(found) if found is not None else None

    def fail(self, fault: Fault) -> None:
        self._faults.append(fault)

    def heal(self) -> None:
        """No more injected faults."""
        self._faults.clear()

    def unreachable(self, down: bool = True) -> None:
        """Answer nothing at all (a lost cluster), until called with False."""
        self._down = down

    def writes(self) -> list[tuple[str, str]]:
        """The (method, path) of every write served, in order (refused ones are not)."""
        return [(m, p) for m, p in self.requests if m != "GET"]

    # ---- the ApiClient surface ------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        accept: str = "application/json",
    ) -> bytes:
        if self._down:
            raise TransportError(7, f"{self.name}: connection refused")
        parts = path.strip("/").split("/")
        if method == "GET" and len(parts) == 3 and parts[0] == "apis":
            return self._discover(f"{parts[1]}/{parts[2]}", path)
        where = parse_path(path)
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, where.plural, where.subresource):
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times <= 0:
                            self._faults.remove(fault)
                    raise ApiException(fault.status, "Injected", f"{method} {path}")
            try:
                answer = self._serve(method, where, dict(query or {}), body, content_type)
            except ApiException as exc:
                self.refused.append((method, path, exc.status))
                raise
            self.requests.append((method, path))
        return orjson.dumps(answer) if answer is not None else b""

    def _discover(self, group_version: str, path: str) -> bytes:
        with self._lock:
            plurals = self.discovery.get(group_version)
            if plurals is None:
                self.refused.append(("GET", path, 404))
                raise ApiException(404, "NotFound", f"no such path {path}")
            self.requests.append(("GET", path))
        resources = [{"name": p, "namespaced": True} for p in plurals]
        answer = {"kind": "APIResourceList", "groupVersion": group_version, "resources": resources}
        return orjson.dumps(answer)

    def get_json(self, path: str, **kwargs: Any) -> Any:
        return orjson.loads(self.request("GET", path, **kwargs))

    def watch(
        self,
        path: str,
        query: Mapping[str, Any],
        on_event: Callable[[Dict], bool],
        *,
        timeout: float | None = None,
        on_open: Callable[[], None] | None = None,
        abort: threading.Event | None = None,
    ) -> None:
        """A watch that delivers nothing and ends when told to (or at its timeout): an
        informer started on a MemoryApi lists once and then waits; the test lists again."""
        if self._down:
            raise TransportError(7, f"{self.name}: connection refused")
        if on_open is not None:
            on_open()
        (abort or threading.Event()).wait(timeout or 60)

    # ---- serving ----------------------------------------------------------------------------

    def _serve(
        self, method: str, where: _Path, query: Dict, body: Any, content_type: str
    ) -> Dict | None:
        handlers: dict[str, Callable[[], Dict | None]] = {
            "GET": lambda: self._get(where, query),
            "POST": lambda: self._create(where, body),
            "PUT": lambda: self._replace(where, body),
            "PATCH": lambda: self._patch(where, body, content_type),
            "DELETE": lambda: self._delete(where, body or {}),
        }
        return handlers[method]()

    def _objects(self, coordinates: Coordinates) -> dict[ObjectKey, Dict]:
        return self._store.setdefault(coordinates, {})

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def _found(self, where: _Path) -> Dict:
        assert where.name is not None
        found = self._objects((where.group, where.plural)).get((where.namespace, where.name))
        if found is None:
            raise ApiException(404, "NotFound", f'{where.plural} "{where.name}" not found')
        return found

    def _get(self, where: _Path, query: Dict) -> Dict:
        if where.name is not None:
            return copy.deepcopy(self._found(where))
        items = [
            copy.deepcopy(o)
            for (ns, _), o in sorted(self._objects((where.group, where.plural)).items())
            if (not where.namespace or ns == where.namespace)
            and selects(o, query.get("labelSelector") or "", query.get("fieldSelector") or "")
        ]
        return {"items": items, "metadata": {"resourceVersion": str(self._version)}}

    def _create(self, where: _Path, body: Dict) -> Dict:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if where.namespace:
            meta["namespace"] = where.namespace
        if not meta.get("name"):
            self._names += 1
            meta["name"] = f"{meta.get('generateName', '')}{self._names:05d}"
        store = self._objects((where.group, where.plural))
        if (where.namespace, meta["name"]) in store:
            raise ApiException(409, "AlreadyExists", f'{where.plural} "{meta["name"]}" exists')
        if where.plural not in _NO_STATUS:
            obj.pop("status", None)
        meta.update(uid=str(uuid.uuid4()), generation=1, resourceVersion=self._next_version())
        meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        meta.pop("deletionTimestamp", None)
        store[(where.namespace, meta["name"])] = obj
        return copy.deepcopy(obj)

    def _replace(self, where: _Path, body: Dict) -> Dict:
        current = self._found(where)
        self._check_version(current, body)
        return self._store_new(where, current, copy.deepcopy(body))

    def _patch(self, where: _Path, body: Any, content_type: str) -> Dict:
        if isinstance(body, bytes | str):
            body = orjson.loads(body)
        store = self._objects((where.group, where.plural))
        current = store.get((where.namespace, str(where.name)))
        if "apply-patch" in content_type:
            if current is None:
                if where.subresource:
                    raise ApiException(404, "NotFound", f'{where.plural} "{where.name}"')
                return self._create(where, body)
            return self._store_new(where, current, _apply_merge(current, body))
        if current is None:
            raise ApiException(404, "NotFound", f'{where.plural} "{where.name}" not found')
        self._check_version(current, body)
        return self._store_new(where, current, merge_struct(current, body))  # RFC 7386

    def _check_version(self, current: Dict, body: Dict) -> None:
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and str(wanted) != current["metadata"]["resourceVersion"]:
            raise ApiException(409, "Conflict", "the object has been modified")

    def _store_new(self, where: _Path, current: Dict, new: Dict) -> Dict:
        """Keep what a write may not change (the status from the object's own endpoint, the
        rest from the status subresource, identity always), then bump the versions."""
        if where.subresource == "status":
            new = {**copy.deepcopy(current), "status": new.get("status")}
        elif where.plural not in _NO_STATUS:
            new["status"] = copy.deepcopy(current.get("status"))
        if new.get("status") is None:
            new.pop("status", None)
        meta = new["metadata"]
        old = current["metadata"]
        for kept in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp"):
            if kept in old:
                meta[kept] = old[kept]
            else:
                meta.pop(kept, None)
        changed = {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
            k: v for k, v in current.items() if k not in ("metadata", "status")
        }
        meta["generation"] = int(old.get("generation", 1)) + (1 if changed else 0)
        meta["resourceVersion"] = old["resourceVersion"]
        if new != current:  # a write that changes nothing keeps the version
            meta["resourceVersion"] = self._next_version()
        key = (where.namespace, str(where.name))
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(where, key)
            return copy.deepcopy(new)
        self._objects((where.group, where.plural))[key] = new
        return copy.deepcopy(new)

    def _delete(self, where: _Path, options: Dict) -> Dict:
        current = self._found(where)
        uid = ((options.get("preconditions") or {}).get("uid")) or None
        if uid and uid != current["metadata"]["uid"]:
            raise ApiException(409, "Conflict", "Precondition failed: UID in precondition")
        key = (where.namespace, str(where.name))
        if current["metadata"].get("finalizers"):
            current["metadata"].setdefault("deletionTimestamp", "2026-01-01T00:00:00Z")
            current["metadata"]["resourceVersion"] = self._next_version()
            return copy.deepcopy(current)
        self._remove(where, key, cascade=options.get("propagationPolicy") != "Orphan")
        return {"kind": "Status", "status": "Success"}

    def _remove(self, where: _Path, key: ObjectKey, cascade: bool = True) -> None:
        gone = self._objects((where.group, where.plural)).pop(key)
        self._version += 1
        if not cascade:
            return
        uid = gone["metadata"]["uid"]
        for coordinates, objects in list(self._store.items()):
            for (ns, name), obj in list(objects.items()):
                owners = obj["metadata"].get("ownerReferences") or []
                if not any(o.get("uid") == uid for o in owners) or (ns, name) not in objects:
                    continue
                left = [o for o in owners if o.get("uid") != uid]
                if left:  # the garbage collector drops the reference; the other owners keep it
                    obj["metadata"]["ownerReferences"] = left
                    obj["metadata"]["resourceVersion"] = self._next_version()
                    continue
                dependent = _Path(coordinates[0], "", coordinates[1], ns, name, None)
                self._delete(dependent, {"propagationPolicy": "Background"})


def _coordinates(obj: Dict) -> Coordinates:
    group = obj["apiVersion"].rpartition("/")[0]
    return group, plural_of(obj["kind"])


def _key_of(obj: Dict) -> ObjectKey:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


def plural_of(kind: str) -> str:
    """The plural of the kinds the controllers use (lower case, -es after s, -ies after y)."""
    lower = kind.lower()
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s"
