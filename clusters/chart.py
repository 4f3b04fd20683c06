"""The Helm chart (charts/trainjob-multicluster) is where the product's manifests are written;
deploy/ holds its renderings for `kubectl apply -k`, made by `./run manifests`.

    python -m clusters.chart          # write deploy/ from the chart
    python -m clusters.chart --check  # exit 1 if deploy/ differs from the chart's rendering
    python -m clusters.chart --image  # the image reference the chart uses by default

The bed's own helm (clusters/gomod/helm) renders; a rendering for kubectl drops the labels
that say Helm manages the objects.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clusters.builds import K8S_VERSION, binary
from clusters.errors import BedError
from clusters.kube import load_manifests

Dict = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "trainjob-multicluster"
NAMESPACE = "trainjob-system"
RELEASE = "trainjob"
HELM_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart")
HEADER = (
    "# Rendered from charts/trainjob-multicluster by `./run manifests` ({values}); do not edit:\n"
    "# change the chart and render again (tests/unit/test_chart.py checks they agree).\n"
)


def image_reference() -> str:
    """The product's image as the chart names it by default (values.yaml's image, the
    chart's appVersion as its tag): the one place a user replaces it."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())["image"]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    ref = f"{values['registry']}/{values['repository']}".strip("/")
    if values.get("digest"):
        return f"{ref}@{values['digest']}"
    return f"{ref}:{values.get('tag') or app_version}"


def helm() -> Path:
    path = binary("helm")
    if not path.is_file():
        raise BedError(f"helm is not built yet ({path}); run `python -m clusters build`")
    return path


def template(values: Dict, namespace: str = NAMESPACE, release: str = RELEASE) -> list[Dict]:
    """`helm template` of the chart with `values` (a nested mapping, as a values file)."""
    out = subprocess.run(
        [
            str(helm()),
            "template",
            release,
            str(CHART),
            "--namespace",
            namespace,
            "--kube-version",
            K8S_VERSION,
            "--include-crds",
            "--values",
            "-",
        ],
        input=json.dumps(values),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise BedError(f"helm template ({values}) failed:\n{out.stderr}")
    return load_manifests(out.stdout)


def lint(values: Dict) -> str:
    """`helm lint --strict` of the chart with `values`; its output (BedError if it fails)."""
    out = subprocess.run(
        [str(helm()), "lint", "--strict", str(CHART), "--values", "-"],
        input=json.dumps(values),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise BedError(f"helm lint ({values}) failed:\n{out.stdout}{out.stderr}")
    return out.stdout


def for_kubectl(docs: list[Dict]) -> list[Dict]:
    """The rendering without CRDs (deploy/ takes them from crds/) and Helm's labels."""
    kept = []
    for doc in docs:
        if doc["kind"] == "CustomResourceDefinition":
            continue
        for meta in (doc["metadata"], _pod_template_meta(doc)):
            labels = (meta or {}).get("labels") or {}
            for key in HELM_LABELS:
                labels.pop(key, None)
        kept.append(doc)
    return kept


def _pod_template_meta(doc: Dict) -> Dict | None:
    spec = doc.get("spec") or {}
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return (spec.get("template") or {}).get("metadata")


@dataclass(frozen=True)
class Rendering:
    """One file of deploy/: the chart with `values`, the objects named in `only` (all: empty)."""

    path: str
    values: Dict
    only: tuple[str, ...] = ()

    def text(self) -> str:
        docs = [
            d
            for d in for_kubectl(template(self.values))
            if not self.only or d["metadata"]["name"] in self.only
        ]
        body = "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)
        return HEADER.format(values=_flags(self.values)) + body


def _flags(values: Dict, prefix: str = "") -> str:
    parts = []
    for key, value in values.items():
        if isinstance(value, dict):
            parts.append(_flags(value, f"{prefix}{key}."))
        else:
            parts.append(f"{prefix}{key}={json.dumps(value)}")
    return ", ".join(parts)


VIEW = ("trainjob-multikueue-view",)
KUEUE_ACCESS = ("trainjob-multikueue-kueue",)
RENDERINGS = (
    Rendering("deploy/manager/manifests.yaml", {"role": "manager"}),
    Rendering("deploy/worker/manifests.yaml", {"role": "worker"}),
    Rendering(
        "deploy/worker/view-rbac.yaml",
        {"role": "worker", "worker": {"multikueueIdentity": {"viewAccess": True}}},
        only=VIEW,
    ),
    Rendering(
        "deploy/coexist/manager/manifests.yaml", {"role": "manager", "manager": {"mode": "Coexist"}}
    ),
    Rendering(
        "deploy/coexist/worker/kueue-multikueue-rbac.yaml",
        {"role": "worker", "worker": {"multikueueIdentity": {"kueueMultiKueueAccess": True}}},
        only=KUEUE_ACCESS,
    ),
    Rendering(
        "deploy/cert-manager/manager/manifests.yaml",
        {"role": "manager", "certificates": {"mode": "cert-manager"}},
    ),
    Rendering(
        "deploy/cert-manager/worker/manifests.yaml",
        {"role": "worker", "certificates": {"mode": "cert-manager"}},
    ),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusters.chart", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--image", action="store_true", help="print the image reference")
    args = parser.parse_args(argv)
    if args.image:
        print(image_reference())
        return 0
    stale = []
    for rendering in RENDERINGS:
        path = REPO / rendering.path
        text = rendering.text()
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(rendering.path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {rendering.path}", file=sys.stderr)
    if stale:
        print(
            "deploy/ differs from the chart's rendering (run ./run manifests): " + ", ".join(stale),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
