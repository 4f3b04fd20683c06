"""Coexist mode: Kueue's own MultiKueue and our dispatcher on one manager, the same workers.

For this module the manager's Kueue runs with its MultiKueue gate on (the bed's
`multikueue_mode: coexist`), every worker gets what deploy/coexist/worker adds to
deploy/worker, and the dispatcher replicas run with what deploy/coexist/manager adds to their
command. Everything goes back to the replace mode the rest of the suite runs in afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.helpers.kube import active_condition, create_workload, is_active
from clusters.helpers.waiting import stays_false, wait_for
from clusters.install import DEPLOY, DISPATCHER
from clusters.kube import Applier, render
from tests.support.multikueue import KUEUE, TRAINER, MultiKueue, dispatcher_with

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
Dict = dict[str, Any]
OURS, KUEUES = "trainjob-multikueue", "multikueue"  # the origin labels of the two controllers
ORIGIN = "kueue.x-k8s.io/multikueue-origin"


def _rendered(overlay: str) -> dict[tuple[str, str], Dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in render(DEPLOY / overlay)}


def _dispatcher_config(docs: dict[tuple[str, str], Dict]) -> Dict:
    config: Dict = yaml.safe_load(
        docs[("ConfigMap", f"{DISPATCHER}-config")]["data"]["config.yaml"]
    )
    return config


@pytest.fixture(scope="module")
def coexisting(bed: Bed, controllers: list[setup.Controller]) -> Iterator[None]:
    worker_extra = [
        doc for key, doc in _rendered("coexist/worker").items() if key not in _rendered("worker")
    ]
    assert worker_extra, "deploy/coexist/worker adds the rules Kueue's MultiKueue needs"
    usual, coexist = (_dispatcher_config(_rendered(o)) for o in ("manager", "coexist/manager"))
    changed = {key: value for key, value in coexist.items() if usual.get(key) != value}
    assert changed == {"mode": "Coexist"}  # the one difference, given as its flag below
    flags = ["--mode=Coexist"]
    for worker in bed.config.workers:
        Applier(bed.api(worker.name)).apply_all(worker_extra)
    bed.set_multikueue_mode("coexist")
    try:
        with dispatcher_with(controllers, *flags):
            yield
    finally:
        bed.set_multikueue_mode("replace")
        for worker in bed.config.workers:
            Applier(bed.api(worker.name)).delete_all(worker_extra)


def _our_queue(mk: MultiKueue) -> None:
    """On the manager, LocalQueue `trainjobs` -> a ClusterQueue checked by our controller; on
    every worker, LocalQueue `trainjobs` into the namespace's plain ClusterQueue."""
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": OURS},
        "spec": {
            "controllerName": "trainjob.dev/multikueue",
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "MultiKueueConfig",
                "name": "multikueue",
            },
        },
    }
    queues = setup.queue_objects(mk.ns, "1000", checks=[OURS], suffix=f"-{mk.ns}-tj")
    local = {**queues[3], "metadata": {**queues[3]["metadata"], "name": "trainjobs"}}
    Applier(mk.bed.api(mk.manager)).apply_all([check, queues[1], local])
    for worker in mk.workers:
        there = {**local, "spec": {"clusterQueue": f"cq-{mk.ns}"}}
        Applier(mk.bed.api(worker)).apply_all([there])


def _submit_job(mk: MultiKueue, name: str, run: str) -> None:
    """A batch/v1 Job for Kueue's own MultiKueue (queue `q`, whose check is Kueue's now)."""
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    client.BatchV1Api(mk.bed.api(mk.manager)).create_namespaced_job(
        mk.ns,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {
                "managedBy": "kueue.x-k8s.io/multikueue",
                "template": {
                    "metadata": {"annotations": {"bed.trainjob.dev/run-duration": run}},
                    "spec": {"restartPolicy": "Never", "containers": [container]},
                },
            },
        },
    )


def _job_pods_running(mk: MultiKueue, name: str) -> list[str]:
    return [
        worker
        for worker in mk.workers
        if any(
            p.status.phase == "Running"
            for p in client.CoreV1Api(mk.bed.api(worker))
            .list_namespaced_pod(mk.ns, label_selector=f"job-name={name}")
            .items
        )
    ]


def _origins(mk: MultiKueue, worker: str) -> dict[str, str]:
    """kind/name -> origin label of every Job, TrainJob and Workload of the namespace there."""
    custom = mk.custom(worker)
    found = {
        f"Job/{j.metadata.name}": (j.metadata.labels or {}).get(ORIGIN, "")
        for j in client.BatchV1Api(mk.bed.api(worker)).list_namespaced_job(mk.ns).items
    }
    for kind, group, plural in (
        ("TrainJob", TRAINER, "trainjobs"),
        ("Workload", KUEUE, "workloads"),
    ):
        for obj in custom.list_namespaced_custom_object(*group, mk.ns, plural)["items"]:
            labels = obj["metadata"].get("labels") or {}
            found[f"{kind}/{obj['metadata']['name']}"] = labels.get(ORIGIN, "")
    return found


def _job_complete(mk: MultiKueue, name: str) -> bool:
    job = client.BatchV1Api(mk.bed.api(mk.manager)).read_namespaced_job(name, mk.ns)
    return any(c.type == "Complete" and c.status == "True" for c in job.status.conditions or [])


@pytest.mark.usefixtures("coexisting")
def test_a_job_by_kueues_multikueue_and_a_trainjob_by_ours_run_side_by_side(bed: Bed) -> None:
    mk = MultiKueue(bed)  # every MultiKueueCluster Active: Kueue's MultiKueue writes it now
    _our_queue(mk)
    for check in ("multikueue", OURS):  # Kueue's check and ours, each Active by its controller
        wait_for(
            lambda check=check: is_active(mk.custom(), check, "admissionchecks"),
            60,
            what=f"AdmissionCheck {check} Active",
        )
    # A TrainJob on the queue of Kueue's check runs nowhere, and says so. (First: the 30 s
    # jobs below must still run when the test looks at them, however long this takes.)
    mk.submit("misplaced", queue="q")
    failed = mk.wait_until("misplaced", "Failed", timeout=60)
    assert failed["reason"] == "NotDispatched", failed
    assert "trainjob.dev/multikueue" in failed["message"], failed
    mk.submit("trainer", run="30s", queue="trainjobs")
    _submit_job(mk, "plain", run="30s")
    worker = mk.started_on("trainer")
    job_on = wait_for(lambda: _job_pods_running(mk, "plain"), 60, what="the Job's pods running")
    assert mk.pods(worker, "trainer"), "the TrainJob still runs while the Job runs"

    origins = {w: _origins(mk, w) for w in mk.workers}
    assert origins[worker]["TrainJob/trainer"] == OURS
    assert origins[job_on[0]]["Job/plain"] == KUEUES
    children = {o for k, o in origins[worker].items() if k.startswith("Job/trainer-")}
    assert children == {OURS}, origins[worker]  # our worker controller labels the Jobs it makes
    ours = {k for w in mk.workers for k, o in origins[w].items() if o == OURS}
    kueues = {k for w in mk.workers for k, o in origins[w].items() if o == KUEUES}
    assert ours and kueues and "Job/plain" in kueues, origins

    # Each garbage collector sweeps its own orphans (ours and Kueue's run every 10 s here)...
    for name, origin in (("orphan-of-ours", OURS), ("orphan-of-kueue", KUEUES)):
        create_workload(mk.custom(worker), mk.ns, name, {ORIGIN: origin}, active=False)
    wait_for(
        lambda: (
            not {"Workload/orphan-of-ours", "Workload/orphan-of-kueue"} & set(_origins(mk, worker))
        ),
        60,
        what="both orphans collected, each by its own controller",
    )
    # ...and neither touched the other's running copies: both finish where they ran.
    mk.wait_until("trainer", "Complete", timeout=120)
    wait_for(lambda: _job_complete(mk, "plain"), 120, what="the Job Complete on the manager")
    assert mk.running_on("trainer") in ([], [worker])


@pytest.mark.usefixtures("coexisting")
def test_in_coexist_mode_kueue_alone_writes_the_multikueue_clusters_condition(bed: Bed) -> None:
    mk = MultiKueue(bed)
    name = f"ghost-{mk.ns}"
    custom = mk.custom()
    custom.create_cluster_custom_object(
        *KUEUE,
        "multikueueclusters",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {
                "clusterSource": {
                    "kubeConfig": {"locationType": "Secret", "location": f"{name}-missing"}
                }
            },
        },
    )
    try:

        def message() -> str:
            return str((active_condition(custom, name) or {}).get("message", ""))

        # Kueue's words ("load client config failed: ..."), not ours ("Secret ... not found in
        # ..."); our dispatcher resyncs every 2 s and would write its own within that.
        kueues = "load client config failed"
        wait_for(lambda: message().startswith(kueues), 60, what="Kueue's Active=False message")
        stays_false(
            lambda: not message().startswith(kueues), 10, what="another writer of the condition"
        )
    finally:
        custom.delete_cluster_custom_object(*KUEUE, "multikueueclusters", name)
