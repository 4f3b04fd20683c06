"""Benchmark: what a TrainJob's dependencies (dispatcher/decisions/dependencies.py) cost the
dispatcher, over a manager and a worker in memory (tests/support/whole_pass.py: the dispatcher's
real passes, watch table and writes; the API servers are in-memory stand-ins, so time on the wire
is not in these figures: each request below costs one round trip more on a real fleet).

For K Secrets referenced by a job's pods (K = 0, 1, 4, 16, 32), in a namespace that opted in:
the requests of the pass that sends the TrainJob to the worker that admitted it (per cluster),
that pass's time (median and spread over the repeats), and the requests when one Secret
changes on the manager while the job runs. Then J jobs sharing one Secret, run by two
workers: the passes one change of it queues and the requests all of them send.

    .venv/bin/python -m tests.support.dependency_figures [--repeat N]

It lives beside the stand-ins it drives (the benchmarks do not import the tests).
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dispatcher.decisions.dependencies import NAMESPACE_LABEL
from tests.support.builders import TrainJobBuilder, container, make_runtime
from tests.support.memory_api import MemoryApi
from tests.support.whole_pass import fleet, reserve
from trainjob_api import constants as c

Dict = dict[str, Any]
KEY = ("ns", "tj")


def _runtime(k: int) -> Dict:
    env = [
        {"name": f"S{i}", "valueFrom": {"secretKeyRef": {"name": f"s{i}", "key": "v"}}}
        for i in range(k)
    ]
    job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [container(env=env)]}}},
        },
    }
    return make_runtime(replicated_jobs=[job])


def _secret(i: int, value: str = "v") -> Dict:
    data = {"v": base64.b64encode(value.encode()).decode()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"s{i}", "namespace": "ns"},
        "data": data,
    }


def one(k: int) -> tuple[dict[str, int], float, dict[str, int]]:
    """(requests of the winning pass per cluster, its seconds, requests of the pass after a
    Secret changed) for a job of `k` Secrets."""
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns", "labels": {NAMESPACE_LABEL: "true"}},
    }
    runtime = _runtime(k)
    submitted = TrainJobBuilder().queue("q").multikueue().obj()
    world, _ctx = fleet(
        [runtime, submitted, namespace, *(_secret(i) for i in range(k))], {"worker1": [runtime]}
    )
    try:
        world.settle(KEY)
        reserve(world, "manager")
        world.settle(KEY)
        reserve(world, "worker1", admitted=True)
        world.relist()
        started = time.perf_counter()
        sent = {n: len(r) for n, r in world.requests_of_a_pass(KEY).items()}
        seconds = time.perf_counter() - started
        assert world.get("worker1", c.TRAINJOB, "tj") is not None
        world.settle(KEY)
        changed: dict[str, int] = {}
        if k:
            world.apis["manager"].put(_secret(0, "rotated"))
            changed = {n: len(r) for n, r in world.requests_of_a_pass(KEY).items()}
        return sent, seconds, changed
    finally:
        world.close()


def _secret_requests(api: MemoryApi, served: int, refused: int) -> int:
    """The requests on namespace ns's Secrets an API answered since (served, refused)."""
    paths = [p for _m, p in api.requests[served:]] + [p for _m, p, _ in api.refused[refused:]]
    return sum("/namespaces/ns/secrets" in p for p in paths)


def shared(jobs: int) -> tuple[int, dict[str, int]]:
    """(passes queued, requests per cluster of those passes on the Secret's copies: reads and
    writes of it, served or refused) when one Secret that `jobs` jobs reference changes, the
    jobs split over two workers."""
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns", "labels": {NAMESPACE_LABEL: "true"}},
    }
    runtime = _runtime(1)
    submitted = [TrainJobBuilder(f"tj{i}").queue("q").multikueue().obj() for i in range(jobs)]
    workers = ("worker1", "worker2")
    world, _ctx = fleet(
        [runtime, *submitted, namespace, _secret(0)], {w: [runtime] for w in workers}
    )
    try:
        for i in range(jobs):
            key = ("ns", f"tj{i}")
            world.settle(key)
            for cluster, admitted in (("manager", False), (workers[i % 2], True)):
                reserve(world, cluster, f"tj{i}", admitted=admitted)
                world.settle(key)
        before = {n: (len(a.requests), len(a.refused)) for n, a in world.apis.items()}
        world.apis["manager"].put(_secret(0, "rotated"))
        world.relist()
        queued = world.queue.take()
        for each in queued:
            world.run(each)
        sent = {n: _secret_requests(a, *before[n]) for n, a in world.apis.items()}
        return len(queued), sent
    finally:
        world.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    print(
        "| Secrets | requests of the winning pass (manager / worker) | that pass's time, "
        "median (min-max) | requests after one changes (manager / worker) |"
    )
    print("|---|---|---|---|")
    for k in (0, 1, 4, 16, 32):
        runs = [one(k) for _ in range(args.repeat)]
        sent, _, changed = runs[0]
        times = sorted(r[1] * 1000 for r in runs)
        after = f"{changed.get('manager', 0)} / {changed.get('worker1', 0)}" if changed else "-"
        print(
            f"| {k} | {sent['manager']} / {sent['worker1']} | {statistics.median(times):.1f} ms "
            f"({times[0]:.1f}-{times[-1]:.1f}) | {after} |"
        )
    for jobs in (2, 20):
        queued, sent = shared(jobs)
        print(
            f"{jobs} jobs share a Secret over two workers; one change: {queued} passes, "
            f"requests manager {sent['manager']}, worker1 {sent['worker1']}, "
            f"worker2 {sent['worker2']} (reads and writes of the Secret)"
        )


if __name__ == "__main__":
    main()
