"""Benchmark: the CPU a Python controller spends per API request and per watch event, on the
client side alone, with the client our controllers use (`kubecontrol.cluster.Cluster` over
`kubecontrol.client`: tenacity, metrics, JSON, libcurl) and its watch (libcurl too).

Multiplied by the requests and watch events a TrainJob costs, it is the floor under the
dispatcher's CPU per TrainJob before any decision is made. Objects are ConfigMaps the size of
a manager Workload (`--size` bytes of data), in a namespace of their own on the bed's manager.
CPU is this thread's own (time.thread_time), and for the watch that of the thread carrying the
cluster's streams too (`kubecontrol/transfers.py`), so other load on the machine hardly moves
it; each figure is the median of `--repeat` rounds, with its range. Needs a running bed.

`--busy N` runs the rounds beside N threads of pure Python work, as a controller's request
shares its interpreter with other threads: every time libcurl hands a piece of the answer to
Python, the thread waits for the GIL again.

    .venv/bin/python benchmarks/floor.py --count 200 --repeat 5
    .venv/bin/python benchmarks/floor.py --count 100 --repeat 3 --busy 2
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.figures import spread
from benchmarks.on_bed import manager_namespace
from kubebase.kinds import CONFIG_MAP, NAMESPACE
from kubecontrol.cluster import Cluster


def pump_cpu(kube: Cluster) -> float:
    """CPU seconds of the thread carrying the cluster's streams so far (0 before it runs)."""
    thread = kube.api._transfers._thread
    if thread is None or thread.ident is None:
        return 0.0
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def cpu_ms_each(count: int, step: Callable[[int], object]) -> float:
    start = time.thread_time()
    for i in range(count):
        step(i)
    return (time.thread_time() - start) / count * 1000


def watch_cpu_ms(kube: Cluster, ns: str, count: int) -> float:
    """CPU of a watching thread per event it receives and decodes (JSON to dicts, as our
    controllers' watches do), while this thread patches `count` times."""
    seen = threading.Event()
    result: list[float] = []
    path = f"/api/v1/namespaces/{ns}/configmaps"
    since = kube.api.get_json(path, query={"limit": 1})["metadata"]["resourceVersion"]

    def run() -> None:
        watcher = time.pthread_getcpuclockid(threading.get_ident())
        start = time.clock_gettime(watcher) + pump_cpu(kube)
        query = {"resourceVersion": since, "timeoutSeconds": 120}
        received = 0

        def on_event(_event: dict[str, object]) -> bool:  # on whichever thread it is called
            nonlocal received
            received += 1
            if received < count:
                return True
            spent = time.clock_gettime(watcher) + pump_cpu(kube) - start
            result.append(spent / received * 1000)
            seen.set()
            return False

        kube.api.watch(path, query, on_event, timeout=150)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    time.sleep(1)
    for i in range(count):
        kube.patch(CONFIG_MAP, "cm-0", ns, {"metadata": {"labels": {"round": str(i)}}})
    seen.wait(120)
    return result[0] if result else float("nan")


def _busy(stop: threading.Event) -> None:
    """Pure Python work, holding the GIL but for the interpreter's switches, until `stop`."""
    n = 0
    while not stop.is_set():
        n += 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=200, help="requests of each kind per round")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--size", type=int, default=4000, help="bytes of data per object")
    parser.add_argument("--busy", type=int, default=0, help="threads of Python work beside")
    args = parser.parse_args()
    found = manager_namespace("floor")
    if found is None:
        return 1
    kube, ns = found
    data = {"payload": "x" * args.size}
    rounds: dict[str, list[float]] = {}
    stop = threading.Event()
    for _ in range(args.busy):
        threading.Thread(target=_busy, args=(stop,), daemon=True).start()

    def cm(i: int) -> dict[str, object]:
        meta = {"name": f"cm-{i}", "namespace": ns}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}

    try:
        for _ in range(args.repeat):
            n = args.count
            figures = {
                "create": cpu_ms_each(n, lambda i: kube.create(CONFIG_MAP, cm(i))),
                "GET": cpu_ms_each(n, lambda i: kube.get(CONFIG_MAP, f"cm-{i}", ns)),
                "merge PATCH": cpu_ms_each(
                    n,
                    lambda i: kube.patch(
                        CONFIG_MAP,
                        f"cm-{i}",
                        ns,
                        {"metadata": {"labels": {"r": f"{time.monotonic_ns()}"}}},
                    ),
                ),
                # One LIST of the `count` objects, per object listed: whole objects, then
                # their metadata only (what the watchdog asks for).
                "LIST, whole objects (per object)": cpu_ms_each(
                    1, lambda _: kube.api.get_json(f"/api/v1/namespaces/{ns}/configmaps")
                )
                / n,
                "LIST, metadata only (per object)": cpu_ms_each(
                    1, lambda _: kube.list_metadata(CONFIG_MAP, ns)
                )
                / n,
                "watch event received and decoded": watch_cpu_ms(kube, ns, n),
                "DELETE": cpu_ms_each(n, lambda i: kube.delete(CONFIG_MAP, f"cm-{i}", ns)),
            }
            for k, v in figures.items():
                rounds.setdefault(k, []).append(v)
        stop.set()
        print(
            f"client-side CPU per request, objects of about {args.size} bytes, {args.count} "
            f"each, {args.repeat} rounds, {args.busy} busy threads beside (median, min-max):"
        )
        for k, vs in rounds.items():
            print(f"  {k}: {spread(vs, unit=' ms')}")
    finally:
        kube.delete(NAMESPACE, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
