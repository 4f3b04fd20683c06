"""One version number: pyproject.toml's. Every other place that names the product's version
(the image tag the manifests and scripts use, the API client's User-Agent) must agree."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from clusters.chart import image_reference
from kubecontrol.client import USER_AGENT

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_the_chart_is_the_products_version_and_names_the_image_by_it() -> None:
    chart = yaml.safe_load((REPO / "charts/trainjob-multicluster/Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION)
    values = yaml.safe_load((REPO / "charts/trainjob-multicluster/values.yaml").read_text())
    assert values["image"]["tag"] == ""  # the appVersion, so the version is written once
    assert image_reference().endswith(f"/trainjob-multicluster:{VERSION}")


def test_the_image_scripts_take_the_image_from_the_chart() -> None:
    build = (REPO / "deploy" / "image" / "build.sh").read_text()
    assert re.search(r"^IMAGE=\$\{IMAGE:-.*clusters\.chart --image", build, re.M)
    kind = (REPO / "clusters" / "kind" / "up.sh").read_text()
    assert "clusters.chart --image" in kind


def test_the_api_clients_user_agent_names_the_installed_version() -> None:
    assert f"trainjob-dispatcher/{VERSION} (python)" == USER_AGENT


def test_the_changelog_has_an_entry_for_the_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(VERSION)}\b", changelog, re.M), VERSION
