"""The house's arrows have no circles: no module imports, even indirectly, one that imports
it back (type-only imports included). import-linter's contracts say which way the arrows
point between packages; this says there is no loop anywhere."""

from __future__ import annotations

import grimp

PACKAGES = ("kubecontrol", "trainjob", "dispatcher", "worker_controller", "kubectl_trainjob",
            "clusters", "demo", "benchmarks")  # fmt: skip


def test_no_import_circles() -> None:
    graph = grimp.build_graph(*PACKAGES)
    circles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if module != imported and graph.chain_exists(imported, module):
                circles.append((module, imported))
    assert circles == []
