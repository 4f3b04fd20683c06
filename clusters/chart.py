"""The Helm chart (charts/trainjob-multicluster) as the bed uses it: rendered and linted by the
bed's own helm (clusters/gomod/helm), and the image it names.

    python -m clusters.chart --image  # the image reference the chart uses by default

release/manifests.py writes deploy/ from it (`./run manifests`).
"""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
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
    return load_manifests(rendered(values, namespace, release))


def rendered(values: Dict, namespace: str = NAMESPACE, release: str = RELEASE) -> str:
    """`helm template`'s text: the manifest Helm would keep in its release."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    args += ["--kube-version", K8S_VERSION]
    return _helm(args, values)


# Helm's parts of a chart that are not among its files (helm.sh/helm/v3/pkg/chart/loader).
_NOT_FILES = ("Chart.yaml", "Chart.lock", "values.yaml", "values.schema.json")


def stored_release_bytes(values: Dict) -> int:
    """About the bytes of the Secret in which Helm's default driver keeps a release of the
    chart with `values`: the release as JSON (each template and file as base64, the manifest
    as text), gzipped, base64-encoded; the release's own small fields left out.
    tests/real/test_upgrade.py compares it with a real release's Secret."""
    templates: list[Dict] = []
    files: list[Dict] = []
    for path in sorted(p for p in CHART.rglob("*") if p.is_file()):
        name = path.relative_to(CHART).as_posix()
        if name in _NOT_FILES:
            continue
        data = base64.b64encode(path.read_bytes()).decode()
        (templates if name.startswith("templates/") else files).append({"name": name, "data": data})
    release = {
        "chart": {
            "templates": templates,
            "values": yaml.safe_load((CHART / "values.yaml").read_text()),
            "schema": base64.b64encode((CHART / "values.schema.json").read_bytes()).decode(),
            "files": files,
        },
        "config": values,
        "manifest": rendered(values),
    }
    return len(base64.b64encode(gzip.compress(json.dumps(release).encode())))


def lint(values: Dict) -> str:
    """`helm lint --strict` of the chart with `values`; its output (BedError if it fails)."""
    return _helm(["lint", "--strict", str(CHART)], values)


def _helm(args: list[str], values: Dict) -> str:
    """helm `args` with `values` as its values file; its output (BedError, with what it said,
    if it fails)."""
    out = subprocess.run(
        [str(helm()), *args, "--values", "-"],
        input=json.dumps(values),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise BedError(f"helm {args[0]} ({values}) failed:\n{out.stdout}{out.stderr}")
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


def main(argv: list[str] | None = None) -> int:
    if list(argv if argv is not None else sys.argv[1:]) != ["--image"]:
        print("usage: python -m clusters.chart --image", file=sys.stderr)
        return 2
    print(image_reference())
    return 0


if __name__ == "__main__":
    sys.exit(main())
