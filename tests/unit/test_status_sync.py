"""Status back from a worker onto the manager TrainJob."""

from __future__ import annotations

from dispatcher.copies import status_back


def _cond(ctype: str, reason: str, status: str = "True", message: str = "m") -> dict[str, str]:
    return {"type": ctype, "status": status, "reason": reason, "message": message}


def test_the_remote_status_replaces_the_managers_with_the_cluster_named() -> None:
    remote = {"status": {"conditions": [_cond("Complete", "Completed")]}}
    manager = {"status": {"clusterName": "w1", "podsStatus": []}}
    assert status_back(manager, remote, "w1") == {
        "podsStatus": None,
        "conditions": [_cond("Complete", "Completed")],
        "clusterName": "w1",
    }
    assert status_back({"status": {**remote["status"], "clusterName": "w1"}}, remote, "w1") is None
