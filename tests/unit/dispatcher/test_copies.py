"""A TrainJob's copies on the workers (dispatcher/decisions/copies.py): built without what belongs
to the manager, ours or not, what the remote watches keep of them (what the dispatcher reads, no
more), and the status brought back."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from dispatcher.decisions.copies import (
    MAX_MANAGER_BYTES,
    changes,
    fit,
    name_taken,
    orphan,
    remote_trainjob,
    remote_workload,
    status_back,
)
from dispatcher.decisions.copies import seen as copy_seen
from tests.support.builders import TrainJobBuilder, edit, make_trainjob
from tests.support.dispatch import manager_workload
from trainjob.ownership import is_our_copy
from trainjob_api import constants as c
from trainjob_api.views import ObjectView, TrainJobView, WorkloadView

Dict = dict[str, Any]


def _condition(type_: str) -> dict:
    return {"type": type_, "status": "True", "reason": "R", "message": "m"}


def test_a_workload_copy_keeps_identity_active_and_admission_conditions() -> None:
    meta = {
        "name": "wl",
        "namespace": "ns",
        "uid": "u1",
        "resourceVersion": "7",
        "labels": {"kueue.x-k8s.io/multikueue-origin": "m"},
        "ownerReferences": [{"kind": "TrainJob", "name": "tj"}],
        "annotations": {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: "m-uid", "other": "x"},
    }
    conditions = [_condition(t) for t in ("QuotaReserved", "Admitted", "PodsReady", "Finished")]
    copy = {
        "metadata": meta,
        "spec": {
            "active": False,
            "priority": 5,
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass"},
            "podSets": [{"name": "node", "count": 2}],
        },
        "status": {"conditions": conditions, "admission": {"clusterQueue": "cq"}},
    }
    seen = copy_seen(c.WORKLOAD, copy)
    assert seen["apiVersion"] == c.KUEUE_API and seen["kind"] == "Workload"
    assert "ownerReferences" not in seen["metadata"] and seen["metadata"]["uid"] == "u1"
    assert "labels" not in seen["metadata"]
    # the manager object's UID it was made for, to tell an orphan by; no other annotation
    assert seen["metadata"]["annotations"] == {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: "m-uid"}
    # `active`, and the priority the manager's may change (decide's _priority_follows)
    assert seen["spec"] == {
        "active": False,
        "priority": 5,
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass"},
    }
    kept = [cd["type"] for cd in seen["status"]["conditions"]]
    assert kept == ["QuotaReserved", "Admitted", "Finished"]
    assert "admission" not in seen["status"]


def test_a_trainjob_copy_keeps_its_whole_status_the_uid_it_was_made_for_and_no_spec() -> None:
    status = {"conditions": [_condition("Complete")], "jobsStatus": [{"name": "node"}]}
    annotations = {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: "m-uid", "other": "x"}
    copy = {
        "metadata": {
            "name": "tj",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "3",
            "annotations": annotations,
        },
        "spec": {"suspend": False, "runtimeRef": {"name": "torch"}},
        "status": status,
    }
    seen = copy_seen(c.TRAINJOB, copy)
    assert seen["kind"] == "TrainJob" and seen["status"] == status and "spec" not in seen
    # the manager TrainJob's UID it was made for: an orphan is told by it, its tails are kept
    # under it, the story reads only the copy of this very TrainJob; no other annotation
    assert seen["metadata"]["annotations"] == {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: "m-uid"}


def test_remote_copies_drop_what_belongs_to_the_manager() -> None:
    wl = remote_workload(WorkloadView(manager_workload("QuotaReserved")), "multikueue")
    assert wl["metadata"]["labels"] == {"kueue.x-k8s.io/multikueue-origin": "multikueue"}
    assert "ownerReferences" not in wl["metadata"] and "status" not in wl
    tj = make_trainjob(
        managedBy="kueue.x-k8s.io/multikueue",
        runtimePatches=[{"manager": "kueue.x-k8s.io/manager"}, {"manager": "user"}],
    )
    out = remote_trainjob(TrainJobView(tj), "wl", "multikueue")
    assert out["spec"]["runtimePatches"] == [{"manager": "user"}]


def test_remote_copies_carry_the_manager_objects_uid_for_tracing() -> None:
    manager_wl = edit(manager_workload("QuotaReserved")).uid("uid-wl").obj()
    wl = remote_workload(WorkloadView(manager_wl), "multikueue")
    assert wl["metadata"]["annotations"] == {"kueue.x-k8s.io/multikueue-origin-uid": "uid-wl"}
    tj = TrainJobBuilder().multikueue().obj()
    edit(tj).annotations({"kubectl.kubernetes.io/last-applied-configuration": "{}"})
    out = remote_trainjob(TrainJobView(tj), "wl", "multikueue")
    assert out["metadata"]["annotations"] == {
        "kueue.x-k8s.io/multikueue-origin-uid": "uid-tj",
        # Kueue 0.19 names the prebuilt Workload in an annotation (the label stays too)
        "kueue.x-k8s.io/prebuilt-workload-name": out["metadata"]["labels"][
            "kueue.x-k8s.io/prebuilt-workload-name"
        ],
    }


def test_a_copy_of_another_manager_object_or_origin_is_not_ours() -> None:
    copy = remote_trainjob(TrainJobView(make_trainjob("tj")), "wl", "multikueue")
    ours = ObjectView(copy)
    assert is_our_copy(ours, ours)
    foreign = ObjectView({"metadata": {"name": "tj", "labels": {}}})
    assert not is_our_copy(foreign, ours)
    replaced = edit(make_trainjob("tj")).uid("uid-replaced").obj()
    other = remote_trainjob(TrainJobView(replaced), "wl", "multikueue")
    assert not is_our_copy(ObjectView(other), ours)
    elsewhere = remote_trainjob(TrainJobView(make_trainjob("tj")), "wl", "other-manager")
    assert not is_our_copy(ObjectView(elsewhere), ours)


def test_a_name_is_taken_by_anything_there_but_our_copy_of_that_very_object() -> None:
    """After a create's 409: the object read there is ours (nothing taken), gone (nothing
    taken), or anyone else's, said naming the copy's kind, namespace and name."""
    copy = remote_trainjob(TrainJobView(make_trainjob("tj")), "wl", "multikueue")
    assert name_taken(None, ObjectView(copy)) is None
    assert name_taken(ObjectView(copy), ObjectView(copy)) is None
    said = "TrainJob ns/tj exists there and is not a copy from this manager (it is left as it is)"
    replaced = edit(make_trainjob("tj")).uid("uid-replaced").obj()
    for found in (
        {"kind": "TrainJob", "metadata": {"name": "tj", "namespace": "ns", "labels": {}}},
        remote_trainjob(TrainJobView(replaced), "wl", "multikueue"),
        remote_trainjob(TrainJobView(make_trainjob("tj")), "wl", "other-manager"),
    ):
        assert name_taken(ObjectView(found), ObjectView(copy)) == said


def _cond(ctype: str, reason: str, status: str = "True", message: str = "m") -> dict[str, str]:
    return {"type": ctype, "status": status, "reason": reason, "message": message}


def test_the_remote_status_replaces_the_managers_with_the_cluster_named() -> None:
    remote = {"status": {"conditions": [_cond("Complete", "AllJobsCompleted")]}}
    manager = {"status": {"clusterName": "w1", "podsStatus": []}}
    assert status_back(TrainJobView(manager), TrainJobView(remote), "w1") == {
        "podsStatus": None,
        "conditions": [_cond("Complete", "AllJobsCompleted")],
        "clusterName": "w1",
    }
    assert (
        status_back(
            TrainJobView({"status": {**remote["status"], "clusterName": "w1"}}),
            TrainJobView(remote),
            "w1",
        )
        is None
    )


def test_a_field_the_remote_trainer_status_dropped_is_removed_on_the_manager() -> None:
    old = {"progressPercentage": 40, "estimatedRemainingSeconds": 60, "lastUpdatedTime": "t1"}
    new = {"progressPercentage": 50, "lastUpdatedTime": "t2"}
    manager = {"status": {"clusterName": "w1", "trainerStatus": old}}
    remote = {"status": {"trainerStatus": new}}
    patch = status_back(TrainJobView(manager), TrainJobView(remote), "w1")
    assert patch == {
        "trainerStatus": {**new, "estimatedRemainingSeconds": None},
        "clusterName": "w1",
    }


def test_the_copies_sent_are_whole_objects_a_worker_accepts_as_they_are() -> None:
    """What the worker's API server receives, field for field: the Workload without the
    manager's job-uid label (its Job is not on that worker), the TrainJob suspended, left to
    the worker's own controller and naming its prebuilt Workload."""
    manager_wl = edit(manager_workload("QuotaReserved")).uid("uid-wl").obj()
    assert remote_workload(WorkloadView(manager_wl), "multikueue") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "trainjob-tj-abcde",
            "namespace": "ns",
            "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"},
            "annotations": {"kueue.x-k8s.io/multikueue-origin-uid": "uid-wl"},
        },
        "spec": {"queueName": "q", "podSets": [{"name": "node", "count": 2}]},
    }
    tj = TrainJobBuilder().queue("q").multikueue().obj()
    assert remote_trainjob(TrainJobView(tj), "wl", "multikueue") == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "tj",
            "namespace": "ns",
            "labels": {
                "kueue.x-k8s.io/queue-name": "q",
                "kueue.x-k8s.io/prebuilt-workload-name": "wl",
                "kueue.x-k8s.io/multikueue-origin": "multikueue",
            },
            "annotations": {
                "kueue.x-k8s.io/prebuilt-workload-name": "wl",
                "kueue.x-k8s.io/multikueue-origin-uid": "uid-tj",
            },
        },
        "spec": {
            "runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime"},
            "suspend": True,
        },
    }


def _copy_made_for(uid: str | None) -> ObjectView:
    annotations = {} if uid is None else {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: uid}
    return ObjectView({"metadata": {"name": "tj", "namespace": "ns", "annotations": annotations}})


MANAGER_TJ = ObjectView({"metadata": {"name": "tj", "namespace": "ns", "uid": "uid-tj"}})


@pytest.mark.parametrize(
    ("copy", "manager", "orphaned"),
    [
        (_copy_made_for("uid-tj"), None, True),  # its manager object deleted
        (_copy_made_for("uid-old"), MANAGER_TJ, True),  # replaced by a new one of that name
        (_copy_made_for("uid-tj"), MANAGER_TJ, False),  # made for the one there now
        # a copy that names no manager object (made before copies carried the UID) is left
        # to its TrainJob's own clean-up
        (_copy_made_for(None), MANAGER_TJ, False),
    ],
)
def test_a_copy_is_an_orphan_once_the_manager_object_it_was_made_for_is_gone(
    copy: ObjectView, manager: ObjectView | None, orphaned: bool
) -> None:
    assert orphan(copy, manager) is orphaned


@pytest.mark.parametrize(
    ("have", "patch", "changed"),
    [
        # the same report, said again in part: nothing to write
        ({"trainerStatus": {"a": 1, "b": 2}}, {"trainerStatus": {"a": 1}}, False),
        # a field of the report removed
        ({"trainerStatus": {"a": 1, "b": 2}}, {"trainerStatus": {"b": None}}, True),
        # a field of the report changed
        ({"trainerStatus": {"a": 1}}, {"trainerStatus": {"a": 2}}, True),
        # a part of the status removed, or one the manager does not have removed again
        ({"podsStatus": []}, {"podsStatus": None}, True),
        ({}, {"podsStatus": None}, False),
    ],
)
def test_a_status_patch_changes_the_trainjob_only_when_merged_it_differs(
    have: Dict, patch: Dict, changed: bool
) -> None:
    assert changes(TrainJobView({"metadata": {"name": "tj"}, "status": have}), patch) is changed


@pytest.mark.parametrize(("over", "left"), [(0, []), (1, ["trainerStatus"])])
def test_a_trainjob_brought_exactly_to_the_stored_limit_takes_the_whole_status(
    over: int, left: list[str]
) -> None:
    tj = edit(make_trainjob()).annotations({"pad": ""}).obj()
    patch = {"trainerStatus": {"progressPercentage": 50}, "clusterName": "w1"}
    size = len(orjson.dumps(tj)) + len(orjson.dumps(patch))
    edit(tj).annotation("pad", "x" * (MAX_MANAGER_BYTES - size + over))
    expected = {**patch, **{key: None for key in left}}
    assert fit(TrainJobView(tj), patch) == (expected, left)


def test_the_jobs_counts_pods_ready_is_read_from_are_the_last_left_on_the_worker() -> None:
    """Too large with the report and the pods' counts: both stay on the worker, the Jobs'
    counts (what the manager Workload's PodsReady is read from) come back."""
    tj = make_trainjob()
    counts = [{"name": f"n{i}", "ready": 1, "active": 1} for i in range(100)]
    pods = [{"name": f"n{i}", "running": 1, "pending": 0} for i in range(100)]
    patch = {
        "trainerStatus": {"progressPercentage": 50},
        "podsStatus": pods,
        "jobsStatus": counts,
        "clusterName": "w1",
    }
    room = len(orjson.dumps({**patch, "trainerStatus": None, "podsStatus": None}))
    edit(tj).annotations({"pad": ""})
    pad = MAX_MANAGER_BYTES - len(orjson.dumps(tj)) - room
    edit(tj).annotation("pad", "x" * pad)
    fitted, left = fit(TrainJobView(tj), patch)
    assert left == ["trainerStatus", "podsStatus"]
    assert fitted["jobsStatus"] == counts and fitted["podsStatus"] is None
