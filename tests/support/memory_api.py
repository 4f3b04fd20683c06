"""An API server in memory, for whole-pass tests of the controllers in milliseconds.

`MemoryApi` answers the requests `kubecontrol.cluster.Cluster` and `kubecontrol.informer`
send (the surface of `kubecontrol.client.ApiClient`: `request`, `get_json`), from a store of
objects, with the rules a controller's pass leans on. Each rule is held to a real
kube-apiserver by one contract suite run against both (tests/bed/test_api_contract.py):

- resourceVersion on every write; a stale one is a 409 on PUT, merge patch, apply and a
  delete's preconditions (uid or resourceVersion), before anything else is judged; an apply
  naming a uid is a 409 when no object is there and a 422 when another is, a merge patch
  naming one a 404 and a 422;
  AlreadyExists (409) and NotFound (404);
- server-side apply merges maps by key and `listType=map` lists by their keys (a Workload's
  conditions by `type`: our PodsReady beside Kueue's Admitted), sets as sets;
- a create into a namespace that does not exist, and any request to an API that is not
  installed, is a 404; names and labels outside Kubernetes' rules, and changes to immutable
  fields (a Job's selector, its pod template, its completions save an Indexed Job's set
  equal to its parallelism; a claim's spec, an immutable Secret's data), are a 422; a field
  selector the kind does not support is a 400;
- the status subresource apart from the rest, generation bumped by a spec change, finalizers
  holding a deletion, generateName, `dryRun=All`, paged lists (`limit`, `continue`) and
  metadata-only lists;
- dependents removed with their owner: at once by default, or when the test says
  (`collect_at_once=False`, then `collect()`), as the garbage collector does some time later.

Faults are injected per request (`fail`) or for the whole cluster (`unreachable`).

It is ours and small; it never stands in for what only an API server decides. Known
simplifications: fields an apply stops setting stay, and no managedFields conflict is raised;
no admission, defaulting or schema validation beyond the rules above; watches that deliver
nothing (tests list the caches again between passes: `tests/support/whole_pass.py`, which
also runs passes on caches a write behind).
"""

from __future__ import annotations

import base64
import copy
import itertools
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from kubebase.kinds import DNS_LABEL, DNS_SUBDOMAIN, Kind, is_label_key, is_label_value
from kubebase.objects import Dict
from kubecontrol.client import METADATA_LIST, ApiException, TransportError
from trainjob.runtime.templates import merge_struct

# Kinds with no status subresource: a write to the object itself writes all of it.
_NO_STATUS = {"configmaps", "secrets", "events", "leases", "serviceaccounts", "namespaces"}
Coordinates = tuple[str, str]  # (API group, plural)
ObjectKey = tuple[str, str]  # (namespace or "", name)
# A place in an object: its field names from the top, "[]" for the items of a list.
FieldPath = tuple[str, ...]


_FIRST_VERSIONS = itertools.count(1000, 1_000_000)

# The namespaces every API server has.
BUILT_IN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

# The API groups a cluster of the bed serves (Kubernetes' own, Kueue's, Trainer's, JobSet's,
# the Cluster Inventory API's). Any other group is served only while `discovery` lists it (the
# gang schedulers' PodGroups, a test's CRD): a request to an API not installed is a 404.
INSTALLED_GROUPS = frozenset(
    {
        "",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "batch",
        "coordination.k8s.io",
        "events.k8s.io",
        "jobset.x-k8s.io",
        "kueue.x-k8s.io",
        "metrics.k8s.io",
        "multicluster.x-k8s.io",
        "networking.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "trainer.kubeflow.org",
    }
)

# Kubernetes' own groups (a PUT there may leave resourceVersion out: an unconditional update);
# the others are CRDs', whose updates must name the version they replace.
KUBERNETES_GROUPS = frozenset(g for g in INSTALLED_GROUPS if g == "" or g.endswith("k8s.io"))
KUBERNETES_GROUPS |= {"apps", "batch", "policy"}

# Field selectors the API server supports beyond metadata.name and metadata.namespace, by
# (group, plural) (each kind's `AddFieldLabelConversionFunc` in Kubernetes; a CRD's only with
# `selectableFields`). Any other is a 400.
_FIELD_SELECTORS: dict[Coordinates, frozenset[str]] = {
    ("", "events"): frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    ("", "secrets"): frozenset({"type"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "pods"): frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        }
    ),
    ("batch", "jobs"): frozenset({"status.successful"}),
}

# Names of these kinds are RFC 1123 labels (a Service's too, since Kubernetes 1.34 relaxed
# them from RFC 1035); RBAC's may hold colons (path-segment names); every other kind's are
# RFC 1123 subdomains.
_LABEL_NAMED = frozenset({"namespaces", "services"})
_SEGMENT_NAMED = frozenset({"roles", "clusterroles", "rolebindings", "clusterrolebindings"})

# The pod template fields of a Job that may change while it is suspended and has not started
# (Kubernetes' mutable scheduling directives, which Kueue uses to place a Job).
_SCHEDULING_DIRECTIVES: tuple[FieldPath, ...] = (
    ("metadata",),
    ("spec", "nodeSelector"),
    ("spec", "tolerations"),
    ("spec", "affinity"),
    ("spec", "schedulingGates"),
)


def list_maps(schema: Dict, at: FieldPath = ()) -> dict[FieldPath, tuple[str, ...]]:
    """Where an OpenAPI schema declares a list merged by key on apply (`listType: map`: its
    keys) or as a set (`listType: set`: no keys), by field path."""
    found: dict[FieldPath, tuple[str, ...]] = {}
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        found[at] = tuple(schema.get("x-kubernetes-list-map-keys") or ())
    elif list_type == "set":
        found[at] = ()
    for name, sub in (schema.get("properties") or {}).items():
        found.update(list_maps(sub, (*at, name)))
    if isinstance(schema.get("items"), dict):
        found.update(list_maps(schema["items"], (*at, "[]")))
    return found


def crd_list_maps(crd: Dict) -> dict[FieldPath, tuple[str, ...]]:
    """`list_maps` of a CRD's storage version."""
    for version in crd["spec"]["versions"]:
        if version.get("storage"):
            return list_maps(version["schema"]["openAPIV3Schema"])
    return {}


# Every kind's metadata: finalizers a set, owner references keyed by uid.
_METADATA_LISTS: dict[FieldPath, tuple[str, ...]] = {
    ("metadata", "finalizers"): (),
    ("metadata", "ownerReferences"): ("uid",),
}
# Kueue's Workload (kueue.x-k8s.io/v1beta2, as its CRD declares them; the contract suite
# compares this with the CRD a bed's Kueue installs). The Trainer kinds' come from our CRDs.
_WORKLOAD_LISTS: dict[FieldPath, tuple[str, ...]] = {
    ("spec", "podSets"): ("name",),
    ("status", "conditions"): ("type",),
    ("status", "admissionChecks"): ("name",),
    ("status", "reclaimablePods"): ("name",),
}
_OUR_CRDS = Path(__file__).resolve().parents[2] / "crds"


def _built_in_list_maps() -> dict[Coordinates, dict[FieldPath, tuple[str, ...]]]:
    tables: dict[Coordinates, dict[FieldPath, tuple[str, ...]]] = {
        ("kueue.x-k8s.io", "workloads"): _WORKLOAD_LISTS,
        ("", "pods"): {("status", "conditions"): ("type",)},
        ("batch", "jobs"): {("status", "conditions"): ("type",)},
    }
    for path in sorted(_OUR_CRDS.glob("trainer.kubeflow.org_*.yaml")):
        crd = yaml.safe_load(path.read_text())
        tables[(crd["spec"]["group"], crd["spec"]["names"]["plural"])] = crd_list_maps(crd)
    return tables


LIST_MAPS = _built_in_list_maps()


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

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


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


def _item_key(item: Any, keys: tuple[str, ...]) -> Any:
    if not keys:  # a set: the item is its own key
        return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
    return tuple(orjson.dumps(item.get(k)) if isinstance(item, dict) else None for k in keys)


def apply_merge(
    target: Any, applied: Any, lists: Mapping[FieldPath, tuple[str, ...]], at: FieldPath = ()
) -> Any:
    """Server-side apply's merge, as far as the stand-in goes: maps merged key by key, a list
    `lists` declares at this path merged item by item (by its keys, or as a set), any other
    value replaced."""
    if isinstance(target, dict) and isinstance(applied, dict):
        out = dict(target)
        for key, value in applied.items():
            out[key] = apply_merge(out.get(key), value, lists, (*at, key))
        return out
    keys = lists.get(at)
    if keys is not None and isinstance(target, list) and isinstance(applied, list):
        merged = list(target)
        where = {_item_key(item, keys): i for i, item in enumerate(merged)}
        for item in applied:
            i = where.get(_item_key(item, keys))
            if i is None:
                where[_item_key(item, keys)] = len(merged)
                merged.append(copy.deepcopy(item))
            else:
                merged[i] = apply_merge(merged[i], item, lists, (*at, "[]"))
        return merged
    return copy.deepcopy(applied)


def _field(obj: Dict, dotted: str) -> str:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _terms(selector: str) -> Iterator[str]:
    """A selector's terms: split at commas outside parentheses."""
    depth, start = 0, 0
    for i, ch in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            yield selector[start:i].strip()
            start = i + 1
    yield selector[start:].strip()


_SET_TERM = re.compile(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)")


def _label_term(labels: Mapping[str, str], term: str) -> bool:
    found = _SET_TERM.fullmatch(term)
    if found:
        key, op, values = found.groups()
        inside = labels.get(key) in {v.strip() for v in values.split(",")}
        return inside if op == "in" else not inside
    if "!=" in term:
        key, value = term.split("!=", 1)
        return labels.get(key.strip()) != value.strip()
    if "=" in term:
        key, value = term.replace("==", "=").split("=", 1)
        return labels.get(key.strip()) == value.strip()
    if term.startswith("!"):
        return term[1:].strip() not in labels
    return term in labels


def _field_terms(field_selector: str) -> Iterator[tuple[str, bool, str]]:
    """(field, equal, value) of each term of a field selector (`a.b=v`, `a.b==v`, `a.b!=v`)."""
    for term in filter(None, _terms(field_selector)):
        if "!=" in term:
            key, value = term.split("!=", 1)
            yield key, False, value
        else:
            key, value = term.replace("==", "=").split("=", 1)
            yield key, True, value


def selects(obj: Dict, label_selector: str = "", field_selector: str = "") -> bool:
    """Whether an object matches a label selector (`k`, `!k`, `k=v`, `k==v`, `k!=v`,
    `k in (a,b)`, `k notin (a,b)`, joined by commas) and a field selector."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if not all(_label_term(labels, t) for t in filter(None, _terms(label_selector))):
        return False
    return all(
        (_field(obj, key) == value) == equal for key, equal, value in _field_terms(field_selector)
    )


def _dig(obj: Any, path: FieldPath) -> Any:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _without(obj: Dict, paths: tuple[FieldPath, ...]) -> Dict:
    out = copy.deepcopy(obj)
    for path in paths:
        parent = _dig(out, path[:-1])
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
    return out


def immutable_change(plural: str, old: Dict, new: Dict) -> str | None:
    """The field an update may not change that it changes (the API server's 422), or None."""
    if plural == "jobs":
        was, now = old.get("spec") or {}, new.get("spec") or {}
        if was.get("selector") != now.get("selector"):
            return "spec.selector: field is immutable"
        if was.get("completionMode") != now.get("completionMode"):
            return "spec.completionMode: field is immutable"
        if was.get("completions") != now.get("completions") and not (
            now.get("completionMode") == "Indexed"
            and now.get("parallelism") == now.get("completions")
        ):
            return "spec.completions: field is immutable"
        placing = bool(was.get("suspend")) and not (old.get("status") or {}).get("startTime")
        loose = _SCHEDULING_DIRECTIVES if placing else ()
        template_was, template_now = was.get("template") or {}, now.get("template") or {}
        if _without(template_was, loose) != _without(template_now, loose):
            return "spec.template: field is immutable"
    elif plural == "persistentvolumeclaims":
        spec_was, spec_now = old.get("spec") or {}, new.get("spec") or {}
        if _without(spec_was, (("resources",),)) != _without(spec_now, (("resources",),)):
            return "spec: Forbidden: spec is immutable after creation except resources"
    elif plural in ("secrets", "configmaps") and old.get("immutable"):
        for part in ("data", "stringData", "binaryData", "immutable"):
            if old.get(part) != new.get(part):
                return f"{part}: Forbidden: field is immutable when `immutable` is set"
    return None


def invalid_metadata(plural: str, meta: Dict) -> str | None:
    """What of an object's name, labels or annotations the API server refuses (422), or None."""
    name = meta.get("name") or ""
    if plural in _SEGMENT_NAMED:
        good = bool(name) and "/" not in name and "%" not in name and name not in (".", "..")
    elif plural in _LABEL_NAMED:
        good = bool(DNS_LABEL.fullmatch(name))
    else:
        good = bool(DNS_SUBDOMAIN.fullmatch(name)) and len(name) <= 253
    if not good:
        return f"metadata.name: Invalid value: {name!r}"
    for key, value in (meta.get("labels") or {}).items():
        if not is_label_key(key):
            return f"metadata.labels: Invalid value: {key!r}"
        if not is_label_value(value):
            return f"metadata.labels: Invalid value: {value!r}"
    for key in meta.get("annotations") or {}:
        if not is_label_key(key):
            return f"metadata.annotations: Invalid value: {key!r}"
    return None


class MemoryApi:
    """The objects of one cluster, served as its API server would serve them (see above)."""

    def __init__(
        self,
        name: str = "cluster",
        objects: list[Dict] = (),  # type: ignore[assignment]
        *,
        collect_at_once: bool = True,
    ) -> None:
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
        # plurals. A group-version here serves only those; one not here serves when its group
        # is one of INSTALLED_GROUPS (its discovery is a 404 all the same).
        self.discovery: dict[str, list[str]] = {}
        self.list_maps = dict(LIST_MAPS)  # by (group, plural): see `list_maps`
        self.collect_at_once = collect_at_once
        for namespace in BUILT_IN_NAMESPACES:
            self.put(_namespace(namespace))
        for obj in objects:
            self.put(obj)

    # ---- the test's side: seed, read, inject ---------------------------------------------

    def put(self, obj: Dict) -> Dict:
        """Store an object as it is (status included), filling what the API server would;
        its namespace is made if it is not there."""
        with self._lock:
            stored = copy.deepcopy(obj)
            meta = stored.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
            meta.setdefault("generation", 1)
            meta["resourceVersion"] = self._next_version()
            namespace = meta.get("namespace")
            if namespace and ("", namespace) not in self._objects(("", "namespaces")):
                self.put(_namespace(namespace))
            self._objects(_coordinates(stored))[_key_of(stored)] = stored
            return copy.deepcopy(stored)

    def install(self, crd: Dict) -> None:
        """What installing a CRD does here: discovery lists it, apply merges its lists."""
        spec = crd["spec"]
        coordinates = (spec["group"], spec["names"]["plural"])
        with self._lock:
            self.list_maps[coordinates] = crd_list_maps(crd)
            for version in spec["versions"]:
                served = self.discovery.setdefault(f"{spec['group']}/{version['name']}", [])
                served.append(spec["names"]["plural"])

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

    def versions(self) -> dict[tuple[str, str, str, str], str]:
        """The resourceVersion of every object but Events, by (group, plural, namespace,
        name): what changed between two calls (a write that changes nothing keeps it)."""
        with self._lock:
            return {
                (*coordinates, *key): obj["metadata"]["resourceVersion"]
                for coordinates, objects in self._store.items()
                if coordinates != ("", "events")
                for key, obj in objects.items()
            }

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

    def collect(self) -> int:
        """The garbage collector's pass: every object whose owners are all gone is deleted
        (as its owner's deletion asked, in the background), and references to owners gone
        are dropped where another owner is left. Returns how many objects were deleted."""
        deleted = 0
        with self._lock:
            while True:
                uids = {
                    o["metadata"]["uid"] for objs in self._store.values() for o in objs.values()
                }
                orphans = []
                for coordinates, objects in self._store.items():
                    for (ns, name), obj in objects.items():
                        owners = obj["metadata"].get("ownerReferences") or []
                        left = [o for o in owners if o.get("uid") in uids]
                        if owners and not left:
                            orphans.append(
                                _Path(coordinates[0], "", coordinates[1], ns, name, None)
                            )
                        elif len(left) < len(owners):
                            obj["metadata"]["ownerReferences"] = left
                            obj["metadata"]["resourceVersion"] = self._next_version()
                if not orphans:
                    return deleted
                for where in orphans:
                    self._delete(where, {"propagationPolicy": "Background"})
                    deleted += 1

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
            query = {k: v for k, v in (query or {}).items() if v is not None}
            dry_run = query.get("dryRun") == "All" and method != "GET"
            saved = (copy.deepcopy(self._store), self._version, self._names) if dry_run else None
            try:
                if isinstance(body, bytes | str):
                    body = orjson.loads(body)
                answer = self._serve(method, where, query, body, content_type, accept)
            except ApiException as exc:
                self.refused.append((method, path, exc.status))
                raise
            finally:
                if saved is not None:
                    self._store, self._version, self._names = saved
            if not dry_run:
                self.requests.append((method, path))
        return orjson.dumps(answer) if answer is not None else b""

    def _installed(self, where: _Path) -> bool:
        listed = self.discovery.get(where.group_version)
        if listed is not None:
            return where.plural in listed
        return where.group in INSTALLED_GROUPS

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
        self, method: str, where: _Path, query: Dict, body: Any, content_type: str, accept: str
    ) -> Dict | None:
        if not self._installed(where):
            raise ApiException(404, "NotFound", f"the server could not find {where.plural}")
        handlers: dict[str, Callable[[], Dict | None]] = {
            "GET": lambda: self._get(where, query, accept),
            "POST": lambda: self._create(where, body),
            "PUT": lambda: self._replace(where, body),
            "PATCH": lambda: self._patch(
                where, body, content_type, query.get("fieldManager") or ""
            ),
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

    def _get(self, where: _Path, query: Dict, accept: str) -> Dict:
        if where.name is not None:
            return copy.deepcopy(self._found(where))
        fields = query.get("fieldSelector") or ""
        labels = query.get("labelSelector") or ""
        if labels.count("(") != labels.count(")") or any(
            ("(" in t) != bool(_SET_TERM.fullmatch(t)) for t in filter(None, _terms(labels))
        ):
            raise ApiException(400, "BadRequest", f"unable to parse requirement: {labels!r}")
        allowed = _FIELD_SELECTORS.get((where.group, where.plural), frozenset())
        for key, _equal, _value in _field_terms(fields):
            if key not in ("metadata.name", "metadata.namespace") and key not in allowed:
                raise ApiException(
                    400, "BadRequest", f'field label not supported: "{key}" for {where.plural}'
                )
        items = [
            o
            for (ns, _), o in sorted(self._objects((where.group, where.plural)).items())
            if (not where.namespace or ns == where.namespace) and selects(o, labels, fields)
        ]
        version = str(self._version)
        start = 0
        if query.get("continue"):
            version, _, offset = base64.b64decode(query["continue"]).decode().partition(":")
            start = int(offset)
        limit = int(query.get("limit") or 0)
        page = items[start : start + limit] if limit else items[start:]
        meta: Dict = {"resourceVersion": version}
        if limit and start + limit < len(items):
            meta["continue"] = base64.b64encode(f"{version}:{start + limit}".encode()).decode()
        if accept == METADATA_LIST:
            partial = [
                {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": copy.deepcopy(o["metadata"]),
                }
                for o in page
            ]
            return {
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta,
                "items": partial,
            }
        return {"items": copy.deepcopy(page), "metadata": meta}

    def _create(self, where: _Path, body: Dict) -> Dict:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if meta.get("resourceVersion"):
            raise ApiException(500, "InternalError", "resourceVersion should not be set")
        if where.namespace:
            meta["namespace"] = where.namespace
            if ("", where.namespace) not in self._objects(("", "namespaces")):
                raise ApiException(404, "NotFound", f'namespaces "{where.namespace}" not found')
        store = self._objects((where.group, where.plural))
        if not meta.get("name") and meta.get("generateName"):
            # A name no object holds, as the API server's random suffix all but always is
            # (a counter alone would meet the names of objects seeded from another MemoryApi).
            while not meta.get("name") or (where.namespace, meta["name"]) in store:
                self._names += 1
                meta["name"] = f"{meta['generateName']}{self._names:05d}"
        problem = invalid_metadata(where.plural, meta)
        if problem:
            raise ApiException(422, "Invalid", problem)
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
        if where.group not in KUBERNETES_GROUPS and not body["metadata"].get("resourceVersion"):
            raise ApiException(
                422, "Invalid", "metadata.resourceVersion: must be specified for an update"
            )
        self._check_version(current, body)
        return self._store_new(where, current, copy.deepcopy(body))

    def _patch(self, where: _Path, body: Any, content_type: str, field_manager: str) -> Dict:
        store = self._objects((where.group, where.plural))
        current = store.get((where.namespace, str(where.name)))
        if "apply-patch" in content_type:
            if not field_manager:
                raise ApiException(422, "Invalid", "fieldManager: Required value: apply needs one")
            uid = (body.get("metadata") or {}).get("uid")
            if current is None:
                if where.subresource:
                    raise ApiException(404, "NotFound", f'{where.plural} "{where.name}"')
                if uid:
                    raise ApiException(
                        409,
                        "Conflict",
                        f"uid mismatch: the provided object specified uid {uid}, and no "
                        "existing object was found",
                    )
                return self._create(where, body)
            self._check_version(current, body)  # a stale version is the first refusal
            if uid and uid != current["metadata"]["uid"]:
                raise ApiException(422, "Invalid", "metadata.uid: field is immutable")
            lists = {**_METADATA_LISTS, **self.list_maps.get((where.group, where.plural), {})}
            return self._store_new(where, current, apply_merge(current, body, lists))
        if current is None:
            raise ApiException(404, "NotFound", f'{where.plural} "{where.name}" not found')
        uid = (body.get("metadata") or {}).get("uid")
        # The API server checks the version before it validates the object: a stale version
        # with a wrong uid is a 409, not a 422.
        self._check_version(current, body)
        if uid and uid != current["metadata"]["uid"]:
            raise ApiException(422, "Invalid", "metadata.uid: field is immutable")
        return self._store_new(where, current, merge_struct(current, body))  # RFC 7386

    def _check_version(self, current: Dict, body: Dict) -> None:
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and str(wanted) != current["metadata"]["resourceVersion"]:
            raise ApiException(409, "Conflict", "the object has been modified")

    def _store_new(self, where: _Path, current: Dict, new: Dict) -> Dict:
        """Keep what a write may not change (the status from the object's own endpoint, the
        rest from the status subresource, identity always), refuse what the API server
        refuses (names, labels, immutable fields), then bump the versions."""
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
        problem = invalid_metadata(where.plural, meta) or immutable_change(
            where.plural, current, new
        )
        added = set(meta.get("finalizers") or ()) - set(old.get("finalizers") or ())
        if old.get("deletionTimestamp") and added:
            problem = "metadata.finalizers: Forbidden: no new finalizers while being deleted"
        if problem:
            raise ApiException(422, "Invalid", problem)
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
        preconditions = options.get("preconditions") or {}
        if preconditions.get("uid") and preconditions["uid"] != current["metadata"]["uid"]:
            raise ApiException(409, "Conflict", "Precondition failed: UID in precondition")
        version = preconditions.get("resourceVersion")
        if version and version != current["metadata"]["resourceVersion"]:
            raise ApiException(409, "Conflict", "Precondition failed: ResourceVersion")
        key = (where.namespace, str(where.name))
        if current["metadata"].get("finalizers"):
            if not current["metadata"].get("deletionTimestamp"):  # asked again: no change
                current["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                current["metadata"]["resourceVersion"] = self._next_version()
            return copy.deepcopy(current)
        self._remove(where, key, cascade=options.get("propagationPolicy") != "Orphan")
        return {"kind": "Status", "status": "Success"}

    def _remove(self, where: _Path, key: ObjectKey, cascade: bool = True) -> None:
        gone = self._objects((where.group, where.plural)).pop(key)
        self._version += 1
        if where.plural == "namespaces":  # its objects go with it
            for objects in self._store.values():
                for object_key in [k for k in objects if k[0] == key[1]]:
                    del objects[object_key]
        if not cascade or not self.collect_at_once:
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


def _namespace(name: str) -> Dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


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
