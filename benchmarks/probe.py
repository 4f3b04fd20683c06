"""How fast this machine is running Python at the moment, for reading CPU figures across hours.

The controllers' CPU per TrainJob moves with the machine as much as with the code: under a
burst the bed's API servers, etcd and Kueue share the two cores with them, and the same work
then costs several times its quiet price (docs/contributors/benchmarks.md, the code at `1913019`).
`MachineProbe` times a fixed piece of work in the benchmark's process (decode a
Workload-sized JSON body and walk it in Python, as a controller does with a watch event)
every half second while the run goes on, in
CPU time of its own thread. What the unit cost during a run is an exchange rate for the
controllers' CPU figures of that run: `in_units` turns milliseconds into units of that work.

    probe = MachineProbe(); probe.start(); ...; probe.stop(); print(probe.report())
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import orjson

from benchmarks.worker_trainjobs import pct

# A manager Workload's size and shape, roughly: nested dicts and lists of strings and numbers.
_BODY = orjson.dumps(
    {
        "metadata": {"name": "w", "labels": {f"l{i}": "v" * 20 for i in range(8)}},
        "spec": {
            "podSets": [
                {"name": f"p{i}", "count": i, "template": {"spec": {"containers": [
                    {"name": "c", "image": "x" * 40, "resources": {"requests": {"cpu": "1"}}},
                ]}}}
                for i in range(4)
            ]
        },
        "status": {"conditions": [{"type": f"T{i}", "status": "True", "message": "m" * 120}
                                  for i in range(10)]},
    }
)  # fmt: skip
_ROUNDS = 20


def _walk(obj: Any) -> int:
    if isinstance(obj, dict):
        return sum(_walk(v) for v in obj.values()) + len(obj)
    if isinstance(obj, list):
        return sum(_walk(v) for v in obj)
    return 1


def unit_us() -> float:
    """CPU microseconds of one unit of work, in this thread."""
    start = time.thread_time()
    for _ in range(_ROUNDS):
        _walk(orjson.loads(_BODY))
    return (time.thread_time() - start) * 1e6


class MachineProbe:
    def __init__(self, every: float = 0.5) -> None:
        self.samples: list[float] = []
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="machine-probe")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if not self.samples:  # a run shorter than one period: one sample now
            self.samples.append(unit_us())

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.samples.append(unit_us())

    def during(self) -> float:
        """The unit's median cost during the run (after `stop`)."""
        return statistics.median(self.samples)

    def report(self) -> str:
        p10, p90 = pct(self.samples, 0.1), pct(self.samples, 0.9)
        return (
            f"machine probe: a fixed unit of Python work cost {self.during():.0f} us of CPU "
            f"during the run (median of {len(self.samples)}; p10 {p10:.0f}, p90 {p90:.0f})"
        )

    def in_units(self, cpu_ms: float) -> float:
        """A CPU figure of the run in units of the probe's work as it cost during the run."""
        return cpu_ms * 1000 / self.during()
