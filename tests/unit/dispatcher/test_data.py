"""Placement that follows a job's data (dispatcher/decisions/data.py): the claims its pods mount
and the datasets it names, read from the pod templates, and the whole pass over a manager and two
workers in memory (tests/support/whole_pass.py). On the bed's API servers:
tests/e2e/test_placement.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dispatcher.decisions import data
from tests.support.builders import TrainJobBuilder, container, edit, make_runtime
from tests.support.whole_pass import (
    World,
    both_caches,  # noqa: F401 (the fixture the cases that run passes use)
    condition,
    fleet,
    reserve,
)
from trainjob_api import constants as c
from trainjob_api.views import RuntimeView

Dict = dict[str, Any]
KEY = ("ns", "tj")
WORKERS = ("worker1", "worker2")


def _runtime(**spec: Any) -> Dict:
    pod = {
        "containers": [container(volumeMounts=[{"name": "data", "mountPath": "/data"}])],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}}],
    }
    job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": pod}},
        },
    }
    return make_runtime(replicated_jobs=[job], **spec)


RUNTIME = _runtime()


def claim(name: str = "imagenet", phase: str = "Bound") -> Dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": phase},
    }


# ---- what a job's pods read -----------------------------------------------------------------


def test_the_claims_the_pods_mount_are_needed_but_those_the_job_makes_itself() -> None:
    pod_sets = [
        {
            "name": "node",
            "template": {
                "spec": {
                    "volumes": [
                        {"name": "a", "persistentVolumeClaim": {"claimName": "imagenet"}},
                        {"name": "b", "persistentVolumeClaim": {"claimName": "scratch-tj"}},
                        {"name": "c", "emptyDir": {}},
                    ]
                }
            },
        }
    ]
    needs = data.needs(
        pod_sets, {}, data.made_by_job(RuntimeView(_runtime()), "tj") | {"scratch-tj"}
    )
    assert needs.claims == (("imagenet", "spec.podSets[node].template.spec.volumes[0]"),)
    made = _runtime()
    edit(made).template_spec(
        volumeClaimPolicies=[{"templates": [{"metadata": {"name": "scratch"}}]}]
    )
    assert data.made_by_job(RuntimeView(made), "tj") == {"scratch-tj"}


def test_a_claim_is_named_where_it_is_first_mounted() -> None:
    """A claim mounted by two PodSets is needed once, named by the first mount, at its own
    index (an entry that is not a volume before it counts)."""
    mounts = [None, {"name": "e", "emptyDir": {}}, {"name": "d", "persistentVolumeClaim": {}}]
    claim = {"name": "a", "persistentVolumeClaim": {"claimName": "imagenet"}}
    pod_sets = [
        {"name": name, "template": {"spec": {"volumes": [*mounts, claim]}}}
        for name in ("launcher", "node")
    ]
    needs = data.needs(pod_sets, {}, set())
    assert needs.claims == (("imagenet", "spec.podSets[launcher].template.spec.volumes[3]"),)


def test_the_datasets_annotation_is_read_and_a_bad_one_named() -> None:
    annotation = data.DATASETS_ANNOTATION
    assert data.datasets_of({annotation: " imagenet, c4 ,imagenet"}) == ("imagenet", "c4")
    with pytest.raises(data.DatasetsError, match="'a b' is not a dataset name"):
        data.datasets_of({annotation: "a b"})
    with pytest.raises(data.DatasetsError, match="at most 16"):
        data.datasets_of({annotation: ",".join(f"d{i}" for i in range(17))})


def test_a_worker_without_the_claim_or_the_dataset_label_is_said_why() -> None:
    needs = data.DataNeeds((("imagenet", "volumes[0]"),), ("imagenet",))
    there = data.Claims(lambda name: "Pending" if name == "imagenet" else None)
    label = {data.DATASET_LABEL_PREFIX + "imagenet": "true"}
    assert data.problem(needs, label, there) is None
    assert data.problem(needs, label, data.Claims(there.phase, require_bound=True)) == (
        "PersistentVolumeClaim imagenet there is Pending"
    )
    assert data.problem(needs, {}, data.Claims(lambda _n: None)) == (
        "no dataset imagenet there (label dataset.trainjob.dev/<name>); "
        "PersistentVolumeClaim imagenet (volumes[0]) is not there"
    )
    assert data.problem(needs, label, None) is None  # claims not known: labels only


# ---- the whole pass ---------------------------------------------------------------------------


def _fleet(
    workers: dict[str, list[Dict]],
    datasets: str | None = None,
    runtime: Dict = RUNTIME,
    **settings: Any,
) -> World:
    """A manager with `runtime` and the TrainJob (naming `datasets` in its annotation), and
    `workers`."""
    submitted = TrainJobBuilder().queue("q").multikueue().obj()
    if datasets is not None:
        edit(submitted).annotations({data.DATASETS_ANNOTATION: datasets})
    world, _ctx = fleet([runtime, submitted], workers, **settings)
    return world


@pytest.fixture
def world() -> Iterator[World]:
    made = _fleet({"worker1": [RUNTIME], "worker2": [RUNTIME, claim()]})
    yield made
    made.close()


def _copies(world: World) -> dict[str, bool]:
    """Whether each worker holds a Workload copy."""
    return {w: bool(world.apis[w].objects(c.WORKLOAD, "ns")) for w in WORKERS}


def _check_message(world: World) -> str:
    wls = world.apis["manager"].objects(c.WORKLOAD, "ns")
    return str(wls[0]["status"]["admissionChecks"][0]["message"])


@pytest.mark.usefixtures("both_caches")
def test_a_job_goes_only_where_its_claim_is_and_the_check_says_why_not_elsewhere(
    world: World,
) -> None:
    world.settle(KEY)
    reserve(world, "manager")
    world.settle(KEY)
    assert _copies(world) == {"worker1": False, "worker2": True}
    assert "not sent to worker1: PersistentVolumeClaim imagenet" in _check_message(world)
    assert condition(world.get("manager", c.TRAINJOB, "tj"), c.COND_DATA_UNAVAILABLE) is None


@pytest.mark.usefixtures("both_caches")
def test_with_no_worker_holding_it_the_job_says_so_and_goes_once_one_does() -> None:
    world = _fleet({w: [RUNTIME] for w in WORKERS})
    try:
        world.settle(KEY)
        reserve(world, "manager")
        world.settle(KEY)
        assert _copies(world) == {"worker1": False, "worker2": False}
        tj = world.get("manager", c.TRAINJOB, "tj")
        assert condition(tj, c.COND_DATA_UNAVAILABLE) == ("True", c.REASON_NO_CLUSTER_HAS_DATA)
        world.apis["worker1"].put(claim())
        world.settle(KEY)
        assert _copies(world) == {"worker1": True, "worker2": False}
        tj = world.get("manager", c.TRAINJOB, "tj")
        assert condition(tj, c.COND_DATA_UNAVAILABLE) is None
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
def test_bound_takes_only_a_bound_claim_and_exists_a_pending_one_too() -> None:
    workers = {"worker1": [RUNTIME, claim(phase="Pending")], "worker2": [RUNTIME, claim()]}
    for setting, expected in (("Bound", False), ("Exists", True)):
        world = _fleet(workers, data_placement=setting)
        try:
            world.settle(KEY)
            reserve(world, "manager")
            world.settle(KEY)
            assert _copies(world) == {"worker1": expected, "worker2": True}, setting
        finally:
            world.close()


@pytest.mark.usefixtures("both_caches")
def test_a_named_dataset_sends_the_job_only_to_clusters_labelled_with_it() -> None:
    plain = make_runtime()  # it reads no claim
    world = _fleet({w: [plain] for w in WORKERS}, datasets="imagenet", runtime=plain)
    try:
        mkc = world.get("manager", c.MULTIKUEUE_CLUSTER, "worker2", namespace=None)
        assert mkc is not None
        edit(mkc).label(data.DATASET_LABEL_PREFIX + "imagenet", "true")
        world.apis["manager"].put(mkc)
        world.settle(KEY)
        reserve(world, "manager")
        world.settle(KEY)
        assert _copies(world) == {"worker1": False, "worker2": True}
        assert "not sent to worker1: no dataset imagenet there" in _check_message(world)
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
def test_data_placement_off_sends_copies_everywhere() -> None:
    world = _fleet({w: [RUNTIME] for w in WORKERS}, data_placement="Off")
    try:
        world.settle(KEY)
        reserve(world, "manager")
        world.settle(KEY)
        assert _copies(world) == {"worker1": True, "worker2": True}
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
def test_a_datasets_annotation_that_cannot_be_read_sends_the_job_nowhere_and_says_why() -> None:
    # Refused at admission (webhooks.py); one set before the webhook served is named here.
    plain = make_runtime()  # it reads no claim
    world = _fleet({w: [plain] for w in WORKERS}, datasets="image net", runtime=plain)
    try:
        world.settle(KEY)
        reserve(world, "manager")
        world.settle(KEY)
        assert _copies(world) == {"worker1": False, "worker2": False}
        with pytest.raises(data.DatasetsError) as refused:
            data.datasets_of({data.DATASETS_ANNOTATION: "image net"})
        assert f"not sent to worker1: {refused.value}" in _check_message(world)
    finally:
        world.close()
