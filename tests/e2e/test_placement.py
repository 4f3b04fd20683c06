"""Where copies go (manager + 2 workers of the bed): capacity-aware placement and giving up on
a TrainJob that no worker could ever hold."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from clusters.kube import Applier, load_manifests
from dispatcher.decisions import checkpoints
from tests.support.multikueue import (
    KUEUE,
    TRAINER,
    MultiKueue,
    events_of,
    names,
    nothing_sent,
    workloads_seen,
)

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
Dict = dict[str, Any]


def test_a_full_worker_gets_no_copy_and_the_trainjob_runs_where_there_is_room(bed: Bed) -> None:
    mk = MultiKueue(bed, worker_cpu="2")
    full, free = mk.workers[0], mk.workers[1]
    with mk.filled(full, cpu="2"):  # the first worker's own TrainJob holds all its quota
        with workloads_seen(mk, full) as seen:
            mk.submit("placed")
            mk.wait_until("placed", "Complete")
        local = {w["metadata"]["name"] for w in mk.remote_workloads(full)}
    assert names(seen) == local, (
        f"copies were sent to the full worker: {sorted(names(seen) - local)}"
    )
    assert (mk.get("placed") or {})["status"]["clusterName"] == free


def test_a_trainjob_no_worker_could_ever_hold_fails_at_once_and_frees_the_quota(
    bed: Bed,
) -> None:
    mk = MultiKueue(bed, worker_cpu="2")
    with workloads_seen(mk, mk.workers[0]) as seen0, workloads_seen(mk, mk.workers[1]) as seen1:
        mk.submit("huge", nodes=3, cpu="1")  # 3 cpu; each worker's ClusterQueue has 2
        failed = mk.wait_until("huge", "Failed", timeout=30)
    assert failed["reason"] == "NoClusterFits", failed
    for worker in mk.workers:
        assert f"{worker}: never: PodSet node does not fit ClusterQueue" in failed["message"]
    assert "cpu 3 wanted, 2 available" in failed["message"], failed["message"]
    assert names(seen0) == names(seen1) == set(), (
        "no copy is sent to a worker that could never admit it"
    )
    assert "NoClusterFits" in events_of(mk, "huge")

    # The check is Rejected, so Kueue deactivates the Workload and frees the manager's quota.
    wait_for(
        lambda: (mk.manager_workload("huge") or {}).get("spec", {}).get("active") is False,
        30,
        what="the manager Workload deactivated",
    )
    wait_for(lambda: mk.reserved_cpu(mk.manager) == "0", 30, what="the manager's quota freed")
    assert mk.condition("huge", "Failed") is not None, "the TrainJob stays Failed"


# ---- a TrainJob's own choice of clusters -----------------------------------------------------

NAMES = "kueue.x-k8s.io/multikueue-cluster-names"
SELECTOR = "trainjob.dev/cluster-selector"


def test_a_trainjob_runs_only_on_the_cluster_it_names(bed: Bed) -> None:
    mk = MultiKueue(bed)
    first, second = mk.workers[0], mk.workers[1]
    with workloads_seen(mk, first) as seen:
        mk.submit("pinned", metadata={"annotations": {NAMES: second}})
        mk.wait_until("pinned", "Complete")
    assert names(seen) == set(), "never a copy on a cluster the TrainJob did not name"
    assert (mk.get("pinned") or {})["status"]["clusterName"] == second


@contextlib.contextmanager
def cluster_label(mk: MultiKueue, cluster: str, key: str, value: str) -> Iterator[None]:
    """A label on a MultiKueueCluster for the block (the bed's are shared by every test)."""
    custom = mk.custom()
    custom.patch_cluster_custom_object(
        *KUEUE, "multikueueclusters", cluster, {"metadata": {"labels": {key: value}}}
    )
    try:
        yield
    finally:
        custom.patch_cluster_custom_object(
            *KUEUE, "multikueueclusters", cluster, {"metadata": {"labels": {key: None}}}
        )


def test_a_selector_matching_no_cluster_is_a_condition_until_a_cluster_matches(
    bed: Bed,
) -> None:
    mk = MultiKueue(bed)
    key = f"tests.trainjob.dev/pool-{mk.ns}"
    mk.submit("choosy", metadata={"annotations": {SELECTOR: f"{key}=gold"}})
    condition = wait_for(
        lambda: next(
            (
                c
                for c in ((mk.get("choosy") or {}).get("status") or {}).get("conditions") or []
                if c["type"] == "ClustersSelected" and c["status"] == "False"
            ),
            None,
        ),
        30,
        what="ClustersSelected=False on the TrainJob",
    )
    assert condition["reason"] == "NoClusterSelected"
    assert f"{SELECTOR}='{key}=gold' matches none of the clusters" in condition["message"]
    assert "NoClusterSelected" in events_of(mk, "choosy")
    nothing_sent(mk, "no cluster matches")
    second = mk.workers[1]
    with cluster_label(mk, second, key, "gold"):
        mk.wait_until("choosy", "Complete")
    status = (mk.get("choosy") or {})["status"]
    assert status["clusterName"] == second
    assert not any(c["type"] == "ClustersSelected" for c in status.get("conditions") or [])


@pytest.mark.parametrize(
    ("annotation", "value", "said"),
    [
        (NAMES, "Worker_1", "'Worker_1' is not a MultiKueueCluster name"),
        (SELECTOR, "tier in (gold", "cannot read 'tier in (gold'"),
        (checkpoints.ANNOTATION, "/ckpt/my run", "must name a directory or object-store prefix"),
    ],
)
def test_an_unreadable_choice_of_clusters_is_refused_naming_the_annotation(
    bed: Bed, annotation: str, value: str, said: str
) -> None:
    mk = MultiKueue(bed)
    with pytest.raises(client.ApiException) as err:
        mk.submit("unreadable", metadata={"annotations": {annotation: value}})
    assert err.value.status == 422
    message = json.loads(err.value.body)["message"]
    assert f"metadata.annotations[{annotation}]: " in message and said in message, message


# ---- runtime drift ---------------------------------------------------------------------------


def mkc_condition(mk: MultiKueue, cluster: str, ctype: str) -> Dict | None:
    mkc = mk.custom().get_cluster_custom_object(*KUEUE, "multikueueclusters", cluster)
    return next(
        (x for x in (mkc.get("status") or {}).get("conditions") or [] if x["type"] == ctype),
        None,
    )


def test_a_worker_whose_runtime_differs_gets_no_copy_and_both_sides_say_so(bed: Bed) -> None:
    mk = MultiKueue(bed)
    first, second = mk.workers[0], mk.workers[1]
    example = setup.REPO / "examples" / "runtimes" / "torch-distributed.yaml"
    runtime = load_manifests(example.read_text())[0]
    name = f"drift-{mk.ns}"
    runtime["metadata"]["name"] = name
    drifted = copy.deepcopy(runtime)
    drifted["spec"]["mlPolicy"]["numNodes"] = 3  # the same name, another spec
    Applier(bed.api(mk.manager)).apply(runtime)
    Applier(bed.api(second)).apply(runtime)
    Applier(bed.api(first)).apply(drifted)
    try:
        with workloads_seen(mk, first) as seen:
            mk.submit("steady", runtime=name)
            mk.wait_until("steady", "Complete")
        assert names(seen) == set(), "no copy goes where the runtime is not the manager's"
        assert (mk.get("steady") or {})["status"]["clusterName"] == second
        assert "RuntimeDrift" in events_of(mk, "steady")
        # The worker's MultiKueueCluster says which runtime drifted (each resync pass).
        drift = wait_for(
            lambda: (
                (x := mkc_condition(mk, first, "RuntimesInSync"))
                and x["status"] == "False"
                and name in x["message"]
                and x
            ),
            30,
            what=f"RuntimesInSync=False on {first}'s MultiKueueCluster",
        )
        assert f"ClusterTrainingRuntime {name} there differs from the manager's" in drift["message"]
        assert name not in (
            (mkc_condition(mk, second, "RuntimesInSync") or {}).get("message") or ""
        )
    finally:
        for cluster in (mk.manager, first, second):
            with contextlib.suppress(client.ApiException):
                client.CustomObjectsApi(bed.api(cluster)).delete_cluster_custom_object(
                    *TRAINER, "clustertrainingruntimes", name
                )


# ---- placement that follows the data ---------------------------------------------------------

DATASETS = "trainjob.dev/datasets"


def _bound_claim(bed: Bed, worker: str, ns: str, name: str) -> None:
    """A claim on `worker` bound to a PersistentVolume made for it (as a platform's
    pre-provisioned dataset volume is), bound by the worker's own PV controller."""
    core = client.CoreV1Api(bed.api(worker))
    pv_name = f"{ns}-{name}"
    core.create_persistent_volume(
        {
            "metadata": {"name": pv_name},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadOnlyMany"],
                "hostPath": {"path": f"/tmp/{pv_name}"},
                "storageClassName": "",
                "claimRef": {"namespace": ns, "name": name},
            },
        }
    )
    core.create_namespaced_persistent_volume_claim(
        ns,
        {
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadOnlyMany"],
                "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": "",
                "volumeName": pv_name,
            },
        },
    )
    wait_for(
        lambda: core.read_namespaced_persistent_volume_claim(name, ns).status.phase == "Bound",
        30,
        what=f"claim {name} bound on {worker}",
    )


def _volumes_gone(bed: Bed, mk: MultiKueue) -> None:
    """The PersistentVolumes made for the test's claims (cluster-wide: its namespace's deletion
    leaves them)."""
    for worker in mk.workers:
        core = client.CoreV1Api(bed.api(worker))
        for pv in core.list_persistent_volume().items:
            if pv.metadata.name.startswith(f"{mk.ns}-"):
                core.delete_persistent_volume(pv.metadata.name)


def test_a_job_that_mounts_a_claim_runs_only_where_the_claim_is(bed: Bed) -> None:
    mk = MultiKueue(bed)
    try:
        _runs_where_its_claim_is(bed, mk)
    finally:
        _volumes_gone(bed, mk)


def _runs_where_its_claim_is(bed: Bed, mk: MultiKueue) -> None:
    without, holder = mk.workers[0], mk.workers[1]
    _bound_claim(bed, holder, mk.ns, "imagenet")
    pod = {
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}}],
    }
    with workloads_seen(mk, without) as seen:
        mk.submit("near-data", pod_spec=pod)
        mk.wait_until("near-data", "Complete")
    assert names(seen) == set(), "no copy where the claim is not"
    assert (mk.get("near-data") or {})["status"]["clusterName"] == holder
    # Where no worker holds it: the TrainJob says so, and waits.
    mk.submit(
        "no-data",
        pod_spec={"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "missing"}}]},
    )
    waiting = wait_for(
        lambda: mk.condition("no-data", "DataUnavailable"), 60, what="DataUnavailable"
    )
    assert waiting["reason"] == "NoClusterHasData", waiting
    for worker in mk.workers:
        assert f"{worker}: PersistentVolumeClaim missing" in waiting["message"], waiting
    nothing_sent(mk, "no worker holds the claim")
    # The claim made on the first worker: the job goes there.
    _bound_claim(bed, without, mk.ns, "missing")
    mk.wait_until("no-data", "Complete", timeout=120)
    assert (mk.get("no-data") or {})["status"]["clusterName"] == without


def test_a_job_naming_a_dataset_runs_only_on_a_cluster_labelled_with_it(bed: Bed) -> None:
    mk = MultiKueue(bed)
    holder = mk.workers[1]
    custom = mk.custom()
    label = {"metadata": {"labels": {"dataset.trainjob.dev/c4": "true"}}}
    custom.patch_cluster_custom_object(*KUEUE, "multikueueclusters", holder, label)
    try:
        with workloads_seen(mk, mk.workers[0]) as seen:
            mk.submit("c4", metadata={"annotations": {DATASETS: "c4"}})
            mk.wait_until("c4", "Complete")
        assert names(seen) == set()
        assert (mk.get("c4") or {})["status"]["clusterName"] == holder
    finally:
        unlabel = {"metadata": {"labels": {"dataset.trainjob.dev/c4": None}}}
        custom.patch_cluster_custom_object(*KUEUE, "multikueueclusters", holder, unlabel)
