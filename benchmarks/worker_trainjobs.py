"""Benchmark: N TrainJobs of 2 nodes on one worker of the bed, run by the worker controller.

Prints: time until all are Complete, the controller's CPU seconds and peak resident memory,
and API requests per TrainJob (from kube-apiserver's own request counters, by verb/resource).
With --queue-fits N the TrainJobs go through a Kueue ClusterQueue that fits N at a time, and
the time from admission to the first Running pod is reported (p50/p99; the API's timestamps
have one-second resolution). Needs a running bed (`python -m clusters up`); starts its own
worker controller.

    .venv/bin/python benchmarks/worker_trainjobs.py --count 200
    .venv/bin/python benchmarks/worker_trainjobs.py --count 200 --queue-fits 20
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clusters.bed import Bed
from clusters.config import Port, load_config
from clusters.processes import http_ok

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
METRIC = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")


def request_counts(api: client.ApiClient) -> Counter[tuple[str, str]]:
    text = api.call_api("/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False)[
        0
    ].data.decode()
    counts: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        m = METRIC.match(line)
        if not m:
            continue
        labels = dict(kv.split("=", 1) for kv in re.findall(r'(\w+="[^"]*")', m["labels"]))
        verb = labels.get("verb", "").strip('"')
        resource = labels.get("resource", "").strip('"')
        sub = labels.get("subresource", "").strip('"')
        if verb in ("WATCH", "CONNECT"):
            continue
        counts[(verb, resource + (f"/{sub}" if sub else ""))] += int(float(m["value"]))
    return counts


def pct(values: list[float], p: float) -> float:
    """The p-quantile (0..1) of `values`, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_mib(pid: int, field: str) -> float:
    """A memory figure of /proc/PID/status (VmRSS, VmHWM, ...) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mib(pid: int) -> float:
    return status_mib(pid, "VmHWM")


def make_queue(custom: client.CustomObjectsApi, ns: str, cpu_millis: int) -> None:
    kueue = ("kueue.x-k8s.io", "v1beta2")
    custom.create_cluster_custom_object(
        *kueue,
        "resourceflavors",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": ns},
        },
    )
    custom.create_cluster_custom_object(
        *kueue,
        "clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": ns},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": ns,
                                "resources": [{"name": "cpu", "nominalQuota": f"{cpu_millis}m"}],
                            }
                        ],
                    }
                ],
            },
        },
    )
    custom.create_namespaced_custom_object(
        *kueue,
        ns,
        "localqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": ns},
            "spec": {"clusterQueue": ns},
        },
    )


def _ts(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def report_admission_latency(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    admitted = {}
    for wl in custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, "workloads")[
        "items"
    ]:
        owner = wl["metadata"]["ownerReferences"][0]["name"]
        for cond in wl.get("status", {}).get("conditions", []):
            if cond["type"] == "Admitted":
                admitted[owner] = _ts(cond["lastTransitionTime"])
    first_start: dict[str, dt.datetime] = {}
    for pod in core.list_namespaced_pod(ns).items:
        tj = (pod.metadata.labels or {}).get("jobset.sigs.k8s.io/jobset-name")
        if tj and pod.status.start_time:
            first_start[tj] = min(first_start.get(tj, pod.status.start_time), pod.status.start_time)
    delays = [(first_start[t] - admitted[t]).total_seconds() for t in admitted if t in first_start]
    if not delays:
        print("no admission data")
        return
    print(
        f"admission -> first pod Running: p50 {pct(delays, 0.5):.0f}s, "
        f"p99 {pct(delays, 0.99):.0f}s "
        f"(n={len(delays)}, 1 s resolution)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--run", default="2s", help="how long each pod runs")
    parser.add_argument("--worker", default=None, help="worker cluster (default: the first)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument(
        "--queue-fits",
        type=int,
        default=0,
        help="submit through a Kueue queue that fits this many at a time",
    )
    args = parser.parse_args()

    bed = Bed(load_config())
    if not bed.is_up():
        print("the bed is not up; run `python -m clusters up` first", file=sys.stderr)
        return 1
    worker = args.worker or bed.config.workers[0].name
    api = bed.api(worker)
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    custom.create_namespaced_custom_object(
        *TRAINER,
        ns,
        "trainingruntimes",
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainingRuntime",
            "metadata": {"name": "torch", "namespace": ns},
            "spec": {
                "mlPolicy": {"numNodes": args.nodes, "torch": {}},
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": "node",
                                "template": {
                                    "metadata": {
                                        "labels": {
                                            "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                        }
                                    },
                                    "spec": {
                                        "template": {
                                            "metadata": {
                                                "annotations": {
                                                    "bed.trainjob.dev/run-duration": args.run
                                                }
                                            },
                                            "spec": {
                                                "containers": [
                                                    {
                                                        "name": "node",
                                                        "image": "pytorch",
                                                        "resources": {"requests": {"cpu": "10m"}},
                                                    }
                                                ]
                                            },
                                        }
                                    },
                                },
                            }
                        ]
                    }
                },
            },
        },
    )
    labels = {}
    if args.queue_fits:
        labels = {"kueue.x-k8s.io/queue-name": "q"}
        make_queue(custom, ns, cpu_millis=10 * args.nodes * args.queue_fits)
    port = bed.config.port(worker, Port.CONTROLLER_BASE) + 5
    log = (bed.cluster_dir(worker) / "bench-worker-controller.log").open("w")
    ctrl = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worker_controller",
            "--kubeconfig",
            str(bed.kubeconfig(worker)),
            "--cluster-name",
            worker,
            "--health-port",
            str(port),
            "--bind-address",
            "127.0.0.1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        while not http_ok(f"http://127.0.0.1:{port}/healthz"):
            if ctrl.poll() is not None:
                print(f"controller exited; see {log.name}", file=sys.stderr)
                return 1
            time.sleep(0.2)
        cpu0, req0 = cpu_seconds(ctrl.pid), request_counts(api)
        start = time.monotonic()
        for i in range(args.count):
            custom.create_namespaced_custom_object(
                *TRAINER,
                ns,
                "trainjobs",
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "metadata": {"name": f"tj-{i:04d}", "labels": labels},
                    "spec": {"runtimeRef": {"name": "torch", "kind": "TrainingRuntime"}},
                },
            )
        created = time.monotonic() - start
        print(f"created {args.count} TrainJobs in {created:.1f}s", flush=True)
        done = 0
        while done < args.count:
            items = custom.list_namespaced_custom_object(*TRAINER, ns, "trainjobs")["items"]
            done = sum(
                1
                for tj in items
                if any(
                    c["type"] == "Complete" and c["status"] == "True"
                    for c in tj.get("status", {}).get("conditions", [])
                )
            )
            elapsed = time.monotonic() - start
            print(f"  {elapsed:6.1f}s: {done}/{args.count} Complete", flush=True)
            if elapsed > args.timeout:
                print("timed out", file=sys.stderr)
                return 1
            time.sleep(2)
        total = time.monotonic() - start
        cpu = cpu_seconds(ctrl.pid) - cpu0
        delta = request_counts(api) - req0
        print(f"\n{args.count} TrainJobs x {args.nodes} nodes, pods run {args.run}, on {worker}")
        print(f"all Complete after      {total:.1f}s (creation took {created:.1f}s)")
        print(f"controller CPU          {cpu:.1f}s ({cpu / args.count * 1000:.0f} ms per TrainJob)")
        print(f"controller peak RSS     {peak_rss_mib(ctrl.pid):.0f} MiB")
        if args.queue_fits:
            report_admission_latency(custom, core, ns)
        print("API requests per TrainJob on the worker (all clients, by verb/resource):")
        for (verb, res), n in sorted(delta.items(), key=lambda kv: -kv[1]):
            if n / args.count >= 0.05:
                print(f"  {verb:7s} {res:32s} {n / args.count:6.2f}")
        print(f"  total                                    {sum(delta.values()) / args.count:6.2f}")
    finally:
        ctrl.terminate()
        ctrl.wait(timeout=30)
        core.delete_namespace(ns)
        if args.queue_fits:
            for plural in ("clusterqueues", "resourceflavors"):
                custom.delete_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
