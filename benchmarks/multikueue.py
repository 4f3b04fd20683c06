"""Benchmark: TrainJobs through manager + 2 workers (MultiKueue dispatcher), one at a time and
in a burst.

Prints p50/p99 of (a) manager create -> first pod Running on a worker and (b) remote Complete
-> manager Complete, the burst's total time, the dispatcher's CPU seconds and peak memory, and
API requests per TrainJob on each cluster (kube-apiserver's own counters). Times come from
watches opened by this script (monotonic clock at event receipt). Needs a running bed.

    .venv/bin/python benchmarks/multikueue.py --sequential 100 --burst 500
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import datetime as dt
import shlex
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client, watch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.probe import MachineProbe
from benchmarks.profile import Profiler
from benchmarks.worker_trainjobs import cpu_seconds, pct, peak_rss_mib, request_counts
from clusters import audit, peer, setup
from clusters.bed import Bed
from clusters.config import WaitForPodsReady, load_config
from clusters.helpers.kube import is_active
from clusters.helpers.waiting import wait_for
from clusters.install import DISPATCHER, leading_dispatcher, scrape
from clusters.kube import service_account_token, write_token_kubeconfig

TRAINER = ("trainer.kubeflow.org", "v1alpha1")


# Requests of our identities that are not a TrainJob's.
NOT_PER_JOB = ("leases", "tokenreviews", "subjectaccessreviews")


class Clock:
    """First-seen monotonic times of events, fed by watch threads."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.remote_done: dict[str, float] = {}
        self.manager_done: dict[str, float] = {}
        # TrainJob -> worker where a pod of it ran -> [first seen Running, first seen ended
        # or deleted (None while it runs)]
        self.spans: dict[str, dict[str, list[float | None]]] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def mark(self, table: dict[str, float], key: str) -> None:
        with self.lock:
            table.setdefault(key, time.monotonic())

    def ran_on(self) -> dict[str, set[str]]:
        """TrainJob -> the workers where a pod of it ran."""
        with self.lock:
            return {tj: set(by_worker) for tj, by_worker in self.spans.items()}

    def on_two_workers(self) -> tuple[list[str], list[str]]:
        """The TrainJobs whose pods ran on more than one worker, and those of them whose pods
        ran on two at one moment."""
        twice = sorted(tj for tj, workers in self.ran_on().items() if len(workers) > 1)
        return twice, [tj for tj in twice if self.ran_at_once(tj)]

    def ran_at_once(self, tj: str) -> bool:
        """Pods of `tj` were running on two workers at one moment (as the watches saw it)."""
        with self.lock:
            spans = [
                (s[0] or 0.0, s[1] if s[1] is not None else float("inf"))
                for s in self.spans.get(tj, {}).values()
            ]
        return any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1 :])


def _complete(obj: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Complete" and c["status"] == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def watch_pods(api: client.ApiClient, ns: str, clock: Clock, worker: str) -> None:
    """Note where pods run; survives API-server outages (the watch is simply opened again)."""
    core = client.CoreV1Api(api)
    while not clock.stop.is_set():
        try:
            for ev in watch.Watch().stream(core.list_namespaced_pod, ns, timeout_seconds=30):
                pod = ev["object"]
                tj = (pod.metadata.labels or {}).get("jobset.sigs.k8s.io/jobset-name")
                if not tj:
                    continue
                now = time.monotonic()
                with clock.lock:
                    span = clock.spans.get(tj, {}).get(worker)
                    if pod.status.phase == "Running" and span is None:
                        clock.spans.setdefault(tj, {})[worker] = [now, None]
                    ended = ev["type"] == "DELETED" or pod.status.phase in ("Succeeded", "Failed")
                    if ended and span is not None and span[1] is None:
                        span[1] = now
                if pod.status.phase == "Running":
                    clock.mark(clock.running, tj)
        except Exception:  # the worker's API server is down: try again shortly
            clock.stop.wait(1.0)


def watch_trainjobs(api: client.ApiClient, ns: str, clock: Clock, table: dict[str, float]) -> None:
    custom = client.CustomObjectsApi(api)
    while not clock.stop.is_set():
        try:
            for ev in watch.Watch().stream(
                custom.list_namespaced_custom_object, *TRAINER, ns, "trainjobs", timeout_seconds=30
            ):
                if _complete(ev["object"]):
                    clock.mark(table, ev["object"]["metadata"]["name"])
        except Exception:  # the API server is down (an outage, or the bed going away)
            clock.stop.wait(1.0)


def run_patch(duration: str) -> dict[str, Any]:
    """A runtimePatch that makes the bed's fake pods of the `node` job run for `duration`."""
    run = {"annotations": {"bed.trainjob.dev/run-duration": duration}}
    node = {"name": "node", "template": {"spec": {"template": {"metadata": run}}}}
    return {
        "manager": "bench.trainjob.dev/run",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}},
    }


PATCH = run_patch("1s")


def our_requests(replica: setup.Controller) -> Counter[str]:
    """Requests a replica's clients sent, by HTTP verb (its own trainjob_api_requests_total)."""
    out: Counter[str] = Counter()
    for (name, labels), value in scrape(replica).items():
        if name == "trainjob_api_requests_total":
            out[dict(labels)["verb"]] += int(value)
    return out


def queue_waits(replica: setup.Controller) -> Counter[float]:
    """The dispatch work queue's wait histogram of a replica: cumulative counts by bucket
    bound (`le`, seconds; inf for all), from its /metrics."""
    out: Counter[float] = Counter()
    for (name, labels), value in scrape(replica).items():
        found = dict(labels)
        if name == "workqueue_queue_duration_seconds_bucket" and found.get("name") == "dispatch":
            out[float(found["le"])] = int(value)
    return out


def report_waits(before: Counter[float], after: Counter[float]) -> None:
    """How long keys waited in the leader's queue meanwhile: the share past 0.5 s and 1 s,
    and the bucket bound under which 99% of them waited."""
    delta = after - before
    total = delta.get(float("inf"), 0)
    if not total:
        return
    p99 = next(le for le in sorted(delta) if delta[le] >= 0.99 * total)
    over = {le: 1 - delta.get(le, 0) / total for le in (0.5, 1.0)}
    print(
        f"dispatch queue (leader): {total} keys taken; waited over 0.5 s: {over[0.5]:.1%}, "
        f"over 1 s: {over[1.0]:.1%}; 99% waited at most {p99:g} s (histogram bucket)"
    )


def trainjob_body(name: str, patch: dict[str, Any] = PATCH, cpu: str = "10m") -> dict[str, Any]:
    """The benchmarks' TrainJob: one node of Trainer's torch-distributed runtime asking `cpu`,
    through LocalQueue `q`, its pods run as `patch` says."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 1, "resourcesPerNode": {"requests": {"cpu": cpu}}},
            "runtimePatches": [patch],
        },
    }


def submit(custom: client.CustomObjectsApi, ns: str, name: str, clock: Clock) -> None:
    clock.mark(clock.created, name)
    custom.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", trainjob_body(name))


def report(title: str, names: list[str], clock: Clock, key: str) -> dict[str, float]:
    """Print (a) and (b) for `names`; return their p50 and p99 as figures named after `key`."""
    a = [clock.running[n] - clock.created[n] for n in names if n in clock.running]
    b = [
        clock.manager_done[n] - clock.remote_done[n]
        for n in names
        if n in clock.manager_done and n in clock.remote_done
    ]
    print(f"{title}: n={len(names)}")
    figures: dict[str, float] = {}
    for label, what, values in (
        ("a", "create -> first pod Running", a),
        ("b", "remote Complete -> manager Complete", b),
    ):
        if not values:
            continue
        p50, p99 = pct(values, 0.5), pct(values, 0.99)
        figures[f"{key} ({label}) p50 s"], figures[f"{key} ({label}) p99 s"] = p50, p99
        print(
            f"  ({label}) {what}: p50 {p50:.2f}s  p99 {p99:.2f}s  "
            f"mean {statistics.mean(values):.2f}s"
        )
    return figures


SENDERS = 32  # threads that send a steady rate's creations


def sustained_key(rate: float) -> str:
    return f"rate {rate:g}/s: sustained (1 yes, 0 no)"


def sustain(
    api: client.ApiClient, ns: str, clock: Clock, rate: float, seconds: float
) -> dict[str, float]:
    """TrainJobs created at a steady `rate` per second for `seconds`, then up to `seconds`
    more for the backlog to drain. Open loop: each creation is sent at its time by a pool of
    senders, whatever the earlier ones' latency (as independent users would), and the create
    call's own latency (admission webhooks included) is reported too. The backlog is the
    TrainJobs created whose first pod is not yet Running; the rate is sustained when the
    backlog at the window's end is at most two seconds' arrivals above the backlog at its
    middle (a pipeline slower than the arrivals falls behind by the difference every second:
    10% short at 2/s over the second half of 5 minutes is 15 s of arrivals) and every create
    was sent within a second of its time. Returns the figures, named after the rate."""
    key = f"rate {rate:g}/s"
    names: list[str] = []
    backlog: dict[str, int] = {}
    calls: list[float] = []  # create-call latencies
    failed: list[str] = []
    # A connection per sender: the client's default pool of 4 would serialise them (the pool
    # is made with the client, from its configuration).
    config = copy.copy(api.configuration)
    config.connection_pool_maxsize = SENDERS
    custom = client.CustomObjectsApi(client.ApiClient(configuration=config))

    def behind() -> int:
        return sum(1 for n in names if n not in clock.running)

    def send(name: str) -> None:
        began = time.monotonic()
        try:
            submit(custom, ns, name, clock)
        except client.ApiException as exc:
            failed.append(f"{name}: {exc.status} {exc.reason}")
            return
        calls.append(time.monotonic() - began)

    start = time.monotonic()
    i, late = 0, 0.0  # late: how far a send fell behind its time at worst
    with ThreadPoolExecutor(max_workers=SENDERS) as senders:
        while (due := start + i / rate) < start + seconds:
            time.sleep(max(0.0, due - time.monotonic()))
            late = max(late, time.monotonic() - due)
            name = f"r{rate:g}-{i:05d}".replace(".", "p")
            names.append(name)
            senders.submit(send, name)
            i += 1
            if i == int(rate * seconds / 2):
                backlog["middle"] = behind()
        backlog["end"] = behind()
    drain_deadline = time.monotonic() + seconds
    while behind() - len(failed) > 0 and time.monotonic() < drain_deadline:
        time.sleep(0.5)
    drained = time.monotonic() - start - seconds
    a = [clock.running[n] - clock.created[n] for n in names if n in clock.running]
    growth = backlog["end"] - backlog.get("middle", 0)
    stable = growth <= 2 * rate and late < 1.0 and not failed
    figures = {
        sustained_key(rate): float(stable),
        f"{key}: backlog growth over the second half": float(growth),
        f"{key}: create -> Running p50 s": pct(a, 0.5) if a else float("nan"),
        f"{key}: create -> Running p99 s": pct(a, 0.99) if a else float("nan"),
        f"{key}: create call p99 s": pct(calls, 0.99) if calls else float("nan"),
        f"{key}: never Running": float(len(names) - len(a)),
    }
    if failed:
        print(f"{key}: {len(failed)} creates refused, e.g. {failed[:3]}")
    print(
        f"{key} for {seconds:.0f}s: {len(names)} created (at worst {late:.2f}s behind the "
        f"pace); backlog at the middle {backlog.get('middle', 0)}, at the end "
        f"{backlog['end']} (growth {growth}); "
        f"{'sustained' if stable else 'NOT sustained'}; drained {drained:.0f}s after; "
        f"create -> Running p50 {figures[f'{key}: create -> Running p50 s']:.2f}s p99 "
        f"{figures[f'{key}: create -> Running p99 s']:.2f}s; create call p99 "
        f"{figures[f'{key}: create call p99 s']:.2f}s; never Running: {len(names) - len(a)}",
        flush=True,
    )
    return figures


# The figure of our identities' requests on a cluster without Leases (compare.py's target).
WITHOUT_LEASES = "  the same without Leases: "


def measure(
    bed: Bed, ns: str, args: argparse.Namespace, processes: dict[str, list[int]]
) -> dict[str, float]:
    """TrainJobs through the manager of `bed` (LocalQueue `q` of namespace `ns`, set up by the
    caller, whichever pipeline runs them): `args.sequential` one at a time, then a burst of
    `args.burst` (given up after `args.timeout` seconds).
    Prints the report and returns its figures by name; `processes` are groups of PIDs whose
    CPU seconds (per TrainJob) and peak resident memory (summed) are reported."""
    manager = bed.config.managers[0].name
    clusters = [manager, *(w.name for w in bed.config.workers)]
    clock = Clock()
    threads = [
        threading.Thread(
            target=watch_trainjobs,
            args=(bed.api(manager), ns, clock, clock.manager_done),
            daemon=True,
        )
    ]
    for worker in bed.config.workers:
        threads.append(
            threading.Thread(
                target=watch_pods, args=(bed.api(worker.name), ns, clock, worker.name), daemon=True
            )
        )
        threads.append(
            threading.Thread(
                target=watch_trainjobs,
                args=(bed.api(worker.name), ns, clock, clock.remote_done),
                daemon=True,
            )
        )
    for t in threads:
        t.start()
    time.sleep(1)
    custom = client.CustomObjectsApi(bed.api(manager))
    figures: dict[str, float] = {}
    sequential, burst, timeout = args.sequential, args.burst, args.timeout
    probe = MachineProbe()
    pids = [pid for group in processes.values() for pid in group]
    # The groups' CPU at rest first, so that a run's fixed costs (resyncs, leader election,
    # probes) can be taken off: a slower run would otherwise pay more of them per TrainJob.
    idle0 = {pid: cpu_seconds(pid) for pid in pids}
    time.sleep(args.idle_seconds)
    idle_rate = {pid: (cpu_seconds(pid) - idle0[pid]) / args.idle_seconds for pid in pids}
    try:
        probe.start()
        began = time.monotonic()
        cpu0 = {pid: cpu_seconds(pid) for pid in pids}
        req0 = {c: request_counts(bed.api(c)) for c in clusters}
        since = dt.datetime.now(dt.UTC)
        seq = [f"seq-{i:04d}" for i in range(sequential)]
        for name in seq:
            submit(custom, ns, name, clock)
            deadline = time.monotonic() + 120
            while name not in clock.manager_done and time.monotonic() < deadline:
                time.sleep(0.02)
        figures.update(report("one at a time", seq, clock, "one"))
        names = [f"burst-{i:04d}" for i in range(burst)]
        start = time.monotonic()
        for name in names:
            submit(custom, ns, name, clock)
        deadline = start + timeout
        # A burst given up on counts what it finished: never the TrainJobs still on the way.
        while (done := sum(1 for n in names if n in clock.manager_done)) < burst:
            if time.monotonic() > deadline:
                print("burst timed out", file=sys.stderr)
                break
            time.sleep(0.5)
        figures["burst total s"] = time.monotonic() - start
        figures["burst Complete"] = done
        figures["burst TrainJobs per s"] = done / figures["burst total s"]
        probe.stop()
        title = (
            f"burst (all Complete on the manager after {figures['burst total s']:.1f}s)"
            if done == burst
            else f"burst GIVEN UP after {figures['burst total s']:.1f}s: {done} of {burst} "
            "Complete on the manager"
        )
        figures.update(report(title, names, clock, "burst"))
        n = sequential + burst  # every TrainJob sent: a burst given up on divides by all of it
        twice, at_once = clock.on_two_workers()
        figures["run on two workers"] = len(twice)
        figures["run on two workers at the same time"] = len(at_once)
        print(
            f"TrainJobs whose pods ran on more than one worker: {len(twice)} {twice[:5]}; at "
            f"the same time: {len(at_once)} {at_once[:5]} (the rest ran again after being "
            "sent back: an eviction, e.g. a PodsReady timeout)"
        )
        print(probe.report())
        figures["machine probe: us per unit"] = probe.during()
        elapsed = time.monotonic() - began
        for group, members in processes.items():
            cpu = sum(cpu_seconds(pid) - cpu0[pid] for pid in members)
            at_rest = sum(idle_rate[pid] for pid in members) * elapsed
            peaks = [peak_rss_mib(pid) for pid in members]
            rss = sum(peaks)
            per_job = cpu / n * 1000
            figures[f"CPU ms per TrainJob: {group}"] = per_job
            figures[f"CPU ms per TrainJob above idle: {group}"] = (cpu - at_rest) / n * 1000
            figures[f"CPU per TrainJob in probe units: {group}"] = probe.in_units(per_job)
            figures[f"peak RSS MiB: {group}"] = rss
            print(
                f"{group} ({len(members)} processes): CPU {cpu:.1f}s in {elapsed:.0f}s "
                f"({per_job:.0f} ms per TrainJob, {probe.in_units(per_job):.0f} probe units; "
                f"{(cpu - at_rest) / n * 1000:.0f} ms above its idle "
                f"{sum(idle_rate[pid] for pid in members) * 1000:.0f} ms/s), "
                f"peak RSS {rss:.0f} MiB"
                + (f" ({', '.join(f'{p:.0f}' for p in peaks)})" if 1 < len(peaks) <= 8 else "")
            )
        for cluster in clusters:
            delta: Counter[tuple[str, str]] = request_counts(bed.api(cluster)) - req0[cluster]
            figures[f"API requests per TrainJob: {cluster}"] = sum(delta.values()) / n
            top = ", ".join(f"{v} {r} {k / n:.1f}" for (v, r), k in delta.most_common(6))
            print(
                f"API requests per TrainJob on {cluster}: {sum(delta.values()) / n:.1f} "
                f"(top: {top})"
            )
        for cluster in clusters:
            ours = Counter(
                (r.verb, r.resource) for r in audit.requests(bed.cluster_dir(cluster), since)
            )
            if not ours:
                continue
            total = sum(ours.values())
            # Leases: leader election; token and access reviews: the bed reading /metrics.
            per_job = total - sum(k for (_, r), k in ours.items() if r in NOT_PER_JOB)
            figures[f"pipeline identities' API requests per TrainJob: {cluster}"] = total / n
            figures[WITHOUT_LEASES + cluster] = per_job / n
            top = ", ".join(f"{v} {r} {k / n:.1f}" for (v, r), k in ours.most_common(8))
            print(
                f"API requests per TrainJob on {cluster} from the pipeline's identities "
                f"(its audit log): {total / n:.1f}; without Leases (leader election, a fixed "
                f"rate whatever the load): {per_job / n:.1f} (top: {top})"
            )
        for rate in [float(r) for r in args.rates.split(",") if r.strip()]:
            found = sustain(bed.api(manager), ns, clock, rate, args.rate_seconds)
            figures.update(found)
            if not found[sustained_key(rate)]:
                break  # a higher rate cannot be sustained either
        if args.rates:
            _, at_once = clock.on_two_workers()
            figures["run on two workers at the same time"] = len(at_once)
            print(f"with the steady rates too, TrainJobs run on two workers at once: {at_once}")
    finally:
        clock.stop.set()
        probe.stop()
    return figures


def start_ours(
    bed: Bed, replicas: int, dispatcher_flags: tuple[str, ...] = ()
) -> list[setup.Controller]:
    """The product with `replicas` of each controller and its installed timers: deploy/ (two
    of each), or the chart with `replicas` for another count; the dispatcher given
    `dispatcher_flags` too."""
    values = None if replicas == 2 else {"replicas": replicas}
    return setup.start_controllers(
        bed, resync=None, chart_values=values, manager_flags=dispatcher_flags
    )


def replicas_arg(parser: argparse.ArgumentParser) -> None:
    """`--replicas`: how many of each controller both pipelines run."""
    parser.add_argument(
        "--replicas",
        type=int,
        choices=(1, 2),
        default=2,
        help="replicas of each controller of the pipeline: ours (the dispatcher and each "
        "worker controller), the peer's (Trainer and JobSet on each worker, leader-elected at "
        "2; its MultiKueue is in Kueue, one process either way)",
    )


def workload_args(doc: str | None, sequential: int, burst: int) -> argparse.ArgumentParser:
    """A benchmark's parser with the arguments `measure` reads (its workload's size)."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sequential", type=int, default=sequential, help="one at a time")
    parser.add_argument("--burst", type=int, default=burst, help="then all at once")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds the burst may take")
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=10,
        help="how long the processes' CPU at rest is sampled before the workload",
    )
    parser.add_argument(
        "--rates",
        default="",
        metavar="R,R,...",
        help="after the burst, TrainJobs at each steady rate per second in turn (e.g. 2,5,10); "
        "a rate not sustained ends the series",
    )
    parser.add_argument(
        "--rate-seconds", type=float, default=300, help="how long each rate is kept"
    )
    return parser


def main() -> int:
    parser = workload_args(__doc__, sequential=100, burst=500)
    parser.add_argument("--keep", action="store_true", help="leave the namespace behind")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="sample every controller replica with py-spy into DIR/<identity>.txt "
        "(summarize with benchmarks/profile.py)",
    )
    parser.add_argument(
        "--dispatcher-args",
        default="",
        metavar="FLAGS",
        help="more flags for the dispatcher, e.g. '--workers 4' (a trade-off to measure)",
    )
    args = parser.parse_args()
    started = with_product("bench", tuple(shlex.split(args.dispatcher_args)))
    if started is None:
        return 1
    bed, ns, ctrls = started
    # The replica that leads does the work (CPU and memory below are its own).
    dispatcher = leading_dispatcher(ctrls)
    standby = [c for c in ctrls if c.name == DISPATCHER and c is not dispatcher]
    # The bed points the admission webhooks at the first replica (no Service to spread them):
    # it spends a few ms more per TrainJob than the other, which matters when comparing runs.
    served_by = next(c for c in ctrls if c.name == DISPATCHER).identity
    print(f"leader: {dispatcher.identity}; admission webhooks served by {served_by}", flush=True)
    clusters = [bed.config.managers[0].name, *(w.name for w in bed.config.workers)]
    try:
        ours0 = {r.identity: our_requests(r) for r in ctrls}
        groups = {
            "dispatcher (leader)": [dispatcher.proc.pid],
            **{f"standby {r.identity}": [r.proc.pid] for r in standby},
            "worker controllers": [c.proc.pid for c in ctrls if c.name != DISPATCHER],
        }
        profiler = (
            Profiler(args.profile, {f"{r.cluster}-{r.identity}": r.proc.pid for r in ctrls})
            if args.profile
            else None
        )
        waits0 = queue_waits(dispatcher)
        try:
            measure(bed, ns, args, groups)
        finally:
            if profiler is not None:
                profiler.stop()
        report_waits(waits0, queue_waits(dispatcher))
        n = args.sequential + args.burst
        for r in ctrls:
            mine = our_requests(r) - ours0[r.identity]
            by_verb = ", ".join(f"{v} {k / n:.1f}" for v, k in sorted(mine.items()))
            print(
                f"API requests per TrainJob sent by {r.identity} ({r.cluster}'s token, to any "
                f"cluster): {sum(mine.values()) / n:.1f} ({by_verb})"
            )
    finally:
        try:
            if not args.keep:
                clean_up(bed, ns, clusters)
        finally:
            setup.stop_controllers(bed, ctrls)
    return 0


def running_bed() -> Bed | None:
    """The bed, when it is up; None (said why) when it is not."""
    bed = Bed(load_config())
    if not bed.is_up():
        print("the bed is not up; run `python -m clusters up` first", file=sys.stderr)
        return None
    return bed


def soak_args(doc: str | None, jobs: int, run: str, timeout: float) -> argparse.ArgumentParser:
    """The soaks' flags (chaos.py, restart_soak.py): how many jobs, how long their pods run,
    each worker's quota, the seed of their random choices, and how long they may all take."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=jobs)
    parser.add_argument("--run", default=run, help="how long each TrainJob's pods run")
    parser.add_argument("--worker-cpu", default="8", help="quota per worker (1 CPU a job)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=timeout)
    return parser


def with_product(
    prefix: str, dispatcher_flags: tuple[str, ...] = ()
) -> tuple[Bed, str, list[setup.Controller]] | None:
    """The running bed, a fresh namespace `<prefix>-xxxx` with a queue of 1,000 cpu on every
    worker, and the product installed as in the tests (the dispatcher given `dispatcher_flags`
    too); None (said why) when the bed is down."""
    bed = running_bed()
    if bed is None:
        return None
    ns = f"{prefix}-{uuid.uuid4().hex[:4]}"
    setup.install(bed, ns, worker_cpu="1000")
    # As installed: the controllers' own timers (the tests' 2 s safety net would be a good part
    # of the dispatcher's CPU).
    return bed, ns, setup.start_controllers(bed, resync=None, manager_flags=dispatcher_flags)


@contextlib.contextmanager
def product(
    prefix: str, dispatcher_flags: tuple[str, ...] = ()
) -> Iterator[tuple[Bed, str, list[setup.Controller]]]:
    """`with_product` for the length of a `with`: the namespace deleted everywhere and the
    controllers stopped at its end; SystemExit(1) when the bed is down."""
    started = with_product(prefix, dispatcher_flags)
    if started is None:
        raise SystemExit(1)
    bed, ns, ctrls = started
    try:
        yield started
    finally:
        try:
            clean_up(bed, ns, [c.name for c in bed.config.clusters])
        finally:
            setup.stop_controllers(bed, ctrls)


def clean_up(bed: Bed, ns: str, clusters: list[str]) -> None:
    """Delete the namespace everywhere while the dispatcher still runs (its finalizer removes
    the remote objects first), so the next run does not start behind a backlog."""
    start = time.monotonic()
    for cluster in clusters:
        client.CoreV1Api(bed.api(cluster)).delete_namespace(ns)
    core = client.CoreV1Api(bed.api(clusters[0]))
    while time.monotonic() - start < 600:
        try:
            core.read_namespace(ns)
        except client.ApiException as exc:
            if exc.status == 404:
                print(f"namespace {ns} deleted everywhere after {time.monotonic() - start:.1f}s")
                return
            raise
        time.sleep(1)
    print(f"namespace {ns} still there after 600s", file=sys.stderr)


def peer_secrets(bed: Bed) -> None:
    """The MultiKueueClusters' Secrets for Kueue's own MultiKueue: a kubeconfig of each
    worker's multikueue-sa (clusters/peer.py), its token inline, as Kueue's guide makes it."""
    manager = bed.config.managers[0].name
    core = client.CoreV1Api(bed.api(manager))
    namespace, account = peer.MULTIKUEUE_IDENTITY
    for worker in bed.config.workers:
        token = service_account_token(bed.api(worker.name), namespace, account)
        path = bed.cluster_dir(worker.name) / "multikueue.kubeconfig"
        write_token_kubeconfig(bed.kubeconfig(worker.name), token, path)
        body = {
            "metadata": {"name": f"{worker.name}-secret", "namespace": bed.config.kueue_namespace},
            "data": {"kubeconfig": base64.b64encode(path.read_bytes()).decode()},
        }
        core.create_namespaced_secret(bed.config.kueue_namespace, body)


# The pipelines (BedConfig.pipeline) by the names the report gives them.
PIPELINES = {"ours": "ours", "peer-shipped": "peer", "peer-lifted": "peer-lifted"}


def wait_active(bed: Bed) -> None:
    """Until every worker's MultiKueueCluster and the AdmissionCheck are Active (after
    setup.install made them)."""
    custom = client.CustomObjectsApi(bed.api(bed.config.managers[0].name))
    for plural, name in [
        *(("multikueueclusters", w.name) for w in bed.config.workers),
        ("admissionchecks", "multikueue"),
    ]:
        wait_for(partial(is_active, custom, name, plural), 120, what=f"{name} Active")


@contextlib.contextmanager
def fresh_bed(
    pipeline: str,
    *,
    replicas: int,
    pods_ready_timeout: int,
    workers: int | None = None,
    kueue_gates: dict[str, bool] | None = None,
    prepare: Callable[[Bed], None] = lambda bed: None,
    start: bool = True,
) -> Iterator[tuple[Bed, list[setup.Controller]]]:
    """A fresh bed (the bed's configuration, with `workers` workers like its first one when
    given, Kueue's waitForPodsReady timeout, and `kueue_gates` on every Kueue when given)
    running `pipeline` (a key of PIPELINES) with `replicas` of each controller, started after
    `prepare(bed)`; with ours, its controllers (the peer's are bed components; with `start`
    False, ours are the caller's to start and stop). Taken down at the block's end."""
    config = load_config()
    update: dict[str, object] = {
        "pipeline": PIPELINES[pipeline],
        "wait_for_pods_ready": WaitForPodsReady(timeout_seconds=pods_ready_timeout),
        "peer_replicas": replicas,
    }
    if kueue_gates is not None:
        update["kueue_feature_gates"] = dict(kueue_gates)
    if workers is not None:
        first = config.workers[0]
        update["clusters"] = [
            *config.managers,
            *(first.model_copy(update={"name": f"worker{i + 1}"}) for i in range(workers)),
        ]
    bed = Bed(config.model_copy(update=update))
    if bed.is_up():
        bed.down()
    print(f"\n=== {pipeline}: a fresh bed ===", flush=True)
    bed.up()
    ctrls: list[setup.Controller] = []
    try:
        prepare(bed)
        if pipeline == "ours":
            ctrls = start_ours(bed, replicas) if start else []
        else:
            peer_secrets(bed)
        yield bed, ctrls
    finally:
        if ctrls:
            setup.stop_controllers(bed, ctrls)
        bed.down()


if __name__ == "__main__":
    sys.exit(main())
