"""Benchmark: our controllers' memory with many TrainJobs in flight, what they hold per cached
object, and the watch connections they keep per cluster.

TrainJobs that run for an hour are submitted in steps (`--jobs` in `--steps`), all through the
manager's MultiKueue queue. Each worker's quota admits `--worker-cpu` / 10m of them (100 each by
default); the rest stay pending on the workers with a Workload copy on every worker (AllAtOnce),
the heaviest state for the dispatcher's caches: per TrainJob a manager TrainJob and Workload, a
remote Workload per worker while it waits, the remote TrainJob once a worker admits it. After
each step, once the counts stop moving, it prints the objects on every cluster, each replica's
resident memory and its TCP connections to each API server; at the end the slope (MiB per
TrainJob in flight, a least-squares fit over the steps), that slope per cached object, and the
peak resident memory (VmHWM) of every replica.

It brings up a fresh bed of its own (the bed's config: `$TJ_BED_CONFIG` or the defaults, e.g.
benchmarks/beds/four-workers.yaml for more workers) with Kueue's default `waitForPodsReady`
timeout (30 min; the test bed's 20 s would evict jobs queued behind a 1,000-job submission on
a 2-core machine, and the counts would never settle), and takes it down at the end.

    .venv/bin/python benchmarks/memory.py --jobs 1000 --steps 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.multikueue import TRAINER, run_patch, trainjob_body
from benchmarks.worker_trainjobs import peak_rss_mib, status_mib
from clusters import setup
from clusters.bed import Bed
from clusters.config import Port, WaitForPodsReady, load_config
from clusters.install import DISPATCHER, leading_dispatcher

KUEUE = ("kueue.x-k8s.io", "v1beta2")
# Pods that run an hour: nothing finishes while memory is measured.
RUN_AN_HOUR = run_patch("1h")


def connections(pid: int, ports: dict[int, str]) -> Counter[str]:
    """Established TCP connections of `pid` by the cluster whose API server port they reach."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out: Counter[str] = Counter()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            remote_port, state, inode = int(f[2].rsplit(":", 1)[1], 16), f[3], f[9]
            if state == "01" and inode in inodes and remote_port in ports:
                out[ports[remote_port]] += 1
    return out


def count(api: client.ApiClient, ns: str, group: str, version: str, plural: str) -> int:
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(group, version, ns, plural)
    return len(listed["items"])


def objects(bed: Bed, ns: str) -> dict[str, int]:
    """The objects of namespace `ns` that the dispatcher caches, by cluster and kind."""
    manager = bed.config.managers[0].name
    out = {
        f"{manager} trainjobs": count(bed.api(manager), ns, *TRAINER, "trainjobs"),
        f"{manager} workloads": count(bed.api(manager), ns, *KUEUE, "workloads"),
    }
    for w in bed.config.workers:
        out[f"{w.name} workloads"] = count(bed.api(w.name), ns, *KUEUE, "workloads")
        out[f"{w.name} trainjobs"] = count(bed.api(w.name), ns, *TRAINER, "trainjobs")
    return out


def settle(bed: Bed, ns: str, timeout: float) -> dict[str, int]:
    """Wait until the object counts hold still for 10 s (or `timeout`); return them."""
    last: dict[str, int] = {}
    still_since = time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = objects(bed, ns)
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= 10:
            return now
        time.sleep(2)
    print(f"counts still moving after {timeout:.0f}s: {last}", file=sys.stderr)
    return last


def submit(custom: client.CustomObjectsApi, ns: str, name: str) -> None:
    body = trainjob_body(name, RUN_AN_HOUR)
    custom.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", body)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000, help="TrainJobs in flight at the end")
    parser.add_argument("--steps", type=int, default=4, help="measure after each of this many")
    parser.add_argument(
        "--worker-cpu", default="1", help="each worker's quota (a TrainJob asks 10m)"
    )
    parser.add_argument("--settle-timeout", type=float, default=600)
    parser.add_argument(
        "--pods-ready-timeout", type=int, default=1800, help="Kueue's, on every cluster"
    )
    args = parser.parse_args()
    timeout = WaitForPodsReady(timeout_seconds=args.pods_ready_timeout)
    bed = Bed(load_config().model_copy(update={"wait_for_pods_ready": timeout}))
    if bed.is_up():
        bed.down()
    bed.up()
    try:
        return measure(bed, args)
    finally:
        bed.down()


def measure(bed: Bed, args: argparse.Namespace) -> int:
    ns = f"mem-{uuid.uuid4().hex[:4]}"
    clusters = [bed.config.managers[0].name, *(w.name for w in bed.config.workers)]
    ports = {bed.config.port(c, Port.APISERVER): c for c in clusters}
    setup.install(bed, ns, worker_cpu=args.worker_cpu)
    ctrls = setup.start_controllers(bed, resync=None)
    leader = leading_dispatcher(ctrls)
    # Replicas by (cluster, identity): the worker controllers of two workers share a name.
    role = {
        (r.cluster, r.identity): ("dispatcher (leader)" if r is leader else "dispatcher (standby)")
        if r.name == DISPATCHER
        else f"worker controller on {r.cluster}"
        for r in ctrls
    }
    custom = client.CustomObjectsApi(bed.api(clusters[0]))
    rows: list[tuple[int, dict[str, int], dict[tuple[str, str], float]]] = []
    try:
        time.sleep(10)  # caches synced, first resync done
        sizes = [round(args.jobs * (i + 1) / args.steps) for i in range(args.steps)]
        submitted = 0
        for target in [0, *sizes]:
            names = [f"mem-{i:05d}" for i in range(submitted, target)]
            start = time.monotonic()
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda n: submit(custom, ns, n), names))
            submitted = target
            counts = settle(bed, ns, args.settle_timeout) if target else objects(bed, ns)
            rss = {(r.cluster, r.identity): status_mib(r.proc.pid, "VmRSS") for r in ctrls}
            rows.append((target, counts, rss))
            shown = ", ".join(f"{k} {v}" for k, v in counts.items())
            mem = ", ".join(f"{role[i]} {v:.0f}" for i, v in rss.items())
            print(
                f"{target} TrainJobs in flight (settled {time.monotonic() - start:.0f}s after "
                f"submitting): objects {shown}; resident MiB: {mem}",
                flush=True,
            )
        print("\nTCP connections to each API server, by replica:")
        for r in ctrls:
            conns = connections(r.proc.pid, ports)
            print(f"  {role[r.cluster, r.identity]} ({r.identity}): {dict(sorted(conns.items()))}")
        xs = [float(n) for n, _, _ in rows]
        cached = [float(sum(c.values())) for _, c, _ in rows]
        per_job = cached[-1] / xs[-1] if xs[-1] else 0.0
        print(
            f"\nObjects of the namespace the dispatcher caches, per TrainJob in flight: "
            f"{per_job:.2f}"
        )
        for r in ctrls:
            ys = [rss[r.cluster, r.identity] for _, _, rss in rows]
            slope, intercept = statistics.linear_regression(xs, ys)
            per_object = (
                f" (about {slope / per_job * 1024:.1f} KiB per cached object)"
                if per_job and r.name == DISPATCHER
                else ""
            )
            print(
                f"{role[r.cluster, r.identity]}: {intercept:.0f} MiB + {slope * 1000:.1f} MiB per "
                f"1,000 TrainJobs in flight{per_object}; peak resident "
                f"{peak_rss_mib(r.proc.pid):.0f} MiB with {args.jobs} in flight"
            )
    finally:
        setup.stop_controllers(bed, ctrls)  # the bed goes down next: no clean-up to wait for
    return 0


if __name__ == "__main__":
    sys.exit(main())
