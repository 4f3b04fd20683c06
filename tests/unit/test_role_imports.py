"""What each controller's process imports before it serves: the libraries (installed
distributions) its application module loads, beyond what the interpreter loads by itself.
Each costs every replica of the role its memory for as long as it runs (benchmarks/imports.py
measures how much, library by library: cryptography 11 MiB, pycurl 5.5 MiB), so
a role's set may not grow unseen: a library new to a role is kept out (imported where it is
used, by the role that uses it), or pinned here with its figure. One that leaves is unpinned,
so the pins stay what the roles load. Imports made later, while a replica runs, are not seen
here: the bed's memory benchmarks see them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {"trainjob-dispatcher", "kubectl-trainjob"}

# Run in a fresh process: the distributions of the top-level modules loaded by importing the
# module named, less those a bare interpreter has loaded already (site's own hooks).
PROBE = r"""
import importlib, importlib.metadata as md, json, sys
def loaded():  # aiohttp looks for backports.zstd and goes on without it: the bare namespace
    # package it finds on the way (a dev tool's backports.tarfile here) is no library it loads;
    # one of its modules is
    names = list(sys.modules)
    tops = {name.partition(".")[0] for name in names}
    return tops - {t for t in NAMESPACES if not any(n.startswith(t + ".") for n in names)}
NAMESPACES = {"backports"}
before = loaded()
importlib.import_module(sys.argv[1])
dists = md.packages_distributions()
print(json.dumps(sorted({d for top in loaded() - before for d in dists.get(top, [])})))
"""

# Both controllers serve webhooks, metrics and (the dispatcher) a read API over h11
# (kubecontrol/web.py: aiohttp, which served them up to 0.3.0, cost each process 10 MiB more),
# make and check their serving certificates (cryptography), pre-check tokens (PyJWT), talk to
# API servers over libcurl (pycurl), read settings and TrainJobs through pydantic models,
# runtime patterns through RE2.
SERVING = {
    "annotated-types", "cffi", "cryptography", "google-re2", "h11", "orjson",
    "prometheus_client", "pycurl", "pydantic", "pydantic_core", "PyJWT", "python-json-logger",
    "PyYAML", "tenacity", "typing-inspection", "typing_extensions",
}  # fmt: skip
PINNED = {"dispatcher.app": SERVING, "worker_controller.app": SERVING}


def libraries(module: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, module], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout)) - OURS


@pytest.mark.parametrize("module", sorted(PINNED))
def test_a_role_loads_the_libraries_pinned_for_it_and_no_more(module: str) -> None:
    loaded = libraries(module)
    assert not loaded - PINNED[module], (
        f"{module} now loads {sorted(loaded - PINNED[module])}: each costs every replica of "
        "the role its memory; keep it out of the role, or pin it here with its figure "
        "(benchmarks/imports.py)"
    )
    assert not PINNED[module] - loaded, (
        f"{module} no longer loads {sorted(PINNED[module] - loaded)}: unpin it"
    )


def test_the_kubernetes_client_stays_out_of_both_roles() -> None:
    assert all("kubernetes" not in libraries(m) for m in PINNED)
