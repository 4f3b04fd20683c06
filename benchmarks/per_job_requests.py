"""Benchmark: every API request our controllers make for one TrainJob, in order, per cluster.

The per-TrainJob figures of benchmarks/multikueue.py are averages over a burst; this lists the
requests behind them for one MultiKueue TrainJob run alone (one node, pods of 1 s), from each
API server's audit log (`clusters/audit.py`: the server's record, with the response code), so
that each request can be named and the floor argued: which ones Kueue's job integration and
MultiKueue make too, which are ours, which were conflicts. Leases (leader election, a fixed
rate) and requests outside the TrainJob's namespace are left out. Needs a running bed.

    .venv/bin/python benchmarks/per_job_requests.py [--nodes N] [--repeat K]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections import Counter
from pathlib import Path

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.multikueue import TRAINER, product, run_patch, trainjob_body
from clusters import audit
from clusters.bed import Bed


def _complete(custom: client.CustomObjectsApi, ns: str, name: str) -> bool:
    tj = custom.get_namespaced_custom_object(*TRAINER, ns, "trainjobs", name)
    return any(
        c["type"] == "Complete" and c["status"] == "True"
        for c in (tj.get("status") or {}).get("conditions") or []
    )


def trace(bed: Bed, ns: str, name: str, nodes: int) -> dict[str, list[audit.Request]]:
    """Run one TrainJob to Complete on the manager; our requests in its namespace per cluster."""
    manager = bed.config.managers[0].name
    custom = client.CustomObjectsApi(bed.api(manager))
    body = trainjob_body(name, run_patch("1s"))
    body["spec"]["trainer"]["numNodes"] = nodes
    started = dt.datetime.now(dt.UTC)
    custom.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", body)
    deadline = time.monotonic() + 120
    while not _complete(custom, ns, name):
        if time.monotonic() > deadline:
            raise SystemExit(f"TrainJob {name} not Complete after 120 s")
        time.sleep(0.2)
    time.sleep(4)  # the winner's copy is removed after it completes
    return {
        cluster.name: [
            r
            for r in audit.requests(bed.cluster_dir(cluster.name), started)
            if r.namespace == ns and r.resource != "leases"
        ]
        for cluster in bed.config.clusters
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1, help="numNodes of the TrainJob")
    parser.add_argument("--repeat", type=int, default=1, help="TrainJobs, one after another")
    args = parser.parse_args()
    with product("req") as (bed, ns, _):
        totals: Counter[str] = Counter()
        time.sleep(3)  # every worker connected
        for i in range(args.repeat):
            per_cluster = trace(bed, ns, f"traced-{i}", args.nodes)
            print(f"\n=== TrainJob traced-{i} ({args.nodes} node(s))")
            for cluster, reqs in per_cluster.items():
                first = reqs[0].received if reqs else None
                print(f"--- {cluster}: {len(reqs)} requests by our identities")
                for r in reqs:
                    at = (r.received - first).total_seconds() if first else 0.0
                    who = r.user.rsplit(":", 1)[-1]
                    print(f"  {at:6.2f}s  {who:28} {r.verb:7} {r.resource:20} {r.name} {r.code}")
                totals[cluster] += len(reqs)
        print()
        for cluster, n in totals.items():
            print(f"requests per TrainJob on {cluster}: {n / args.repeat:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
