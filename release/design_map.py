"""The map of the code in docs/contributors/design.md, written by `./run manifests` from the code
itself: the layers import-linter holds the packages to (pyproject.toml), then each package
(a folder of modules) with its own docstring, and each module with the first sentence of its
docstring and the packages of ours it imports, as the import graph has them.

A module moved, added or given new imports changes the map; tests/unit/clusters/test_chart.py
fails while the page differs from what this writes.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from clusters.chart import REPO

# The product's packages, each folder of them a row of the map (the plugin's distribution holds
# the API's vocabulary and the kubectl plugin; the product's holds the rest).
ROOTS = ("kubecontrol", "trainjob", "dispatcher", "worker_controller", "plugin")
TOP_PACKAGES = ("kubebase", "trainjob_api", "kubecontrol", "trainjob", "dispatcher",
                "worker_controller", "kubectl_trainjob")  # fmt: skip


def _files() -> list[Path]:
    found = [
        p
        for root in ROOTS
        for p in sorted((REPO / root).rglob("*.py"))
        if "tests" not in p.relative_to(REPO).parts and ".egg-info" not in str(p)
    ]
    return [p for p in found if _dotted(p).split(".")[0] in TOP_PACKAGES]


def _dotted(path: Path) -> str:
    rel = path.relative_to(REPO)
    parts = rel.parts[1:] if rel.parts[0] == "plugin" else rel.parts
    name = ".".join(parts)[: -len(".py")]
    return name.removesuffix(".__init__")


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def first_sentence(text: str) -> str:
    """The docstring's first sentence, on one line, safe in a Markdown table cell."""
    paragraph = text.strip().split("\n\n")[0].strip()
    flat = " ".join(paragraph.removesuffix(":").split())
    match = re.match(r"(.+?\.)(\s|$)", flat)
    sentence = match.group(1) if match else flat
    return sentence.replace("|", "\\|")


def _package_of(module: str, packages: set[str]) -> str:
    """The deepest package (folder) of ours that holds the module."""
    if module in packages:
        return module
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in packages:
            return candidate
    return module


def layers() -> str:
    """The layered contracts of pyproject.toml as lists, top first."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    lines = []
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] != "layers":
            continue
        within = contract.get("containers", [""])[0]
        prefix = f"{within}." if within else ""
        lines.append(f"{contract['name'][0].upper()}{contract['name'][1:]}, top first:\n")
        for layer in contract["layers"]:
            names = " \\| ".join(f"`{prefix}{name.strip()}`" for name in layer.split("|"))
            lines.append(f"1. {names}")
        lines.append("")
    return "\n".join(lines)


def table() -> str:
    """The map: each package with its docstring, each module with what it is and imports."""
    import grimp  # the lint tools' dependency (import-linter's graph), in the dev environment

    files = _files()
    modules = {_dotted(p): p for p in files}
    packages = {_dotted(p) for p in files if p.name == "__init__.py"}
    packages |= {m.rsplit(".", 1)[0] for m in modules if "." in m}
    # No cache: one left by another checkout's state (.grimp_cache) would give old imports.
    graph = grimp.build_graph(*TOP_PACKAGES, include_external_packages=False, cache_dir=None)
    out = [layers()]
    for package in sorted(packages, key=lambda p: (TOP_PACKAGES.index(p.split(".")[0]), p)):
        members = sorted(m for m in modules if _package_of(m, packages) == package)
        if not members:
            continue
        folder = modules[package].parent if package in modules else modules[members[0]].parent
        out.append(
            f"**`{folder.relative_to(REPO)}/`**"
            + (f": {first_sentence(_docstring(modules[package]))}" if package in modules else "")
        )
        out.append("")
        out.append("| module | what it is | imports of ours |")
        out.append("|---|---|---|")
        for module in members:
            if module in packages:
                continue
            imported = {
                _package_of(m, packages)
                for m in graph.find_modules_directly_imported_by(module)
                if m.split(".")[0] in TOP_PACKAGES
            } - {package}
            shown = ", ".join(f"`{m}`" for m in sorted(imported)) or "none"
            rel = modules[module].relative_to(REPO)
            out.append(f"| `{rel}` | {first_sentence(_docstring(modules[module]))} | {shown} |")
        out.append("")
    return "\n".join(out)
