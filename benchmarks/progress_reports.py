"""Benchmark: what training progress reports cost the API servers, per TrainJob.

`--jobs` TrainJobs run on the workers (kwok pods, long runs) and report their progress as a
trainer pod does (Trainer's payload, with a token the API server binds to one of their pods),
to their worker's controller replicas in turn (as the Service spreads them), every `--every`
seconds for `--seconds`; as many more TrainJobs run beside them and report nothing. From the
API servers' audit logs (the servers' own record), per TrainJob and per 10 s, the reporting
group's requests minus the silent group's: on the worker, the status writes and TokenReviews
of the worker controller; on the manager, the status writes of the dispatcher. Needs a
running bed (`python -m clusters up`).

    .venv/bin/python benchmarks/progress_reports.py [--jobs 10] [--every 10] [--seconds 120]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import ssl
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.multikueue import TRAINER, product, run_patch, trainjob_body
from clusters import audit, setup
from clusters.bed import Bed
from clusters.install import WORKER_CONTROLLER
from trainjob import progress

WORKER_SA = "system:serviceaccount:trainjob-system:trainjob-worker-controller"
DISPATCHER_SA = "system:serviceaccount:trainjob-system:trainjob-dispatcher"


class Job:
    """One reporting TrainJob: where it runs, how its pods reach the server, their token."""

    def __init__(self, bed: Bed, ctrls: list[setup.Controller], ns: str, name: str, worker: str):
        api = client.CoreV1Api(bed.api(worker))
        pods = api.list_namespaced_pod(ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
        pod = pods.items[0]
        made = api.create_namespaced_service_account_token(
            "default",
            ns,
            {
                "spec": {
                    "audiences": [progress.audience(ns, name)],
                    "expirationSeconds": 3600,
                    "boundObjectRef": {
                        "kind": "Pod",
                        "apiVersion": "v1",
                        "name": pod.metadata.name,
                        "uid": pod.metadata.uid,
                    },
                }
            },
        )
        ca = api.read_namespaced_config_map(progress.ca_config_map_name(name), ns).data["ca.crt"]
        self.name, self.worker, self.token = name, worker, made.status.token
        self.trust = ssl.create_default_context(cadata=ca)
        self.ports = [
            c.webhook for c in ctrls if c.name == WORKER_CONTROLLER and c.cluster == worker
        ]
        self.path = progress.status_path(ns, name)
        self.sent = 0

    def report(self, percent: int) -> int:
        body = {
            "trainerStatus": {
                "progressPercentage": percent,
                "estimatedRemainingSeconds": 600,
                "metrics": [{"name": "loss", "value": f"{1 / (1 + percent):.4f}"}],
                "lastUpdatedTime": dt.datetime.now(dt.UTC).isoformat(),
            }
        }
        port = self.ports[self.sent % len(self.ports)]
        self.sent += 1
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}{self.path}",
            json.dumps(body).encode(),
            {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, context=self.trust, timeout=10) as answer:
            return int(answer.status)


def _running(
    custom: client.CustomObjectsApi, bed: Bed, ns: str, names: list[str]
) -> dict[str, str]:
    """Wait until every TrainJob runs on a worker with a pod there; name -> worker."""
    deadline = time.monotonic() + 300
    while True:
        where: dict[str, str] = {}
        for name in names:
            tj = custom.get_namespaced_custom_object(*TRAINER, ns, "trainjobs", name)
            worker = (tj.get("status") or {}).get("clusterName")
            if worker:
                pods = client.CoreV1Api(bed.api(worker)).list_namespaced_pod(
                    ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"
                )
                if any(p.status.phase == "Running" for p in pods.items):
                    where[name] = worker
        if len(where) == len(names):
            return where
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(where)} of {len(names)} TrainJobs running after 300 s")
        time.sleep(1)


def _count(
    bed: Bed, clusters: list[str], since: dt.datetime, until: dt.datetime, names: set[str]
) -> dict[str, Any]:
    """Status writes of `names` per identity, and the worker controllers' TokenReviews."""
    out = {"worker_status": 0, "manager_status": 0, "token_reviews": 0}
    manager = bed.config.managers[0].name
    for cluster in clusters:
        for r in audit.requests(bed.cluster_dir(cluster), since):
            if r.received > until:
                continue
            if r.resource == "trainjobs/status" and r.writes and r.name in names:
                if cluster == manager and r.user == DISPATCHER_SA:
                    out["manager_status"] += 1
                elif cluster != manager and r.user == WORKER_SA:
                    out["worker_status"] += 1
            elif r.resource == "tokenreviews" and r.user == WORKER_SA and names:
                out["token_reviews"] += 1
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10, help="reporting TrainJobs (as many silent)")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between reports")
    parser.add_argument("--seconds", type=float, default=120.0, help="how long they report")
    args = parser.parse_args()
    with product("prog") as (bed, ns, ctrls):
        clusters = [c.name for c in bed.config.clusters]
        custom = client.CustomObjectsApi(bed.api(bed.config.managers[0].name))
        reporting = [f"rep-{i}" for i in range(args.jobs)]
        silent = [f"quiet-{i}" for i in range(args.jobs)]
        for name in reporting + silent:
            body = trainjob_body(name, run_patch("3600s"))
            custom.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", body)
        where = _running(custom, bed, ns, reporting + silent)
        jobs = [Job(bed, ctrls, ns, name, where[name]) for name in reporting]
        time.sleep(15)  # the start's own status writes settle
        since = dt.datetime.now(dt.UTC)
        begin, rounds, refused = time.monotonic(), 0, 0
        while time.monotonic() - begin < args.seconds:
            for job in jobs:
                refused += job.report(min(99, rounds)) != 200
            rounds += 1
            time.sleep(max(0.0, begin + rounds * args.every - time.monotonic()))
        time.sleep(10)  # a held report goes at its turn, the manager's copy after it
        until = dt.datetime.now(dt.UTC)
        window = (until - since).total_seconds()
        rep = _count(bed, clusters, since, until, set(reporting))
        quiet = _count(bed, clusters, since, until, set(silent))
        per = 10.0 / window / args.jobs
        print(
            f"{args.jobs} TrainJobs reported every {args.every:g} s for {args.seconds:g} s "
            f"({rounds} reports each, {refused} refused); window {window:.0f} s, "
            f"{args.jobs} silent TrainJobs beside them"
        )
        for key, what in (
            ("worker_status", "worker: status writes (worker controller)"),
            ("token_reviews", "worker: TokenReviews (worker controller)"),
            ("manager_status", "manager: status writes (dispatcher)"),
        ):
            # TokenReviews name no TrainJob: all of them are the reporting group's
            base = quiet[key] if key != "token_reviews" else 0
            shown = f"{quiet[key]:4}" if key != "token_reviews" else "   -"
            print(
                f"  {what:44} reporting {rep[key]:4}  silent {shown}  "
                f"added per TrainJob per 10 s: {(rep[key] - base) * per:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
