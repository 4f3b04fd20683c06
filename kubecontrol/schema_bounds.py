"""An object held to the size limits of an installed CRD's schema (pure): `maxItems`,
`maxLength`, `maxProperties` and the shapes (object, array, string) its OpenAPI v3 schema
gives, as the API server checks them before it stores an object.

A webhook judges what reaches its port, and anything may: a forged review's object was never
checked against the CRD. Held to the CRD's own limits first, in one walk that is linear in the
object and stops at MAX_VALUES, the judging that follows costs what a stored object could cost
and no more. Fields the schema does not name are not walked (the API server prunes them).
"""

from __future__ import annotations

from typing import Any

from kubebase.objects import Dict

# Values walked at the most: an AdmissionReview's body is bounded in bytes (3 MiB), and a
# TrainJob the CRD allows holds far fewer values than this.
MAX_VALUES = 100_000
TOO_MANY_VALUES = f"the object holds more than {MAX_VALUES} values"


def version_schema(crd: Dict | None, version: str) -> Dict | None:
    """The openAPIV3Schema of `version` in `crd`, or None (no CRD, or it does not serve it)."""
    for served in ((crd or {}).get("spec") or {}).get("versions") or []:
        if isinstance(served, dict) and served.get("name") == version:
            schema = (served.get("schema") or {}).get("openAPIV3Schema")
            return schema if isinstance(schema, dict) else None
    return None


def bounds_problem(obj: Any, schema: Dict | None) -> str | None:
    """Where `obj` breaks a size limit or a shape of `schema` (the field, what it holds, what
    the schema allows), or None. No schema: nothing is checked."""
    if schema is None:
        return None
    stack: list[tuple[Any, Dict, str]] = [(obj, schema, "")]
    walked = 0
    while stack:
        value, sch, path = stack.pop()
        walked += 1
        room = MAX_VALUES - walked - len(stack)  # children counted before any is pushed
        problem = _one(value, sch, path or ".", stack, room)
        if problem is not None:
            return problem
    return None


_SCALARS = (str, int, float, bool)


def _repeated(items: list[Any], sch: Dict) -> str | None:
    """An entry key found twice in a list the schema keys (`x-kubernetes-list-type: map` by
    its `x-kubernetes-list-map-keys`, or `set`): the API server refuses such a list, and a
    merge by key costs the square of the entries that repeat."""
    kind = sch.get("x-kubernetes-list-type")
    if kind == "set":  # of scalars (the API server's rule); others are left to it
        seen_set: set[tuple[type, object]] = set()
        for entry in items:
            if not isinstance(entry, _SCALARS):
                return None
            if (type(entry), entry) in seen_set:
                return repr(entry)[:80]
            seen_set.add((type(entry), entry))
        return None
    keys = sch.get("x-kubernetes-list-map-keys")
    if kind != "map" or not isinstance(keys, list):
        return None
    seen: set[tuple[object, ...]] = set()
    for entry in items:
        if not isinstance(entry, dict):
            continue
        values = [entry.get(k) for k in keys]
        if not all(isinstance(v, _SCALARS) or v is None for v in values):
            return "an entry whose key is not a scalar"
        key = tuple((type(v), v) for v in values)
        if key in seen:
            named = ", ".join(f"{k}={entry.get(k)!r}" for k in keys)
            return f"the entry {named[:120]}"
        seen.add(key)
    return None


def _one(
    value: Any, sch: Dict, path: str, stack: list[tuple[Any, Dict, str]], room: int
) -> str | None:
    """Check one value against its schema; its children go on `stack`, when there is `room`
    for them."""
    kind = sch.get("type")
    if value is None or sch.get("x-kubernetes-int-or-string"):
        return None
    if kind == "object" or (kind is None and isinstance(value, dict)):
        if not isinstance(value, dict):
            return f"{path}: not an object"
        over = _over(path, len(value), sch.get("maxProperties"), "properties")
        if over is not None:
            return over
        if len(value) > room:
            return TOO_MANY_VALUES
        properties = sch.get("properties")
        more = sch.get("additionalProperties")
        for key, child in value.items():
            sub = properties.get(key) if isinstance(properties, dict) else None
            if sub is None and isinstance(more, dict):
                sub = more
            if isinstance(sub, dict):
                stack.append((child, sub, f"{path.rstrip('.')}.{key}"))
        return None
    if kind == "array":
        if not isinstance(value, list):
            return f"{path}: not a list"
        over = _over(path, len(value), sch.get("maxItems"), "items")
        if over is not None:  # before the keys are looked at: a long list costs nothing
            return over
        repeated = _repeated(value, sch)
        if repeated is not None:
            return f"{path}: {repeated} more than once (the CRD keys this list)"
        items = sch.get("items")
        if isinstance(items, dict):
            if len(value) > room:
                return TOO_MANY_VALUES
            stack.extend((child, items, f"{path}[{i}]") for i, child in enumerate(value))
        return None
    if kind == "string":
        if not isinstance(value, str):
            return f"{path}: not a string"
        return _over(path, len(value), sch.get("maxLength"), "characters")
    return None


def _over(path: str, count: int, most: object, what: str) -> str | None:
    """Why `count` is over the schema's `most` of `what`, or None."""
    if isinstance(most, int) and count > most:
        return f"{path}: {count} {what}, over the {most} the CRD allows"
    return None
