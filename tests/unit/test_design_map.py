"""The map of the code in docs/contributors/design.md (release/design_map.py): every module of
the product in it, each with the packages the import graph says it imports, and the layers as
import-linter holds them. That the page holds what this writes is tests/unit/clusters/
test_chart.py's `./run manifests --check`."""

from __future__ import annotations

import subprocess
import tomllib

from release import design_map
from tests.support.files import REPO_ROOT


def _row(table: str, path: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(f"| `{path}` |"))
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def test_every_module_of_the_product_has_a_row() -> None:
    tracked = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "dispatcher", "worker_controller", "trainjob",
         "kubecontrol", "plugin/trainjob_api", "plugin/kubebase", "plugin/kubectl_trainjob"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    modules = [p for p in tracked if p.endswith(".py") and not p.endswith("__init__.py")]
    table = design_map.table()
    assert len(modules) > 100
    assert [m for m in modules if f"| `{m}` |" not in table] == []


def test_a_row_says_what_the_module_is_and_the_packages_it_imports() -> None:
    table = design_map.table()
    _, what, imports = _row(table, "dispatcher/controller/execute.py")
    assert what.startswith("Carrying out a dispatcher pass")
    for package in ("dispatcher.workers", "dispatcher.decisions", "kubebase", "trainjob_api"):
        assert f"`{package}`" in imports
    assert "`dispatcher.controller`" not in imports  # its own package is not listed
    assert _row(table, "plugin/kubebase/objects.py")[2] == "none"


def test_the_layers_are_import_linters() -> None:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    layered = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    text = design_map.layers()
    assert len(layered) == 2
    for contract in layered:
        assert contract["name"][1:] in text
        for layer in contract["layers"]:
            assert layer.split("|")[0].strip() in text
    lines = text.splitlines()
    order = [
        lines.index(f"1. `dispatcher.{role}`") for role in ("commands", "readapi", "decisions")
    ]
    assert order == sorted(order)  # top first, as import-linter reads them
    assert "1. `dispatcher.settings` \\| `dispatcher.metrics`" in lines


def test_each_package_is_headed_by_its_folder_and_docstring() -> None:
    table = design_map.table()
    assert table.startswith(design_map.layers())
    assert "**`dispatcher/controller/`**: The controller's pass and what it runs on" in table
    assert design_map.table() in (REPO_ROOT / "docs" / "contributors" / "design.md").read_text()


def test_the_first_sentence_of_a_docstring() -> None:
    assert design_map.first_sentence("One thing. Then more.") == "One thing."
    assert design_map.first_sentence("Run it as:\n\n    cmd a | b\n") == "Run it as"
    assert design_map.first_sentence("A | B\nacross lines") == "A \\| B across lines"
