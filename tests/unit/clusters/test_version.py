"""One version number: pyproject.toml's. Every other place that names the product's version
(the image tag the manifests and scripts use, the API client's User-Agent, the
`trainjob_build_info` series) must agree."""

from __future__ import annotations

import platform
import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from prometheus_client import generate_latest

from clusters.chart import image_reference
from kubecontrol.client import USER_AGENT
from kubecontrol.metrics import REGISTRY

REPO = Path(__file__).resolve().parents[3]
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


def test_the_api_clients_user_agent_and_build_info_name_the_installed_version() -> None:
    assert f"trainjob-dispatcher/{VERSION} (python)" == USER_AGENT
    exposed = generate_latest(REGISTRY).decode()
    python = platform.python_version()
    assert f'trainjob_build_info{{python="{python}",version="{VERSION}"}} 1.0' in exposed


def test_the_changelog_has_an_entry_for_the_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(VERSION)}\b", changelog, re.M), VERSION


def test_the_install_examples_name_only_public_images_the_bed_stands_in_for() -> None:
    """The runbook's runtime runs as written on any cluster: no product image to edit in."""
    from clusters.images import STAND_INS

    runtime = yaml.safe_load((REPO / "examples/install/runtime.yaml").read_text())
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    images = {
        c["image"] for rj in jobs for c in rj["template"]["spec"]["template"]["spec"]["containers"]
    }
    assert images and images <= set(STAND_INS), images
    assert image_reference() not in images


def test_the_image_lock_pins_every_dependency_within_its_range() -> None:
    """deploy/image/requirements.lock (./run lock) against pyproject.toml: each dependency
    at one version its range allows, each with the sha256 of its wheels."""
    lock = (REPO / "deploy/image/requirements.lock").read_text()
    entry = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})\b", re.M)
    pinned = {canonicalize_name(m[1]): (Version(m[2]), m[3]) for m in entry.finditer(lock)}
    assert len(pinned) == lock.count("=="), "every entry has a sha256"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    plugin = tomllib.loads((REPO / "plugin/pyproject.toml").read_text())["project"]
    for spec in project["dependencies"] + plugin["dependencies"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        if name == canonicalize_name(plugin["name"]):  # built from the checkout, as the product
            pin = str(requirement.specifier)
            assert pin == f"=={project['version']}" == f"=={plugin['version']}"
            assert name not in pinned
            continue
        assert name in pinned, f"{name} is not in the lock: run ./run lock"
        assert requirement.specifier.contains(pinned[name][0]), (name, str(pinned[name][0]))
