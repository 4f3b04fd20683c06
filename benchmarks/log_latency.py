"""Benchmark: how long a log line takes from a worker pod to the user through the manager.

On the real-node bed (brought up and installed if it is not: `python -m clusters up
--real-nodes --install` makes the same), a TrainJob on the manager runs one pod that prints its
own clock `--lines` times, every `--every` seconds. A tenant with the built-in `edit` role on
the manager follows the log through the dispatcher's view.trainjob.dev API, and, for a
baseline, the worker's admin follows the same pod's log from the worker's API server. Each line
received is stamped on arrival; the figure is arrival minus the time the pod printed (one host
clock: the pods run on this machine). Also: the CPU the dispatcher replicas spent while the
stream ran (their processes on this host, from /proc), per second of streaming.

    .venv/bin/python benchmarks/log_latency.py --lines 300 --every 0.1 [--streams 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.config import real_bed_config
from clusters.helpers.examples import RUNTIME_FILE
from clusters.helpers.kube import TrainJobs
from clusters.helpers.tenant import Tenant, story_path
from clusters.helpers.waiting import wait_for
from clusters.install import install_product

IDLE_SECONDS = 20
PRINTER = (
    "import sys, time\n"
    "n, every = int(sys.argv[1]), float(sys.argv[2])\n"
    f"time.sleep({IDLE_SECONDS} + 5)\n"  # the idle baseline, then the readers attach
    "for i in range(n):\n"
    "    print(f'{time.time():.6f} {i}', flush=True)\n"
    "    time.sleep(every)\n"
)


def _trainjob(name: str, lines: int, every: float) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "runtimeRef": {"name": "torch-ddp-cpu"},
            "trainer": {
                "numNodes": 1,
                "resourcesPerNode": {"requests": {"cpu": "500m"}},
                "command": ["python3", "-c", PRINTER, str(lines), str(every)],
            },
        },
    }


def _follow(
    api: client.ApiClient, path: str, query: list[tuple[str, str]], out: list[float]
) -> None:
    """Follow a log at `path`; for each line, arrival minus the time the pod printed."""
    answer = api.call_api(
        path,
        "GET",
        query_params=query,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
        _request_timeout=None,
    )
    pending = b""
    for chunk in answer.stream(1024):
        now = time.time()
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            stamp = line.split(b" ", 1)[0]
            try:
                out.append(now - float(stamp))
            except ValueError:
                continue


def _dispatchers() -> list[str]:
    """The PIDs of this host's dispatcher processes (the replicas run as its pods)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes() if pid.isdigit() else b""
        except OSError:
            continue
        if b"trainjob-dispatcher" in cmd and b"/bin/" in cmd:
            found.append(pid)
    return found


def _dispatcher_cpu() -> float:
    """CPU seconds of the dispatcher replicas, both together."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for pid in _dispatchers():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _dispatcher_rss() -> float:
    """Resident MiB of the dispatcher replicas, both together."""
    total = 0.0
    for pid in _dispatchers():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        line = next((x for x in status.splitlines() if x.startswith("VmRSS:")), "VmRSS: 0 kB")
        total += int(line.split()[1]) / 1024
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--every", type=float, default=0.1)
    parser.add_argument("--streams", type=int, default=1, help="followers through the manager")
    args = parser.parse_args()

    bed = Bed(real_bed_config())
    if not bed.is_up():
        bed.up()
    manager = bed.config.managers[0].name
    try:
        client.AppsV1Api(bed.api(manager)).read_namespaced_deployment(
            "trainjob-dispatcher", "trainjob-system"
        )
    except client.ApiException:
        install_product(bed)
    ns = f"lat-{uuid.uuid4().hex[:6]}"
    setup.install(bed, ns, worker_cpu="4", runtime=RUNTIME_FILE)
    name = "printer"
    with tempfile.TemporaryDirectory() as tmp:
        alice = Tenant(bed, ns, "alice", "edit", Path(tmp))
        TrainJobs(alice.api, ns).create(_trainjob(name, args.lines, args.every))

        def running_pod() -> dict[str, Any] | None:
            code, story = alice.get(story_path(ns, name))
            pods = (
                [p for p in story.get("pods") or [] if p["phase"] == "Running"]
                if code == 200
                else []
            )
            return {"worker": story["worker"], "pod": pods[0]["name"]} if pods else None

        found = wait_for(running_pod, 300, what="the printer pod running")
        idle_before = _dispatcher_cpu()
        time.sleep(IDLE_SECONDS)  # the baseline: the same replicas with no stream
        idle = (_dispatcher_cpu() - idle_before) / IDLE_SECONDS
        rss_idle = _dispatcher_rss()
        through_manager: list[float] = []
        direct: list[float] = []
        cpu_before, started = _dispatcher_cpu(), time.monotonic()
        readers = [
            *(
                threading.Thread(
                    target=_follow,
                    args=(
                        alice.api,
                        story_path(ns, name, "log"),
                        [("follow", "true")],
                        through_manager,
                    ),
                )
                for _ in range(args.streams)
            ),
            threading.Thread(
                target=_follow,
                args=(
                    bed.api(found["worker"]),
                    f"/api/v1/namespaces/{ns}/pods/{found['pod']}/log",
                    [("follow", "true")],
                    direct,
                ),
            ),
        ]
        for reader in readers:
            reader.start()
        time.sleep(5 + args.lines * args.every / 2)  # mid-stream
        rss_streaming = _dispatcher_rss()
        for reader in readers:
            reader.join(timeout=args.lines * args.every + 120)
        spent = time.monotonic() - started
        cpu = _dispatcher_cpu() - cpu_before
    print(
        f"lines printed: {args.lines}, one every {args.every}s; followed by {args.streams} "
        "reader(s) through the manager and one from the worker"
    )
    for label, values in (("through the manager", through_manager), ("from the worker", direct)):
        ordered = sorted(values)
        if not ordered:
            print(f"{label}: no lines")
            continue
        p50 = ordered[len(ordered) // 2]
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        print(
            f"{label}: {len(ordered)} lines; latency p50 {p50 * 1000:.0f} ms, "
            f"p99 {p99 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms"
        )
    print(
        f"dispatcher replicas' CPU while streaming: {cpu:.2f} s over {spent:.0f} s "
        f"({cpu / spent * 1000:.1f} ms/s, both replicas); idle beforehand "
        f"{idle * 1000:.1f} ms/s; the streams' share {(cpu / spent - idle) * 1000:.1f} ms/s"
    )
    print(
        f"dispatcher replicas' resident memory: {rss_idle:.1f} MiB idle, "
        f"{rss_streaming:.1f} MiB mid-stream ({rss_streaming - rss_idle:+.1f} MiB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
