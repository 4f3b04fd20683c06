"""Gang scheduling on the bed: the scheduler-plugins' and Volcano's PodGroup CRDs installed on
the first worker only (clusters/podgroups.py; neither scheduler runs, so the pods are placed by
the default scheduler, and the groups are read back as their API server stored them), the
worker controller running from deploy/ under its ServiceAccount.

- On the worker with the CRDs: a coscheduling job and a Volcano job get their PodGroups as
  Trainer v2.3 makes them (every pod counted, what they request together, the timeout; the
  queue, the priority class, the topology), owned by the TrainJob, every pod naming its group;
  both complete; the garbage collector deletes a group with its TrainJob.
- A PodGroup of a job's name that is not the job's: left as it is, the job waits with
  ObjectsBlocked naming it, and runs once it is gone.
- On the worker without them: the same runtime runs ungrouped and says which API is missing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from clusters import podgroups, setup
from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from clusters.kube import Applier, load_manifests
from tests.support.multikueue import MultiKueue
from worker_controller import served

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
Dict = dict[str, Any]
COSCHEDULING = ("scheduling.x-k8s.io", "v1alpha1")
VOLCANO = ("scheduling.volcano.sh", "v1beta1")


@pytest.fixture
def gang_worker(bed: Bed) -> Iterator[str]:
    """The first worker, serving both PodGroup APIs for the test."""
    worker = bed.config.workers[0].name
    applier = Applier(bed.api(worker))
    crds = podgroups.crds()
    applier.apply_all(crds)
    applier.wait_crds_established(list(podgroups.NAMES))
    # A "not served" answer the worker controller holds from before expires first.
    time.sleep(served.NOT_SERVED_SECONDS)
    yield worker
    applier.remove_all(crds)


def gang_runtime(mk: MultiKueue, name: str, policy: Dict, annotations: Dict | None = None) -> str:
    """Trainer's torch-distributed with `policy`, on every worker."""
    example = setup.REPO / "examples" / "runtimes" / "torch-distributed.yaml"
    runtime = load_manifests(example.read_text())[0]
    runtime["metadata"]["name"] = name
    runtime["spec"]["podGroupPolicy"] = policy
    if annotations:
        runtime["spec"]["template"].setdefault("metadata", {})["annotations"] = annotations
    for worker in mk.workers:
        Applier(mk.bed.api(worker)).apply(runtime)
    return name


def condition(mk: MultiKueue, name: str, worker: str, ctype: str) -> Dict | None:
    conds = ((mk.get(name, worker) or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == ctype and c["status"] == "True"), None)


def wait_local(mk: MultiKueue, name: str, worker: str, ctype: str, timeout: float = 90) -> Dict:
    return wait_for(
        lambda: condition(mk, name, worker, ctype), timeout, what=f"{name} {ctype} on {worker}"
    )


def pod_group(mk: MultiKueue, worker: str, api: tuple[str, str], name: str) -> Dict | None:
    try:
        found: Dict = mk.custom(worker).get_namespaced_custom_object(*api, mk.ns, "podgroups", name)
        return found
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def pods_of(mk: MultiKueue, worker: str, name: str) -> list[Any]:
    return list(
        client.CoreV1Api(mk.bed.api(worker))
        .list_namespaced_pod(mk.ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
        .items
    )


def test_gang_jobs_get_their_pod_groups_where_the_worker_serves_them(
    bed: Bed, gang_worker: str
) -> None:
    mk = MultiKueue(bed)
    plain = next(w for w in mk.workers if w != gang_worker)
    cosched = gang_runtime(mk, f"gang-cs-{mk.ns}", {"coscheduling": {"scheduleTimeoutSeconds": 30}})
    volcano = gang_runtime(
        mk,
        f"gang-vc-{mk.ns}",
        {"volcano": {"networkTopology": {"mode": "soft"}}},
        {"scheduling.volcano.sh/queue-name": "research"},
    )
    foreign = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "taken", "namespace": mk.ns},
        "spec": {"minMember": 9},
    }
    Applier(bed.api(gang_worker)).apply(foreign)
    cs = mk.submit("cs", runtime=cosched, nodes=2, cluster=gang_worker)
    mk.submit("vc", runtime=volcano, nodes=2, cluster=gang_worker)
    mk.submit("taken", runtime=cosched, nodes=2, cluster=gang_worker)
    mk.submit("ungrouped", runtime=cosched, nodes=2, cluster=plain)

    group = wait_for(lambda: pod_group(mk, gang_worker, COSCHEDULING, "cs"), 60, what="cs's group")
    owner = group["metadata"]["ownerReferences"]
    assert [(o["kind"], o["uid"], o["controller"]) for o in owner] == [
        ("TrainJob", cs["metadata"]["uid"], True)
    ]
    # Two nodes of 1 CPU (mk.submit's resourcesPerNode).
    assert group["spec"] == {
        "minMember": 2,
        "minResources": {"cpu": "2"},
        "scheduleTimeoutSeconds": 30,
    }
    group = wait_for(lambda: pod_group(mk, gang_worker, VOLCANO, "vc"), 60, what="vc's group")
    assert group["spec"]["minMember"] == 2 and group["spec"]["minResources"] == {"cpu": "2"}
    assert group["spec"]["queue"] == "research"
    assert group["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 1}

    wait_local(mk, "cs", gang_worker, "Complete")
    wait_local(mk, "vc", gang_worker, "Complete")
    labels = [
        p.metadata.labels.get("scheduling.x-k8s.io/pod-group")
        for p in pods_of(mk, gang_worker, "cs")
    ]
    assert labels == ["cs", "cs"]
    annotations = [
        (p.metadata.annotations or {}).get("scheduling.k8s.io/group-name")
        for p in pods_of(mk, gang_worker, "vc")
    ]
    assert annotations == ["vc", "vc"]
    for name in ("cs", "vc"):
        assert condition(mk, name, gang_worker, "PodGroupPolicyIgnored") is None

    # Someone else's group under the job's name: kept, and the job waits until it is gone.
    blocked = wait_local(mk, "taken", gang_worker, "ObjectsBlocked", timeout=60)
    assert blocked["reason"] == "NameTaken" and "PodGroup 'taken'" in blocked["message"]
    assert pods_of(mk, gang_worker, "taken") == []
    kept = pod_group(mk, gang_worker, COSCHEDULING, "taken") or {}
    assert kept["spec"] == {"minMember": 9} and not kept["metadata"].get("ownerReferences")
    mk.custom(gang_worker).delete_namespaced_custom_object(
        *COSCHEDULING, mk.ns, "podgroups", "taken"
    )
    wait_local(mk, "taken", gang_worker, "Complete", timeout=120)
    made = pod_group(mk, gang_worker, COSCHEDULING, "taken") or {}
    assert made["spec"]["minMember"] == 2

    # The worker without the CRDs: ungrouped, and said.
    ignored = wait_local(mk, "ungrouped", plain, "PodGroupPolicyIgnored", timeout=60)
    assert "scheduling.x-k8s.io/v1alpha1" in ignored["message"]
    wait_local(mk, "ungrouped", plain, "Complete")
    assert all(
        "scheduling.x-k8s.io/pod-group" not in (p.metadata.labels or {})
        for p in pods_of(mk, plain, "ungrouped")
    )

    # Deleted with its TrainJob (the worker's garbage collector).
    mk.custom(gang_worker).delete_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", mk.ns, "trainjobs", "cs"
    )
    wait_for(
        lambda: pod_group(mk, gang_worker, COSCHEDULING, "cs") is None,
        60,
        what="cs's group deleted with its TrainJob",
    )
    for runtime in (cosched, volcano):
        for worker in mk.workers:
            mk.custom(worker).delete_cluster_custom_object(
                "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", runtime
            )
