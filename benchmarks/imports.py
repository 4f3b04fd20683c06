"""Benchmark: what each controller's imports cost its replicas before they hold anything: the
resident memory of a fresh process once it has imported a role's application (what every
replica loads first), and how much of it each library brought, import by import.

Each role is imported in a process of its own. An import hook notes the process's resident
memory (/proc/self/statm) around the first import of each library from outside it (the
outermost: what aiohttp itself imports counts for aiohttp, the standard library's modules
too), and the rest is the product's own modules with what they import of the standard
library. The figures depend on the order the libraries come in (a module two of them use is
counted for the first); `--repeat` runs give the noise (median, min-max). No bed.
tests/unit/test_role_imports.py fails when a role's set of libraries grows.

    .venv/bin/python benchmarks/imports.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ROLES = {"dispatcher": "dispatcher.app", "worker controller": "worker_controller.app"}

# Run in a fresh process: the resident memory at its start and after the role's import, and
# what each library's outermost first import added, as JSON.
PROBE = r"""
import builtins, importlib, json, os, sys
PAGE = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE
OWN = {"dispatcher", "worker_controller", "kubecontrol", "kubebase", "trainjob", "trainjob_api"}
cost, inside = {}, []
real = builtins.__import__
def hooked(name, globals=None, locals=None, fromlist=(), level=0):
    top = name.partition(".")[0] if level == 0 else ""
    note = bool(top) and not inside and top not in OWN and top not in sys.modules
    if note:
        inside.append(top)
        before = rss()
    try:
        return real(name, globals, locals, fromlist, level)
    finally:
        if note:
            inside.pop()
            cost[top] = cost.get(top, 0) + rss() - before
builtins.__import__ = hooked
start = rss()
importlib.import_module(sys.argv[1])
print(json.dumps({"start": start, "end": rss(), "cost": cost}))
"""


def probe(module: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, module],
        capture_output=True, text=True, check=True, cwd=REPO_ROOT, timeout=120,
    )  # fmt: skip
    found: dict[str, object] = json.loads(done.stdout)
    return found


def mib(values: list[float]) -> str:
    values = [v / 2**20 for v in values]
    return f"{statistics.median(values):5.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="processes per role")
    parser.add_argument("--top", type=int, default=12, help="libraries shown per role")
    args = parser.parse_args()
    for role, module in ROLES.items():
        runs = [probe(module) for _ in range(args.repeat)]
        starts = [float(r["start"]) for r in runs]  # type: ignore[arg-type]
        ends = [float(r["end"]) for r in runs]  # type: ignore[arg-type]
        costs: list[dict[str, int]] = [r["cost"] for r in runs]  # type: ignore[misc]
        libs = sorted({k for c in costs for k in c}, key=lambda k: -statistics.median(
            [c.get(k, 0) for c in costs]))  # fmt: skip
        print(f"{role} ({module}): resident {mib(ends)} MiB after its imports, the interpreter "
              f"{mib(starts)} MiB of it; {len(libs)} imports from outside it")  # fmt: skip
        for lib in libs[: args.top]:
            name = f"{lib} (stdlib)" if lib in sys.stdlib_module_names else lib
            print(f"  {name:20} {mib([float(c.get(lib, 0)) for c in costs])} MiB")
        own = [e - s - sum(c.values()) for e, s, c in zip(ends, starts, costs, strict=True)]
        print(f"  {'(ours, the rest)':20} {mib(own)} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
