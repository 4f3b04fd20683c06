"""What the dispatcher's caches keep of its copies on the workers: what it reads, no more."""

from __future__ import annotations

from dispatcher.copies import seen as copy_seen
from trainjob import constants as c


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
