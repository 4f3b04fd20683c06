"""One version number: pyproject.toml's. Every other place that names the product's version
(the image tag the manifests and scripts use, the API client's User-Agent) must agree."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from kubecontrol.client import USER_AGENT

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_the_manifests_image_tag_is_the_products_version() -> None:
    for role in ("manager", "worker"):
        kustomization = yaml.safe_load((REPO / "deploy" / role / "kustomization.yaml").read_text())
        tags = {i["name"]: i["newTag"] for i in kustomization.get("images") or []}
        assert tags == {"trainjob-multicluster": VERSION}, (role, tags)


def test_the_image_scripts_default_to_the_products_version() -> None:
    build = (REPO / "deploy" / "image" / "build.sh").read_text()
    assert re.search(r"^TAG=\$\{1:-(.+)\}$", build, re.M).group(1) == VERSION  # type: ignore[union-attr]
    kind = (REPO / "clusters" / "kind" / "up.sh").read_text()
    assert f"trainjob-multicluster:{VERSION}" in kind


def test_the_api_clients_user_agent_names_the_installed_version() -> None:
    assert f"trainjob-dispatcher/{VERSION} (python)" == USER_AGENT


def test_the_changelog_has_an_entry_for_the_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(VERSION)}\b", changelog, re.M), VERSION
