"""The chart's README as `helm show readme` serves it: every value of values.yaml with its
default and comment (release/chart_readme.py), and the docs its comments point to exist."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import yaml

from clusters import builds
from release import chart_readme
from release.assets import CHART, REPO


def leaves(node: Any, prefix: str = "") -> set[str]:
    if isinstance(node, dict) and node:
        return set().union(*(leaves(v, f"{prefix}{k}.") for k, v in node.items()))
    return {prefix.rstrip(".")}


def test_helm_shows_the_readme_with_every_value_and_its_default() -> None:
    shown = subprocess.run(
        [str(builds.binary("helm")), "show", "readme", str(CHART)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown.strip() == (CHART / "README.md").read_text().strip()
    listed = set(re.findall(r"^\| `([^`]+)` \|", shown, flags=re.MULTILINE))
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    # Each value is listed, or the mapping written on one line that holds it ({cpu: 100m}).
    missing = {
        leaf
        for leaf in leaves(values)
        if not any(leaf == row or leaf.startswith(f"{row}.") for row in listed)
    }
    assert not missing, missing
    rows = {v.path: v for v in chart_readme.values((CHART / "values.yaml").read_text())}
    assert rows["replicas"].default == "2" and "Leader election" in rows["replicas"].comment
    assert rows["image.tag"].comment == "default: the chart's appVersion"  # beside the value
    assert rows["networkPolicy.metricsFrom"].default == ""  # a list below it, not listed


def test_the_values_comments_point_to_pages_and_sections_that_exist() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    text = " ".join(" ".join(line.strip().lstrip("#").split()) for line in lines)
    said = re.findall(r"docs/([\w/-]+\.md)(?:, \"([^\"]+)\")?", text)
    assert said
    for page, section in said:
        doc = REPO / "docs" / page
        assert doc.is_file(), page
        if section:
            body = doc.read_text()
            heading = re.search(rf"^#+ .*{re.escape(section)}", body, flags=re.MULTILINE)
            bold = f"**{section}" in body
            assert heading or bold, (page, section)
