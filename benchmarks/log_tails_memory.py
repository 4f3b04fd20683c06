"""Benchmark: what 1,000 finished TrainJobs' kept log tails cost the dispatcher's memory.

`--jobs` TrainJobs are made on the manager (held: their queue does not exist, so they run
nowhere and cost the same before and after), then one kept-tails ConfigMap for each, as the
leader keeps them when a copy goes (`dispatcher/workers/log_tails.py`: `--containers` containers of
8 KiB each). The leader's resident memory is read before the tails exist and after
`--sweeps` resync sweeps over them (each lists their metadata and deletes none: their
TrainJobs are alive), with its peak (VmHWM). Needs a running kwok bed.

    .venv/bin/python benchmarks/log_tails_memory.py [--jobs 1000] [--containers 4] [--sweeps 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import orjson
from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.multikueue import TRAINER, product, trainjob_body
from benchmarks.worker_trainjobs import status_mib
from clusters.install import leading_dispatcher
from dispatcher.workers import log_tails

NAMESPACE = "trainjob-system"


def _data(trainjob: str, containers: int) -> dict[str, str]:
    pods = [{"metadata": {"name": f"{trainjob}-node-0-0-x"}, "worker": "worker1"}]
    data = {log_tails.PODS_KEY: orjson.dumps(pods).decode()}
    for i in range(containers):
        data[log_tails.key_of(f"{trainjob}-node-0-0-x", f"c{i}")] = (
            f"step {i} loss 0.1234\n" * 400
        )[: log_tails.TAIL_BYTES]
    return data


def _tails(uid: str, trainjob: str, containers: int) -> dict[str, object]:
    return {
        "metadata": {
            "name": log_tails.name_of(uid),
            "labels": {log_tails.LABEL: uid},
            "annotations": {log_tails.TRAINJOB_ANNOTATION: trainjob},
        },
        "data": _data(trainjob.rsplit("/", 1)[-1], containers),
        "immutable": True,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--containers", type=int, default=4, help="kept per TrainJob, 8 KiB each")
    parser.add_argument("--sweeps", type=int, default=2, help="resync sweeps to wait for")
    args = parser.parse_args()
    # sweeps every 10 s instead of a minute, so that the run is short
    with product("tails", ("--gc-interval", "10")) as (bed, ns, ctrls):
        manager = bed.config.managers[0].name
        custom = client.CustomObjectsApi(bed.api(manager))
        core = client.CoreV1Api(bed.api(manager))
        uids = []
        for i in range(args.jobs):
            body = trainjob_body(f"held-{i}")
            body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "nowhere"
            made = custom.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", body)
            uids.append((made["metadata"]["uid"], f"{ns}/held-{i}"))
        time.sleep(20)  # in every cache, their Workloads made
        leader = leading_dispatcher([c for c in ctrls if c.cluster == manager])
        before = status_mib(leader.proc.pid, "VmRSS")
        began = time.monotonic()
        for uid, trainjob in uids:
            core.create_namespaced_config_map(NAMESPACE, _tails(uid, trainjob, args.containers))
        made_in = time.monotonic() - began
        time.sleep(10 * args.sweeps + 5)
        kept = core.list_namespaced_config_map(NAMESPACE, label_selector=log_tails.LABEL).items
        after = status_mib(leader.proc.pid, "VmRSS")
        peak = status_mib(leader.proc.pid, "VmHWM")
        size = sum(len(v) for v in _data("t", args.containers).values()) / 1024
        print(
            f"{args.jobs} held TrainJobs, {len(kept)} kept-tails ConfigMaps of {size:.0f} KiB "
            f"({args.containers} containers) made in {made_in:.0f} s, {args.sweeps} sweeps"
        )
        print(
            f"leader {leader.identity}: RSS {before:.1f} MiB before the tails, {after:.1f} MiB "
            f"after ({after - before:+.1f} MiB); peak {peak:.1f} MiB"
        )
        for cm in kept:
            core.delete_namespaced_config_map(cm.metadata.name, NAMESPACE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
