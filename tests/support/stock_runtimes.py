"""Kubeflow Trainer's stock ClusterTrainingRuntimes, taken at test time from the manifests of
the Trainer release the product follows (`clusters.builds.TRAINER_API_VERSION`), exactly as
its `manifests/base/runtimes` kustomization lists them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from clusters import builds

Dict = dict[str, Any]
MODULE = f"{builds.TRAINER_PACKAGE}@{builds.TRAINER_API_VERSION}"


def _listed(directory: Path) -> list[Path]:
    """The files a kustomization lists, its sub-directories' lists followed."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    out: list[Path] = []
    for entry in kustomization.get("resources") or []:
        path = directory / entry
        out += _listed(path) if path.is_dir() else [path]
    return out


@functools.cache
def stock_runtimes() -> dict[str, Dict]:
    """Name -> the ClusterTrainingRuntime as Trainer ships it."""
    root = builds.module_source_dir("trainer", MODULE) / "manifests" / "base" / "runtimes"
    docs = [doc for path in _listed(root) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return {doc["metadata"]["name"]: doc for doc in docs}
