"""Sampling profiles of our controllers while a benchmark runs (py-spy, from PyPI), and a
plain-text summary of them: where the time goes, by own time and by inclusive time.

    .venv/bin/python benchmarks/multikueue.py --sequential 20 --burst 100 --profile /tmp/prof
    .venv/bin/python benchmarks/profile.py /tmp/prof/trainjob-dispatcher-0.txt

The files are py-spy's "raw" (collapsed stack) format, which flamegraph.pl also reads.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path


class Profiler:
    """`py-spy record` attached to running processes, stopped (and written) on `stop()`.
    Samples only the thread holding the GIL (Python's CPU time) and never pauses the process:
    the default (pause each process at every sample) slowed a 100-job burst thirtyfold."""

    def __init__(self, out_dir: Path, targets: dict[str, int], rate: int = 50) -> None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        out_dir.mkdir(parents=True, exist_ok=True)
        self.procs = [
            subprocess.Popen(
                [spy, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
                 "--gil", "--nonblocking", "--output", str(out_dir / f"{name}.txt")],
                stdout=subprocess.DEVNULL,
                stderr=(out_dir / f"{name}.log").open("w"),
            )
            for name, pid in targets.items()
        ]  # fmt: skip

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            proc.wait(timeout=60)


def summarize(path: Path, top: int = 25) -> str:
    """Own and inclusive samples per function (file:function). py-spy leaves out samples of
    threads that wait (a lock, a socket, a sleep), so these are CPU samples."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    busy = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = [_frame(f) for f in stack.split(";")]
        busy += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    lines = [f"{path.name}: {busy} samples"]
    for title, table in (("own", own), ("inclusive", inclusive)):
        lines.append(f"  by {title} time:")
        lines += [f"    {k / max(busy, 1):6.1%}  {frame}" for frame, k in table.most_common(top)]
    return "\n".join(lines)


def _frame(raw: str) -> str:
    """`func (path/to/module.py:123)` -> `module.py:func`."""
    func, _, where = raw.partition(" (")
    file = where.rstrip(")").rsplit(":", 1)[0]
    return f"{Path(file).name}:{func}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    for path in args.files:
        print(summarize(path, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
