"""The house's arrows have no circles: no module imports, even indirectly, one that imports
it back (type-only imports included). import-linter's contracts say which way the arrows
point between packages; this says there is no loop anywhere."""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kubebase", "trainjob_api", "kubecontrol", "trainjob", "dispatcher",
            "worker_controller", "kubectl_trainjob", "clusters", "demo", "benchmarks")  # fmt: skip


def test_no_import_circles() -> None:
    graph = grimp.build_graph(*PACKAGES)
    circles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if module != imported and graph.chain_exists(imported, module):
                circles.append((module, imported))
    assert circles == []


def _contract(name_start: str) -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    found: dict[str, object] = next(c for c in contracts if c["name"].startswith(name_start))
    return found


def test_every_writer_is_out_of_reach_of_every_decision() -> None:
    """The contract names its modules one by one: a new writer (execute, *_io, reconcile) or
    a new decision module must join it, or this fails."""
    contract = _contract("decisions ")
    graph = grimp.build_graph(*PACKAGES[:7])
    product = sorted(graph.modules)
    writers = [m for m in product if m.rsplit(".", 1)[-1] in WRITERS or m.endswith("_io")]
    deciders = [m for m in product if m.rsplit(".", 1)[-1] in DECIDERS]
    assert writers and deciders
    assert [m for m in writers if not _named(m, contract["forbidden_modules"])] == []
    assert [m for m in deciders if not _named(m, contract["source_modules"])] == []


def _named(module: str, entries: object) -> bool:
    """Whether a contract's list names the module, itself or a package holding it."""
    assert isinstance(entries, list)
    return any(module == entry or module.startswith(entry + ".") for entry in entries)


WRITERS = {"execute", "reconcile", "client", "cluster", "informer"}
DECIDERS = {"decide", "status", "builders", "views", "models", "workload", "capacity", "caches",
            "status_writes", "naming", "jobframework", "readiness", "queues", "plan",
            "digests"}  # fmt: skip


def test_no_test_module_imports_another() -> None:
    """A test module's helpers that another needs live in tests/support (or, when the
    benchmarks need them too, in clusters/helpers), never in a test module."""
    graph = grimp.build_graph("tests", "benchmarks", "clusters", "demo")
    imported = sorted(
        (importer, module)
        for module in graph.modules
        if module.rsplit(".", 1)[-1].startswith("test_")
        for importer in graph.find_modules_that_directly_import(module)
    )
    assert imported == []
