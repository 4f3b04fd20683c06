"""The suite's mutation score over the decision and safety modules: how many small changes to
the product (an operator flipped, a constant changed, a call dropped) some test notices.

    python -m benchmarks.mutation                 # the modules below, two children
    python -m benchmarks.mutation --only plugin/kubebase/shares.py --max-children 1
    python -m benchmarks.mutation --keep          # keep the scratch copy, then after new tests:
    python -m benchmarks.mutation --again /tmp/trainjob-mutation-XXXX

It runs mutmut (a maintained mutation tester: https://github.com/boxed/mutmut) in a scratch
copy of the working tree, so nothing of its own lands in the checkout, with the unit and local
tests that cover those modules (mutmut runs, for each mutant, only the tests that reach the
function it changed). It prints, per module, the mutants made, killed, survived, and reached
by no test, the score (killed of all made) and the run's time, and writes every mutant not
killed to `mutation-survivors.txt` in the current directory. A benchmark, not a test: the goal
(90% killed) is printed against the figure, never asserted in `./run test`.

`--again` takes a kept scratch copy whose product files are those of the working tree, copies
the working tree's tests into it and runs again only the mutants it had not killed: a test
added never revives a killed mutant, so the tally is the whole run's with today's tests.

Two settings keep the run on two cores: the property-based fuzz draws FUZZ_EXAMPLES=150 inputs
per property (700 in `./run test`; it reaches most functions of the worker controller, so it
runs for most mutants), the same ones each time as in CI (CI=true), and a test stopped after
TEST_TIMEOUT seconds counts as a timeout (killed: the mutant made a test hang, as a mutant of
a server's deadline does).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The decision and safety modules: the dispatcher's decisions and plan, the worker
# controller's, the failure policy, admission's rules, the fair shares and the serving bounds.
MODULES = [
    "dispatcher/decisions/decide.py",
    "dispatcher/decisions/plan.py",
    "dispatcher/decisions/copies.py",
    "worker_controller/decide.py",
    "trainjob/runtime/failure.py",
    "trainjob/admission.py",
    "plugin/kubebase/shares.py",
    "kubecontrol/serving.py",
]
# The tests that reach them (the e2e tests, on a bed, are not part of a mutation run).
TESTS = [
    "tests/unit/dispatcher",
    "tests/unit/worker_controller",
    "tests/unit/trainjob",
    "tests/unit/kubecontrol",
    "tests/local/test_story_contract.py",
    "tests/local/test_serving.py",
]
# Tests that read the product's source rather than run it (mutmut rewrites the source).
SOURCE_READERS = ["tests/unit/trainjob/test_vocabulary.py"]
GOAL = 0.9
FUZZ_EXAMPLES = "150"
TEST_TIMEOUT = 60
# mutmut's names: "dispatcher.decisions.decide.x_plan__mutmut_3",
# "kubebase.shares.xǁSharesǁtake__mutmut_1"
_RESULT = re.compile(r"^\s*([\w.]+?)\.x[_ǁ]\S*__mutmut_\d+: (.+)$")


def _scratch_copy(target: Path) -> None:
    """The working tree's tracked files (as they are now, changes included)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _config(modules: list[str], tree: Path) -> str:
    """mutmut's section of the scratch copy's pyproject.toml (TOML arrays of strings are
    JSON's): everything of the tree but the mutated packages is copied beside the mutants,
    as the tests read it (examples, CRDs, the chart, docs)."""
    roots = sorted({m.split("/")[0] + "/" for m in modules})
    copied = sorted(
        p.name + ("/" if p.is_dir() else "")
        for p in tree.iterdir()
        if p.name + "/" not in roots and p.name not in ("tests", "mutants")
    )
    settings = {
        "source_paths": roots,
        "only_mutate": modules,
        "also_copy": copied,
        "pytest_add_cli_args_test_selection": TESTS,
        "pytest_add_cli_args": [
            *(f"--ignore={t}" for t in SOURCE_READERS),
            f"--timeout={TEST_TIMEOUT}",
        ],
    }
    return "\n[tool.mutmut]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())


def _tally(results: str, modules: list[str]) -> dict[str, Counter[str]]:
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    names = {m.removesuffix(".py").replace("/", "."): m for m in modules}
    for line in results.splitlines():
        found = _RESULT.match(line)
        if found and found[1] in names:
            by_module[names[found[1]]][found[2].strip()] += 1
    return by_module


def _report(scratch: Path, modules: list[str], took: float | None, children: int) -> int:
    """Tally the run's mutants per module, print the table and the figure, and write those
    not killed to mutation-survivors.txt; 1 when there is nothing to tally."""
    results = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=scratch,
        capture_output=True,
        text=True,
    ).stdout
    tally = _tally(results, modules)
    total: Counter[str] = Counter()
    print(f"\n{'module':34} {'made':>5} {'killed':>6} {'survived':>8} {'no test':>7} score")
    for module in modules:
        counts = tally.get(module, Counter())
        total += counts
        made = sum(counts.values())
        score = (counts["killed"] + counts["timeout"]) / made if made else 0.0
        print(
            f"{module:34} {made:5} {counts['killed']:6} {counts['survived']:8} "
            f"{counts['no tests']:7} {score:6.1%}"
        )
    made = sum(total.values())
    score = (total["killed"] + total["timeout"]) / made if made else 0.0
    others = {k: v for k, v in total.items() if k not in ("killed", "survived", "no tests")}
    print(
        f"{'all':34} {made:5} {total['killed']:6} {total['survived']:8} "
        f"{total['no tests']:7} {score:6.1%}"
    )
    spent = "" if took is None else f"; {took / 60:.1f} min, {children} children"
    print(f"[figure] mutation score {score:.1%} (goal {GOAL:.0%}); other outcomes {others}{spent}")
    left = [line.strip() for line in results.splitlines() if _RESULT.match(line)]
    left = [x for x in left if not x.endswith((": killed", ": timeout"))]
    Path("mutation-survivors.txt").write_text("\n".join(left) + "\n")
    print(f"{len(left)} mutants not killed: mutation-survivors.txt")
    return 0 if made else 1


def _not_killed(scratch: Path) -> list[str]:
    results = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=scratch,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [
        line.split(":")[0].strip()
        for line in results.splitlines()
        if _RESULT.match(line) and not line.rstrip().endswith((": killed", ": timeout"))
    ]


def _take_tests(scratch: Path) -> None:
    """Copy the working tree's tests into a kept scratch copy whose code (but for the tests and
    these scripts) is the tree's."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source, kept = REPO / name, scratch / name
        if name.startswith("tests/"):
            if source.is_file():
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, kept)
        elif (
            name.endswith(".py")
            and not name.startswith("benchmarks/")
            and source.is_file()
            and (not kept.is_file() or kept.read_bytes() != source.read_bytes())
        ):
            raise SystemExit(f"{name} differs from {scratch}'s: make a new run instead")


def _mutmut(scratch: Path, args: list[str]) -> int:
    log = scratch / "mutmut.log"
    print(f"progress: {log}", flush=True)
    env = {**os.environ, "FUZZ_EXAMPLES": FUZZ_EXAMPLES, "CI": "true"}
    with log.open("a") as out:
        return subprocess.run(
            [sys.executable, "-m", "mutmut", "run", *args],
            cwd=scratch,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        ).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=MODULES, help="modules to mutate")
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy")
    parser.add_argument(
        "--results-of", type=Path, help="only tally a kept scratch copy's run (its mutants so far)"
    )
    parser.add_argument(
        "--again",
        type=Path,
        help="a kept scratch copy: run its mutants not killed, with the tree's tests",
    )
    args = parser.parse_args()
    if args.results_of is not None:
        return _report(args.results_of, args.only, None, args.max_children)
    children = ["--max-children", str(args.max_children)]
    if args.again is not None:
        _take_tests(args.again)
        left = _not_killed(args.again)
        print(f"running again the {len(left)} mutants {args.again} had not killed", flush=True)
        started = time.monotonic()
        print(f"mutmut exit {_mutmut(args.again, [*children, *left])}")
        return _report(args.again, args.only, time.monotonic() - started, args.max_children)
    scratch = Path(tempfile.mkdtemp(prefix="trainjob-mutation-"))
    try:
        _scratch_copy(scratch)
        with (scratch / "pyproject.toml").open("a") as pyproject:
            pyproject.write(_config(args.only, scratch))
        print(f"mutating {len(args.only)} modules in {scratch}", flush=True)
        started = time.monotonic()
        print(f"mutmut exit {_mutmut(scratch, children)}")
        return _report(scratch, args.only, time.monotonic() - started, args.max_children)
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
