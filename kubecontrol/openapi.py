"""OpenAPI documents of an aggregated API, written from the pydantic models it answers with.

The API server's aggregator reads `/openapi/v3` (and, from a server without it, `/openapi/v2`)
of each APIService and serves them with the cluster's own: that is what `kubectl explain`
and `kubectl apply`'s field checks read. `kubectl explain RESOURCE` finds the operation on
the resource's path, takes its `x-kubernetes-group-version-kind`, and prints the component
schema that carries the same GVK.

pydantic writes JSON Schema (2020-12); Kubernetes reads OpenAPI 3.0 and Swagger 2.0 as its
own generator writes them, so the schemas are rewritten: `nullable` in place of a union
with null, `enum` in place of `const`, a `$ref` beside a description wrapped in `allOf`,
`x-kubernetes-preserve-unknown-fields` in place of `additionalProperties: true`, no titles and
no defaults (these are answers, never written).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from kubebase.objects import Dict


@dataclass(frozen=True)
class Operation:
    """One GET the API serves: its path (with `{namespace}` and `{name}` where they are),
    what answers it (a model, or None for plain text) and the kind it is about (for a
    list, the kind of its items, as Kubernetes marks it)."""

    path: str
    summary: str
    model: type[BaseModel] | None
    kind: str | None = None
    operation_id: str = ""


def prefix(group: str, version: str) -> str:
    """`view.trainjob.dev`, `v1alpha1` -> `dev.trainjob.view.v1alpha1.`, as Kubernetes names
    the definitions of a group."""
    return ".".join([*reversed(group.split(".")), version]) + "."


def _rewrite(node: Any, v3: bool) -> Any:
    if isinstance(node, list):
        return [_rewrite(x, v3) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _rewrite(v, v3) for k, v in node.items() if k not in ("title", "default")}
    if isinstance(out.get("description"), str):  # a docstring's lines, as one paragraph
        out["description"] = " ".join(out["description"].split())
    choices = out.get("anyOf")
    if isinstance(choices, list) and {"type": "null"} in choices:
        rest = [x for x in choices if x != {"type": "null"}]
        del out["anyOf"]
        out = {**(rest[0] if len(rest) == 1 else {"anyOf": rest}), **out}
        if v3:
            out["nullable"] = True
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if "$ref" in out and len(out) > 1:
        out["allOf"] = [{"$ref": out.pop("$ref")}]
    if out.get("additionalProperties") is True:
        del out["additionalProperties"]
        out["x-kubernetes-preserve-unknown-fields"] = True
        out.setdefault("type", "object")
    if out.get("type") == "object" and "properties" not in out and "allOf" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def schemas(
    models: Iterable[type[BaseModel]], group: str, version: str, kinds: Iterable[str], v3: bool
) -> dict[str, Dict]:
    """The definitions of `models` and all they hold, named as Kubernetes names them; those
    whose name is one of `kinds` carry their GVK."""
    named = prefix(group, version)
    root = "#/components/schemas/" if v3 else "#/definitions/"
    _, found = models_json_schema(
        [(m, "serialization") for m in models],
        by_alias=True,
        ref_template=root + named + "{model}",
    )
    kinds = set(kinds)
    out: dict[str, Dict] = {}
    for name, schema in (found.get("$defs") or {}).items():
        rewritten = _rewrite(schema, v3)
        if name in kinds:
            rewritten["x-kubernetes-group-version-kind"] = [
                {"group": group, "kind": name, "version": version}
            ]
        out[named + name] = rewritten
    return out


def _parameters(path: str, v3: bool) -> list[Dict]:
    """The path's parameters (`{namespace}`, `{name}`); a parameter's type is in a schema in
    OpenAPI 3.0, beside it in Swagger 2.0."""
    names = [("namespace", "object name and auth scope, such as for teams and projects")]
    names += [("name", "name of the object")]
    typed = {"schema": {"type": "string"}} if v3 else {"type": "string"}
    return [
        {"name": n, "in": "path", "required": True, "description": d, **typed}
        for n, d in names
        if "{" + n + "}" in path
    ]


def _document(
    group: str, version: str, operations: Iterable[Operation], v3: bool
) -> tuple[dict[str, Dict], dict[str, Dict]]:
    """(paths, schemas) of one group-version, in OpenAPI 3.0's form or Swagger 2.0's."""
    operations = list(operations)
    root = "#/components/schemas/" if v3 else "#/definitions/"
    paths: dict[str, Dict] = {}
    for op in operations:
        schema = (
            {"type": "string"}
            if op.model is None
            else {"$ref": f"{root}{prefix(group, version)}{op.model.__name__}"}
        )
        media = "text/plain" if op.model is None else "application/json"
        answer: Dict = {"description": "OK"}
        if v3:
            answer["content"] = {media: {"schema": schema}}
        else:
            answer["schema"] = schema
        get: Dict = {
            "description": op.summary,
            "operationId": op.operation_id,
            **({} if v3 else {"produces": [media]}),
            "responses": {"200": answer},
        }
        if op.kind:
            get["x-kubernetes-action"] = "get"
            get["x-kubernetes-group-version-kind"] = {
                "group": group,
                "kind": op.kind,
                "version": version,
            }
        params = _parameters(op.path, v3)
        paths[op.path] = {"get": get, **({"parameters": params} if params else {})}
    models = [op.model for op in operations if op.model is not None]
    kinds = [op.kind for op in operations if op.kind] + [m.__name__ for m in models]
    return paths, schemas(models, group, version, kinds, v3=v3)


def v3_document(group: str, version: str, operations: Iterable[Operation]) -> Dict:
    """The OpenAPI 3.0 document of one group-version (`/openapi/v3/apis/GROUP/VERSION`)."""
    paths, found = _document(group, version, operations, v3=True)
    return {
        "openapi": "3.0.0",
        "info": {"title": group, "version": version},
        "paths": paths,
        "components": {"schemas": found},
    }


def v2_document(group: str, version: str, operations: Iterable[Operation]) -> Dict:
    """The Swagger 2.0 document (`/openapi/v2`), for an aggregator that reads only that."""
    paths, found = _document(group, version, operations, v3=False)
    return {
        "swagger": "2.0",
        "info": {"title": group, "version": version},
        "paths": paths,
        "definitions": found,
    }


@dataclass(frozen=True)
class Served:
    """A document as it is served: its bytes and their hash (the v3 root names it)."""

    body: bytes
    hash: str

    @classmethod
    def of(cls, document: Dict) -> Served:
        body = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
        return cls(body, hashlib.sha512(body).hexdigest().upper())
