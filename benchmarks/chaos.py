"""Chaos soak: MultiKueue TrainJobs through manager + 2 workers while faults hit the system.

Faults, at random moments while jobs are in flight (seeded, so a run can be repeated):
- `kill`: the dispatcher is killed with SIGKILL (at whatever point of a dispatch it is) and
  started again at once;
- `short`: a worker's kube-apiserver stops for a third of the worker-lost timeout;
- `long`: a worker's kube-apiserver stops for longer than the worker-lost timeout (its jobs
  are meant to move to the other worker);
- `remote-delete`: the Workload copy of a running TrainJob is deleted by hand on its worker;
- `delete`: a manager TrainJob is deleted by its user mid-run.

It counts, and exits 1 when any is not 0:
- lost: TrainJobs neither Complete nor deleted on the manager by the deadline;
- run twice: TrainJobs whose pods ran on two workers although no fault sent them back (no
  `ClusterLost` / `RemoteWorkloadGone` / `RemoteEvicted` Event on the manager TrainJob);
- leftovers: remote TrainJobs or Workloads of the namespace still on a worker once
  everything finished (garbage collection included);
- stuck deletions: deleted manager TrainJobs still there at the end.
Moves that a fault asked for are reported too (not failures). Needs a running bed.

    .venv/bin/python benchmarks/chaos.py --jobs 300 --faults 20
"""

from __future__ import annotations

import random
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.multikueue import (
    Clock,
    clean_up,
    run_patch,
    running_bed,
    soak_args,
    trainjob_body,
    watch_pods,
)
from clusters import setup
from clusters.bed import Bed
from clusters.install import DISPATCHER, leads

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
SENT_BACK = {"ClusterLost", "RemoteWorkloadGone", "RemoteEvicted"}
Dict = dict[str, Any]


def say(msg: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def body(name: str, run: str) -> Dict:
    """A one-node TrainJob (1 CPU) whose pod runs `run` on the bed's kwok nodes."""
    return trainjob_body(name, run_patch(run), cpu="1")


class Chaos:
    def __init__(self, bed: Bed, ns: str, ctrls: list[setup.Controller], lost: float) -> None:
        self.bed, self.ns, self.lost = bed, ns, lost
        self.dispatchers = [c for c in ctrls if c.name == DISPATCHER]
        self.manager = bed.config.managers[0].name
        self.workers = [w.name for w in bed.config.workers]
        self.deleted: set[str] = set()
        self.log: list[str] = []

    def custom(self, cluster: str) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.bed.api(cluster))

    def running_on(self, worker: str) -> list[str]:
        try:
            items = self.custom(worker).list_namespaced_custom_object(
                *TRAINER, self.ns, "trainjobs"
            )["items"]
        except Exception:
            return []
        return [i["metadata"]["name"] for i in items]

    def kill(self, rng: random.Random) -> str:
        """SIGKILL the replica that leads (any, when none answers), restart it at once (a
        container restart: same identity, so it may take its Lease straight back)."""
        victim = next((d for d in self.dispatchers if leads(d)), None) or rng.choice(
            self.dispatchers
        )
        victim.proc.kill()
        victim.proc.wait()
        victim.start()
        return f"dispatcher {victim.identity} killed (SIGKILL) and restarted"

    def outage(self, rng: random.Random, seconds: float) -> str:
        worker = rng.choice(self.workers)
        self.bed.stop_component(worker, "kube-apiserver")
        time.sleep(seconds)
        self.bed.restore_api_server(worker)
        return f"{worker} API server down for {seconds:.0f}s"

    def remote_delete(self, rng: random.Random) -> str:
        worker = rng.choice(self.workers)
        items = self.custom(worker).list_namespaced_custom_object(*KUEUE, self.ns, "workloads")[
            "items"
        ]
        if not items:
            return f"remote-delete: no Workload on {worker}"
        name = rng.choice(items)["metadata"]["name"]
        self.custom(worker).delete_namespaced_custom_object(*KUEUE, self.ns, "workloads", name)
        return f"deleted Workload {name} on {worker} by hand"

    def delete(self, rng: random.Random, names: list[str]) -> str:
        name = rng.choice([n for n in names if n not in self.deleted])
        self.deleted.add(name)
        self.custom(self.manager).delete_namespaced_custom_object(
            *TRAINER, self.ns, "trainjobs", name
        )
        return f"deleted TrainJob {name} on the manager"


def manager_state(chaos: Chaos) -> dict[str, Dict]:
    items = chaos.custom(chaos.manager).list_namespaced_custom_object(
        *TRAINER, chaos.ns, "trainjobs"
    )["items"]
    return {i["metadata"]["name"]: i for i in items}


def complete(obj: Dict) -> bool:
    return any(
        c["type"] == "Complete" and c["status"] == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def sent_back(bed: Bed, manager: str, ns: str) -> set[str]:
    events = client.CoreV1Api(bed.api(manager)).list_namespaced_event(ns).items
    return {e.involved_object.name for e in events if e.reason in SENT_BACK}


def remote_leftovers(chaos: Chaos) -> list[str]:
    out = []
    for worker in chaos.workers:
        for kind, group in (("trainjobs", TRAINER), ("workloads", KUEUE)):
            items = chaos.custom(worker).list_namespaced_custom_object(*group, chaos.ns, kind)[
                "items"
            ]
            out += [f"{worker}/{kind}/{i['metadata']['name']}" for i in items]
    return out


def main() -> int:
    parser = soak_args(__doc__, jobs=300, run="15s", timeout=2400)
    parser.add_argument("--faults", type=int, default=20)
    parser.add_argument("--lost-timeout", type=float, default=30.0)
    args = parser.parse_args()
    bed = running_bed()
    if bed is None:
        return 1
    rng = random.Random(args.seed)
    ns = f"chaos-{uuid.uuid4().hex[:4]}"
    setup.install(bed, ns, worker_cpu=args.worker_cpu)
    ctrls = setup.start_controllers(bed, worker_lost_timeout=args.lost_timeout)
    chaos = Chaos(bed, ns, ctrls, args.lost_timeout)
    clock = Clock()
    for worker in chaos.workers:
        threading.Thread(
            target=watch_pods, args=(bed.api(worker), ns, clock, worker), daemon=True
        ).start()
    names = [f"chaos-{i:04d}" for i in range(args.jobs)]
    kinds = ["kill"] * 8 + ["short"] * 4 + ["long"] * 3 + ["remote-delete"] * 3 + ["delete"] * 2
    plan = [kinds[i % len(kinds)] for i in range(args.faults)]
    rng.shuffle(plan)
    start = time.monotonic()
    failures = 0
    try:
        custom = chaos.custom(chaos.manager)
        for name in names:
            custom.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", body(name, args.run))
        say(f"submitted {len(names)} TrainJobs to {ns}; faults: {dict(Counter(plan))}")
        for i, kind in enumerate(plan, 1):
            time.sleep(rng.uniform(3, 12))
            if kind == "kill":
                what = chaos.kill(rng)
            elif kind == "short":
                what = chaos.outage(rng, args.lost_timeout / 3)
            elif kind == "long":
                what = chaos.outage(rng, args.lost_timeout + 15)
            elif kind == "remote-delete":
                what = chaos.remote_delete(rng)
            else:
                what = chaos.delete(rng, names)
            say(f"fault {i}/{len(plan)}: {what}")
        say("faults done; waiting for every TrainJob to finish")
        deadline = start + args.timeout
        while time.monotonic() < deadline:
            state = manager_state(chaos)
            open_ = [n for n in names if n not in chaos.deleted and not complete(state.get(n, {}))]
            stuck = [n for n in chaos.deleted if n in state]
            if not open_ and not stuck:
                break
            time.sleep(5)
        total = time.monotonic() - start
        state = manager_state(chaos)
        lost = [n for n in names if n not in chaos.deleted and not complete(state.get(n, {}))]
        stuck = sorted(n for n in chaos.deleted if n in state)
        back = sent_back(bed, chaos.manager, ns)
        ran_on = clock.ran_on()
        twice = sorted(n for n, ws in ran_on.items() if len(ws) > 1 and n not in back)
        moved = sorted(n for n, ws in ran_on.items() if len(ws) > 1 and n in back)
        leftovers: list[str] = []
        gc_deadline = time.monotonic() + 120  # retention 0, GC every 10 s in start_controllers
        while time.monotonic() < gc_deadline:
            leftovers = remote_leftovers(chaos)
            if not leftovers:
                break
            time.sleep(5)
        say(f"done after {total:.0f}s ({len(names)} TrainJobs, {len(plan)} faults)")
        for label, items in (
            ("lost", lost),
            ("run twice (no fault sent them back)", twice),
            ("leftovers on workers", leftovers),
            ("stuck deletions", stuck),
        ):
            print(f"  {label}: {len(items)} {items[:5]}")
            failures += len(items)
        print(f"  moved to another worker after a fault sent them back: {len(moved)}")
        print(f"  sent back by a fault (Retry on the manager): {len(back)}")
    finally:
        clock.stop.set()
        try:
            clean_up(bed, ns, [chaos.manager, *chaos.workers])
        finally:
            setup.stop_controllers(bed, ctrls)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
