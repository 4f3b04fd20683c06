"""The examples in examples/ as a tenant applies them: a ServiceAccount bound to the built-in
`edit` role in a fresh namespace on the manager runs `kubectl apply -n <namespace> -f
examples/<file>` on each file as it is, after the admin side did what the install runbook and
"Onboarding a team's namespace" say (the runtimes of examples/runtimes/ on every cluster, the
LocalQueue `user-queue` in the namespace on every cluster, the real job's claims on the
workers). Each TrainJob is accepted, Kueue reserves its quota on the manager, and the
dispatcher sends it to a worker."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clusters import builds, images
from clusters.bed import Bed
from clusters.helpers.examples import EXAMPLES, RUNTIMES
from clusters.helpers.tenant import Tenant
from clusters.helpers.waiting import wait_for
from clusters.kube import Applier, load_manifests
from tests.support.multikueue import MultiKueue, manager_events

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]

Dict = dict[str, Any]
QUEUE = "user-queue"  # the runbook's LocalQueue (examples/install/manager-queues.yaml)
# Each CPU example and the real job, with the TrainJobs it holds.
APPLIED = {
    "torch-ddp-cpu.yaml": ["ddp-cpu"],
    "mpi-cpu.yaml": ["mpi-cpu"],
    "progress-sdk.yaml": ["progress-sdk"],
    "real-job.yaml": ["real-job"],
}


def _in(docs: list[Dict], ns: str) -> list[Dict]:
    out = copy.deepcopy(docs)
    for d in out:
        d["metadata"]["namespace"] = ns
    return out


def _onboarded(bed: Bed, mk: MultiKueue) -> None:
    """The admin side: the runbook's runtimes on every cluster (the bed's images in place of
    the public ones, on every cluster alike), `user-queue` in the namespace on every cluster
    (on the manager behind the MultiKueue check), and the real job's claims on the workers."""
    runtimes = images.for_the_bed(
        [d for path in sorted(RUNTIMES.glob("*.yaml")) for d in load_manifests(path.read_text())]
    )
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": QUEUE, "namespace": mk.ns},
        "spec": {"clusterQueue": f"cq-{mk.ns}"},
    }
    claims = _in(load_manifests((EXAMPLES / "real-job-claims.yaml").read_text()), mk.ns)
    Applier(bed.api(mk.manager)).apply_all([*runtimes, queue])
    for worker in mk.workers:
        Applier(bed.api(worker)).apply_all([*runtimes, queue, *claims])


def _apply_as(tenant: Tenant, ns: str, path: Path, tmp_path: Path) -> str:
    """`kubectl apply -n ns -f path` with the tenant's kubeconfig; its output."""
    done = subprocess.run(
        [
            str(builds.binary("kubectl")),
            "--kubeconfig",
            str(tenant.kubeconfig),
            "--cache-dir",
            str(tmp_path / "kubectl-cache"),
            "apply",
            "-n",
            ns,
            "-f",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (path.name, done.stderr)
    return done.stdout


def _quota_reserved(mk: MultiKueue, name: str) -> bool:
    workload = mk.manager_workload(name) or {}
    return any(
        c["type"] == "QuotaReserved" and c["status"] == "True"
        for c in (workload.get("status") or {}).get("conditions") or []
    )


def _sent_to(mk: MultiKueue, name: str) -> str | None:
    """The worker a manager TrainJob's first Started Event says it was dispatched to."""
    for event in manager_events(mk, name):
        said = event.message or ""
        if event.reason == "Started" and "dispatched to cluster " in said:
            return said.rsplit("dispatched to cluster ", 1)[1].strip()
    return None


def test_each_example_applied_by_an_edit_user_is_admitted_and_sent_to_a_worker(
    bed: Bed, tmp_path: Path
) -> None:
    mk = MultiKueue(bed)
    _onboarded(bed, mk)
    alice = Tenant(bed, mk.ns, "alice", "edit", tmp_path)
    said = {file: _apply_as(alice, mk.ns, EXAMPLES / file, tmp_path) for file in APPLIED}
    for file, names in APPLIED.items():
        for name in names:
            assert f"trainjob.trainer.kubeflow.org/{name} created" in said[file], said
    # The real job's Secret and ConfigMap are the tenant's to make, in its namespace.
    assert "secret/hub-token created" in said["real-job.yaml"], said
    assert "configmap/real-job-config created" in said["real-job.yaml"], said
    for names in APPLIED.values():
        for name in names:
            tj = mk.get(name) or {}
            assert tj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == QUEUE
            assert tj["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"  # the webhook's
            wait_for(lambda n=name: _quota_reserved(mk, n), 60, what=f"{name} QuotaReserved")
            # The worker it was sent to, as the Started Event names it: the real job's pods
            # never start on the bed (its claims are never bound there, and its Secret is not
            # copied to a namespace that has not opted in), so it is sent back and forth.
            sent = wait_for(lambda n=name: _sent_to(mk, n), 90, what=f"{name} sent to a worker")
            assert sent in mk.workers, sent


def test_the_gpu_examples_apply_as_they_are_for_an_edit_user(bed: Bed, tmp_path: Path) -> None:
    """examples/gpu/gpu-trainjobs.yaml is accepted as it is (its runs on GPU workers are
    tests/e2e/test_gpu_fleet.py's): the TrainJobs' /dev/shm patch is valid on the manager."""
    mk = MultiKueue(bed)
    _onboarded(bed, mk)
    alice = Tenant(bed, mk.ns, "alice", "edit", tmp_path)
    said = _apply_as(alice, mk.ns, EXAMPLES / "gpu" / "gpu-trainjobs.yaml", tmp_path)
    for name in ("ddp-h100", "ddp-a100"):
        assert f"trainjob.trainer.kubeflow.org/{name} created" in said, said
        patch = (mk.get(name) or {})["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]
        pod = patch["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        assert pod["spec"]["volumes"][0]["emptyDir"]["medium"] == "Memory"
