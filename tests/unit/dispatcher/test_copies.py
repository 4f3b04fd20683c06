"""A TrainJob's copies on the workers (dispatcher/copies.py): built without what belongs to the
manager, ours or not, what the remote watches keep of them (what the dispatcher reads, no more),
and the status brought back."""

from __future__ import annotations

from typing import Any

from clusters.helpers.builders import TrainJobBuilder, make_trainjob
from dispatcher.copies import is_our_copy, remote_trainjob, remote_workload, status_back
from dispatcher.copies import seen as copy_seen
from tests.support.dispatch import manager_workload
from trainjob import constants as c
from trainjob.views import ObjectView, TrainJobView, WorkloadView

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
    }
    conditions = [_condition(t) for t in ("QuotaReserved", "Admitted", "PodsReady", "Finished")]
    copy = {
        "metadata": meta,
        "spec": {"active": False, "priority": 5, "podSets": [{"name": "node", "count": 2}]},
        "status": {"conditions": conditions, "admission": {"clusterQueue": "cq"}},
    }
    seen = copy_seen(c.WORKLOAD, copy)
    assert seen["apiVersion"] == c.KUEUE_API and seen["kind"] == "Workload"
    assert "ownerReferences" not in seen["metadata"] and seen["metadata"]["uid"] == "u1"
    assert "labels" not in seen["metadata"]
    assert seen["spec"] == {"active": False, "priority": 5}
    kept = [cd["type"] for cd in seen["status"]["conditions"]]
    assert kept == ["QuotaReserved", "Admitted", "Finished"]
    assert "admission" not in seen["status"]


def test_a_trainjob_copy_keeps_its_whole_status_and_no_spec() -> None:
    status = {"conditions": [_condition("Complete")], "jobsStatus": [{"name": "node"}]}
    copy = {
        "metadata": {"name": "tj", "namespace": "ns", "resourceVersion": "3"},
        "spec": {"suspend": False, "runtimeRef": {"name": "torch"}},
        "status": status,
    }
    seen = copy_seen(c.TRAINJOB, copy)
    assert seen["kind"] == "TrainJob" and seen["status"] == status and "spec" not in seen


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
    manager_wl = manager_workload("QuotaReserved")
    manager_wl["metadata"]["uid"] = "uid-wl"
    wl = remote_workload(WorkloadView(manager_wl), "multikueue")
    assert wl["metadata"]["annotations"] == {"kueue.x-k8s.io/multikueue-origin-uid": "uid-wl"}
    tj = TrainJobBuilder().multikueue().obj()
    tj["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
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
    replaced = make_trainjob("tj")
    replaced["metadata"]["uid"] = "uid-replaced"
    other = remote_trainjob(TrainJobView(replaced), "wl", "multikueue")
    assert not is_our_copy(ObjectView(other), ours)
    elsewhere = remote_trainjob(TrainJobView(make_trainjob("tj")), "wl", "other-manager")
    assert not is_our_copy(ObjectView(elsewhere), ours)


def _cond(ctype: str, reason: str, status: str = "True", message: str = "m") -> dict[str, str]:
    return {"type": ctype, "status": status, "reason": reason, "message": message}


def test_the_remote_status_replaces_the_managers_with_the_cluster_named() -> None:
    remote = {"status": {"conditions": [_cond("Complete", "Completed")]}}
    manager = {"status": {"clusterName": "w1", "podsStatus": []}}
    assert status_back(TrainJobView(manager), TrainJobView(remote), "w1") == {
        "podsStatus": None,
        "conditions": [_cond("Complete", "Completed")],
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
