"""Our CRDs explained: each field of their schemas (api/crds/, as we write them) that Kubeflow
Trainer v2.3's CRDs have is described as Trainer describes it (so that `kubectl explain
trainjob.spec.trainer` says what the field is), and docs/users/reference.md lists every field
as the installed CRDs describe it. `./run manifests` writes both (release/manifests.py); our
own descriptions are for the fields Trainer does not have.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.scalarstring import LiteralScalarString

from clusters import builds
from clusters.kube import SAFE_LOADER

REPO = Path(__file__).resolve().parent.parent
CRDS = REPO / "api" / "crds"  # ours, as written; release/crd_schema.py makes what is installed
INSTALLED = REPO / "crds"
PLURALS = ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
REFERENCE = REPO / "docs" / "users" / "reference.md"
Dict = dict[str, Any]


def crd_path(plural: str) -> Path:
    return CRDS / f"trainer.kubeflow.org_{plural}.yaml"


def installed_path(plural: str) -> Path:
    return INSTALLED / f"trainer.kubeflow.org_{plural}.yaml"


def _yaml() -> YAML:
    y = YAML()  # round trip: our comments, anchors and order kept
    y.preserve_quotes = True
    y.width = 4096
    y.indent(mapping=2, sequence=2, offset=0)
    return y


def openapi_schema(crd: Any) -> Any:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def fields(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, schema node) of every field below `node`: `.a.b`, `[]` for a list's items, `{}`
    for a map's values."""
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from fields(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from fields(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from fields(node["additionalProperties"], f"{path}{{}}")


@functools.cache
def trainers_crd(plural: str) -> Any:
    """Kubeflow Trainer's CRD of `plural`, at the API version we serve (from its module)."""
    trainer = builds.module_source_dir(
        "trainer", f"{builds.TRAINER_PACKAGE}@{builds.TRAINER_API_VERSION}"
    )
    path = trainer / f"manifests/base/crds/trainer.kubeflow.org_{plural}.yaml"
    return yaml.load(path.read_text(), Loader=SAFE_LOADER)


def trainers_descriptions(plural: str) -> dict[str, str]:
    """Each field's description in Kubeflow Trainer's CRD, at the API version we serve."""
    schema = openapi_schema(trainers_crd(plural))
    return {p: str(n["description"]) for p, n in fields(schema) if n.get("description")}


def described(plural: str, text: str) -> str:
    """Our CRD's text with each field Trainer has described as Trainer describes it (the key
    first in the field, as controller-gen writes it, or no key where Trainer says nothing).

    A node our text shares through a YAML anchor is one node at several paths: it keeps a
    description only where Trainer says the same at each of them (the installed CRD describes
    each path, release/crd_schema.py). Fields Trainer does not have keep ours."""
    schema = openapi_schema(trainers_crd(plural))
    theirs = {p: str(n.get("description") or "").strip() for p, n in fields(schema)}
    y = _yaml()
    crd = y.load(text)
    paths: dict[int, list[str]] = {}
    nodes: dict[int, Any] = {}
    for path, node in fields(openapi_schema(crd)):
        paths.setdefault(id(node), []).append(path)
        nodes[id(node)] = node
    for key, where in paths.items():
        if not any(p in theirs for p in where):
            continue  # ours alone
        node = nodes[key]
        said = {theirs.get(p, "") for p in where}
        text_of = said.pop() if len(said) == 1 else ""
        if not text_of:
            node.pop("description", None)
        elif str(node.get("description") or "").strip() != text_of:
            value = LiteralScalarString(text_of) if "\n" in text_of else text_of
            if "description" in node:
                node["description"] = value
            elif isinstance(node, CommentedMap):
                node.fa.set_block_style()  # `{type: string}` with a paragraph would not read
                node.insert(0, "description", value)
    out = io.StringIO()
    y.dump(crd, out)
    return out.getvalue()


def _type_of(node: Dict) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "integer or string"
    kind = str(node.get("type") or "")
    if kind == "array":
        items = node.get("items") or {}
        return f"list of {_type_of(items) or 'any'}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of {_type_of(node['additionalProperties']) or 'any'}"
    return kind or "any"


def _cell(text: str) -> str:
    first = text.strip().split("\n\n")[0]
    return " ".join(first.split()).replace("|", "\\|")


def reference(_: str = "") -> str:
    """docs/users/reference.md: every field of our three CRDs, as api/crds/ holds them, each
    described as the installed CRD (crds/) describes it."""
    lines = [
        "# The API's fields",
        "",
        "Every field of the three kinds this product serves (`trainer.kubeflow.org/v1alpha1`,",
        "Kubeflow Trainer v2.3's API), from the CRDs themselves: written by `./run manifests`,",
        "do not edit. `kubectl explain trainjob.spec.trainer` (or any path below) says the same on",
        "a cluster; each field Kubeflow Trainer v2.3's CRDs have is described in their words.",
        "A field marked *Kubernetes type* is a Kubernetes or JobSet type (a pod",
        "template, an env entry, a JobSet spec ...), typed as Kubeflow Trainer v2.3's CRDs type",
        "it; `kubectl explain` lists its fields, this page does not;",
        "[differences.md](../operators/differences.md) says which fields of Trainer's are",
        "honoured, refused or reported.",
        "",
    ]
    for plural in PLURALS:
        crd = yaml.load(crd_path(plural).read_text(), Loader=SAFE_LOADER)
        kind = crd["spec"]["names"]["kind"]
        schema = openapi_schema(crd)
        # What `kubectl explain` says: the installed CRD's description at each path.
        explained = dict(
            fields(openapi_schema(yaml.load(installed_path(plural).read_text(), SAFE_LOADER)))
        )
        lines += [f"## {kind}", "", _cell(str(explained[""].get("description") or "")), ""]
        lines += ["| field | type | what it is |", "|---|---|---|"]
        for path, node in fields(schema):
            if not path or path in (".apiVersion", ".kind", ".metadata"):
                continue
            if path.endswith(("[]", "{}")) and not node.get("properties"):
                continue  # the list's or map's own row says it
            kind_of = _type_of(node)
            if node.get("x-kubernetes-preserve-unknown-fields"):
                kind_of += " (Kubernetes type)"
            required = path.rsplit(".", 1)[-1] in _required_of(schema, path)
            said = _cell(str(explained.get(path, node).get("description") or ""))
            lines.append(
                f"| `{path[1:]}`{' (required)' if required else ''} | {kind_of} | {said} |"
            )
        lines.append("")
    return "\n".join(lines)


def _required_of(schema: Dict, path: str) -> list[str]:
    """The `required` list of the object that holds the field at `path`."""
    parent = path.rsplit(".", 1)[0]
    for p, node in fields(schema):
        if p == parent:
            return list(node.get("required") or [])
    return []
