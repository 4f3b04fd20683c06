"""Figures of the code itself (no bed): how much of it reads raw dicts, and how the tests map
onto it. Per product package: `.get(` calls, parameters annotated as a raw dict (`Dict`,
`dict[str, Any]`, `Mapping[str, Any]`) against all parameters, and the modules that define a
`Dict` alias of their own; then, per product module, the test modules named after it.

    .venv/bin/python benchmarks/code_figures.py [CHECKOUT] [--missing]
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

# A checkout to read (another commit's worktree, say), else this one.
_ARGS = [a for a in sys.argv[1:] if not a.startswith("-")]
ROOT = Path(_ARGS[0]).resolve() if _ARGS else Path(__file__).resolve().parent.parent
PACKAGES = ("dispatcher", "worker_controller", "trainjob", "kubecontrol", "trainjob_api",
            "kubebase", "kubectl_trainjob")  # fmt: skip


def package_files(package: str) -> list[Path]:
    """A package's modules, at the top or in plugin/ (where the plugin's distribution is)."""
    return sorted(p for home in (ROOT, ROOT / "plugin") for p in (home / package).rglob("*.py"))


RAW = re.compile(r"^(Dict|dict\[str, Any\]|Mapping\[str, Any\])( \| None)?$")


def package_figures(package: str) -> tuple[int, int, int, int, int]:
    """(modules, `.get(` calls, raw-dict parameters, parameters, modules with a Dict alias)."""
    gets = raw = params = aliases = 0
    files = package_files(package)
    for path in files:
        source = path.read_text()
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
            ):
                gets += 1
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                    if arg.arg in ("self", "cls"):
                        continue
                    params += 1
                    if arg.annotation is not None and RAW.match(ast.unparse(arg.annotation)):
                        raw += 1
        if re.search(r"^Dict = dict\[str, Any\]", source, re.M):
            aliases += 1
    return len(files), gets, raw, params, aliases


def test_map() -> tuple[int, int, list[str]]:
    """(product modules, of them with a test module named after them, those without)."""
    # The controllers' tests, and the plugin's distribution's own (plugin/tests).
    tests = {p.stem for home in ("tests", "plugin/tests") for p in (ROOT / home).rglob("test_*.py")}
    modules, covered, missing = 0, 0, []
    for package in PACKAGES:
        for path in package_files(package):
            if path.stem in ("__init__", "__main__"):
                continue
            modules += 1
            rel = path.relative_to(ROOT).with_suffix("")
            if f"test_{path.stem}" in tests:
                covered += 1
            else:
                missing.append(str(rel))
    return modules, covered, missing


def main() -> int:
    head = ("package", "modules", ".get(", "raw-dict params", "Dict aliases")
    print(f"{head[0]:20s} {head[1]:>7s} {head[2]:>6s} {head[3]:>16s} {head[4]:>12s}")
    for package in PACKAGES:
        files, gets, raw, params, aliases = package_figures(package)
        print(f"{package:20s} {files:7d} {gets:6d} {f'{raw} of {params}':>16s} {aliases:12d}")
    modules, covered, missing = test_map()
    print(f"\nproduct modules with a test module named after them: {covered} of {modules}")
    if "--missing" in sys.argv:
        print("  without: " + ", ".join(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
