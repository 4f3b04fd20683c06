"""`python -m demo`: bring up the bed and controllers, push a TrainJob manager -> worker -> back.

Every step is printed as it happens. The bed stays up afterwards (`python -m clusters down`
removes it; with --real, `TJ_BED_STATE_DIR=.bed-real python -m clusters down`); the
controllers this demo started are stopped at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.config import load_config, real_bed_config
from clusters.errors import BedError
from clusters.kube import load_manifests
from kubectl_trainjob.view import pods_in_short, progress_in_short
from trainjob_api.views import TrainJobView

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
Dict = dict[str, Any]


def say(msg: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _conditions(obj: Dict) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def run(bed: Bed, namespace: str, timeout: float) -> int:
    manager = bed.config.managers[0].name
    real = bed.config.real_nodes
    example = (
        setup.REPO / "examples" / "torch-ddp-cpu.yaml"
        if real
        else setup.REPO / "clusters" / "manifests" / "trainjob-kwok.yaml"
    )
    say(f"installing the TrainJob runtime, Kueue queues and MultiKueue objects ({namespace})")
    if real:
        runtime = setup.REPO / "examples" / "runtimes" / "torch-ddp-cpu.yaml"
        setup.install(bed, namespace, worker_cpu="4", runtime=runtime)
    else:
        setup.install(bed, namespace)
    say("installing the product from deploy/ (worker controllers, then 2 dispatcher replicas)")
    ctrls = setup.start_controllers(bed)
    if real:
        say("  the product runs as Pods from its image on each cluster's real node")
    printed_lines = 0
    try:
        for ctrl in ctrls:
            say(
                f"  {ctrl.identity} on {ctrl.cluster}: pid {ctrl.proc.pid}, ServiceAccount "
                f"token, log {ctrl.log}"
            )
        custom = client.CustomObjectsApi(bed.api(manager))
        tj = next(d for d in load_manifests(example.read_text()) if d["kind"] == "TrainJob")
        name = f"{tj['metadata']['name']}-{uuid.uuid4().hex[:4]}"
        tj["metadata"] = {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "q"}}
        created = custom.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", tj)
        say(
            f"created TrainJob {namespace}/{name} on {manager} (webhook set managedBy="
            f"{created['spec'].get('managedBy')}, suspend={created['spec'].get('suspend')})"
        )
        seen: set[str] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            obj = custom.get_namespaced_custom_object(*TRAINER, namespace, "trainjobs", name)
            wls = custom.list_namespaced_custom_object(*KUEUE, namespace, "workloads")["items"]
            wl = next(
                (
                    w
                    for w in wls
                    if any(
                        r.get("name") == name for r in w["metadata"].get("ownerReferences") or []
                    )
                ),
                None,
            )
            steps = []
            if wl is not None:
                steps.append(f"Workload {wl['metadata']['name']} created on {manager}")
                wl_conds = _conditions(wl)
                if wl_conds.get("QuotaReserved") == "True":
                    steps.append(f"Kueue on {manager} reserved quota")
                for check in (wl.get("status") or {}).get("admissionChecks") or []:
                    steps.append(f"MultiKueue check {check['state']}: {check.get('message')}")
                if wl_conds.get("PodsReady") == "True":
                    steps.append(
                        f"Workload PodsReady on {manager}: all pods ready (Kueue's "
                        "waitForPodsReady keeps it admitted)"
                    )
                if wl_conds.get("Finished") == "True":
                    steps.append(f"Workload Finished on {manager}: quota released")
            cluster = (obj.get("status") or {}).get("clusterName")
            if cluster:
                steps.append(f"running on {cluster}")
                remote = (
                    client.CoreV1Api(bed.api(cluster))
                    .list_namespaced_pod(
                        namespace, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"
                    )
                    .items
                )
                phases = sorted(p.status.phase for p in remote)
                if phases:
                    steps.append(f"pods on {cluster}: {', '.join(phases)}")
                if real:
                    printed_lines = _print_rank0_log(bed, cluster, namespace, remote, printed_lines)
                shown = TrainJobView(obj)
                reported = progress_in_short(shown)
                if reported != "-":  # the training's own report (status.trainerStatus)
                    steps.append(
                        f"progress reported by the training, seen on {manager}: {reported}"
                    )
                if shown.pods_status:
                    steps.append(
                        f"pods as the TrainJob on {manager} counts them: {pods_in_short(shown)}"
                    )
            conds = _conditions(obj)
            for ctype in ("Complete", "Failed"):
                if conds.get(ctype) == "True":
                    steps.append(
                        f"TrainJob {ctype} on {manager}; jobsStatus "
                        f"{(obj.get('status') or {}).get('jobsStatus')}"
                    )
            for step in steps:
                if step not in seen:
                    seen.add(step)
                    say(step)
            if conds.get("Complete") == "True" and wl and _conditions(wl).get("Finished"):
                say(f"done: {namespace}/{name} ran on {cluster} and reported back to {manager}")
                return 0
            if conds.get("Failed") == "True":
                say("the TrainJob failed; see the Events: kubectl describe trainjob")
                return 1
            time.sleep(0.5)
        say(
            f"timed out after {timeout:.0f}s; controller logs: "
            + ", ".join(str(c.log) for c in ctrls)
        )
        return 1
    finally:
        down = "python -m clusters down"
        if real:
            down = f"TJ_BED_STATE_DIR={bed.config.state_dir} {down}"
        say(f"stopping the controllers (the bed stays up: `{down}` removes it)")
        setup.stop_controllers(bed, ctrls)


def _print_rank0_log(
    bed: Bed, cluster: str, namespace: str, pods: list[client.V1Pod], printed: int
) -> int:
    """Print rank 0's log lines not printed yet; return how many are printed now."""
    rank0 = [
        p
        for p in pods
        if (p.metadata.annotations or {}).get("batch.kubernetes.io/job-completion-index") == "0"
        and p.status.phase in ("Running", "Succeeded", "Failed")
    ]
    if not rank0:
        return printed
    try:
        log = client.CoreV1Api(bed.api(cluster)).read_namespaced_pod_log(
            rank0[0].metadata.name, namespace
        )
    except client.ApiException:
        return printed
    lines = [line for line in log.splitlines() if line.startswith(("step ", "done:", "world "))]
    for line in lines[printed:]:
        say(f"  rank 0: {line}")
    return max(printed, len(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    parser.add_argument("--config", type=Path, help="bed config (default: manager + 2 workers)")
    parser.add_argument("--namespace", help="namespace to use (default: a fresh demo-xxxx)")
    parser.add_argument("--timeout", type=float, help="seconds (default 180; 600 with --real)")
    parser.add_argument(
        "--real",
        action="store_true",
        help="on real nodes (root): the product as Pods from its image, and a TrainJob that "
        "trains a small model with torchrun across 2 pods (examples/torch-ddp-cpu.yaml)",
    )
    args = parser.parse_args(argv)
    try:
        bed = Bed(real_bed_config() if args.real else load_config(args.config))
        say("bringing up the local clusters (first run builds the binaries)")
        bed.up()
        timeout = args.timeout or (600.0 if args.real else 180.0)
        return run(bed, args.namespace or f"demo-{uuid.uuid4().hex[:4]}", timeout)
    except BedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
