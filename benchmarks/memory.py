"""Benchmark: our controllers' memory with many TrainJobs in flight, what they hold per cached
object, and the watch connections they keep per cluster.

TrainJobs that run for an hour are submitted in steps (`--jobs` in `--steps`), all through the
manager's MultiKueue queue. Each worker's quota admits `--worker-cpu` / 10m of them (100 each by
default); the rest stay pending on the workers with a Workload copy on every worker (AllAtOnce),
the heaviest state for the dispatcher's caches: per TrainJob a manager TrainJob and Workload, a
remote Workload per worker while it waits, the remote TrainJob once a worker admits it. After
each step, once the counts stop moving, it prints the objects on every cluster, each replica's
resident memory and its TCP connections to each API server; at the end the slope (MiB per
TrainJob in flight, a least-squares fit over the steps), that slope per cached object, the
peak resident memory (VmHWM) of every replica and the CPU it used over the steps; then the
same for the pipeline's controllers together, every Kueue, and both (the whole pipeline).
`--pipeline peer-shipped` measures the upstream pipeline as compare.py runs it (Kueue's
MultiKueue, Trainer and JobSet), on the same TrainJobs (Trainer's torch-distributed runtime,
both pipelines); `--replicas` sets how many of each controller run (both pipelines; at 2 the
peer's elect a leader as their releases do).

It brings up a fresh bed of its own (the bed's config: `$TJ_BED_CONFIG` or the defaults, e.g.
benchmarks/beds/four-workers.yaml for more workers) with Kueue's default `waitForPodsReady`
timeout (30 min; the test bed's 20 s would evict jobs queued behind a 1,000-job submission on
a 2-core machine, and the counts would never settle), and takes it down at the end.

    .venv/bin/python benchmarks/memory.py --jobs 1000 --steps 4
    .venv/bin/python benchmarks/memory.py --jobs 1000 --steps 2 --pipeline peer-shipped --replicas 1
    .venv/bin/python benchmarks/memory.py --jobs 1000 --steps 2 --replicas 1 --heap 15  # by line
    .venv/bin/python benchmarks/memory.py --jobs 1000 --steps 2 --replicas 1 --heap 25 \
        --heap-frames 4  # by line and its callers
    .venv/bin/python benchmarks/memory.py --jobs 1000 --steps 2 --replicas 1 --allocators
    .venv/bin/python benchmarks/memory.py --jobs 1000 --steps 2 --replicas 1 \
        --pipeline ours,peer-shipped --repeat 3  # both, and the goals: exit 1 when not met

Given both pipelines, it runs each `--repeat` times (the order rotating, each run on a fresh
bed), then sets our pipeline controllers against the peer's, run by run, with the goals:
the slope per 1,000 TrainJobs in flight at most 1.0x the peer's, the peak resident memory at
most 1.25x. A goal whose median is not met is said so, last, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import NamedTuple

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import heap
from benchmarks.figures import spread
from benchmarks.multikueue import (
    PIPELINES,
    TRAINER,
    peer_secrets,
    replicas_arg,
    run_patch,
    start_ours,
    trainjob_body,
)
from benchmarks.worker_trainjobs import cpu_seconds, peak_rss_mib, status_mib
from clusters import peer, setup
from clusters.bed import Bed
from clusters.config import REPO_ROOT, Port, WaitForPodsReady, load_config
from clusters.helpers.kube import is_active
from clusters.helpers.waiting import wait_for
from clusters.install import DISPATCHER, Replica, leading_dispatcher

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
    parser.add_argument(
        "--pipeline",
        type=pipelines_arg,
        default=["ours"],
        help="ours, or the upstream pipeline as compare.py runs it (peer-shipped: Kueue's "
        "MultiKueue, Trainer and JobSet on each worker), or both (ours,peer-shipped): then "
        "our controllers are set against the peer's and the goals checked",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each pipeline")
    parser.add_argument(
        "--heap",
        type=int,
        default=0,
        metavar="N",
        help="our replicas trace their Python heap (benchmarks/heap.py) and the N "
        "lines that allocated most of what each holds are printed after each step, with what "
        "each grew by over the run: where the memory goes, not how much (tracing costs its own)",
    )
    parser.add_argument(
        "--heap-frames",
        type=int,
        default=heap.FRAMES,
        metavar="K",
        help="with --heap: each site is the allocating line and its callers, K frames in all "
        "(who keeps what a shared helper allocates; more frames cost the replicas more)",
    )
    parser.add_argument(
        "--allocators",
        action="store_true",
        help="our replicas (untraced) say after each step what Python's small-object allocator "
        "and glibc's malloc hold in use and keep free, with what each grew by over the run: how "
        "much of the resident memory is live data (benchmarks/heap.py; with --heap, malloc's only)",
    )
    replicas_arg(parser)
    args = parser.parse_args()
    names: list[str] = args.pipeline
    results: dict[str, list[Figures]] = {name: [] for name in names}
    for i in range(args.repeat):
        # The order rotates, so no pipeline always runs on a machine just warmed by another.
        for name in names[i % len(names) :] + names[: i % len(names)]:
            if len(names) > 1 or args.repeat > 1:
                print(f"\n##### run {i + 1}/{args.repeat}: {name}", flush=True)
            results[name].append(run(name, args))
    return report_goals(results) if len(names) > 1 else 0


def pipelines_arg(given: str) -> list[str]:
    """`--pipeline`'s value: one pipeline, or ours and the peer's."""
    names = given.split(",")
    if names not in (["ours"], ["peer-shipped"], ["ours", "peer-shipped"]):
        raise argparse.ArgumentTypeError("ours, peer-shipped, or ours,peer-shipped")
    return names


def run(pipeline: str, args: argparse.Namespace) -> Figures:
    """One run of `pipeline` on a fresh bed, taken down after."""
    timeout = WaitForPodsReady(timeout_seconds=args.pods_ready_timeout)
    update: dict[str, object] = {
        "wait_for_pods_ready": timeout,
        "pipeline": PIPELINES[pipeline],
        "peer_replicas": args.replicas,
    }
    bed = Bed(load_config().model_copy(update=update))
    if bed.is_up():
        bed.down()
    bed.up()
    try:
        return measure(bed, pipeline, args)
    finally:
        bed.down()


# What a run gives, by group of processes ("pipeline controllers", "every Kueue", ...): its
# resident memory's intercept and slope (MiB, MiB per 1,000 TrainJobs in flight) and the sum
# of its processes' peaks (MiB).
Figures = dict[str, "Fit"]


class Fit(NamedTuple):
    intercept: float
    slope: float
    peak: float


CONTROLLERS = "pipeline controllers"
# The goals: ours / the peer's, our pipeline controllers against the peer's.
GOALS = (("slope per 1,000 TrainJobs in flight", "slope", 1.0), ("peak resident", "peak", 1.25))


def report_goals(results: dict[str, list[Figures]]) -> int:
    """Our pipeline controllers against the peer's, run by run: each figure, each goal's
    ratio (median (min-max); runs that met it); 1 when a goal's median is not met."""
    ours, peer = results["ours"], results["peer-shipped"]
    print("\npipeline controllers, ours against the peer's (median (min-max) of the runs):")
    for what, field, _ in GOALS:
        for name, runs in (("ours", ours), ("peer-shipped", peer)):
            print(f"  {what}, {name}: {spread([getattr(f[CONTROLLERS], field) for f in runs], 1)}")
    missed = []
    for what, field, bound in GOALS:
        ratios = [
            getattr(o[CONTROLLERS], field) / getattr(p[CONTROLLERS], field)
            for o, p in zip(ours, peer, strict=True)
        ]
        met = sum(1 for r in ratios if r <= bound)
        print(f"  {what}, ours/peer <= {bound}: {spread(ratios)}; met in {met}/{len(ratios)}")
        if statistics.median(ratios) > bound:
            missed.append(f"{what}: ours/peer {statistics.median(ratios):.2f}x > {bound}x")
    for line in missed:
        print(f"GOAL NOT MET: {line}")
    return 1 if missed else 0


def start(
    bed: Bed, pipeline: str, args: argparse.Namespace
) -> tuple[list[Replica], dict[str, int]]:
    """The pipeline's controllers started (ours) or found (the peer's, which the bed runs):
    our replicas, and every controller process of the pipeline and every Kueue, by what each
    is."""
    if pipeline == "ours":
        hooked = args.heap or args.allocators
        hook = heap.hooked_children(traced=bool(args.heap), frames=args.heap_frames)
        with hook if hooked else contextlib.nullcontext():
            ctrls = start_ours(bed, args.replicas)
        leader = leading_dispatcher(ctrls) if args.replicas > 1 else None
        procs = {}
        for r in ctrls:
            if r.name != DISPATCHER:
                what = f"worker controller on {r.cluster} ({r.identity})"
            elif leader is None:
                what = "dispatcher"
            else:
                what = "dispatcher (leader)" if r is leader else "dispatcher (standby)"
            procs[what] = r.proc.pid
    else:
        ctrls = []
        peer_secrets(bed)
        procs = {
            f"{comp.name} on {w.name}": bed.component(w.name, comp.name).pid() or 0
            for w in bed.config.workers
            for comp in peer.components(bed.config, w, bed.cluster_dir(w.name))
        }
    kueues = {
        f"Kueue on {c.name}": bed.component(c.name, "kueue").pid() or 0 for c in bed.config.clusters
    }
    return ctrls, {**procs, **kueues}


def measure(bed: Bed, pipeline: str, args: argparse.Namespace) -> Figures:
    ns = f"mem-{uuid.uuid4().hex[:4]}"
    clusters = [bed.config.managers[0].name, *(w.name for w in bed.config.workers)]
    ports = {bed.config.port(c, Port.APISERVER): c for c in clusters}
    runtime = peer.trainer_dir() / "manifests" / "base" / "runtimes" / "torch_distributed.yaml"
    setup.install(bed, ns, worker_cpu=args.worker_cpu, runtime=runtime)
    ctrls, procs = start(bed, pipeline, args)
    custom = client.CustomObjectsApi(bed.api(clusters[0]))
    rows: list[tuple[int, dict[str, int], dict[str, float]]] = []
    # our replicas (Python) only: the peer's controllers and every Kueue are Go
    traced = {what: r.proc.pid for r in ctrls for what, pid in procs.items() if pid == r.proc.pid}
    heaps: list[dict[str, heap.Heap]] = []
    cpu_at: list[dict[str, float]] = []  # CPU seconds of each process after each step
    try:
        every = [*(("multikueueclusters", w.name) for w in bed.config.workers)]
        for plural, name in [*every, ("admissionchecks", "multikueue")]:
            wait_for(partial(is_active, custom, name, plural), 120, what=f"{name} Active")
        time.sleep(10)  # caches synced, first resync done
        sizes = [round(args.jobs * (i + 1) / args.steps) for i in range(args.steps)]
        submitted = 0
        for target in [0, *sizes]:
            names = [f"mem-{i:05d}" for i in range(submitted, target)]
            start_at = time.monotonic()
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda n: submit(custom, ns, n), names))
            submitted = target
            counts = settle(bed, ns, args.settle_timeout) if target else objects(bed, ns)
            rss = {what: status_mib(pid, "VmRSS") for what, pid in procs.items()}
            cpu_at.append({what: cpu_seconds(pid) for what, pid in procs.items()})
            rows.append((target, counts, rss))
            shown = ", ".join(f"{k} {v}" for k, v in counts.items())
            mem = ", ".join(f"{what} {v:.0f}" for what, v in rss.items())
            print(
                f"{target} TrainJobs in flight (settled {time.monotonic() - start_at:.0f}s after "
                f"submitting): objects {shown}; resident MiB: {mem}",
                flush=True,
            )
            if args.heap or args.allocators:
                heaps.append({what: heap.heap_of(pid) for what, pid in traced.items()})
                show_heaps(heaps[-1], args.heap)
        print("\nTCP connections to each API server, by process:")
        for what, pid in procs.items():
            print(f"  {what}: {dict(sorted(connections(pid, ports).items()))}")
        xs = [float(n) for n, _, _ in rows]
        cached = [float(sum(c.values())) for _, c, _ in rows]
        per_job = cached[-1] / xs[-1] if xs[-1] else 0.0
        print(f"\nObjects of the namespace per TrainJob in flight (every cluster): {per_job:.2f}")
        controllers = [w for w in procs if not w.startswith("Kueue ")]
        groups = {
            **{what: [what] for what in procs},
            CONTROLLERS: controllers,
            "every Kueue": [w for w in procs if w.startswith("Kueue ")],
            "whole pipeline (controllers + every Kueue)": list(procs),
        }
        figures: Figures = {}
        for group, members in groups.items():
            ys = [sum(rss[m] for m in members) for _, _, rss in rows]
            slope, intercept = statistics.linear_regression(xs, ys)
            peak = sum(peak_rss_mib(procs[m]) for m in members)
            figures[group] = Fit(intercept, slope * 1000, peak)
            cpu = sum(cpu_at[-1][m] - cpu_at[0][m] for m in members)
            print(
                f"{group}: {intercept:.0f} MiB + {slope * 1000:.1f} MiB per 1,000 TrainJobs in "
                f"flight; peak resident {peak:.0f} MiB with {args.jobs} in flight; CPU "
                f"{cpu:.1f} s from the first step to the last ({cpu * 1000 / max(xs[-1], 1):.1f} "
                "ms per TrainJob)"
            )
        if len(heaps) > 1:
            show_growth(heaps[0], heaps[-1], args.heap, rows[-1][0] - rows[0][0])
    finally:
        if ctrls:
            setup.stop_controllers(bed, ctrls)  # the bed goes down next: no clean-up to wait for
    return figures


def show_heaps(heaps: dict[str, heap.Heap], top: int) -> None:
    """Each hooked process's allocators, and its traced heap: in all, and its `top` allocating
    lines."""
    for what, held in heaps.items():
        shown = ", ".join(f"{name} {size / 2**20:.1f}" for name, size in held.allocators.items())
        print(f"  allocators of {what} (MiB): {shown}")
        if not held.sites:
            continue
        total = sum(size for size, _ in held.sites.values())
        print(f"  heap of {what}: {total / 2**20:.1f} MiB traced")
        for where, (size, count) in sorted(held.sites.items(), key=lambda x: -x[1][0])[:top]:
            print(f"    {size / 2**20:7.2f} MiB {count:8d} blocks  {heap.short(where, REPO_ROOT)}")


def show_growth(
    first: dict[str, heap.Heap], last: dict[str, heap.Heap], top: int, jobs: int
) -> None:
    """What each hooked process's allocators and traced heap grew by from the first step to the
    last, in all and by line: the memory the TrainJobs in flight hold there."""
    print(f"\nGrowth over {jobs} TrainJobs:")
    for what, held in last.items():
        before = first.get(what, heap.NO_HEAP)
        grew = {n: v - before.allocators.get(n, 0) for n, v in held.allocators.items()}
        shown = ", ".join(f"{n} {v / 2**20:+.1f}" for n, v in grew.items())
        print(f"  allocators of {what} (MiB): {shown}")
        if not held.sites:
            continue
        rows = heap.growth(before.sites, held.sites)
        total = sum(size for _, size, _ in rows)
        each = total / max(jobs, 1)
        print(f"  heap of {what}: {total / 2**20:+.1f} MiB traced ({each:+,.0f} B per TrainJob)")
        for where, size, count in rows[:top]:
            site = heap.short(where, REPO_ROOT)
            print(f"    {size / 2**20:+7.2f} MiB {count:+8d} blocks  {site}")


if __name__ == "__main__":
    sys.exit(main())
