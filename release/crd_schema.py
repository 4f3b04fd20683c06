"""The CRDs we install: ours (api/crds/, written by hand and described by release/crd_docs.py)
with each Kubernetes type they leave open typed as Kubeflow Trainer v2.3's CRDs type it.

Our schemas type every field the controllers read and leave the Kubernetes types below them
open (`x-kubernetes-preserve-unknown-fields`: env entries, `resourcesPerNode`, the pod
templates' parts a `runtimePatch` may set, a runtime's JobSet spec ...). Installed that way,
`kubectl explain` has nothing to say of them and the API server keeps any field a client sends
there. Trainer's CRDs type them (controller-gen, from the Kubernetes and JobSet Go types of its
release), so each open node of ours becomes Trainer's node at the same path, with ours laid
over it: our validation rules are added to Trainer's, our limits and types win, our extra
fields are kept, and `required` is the union of both. A node Trainer leaves open or does not
have stays as ours is.

Each field Trainer has, open or typed in ours, is described as Trainer describes it (or not at
all where Trainer says nothing), so that `kubectl explain` says on our clusters what it says on
Trainer's; ours describe only the fields Trainer does not have. Our source shares nodes through
YAML anchors (one `env` list for the initializers, the trainer and the containers, one open
list for a pod's tolerations, volumes and image pull secrets), whose descriptions could only
be right at one of the paths that share them: a description is the path's, never the node's.

`./run manifests` writes crds/ (for `kubectl apply -k`, the kustomize overlays and the
release's archive) from api/crds/, and the chart's copy of each (charts/trainjob-multicluster/
files/crds/, rendered by its templates/crds.yaml) as compact JSON; `--check` compares.

Why the chart's copies are compact: Helm keeps a release, its chart's files included, in one
Secret, which the API server holds to 1 MiB, and it stores each file as base64 inside the
release's JSON before compressing that, which compresses poorly, so each byte of a file
counts. The same objects as compact JSON take two thirds of the room the YAML took
(tests/unit/clusters/test_chart.py holds the release under a budget).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from clusters.kube import SAFE_LOADER
from release.crd_docs import PLURALS, crd_path, openapi_schema, trainers_crd

REPO = Path(__file__).resolve().parent.parent
CHART_COPIES = REPO / "charts" / "trainjob-multicluster" / "files" / "crds"
HEADER = (
    "# Written by `./run manifests` from api/crds/{name} (ours) with each Kubernetes type it\n"
    "# leaves open typed as Kubeflow Trainer v2.3's CRD types it (release/crd_schema.py); do\n"
    "# not edit: change api/crds/ and run it again.\n"
)
OPEN = "x-kubernetes-preserve-unknown-fields"
Dict = dict[str, Any]


def chart_copy_path(plural: str) -> Path:
    return CHART_COPIES / f"trainer.kubeflow.org_{plural}.json"


def _typed(node: Any) -> bool:
    return isinstance(node, dict) and not node.get(OPEN) and node.get("type") in ("object", "array")


def _child(node: Dict, key: str, name: str | None = None) -> Any:
    """Trainer's node under `node` for one step of ours (a property, the items, the values)."""
    if not isinstance(node, dict):
        return None
    if key == "properties":
        return (node.get("properties") or {}).get(name)
    return node.get(key) if isinstance(node.get(key), dict) else None


def overlay(theirs: Dict, ours: Dict) -> Dict:
    """Trainer's typed node with ours laid over it (the module's docstring says how)."""
    out = copy.deepcopy(theirs)
    for key, value in ours.items():
        if key in (OPEN, "description"):
            continue
        if key == "properties":
            props = out.setdefault("properties", {})
            for name, child in value.items():
                props[name] = complete_node(child, props.get(name))
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = complete_node(value, _child(out, key))
        elif key == "x-kubernetes-validations":
            rules = out.setdefault(key, [])
            rules += [rule for rule in value if rule not in rules]
        elif key == "required":
            have = out.get(key) or []
            out[key] = have + [r for r in value if r not in have]
        else:
            out[key] = copy.deepcopy(value)
    return out


def described_as(node: Dict, theirs: Any) -> Dict:
    """`node` (a new dict) with Trainer's description where Trainer has the field (`theirs`
    is its node there), the key first as controller-gen writes it; ours where Trainer has no
    such field."""
    if not isinstance(theirs, dict):
        return node
    rest = {key: value for key, value in node.items() if key != "description"}
    if theirs.get("description"):
        return {"description": theirs["description"], **rest}
    return rest


def complete_node(ours: Any, theirs: Any) -> Any:
    """`ours` with every open node below it that Trainer types replaced by the overlay, and
    each field Trainer has described as Trainer describes it."""
    if not isinstance(ours, dict):
        return copy.deepcopy(ours)
    if ours.get(OPEN) and (_typed(theirs) or _empty_object(theirs)):
        return described_as(overlay(theirs, ours), theirs)
    out: Dict = {}
    for key, value in ours.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {
                name: complete_node(child, _child(theirs, "properties", name))
                for name, child in value.items()
            }
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = complete_node(value, _child(theirs, key))
        else:
            out[key] = copy.deepcopy(value)
    return described_as(out, theirs)


def _empty_object(node: Any) -> bool:
    """Trainer's struct without fields (`jax: {}`): typed as having none."""
    return (
        isinstance(node, dict)
        and node.get("type") == "object"
        and not node.get(OPEN)
        and not node.get("properties")
        and "additionalProperties" not in node
    )


def still_open(schema: Dict, path: str = "") -> Iterator[str]:
    """The paths of the open nodes left in `schema`."""
    if schema.get(OPEN):
        yield path or "."
    for name, child in (schema.get("properties") or {}).items():
        yield from still_open(child, f"{path}.{name}")
    for key, mark in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(schema.get(key), dict):
            yield from still_open(schema[key], f"{path}{mark}")


def installed(plural: str, source: str) -> Dict:
    """The installed CRD for our source text of `plural`."""
    crd: Dict = yaml.load(source, Loader=SAFE_LOADER)
    theirs = openapi_schema(trainers_crd(plural))
    version = crd["spec"]["versions"][0]
    version["schema"]["openAPIV3Schema"] = complete_node(openapi_schema(crd), theirs)
    return crd


def installed_text(crd: Dict) -> str:
    """crds/'s file of an installed CRD: YAML under a header naming its source."""
    name = f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's: 1 MB in 0.2 s, not 2 s
    body = yaml.dump(crd, Dumper=dumper, sort_keys=False, width=100, allow_unicode=True)
    return HEADER.format(name=name) + body


def chart_copy(crd: Dict) -> str:
    """The chart's copy of an installed CRD: the same object as compact JSON."""
    return json.dumps(crd, separators=(",", ":"), ensure_ascii=False) + "\n"


def sources() -> list[tuple[str, Path]]:
    """(plural, our CRD as written: api/crds/) of each kind."""
    return [(plural, crd_path(plural)) for plural in PLURALS]
