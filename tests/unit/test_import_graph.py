"""The house's arrows have no circles: no module imports, even indirectly, one that imports
it back (type-only imports included). import-linter's contracts say which way the arrows
point between packages; this says there is no loop anywhere. Each graph is built afresh
(`cache_dir=None`): grimp's cache takes a file changed within the second it was written for
the one it read."""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kubebase", "trainjob_api", "kubecontrol", "trainjob", "dispatcher",
            "worker_controller", "kubectl_trainjob", "clusters", "demo", "benchmarks")  # fmt: skip


def test_no_import_circles() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
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
    graph = grimp.build_graph(*PACKAGES[:7], cache_dir=None)
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
    """A test module's helpers that another needs live in tests/support (the benchmarks use
    its builders, and what drives the bed in clusters/helpers), never in a test module."""
    graph = grimp.build_graph("tests", "benchmarks", "clusters", "demo", cache_dir=None)
    imported = sorted(
        (importer, module)
        for module in graph.modules
        if module.rsplit(".", 1)[-1].startswith("test_")
        for importer in graph.find_modules_that_directly_import(module)
    )
    assert imported == []


def test_the_products_unit_tests_build_their_objects_without_the_bed() -> None:
    """A unit test of the product builds its TrainJobs and runtimes with tests/support's
    builders; what it may take from the bed is the upstream releases the bed fetches
    (`clusters.builds`, `clusters.kueue`), their YAML and the repository's root."""
    graph = grimp.build_graph("tests", "clusters", cache_dir=None)
    allowed = {"clusters.builds", "clusters.kueue", "clusters.kube", "clusters.config",
               "clusters.helpers.waiting", "clusters.errors"}  # fmt: skip
    product = ("tests.unit.dispatcher", "tests.unit.worker_controller", "tests.unit.trainjob",
               "tests.unit.kubecontrol", "tests.unit.kubebase")  # fmt: skip
    taken = sorted(
        (importer, module)
        for module in graph.modules
        if module.startswith("clusters.") and module not in allowed
        for importer in graph.find_modules_that_directly_import(module)
        if importer.startswith(product)
    )
    assert taken == []
