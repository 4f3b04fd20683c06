"""Figures of the code itself (no bed): how much of it reads raw dicts, and how the tests map
onto it. Per product package: `.get(` calls, parameters annotated as a raw dict (`Dict`,
`dict[str, Any]`, `Mapping[str, Any]`) against all parameters, and the modules that define a
`Dict` alias of their own; then, per product module, the test modules named after it; then
the tests' edits of an object's JSON (a builder's work, `tests/support/builders.py`).

    .venv/bin/python benchmarks/code_figures.py [CHECKOUT] [--missing] [--modules] [--edits] [--raw]
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
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


def decision_modules() -> list[Path]:
    """The modules the import contract "decisions ... do no I/O" holds (pyproject.toml): the
    domain, where a raw dict is a decision's input rather than an edge's."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    (pure,) = [k for k in contracts if k["name"].startswith("decisions ")]
    found: list[Path] = []
    for module in pure["source_modules"]:
        rel = Path(*module.split("."))
        for home in (ROOT, ROOT / "plugin"):
            if (home / rel).is_dir():
                found += sorted((home / rel).rglob("*.py"))
            elif (home / rel).with_suffix(".py").is_file():
                found.append((home / rel).with_suffix(".py"))
    return found


def package_figures(package: str) -> tuple[int, int, int, int, int, int]:
    """(modules, lines, `.get(` calls, raw-dict parameters, parameters, modules with a Dict
    alias)."""
    return figures_of(package_files(package))


def figures_of(files: list[Path]) -> tuple[int, int, int, int, int, int]:
    """`package_figures` of any set of modules."""
    gets = raw = params = aliases = lines = 0
    for path in files:
        source = path.read_text()
        lines += len(source.splitlines())
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
    return len(files), lines, gets, raw, params, aliases


def raw_params(files: list[Path]) -> list[str]:
    """Each function of `files` with a raw-dict parameter: `path:line name(parameters)`."""
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                raw = [
                    a.arg
                    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]
                    if a.annotation is not None and RAW.match(ast.unparse(a.annotation))
                ]
                if raw:
                    where = path.relative_to(ROOT)
                    found.append(f"{where}:{node.lineno} {node.name}({', '.join(raw)})")
    return found


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


# Where a decision module reads JSON on purpose: the parse boundary (STYLE.md: "parse once,
# where an object enters, into small typed views"): the views' classes, and the modules that
# parse at the informer's transform or the CRD.
BOUNDARY_MODULES = ("views.py", "digests.py", "models.py", "crd.py")


def boundary_split(files: list[Path]) -> dict[str, tuple[int, int]]:
    """`.get(` calls and lines of `files`, at the parse boundary (a class named `...View`, or a
    module of BOUNDARY_MODULES) and elsewhere: {"boundary": (gets, lines), "rest": ...}."""
    split = {"boundary": [0, 0], "rest": [0, 0]}
    for path in files:
        source = path.read_text()
        tree = ast.parse(source)
        lines = len(source.splitlines())
        if path.name in BOUNDARY_MODULES:
            split["boundary"][0] += _gets(tree)
            split["boundary"][1] += lines
            continue
        views = [
            n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name.endswith("View")
        ]
        in_views = sum(_gets(v) for v in views)
        view_lines = sum((v.end_lineno or v.lineno) - v.lineno + 1 for v in views)
        split["boundary"][0] += in_views
        split["boundary"][1] += view_lines
        split["rest"][0] += _gets(tree) - in_views
        split["rest"][1] += lines - view_lines
    return {k: (g, n) for k, (g, n) in split.items()}


def _gets(tree: ast.AST) -> int:
    return sum(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get"
        for n in ast.walk(tree)
    )


# An object's JSON, as a test would reach into it: `tj["status"]`, `wl.raw["spec"]`.
_TOP = {"metadata", "spec", "status"}
_MUTATORS = {"update", "setdefault", "append", "extend", "insert", "pop", "remove", "clear"}


def _reaches_object(node: ast.expr) -> bool:
    """Whether `node` is a subscript chain through an object's metadata, spec or status."""
    while isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and key.value in _TOP:
            return True
        node = node.value
    return False


def json_edits(path: Path) -> list[int]:
    """The lines of a test module that change an object's JSON by hand: an assignment to, a
    `del` of, or a mutating call on a subscript through its metadata, spec or status."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
        ):
            targets = [node.func.value]
        flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        if any(_reaches_object(t) for t in flat) and isinstance(node, ast.stmt | ast.expr):
            lines.append(node.lineno)
    lines.sort()
    return lines


def edit_figures() -> list[tuple[str, int, int]]:
    """Per test tree: (tree, hand edits of an object's JSON, modules holding one)."""
    rows = []
    for tree in ("tests/unit", "tests/local", "plugin/tests"):
        found = [len(json_edits(p)) for p in sorted((ROOT / tree).rglob("*.py"))]
        rows.append((tree, sum(found), sum(1 for n in found if n)))
    return rows


def main() -> int:
    head = ("modules", "lines", ".get(", "per 100", "raw-dict params", "share", "Dict aliases")
    print(f"{'package':20s} " + " ".join(f"{h:>{len(h) + 2}s}" for h in head))
    rows = [(p, package_figures(p)) for p in PACKAGES]
    everything = [f for p in PACKAGES for f in package_files(p)]
    rows += [
        ("all", figures_of(everything)),
        ("decisions (contract)", figures_of(decision_modules())),
    ]
    for name, (files, lines, gets, raw, params, aliases) in rows:
        per = 100 * gets / max(lines, 1)
        share = 100 * raw / max(params, 1)
        print(
            f"{name:20s} {files:9d} {lines:7d} {gets:7d} {per:9.2f} "
            f"{f'{raw} of {params}':>17s} {share:6.1f}% {aliases:14d}"
        )
    print(
        "\nthe decisions contract's `.get(`, at the parse boundary (views, digests) and elsewhere:"
    )
    for part, (gets, lines) in boundary_split(decision_modules()).items():
        print(
            f"  {part:10s} {gets:5d} in {lines:6d} lines  {100 * gets / max(lines, 1):5.2f} per 100"
        )
    if "--modules" in sys.argv:
        print("\nthe decisions contract's modules, most `.get(` first:")
        by_module = [(figures_of([f]), f) for f in decision_modules()]
        for (_, lines, gets, raw, params, _), path in sorted(by_module, key=lambda m: -m[0][2]):
            name = str(path.relative_to(ROOT))
            per = 100 * gets / max(lines, 1)
            print(f"  {name:50s} {gets:4d} .get( {per:5.1f}/100  {raw:3d} of {params:3d} raw")
    if "--raw" in sys.argv:
        print("\nthe decisions contract's raw-dict parameters:")
        for line in raw_params(decision_modules()):
            print(f"  {line}")
    modules, covered, missing = test_map()
    print(f"\nproduct modules with a test module named after them: {covered} of {modules}")
    if "--missing" in sys.argv:
        print("  without: " + ", ".join(missing))
    print("\nhand edits of an object's JSON (metadata, spec, status) in the tests:")
    for tree, edits, modules in edit_figures():
        print(f"  {tree:14s} {edits:4d} in {modules} modules")
    if "--edits" in sys.argv:
        for tree in ("tests/unit", "tests/local", "plugin/tests"):
            for path in sorted((ROOT / tree).rglob("*.py")):
                if found := json_edits(path):
                    print(f"  {path.relative_to(ROOT)}: {len(found)} (lines {found})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
