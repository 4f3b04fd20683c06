"""Status back from a worker onto the manager TrainJob, and the Warnings it announces."""

from __future__ import annotations

from dispatcher.status_sync import status_back, warnings_back


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


def test_failed_and_stuck_pods_are_announced_once_per_reason() -> None:
    stuck = _cond("PodsStuck", "ImagePullBackOff", message="pod p container node: ...")
    patch = {"conditions": [stuck, _cond("Suspended", "Resumed", "False")]}
    assert warnings_back({}, patch, "w1") == [
        ("ImagePullBackOff", "on w1: pod p container node: ...")
    ]
    # Already said: nothing again; another reason, or Failed: said.
    assert warnings_back({"conditions": [stuck]}, patch, "w1") == []
    crash = _cond("PodsStuck", "CrashLoopBackOff")
    failed = _cond("Failed", "PodSetFailed", message="PodSet 'node' failed")
    assert warnings_back({"conditions": [stuck]}, {"conditions": [crash, failed]}, "w2") == [
        ("CrashLoopBackOff", "on w2: m"),
        ("PodSetFailed", "on w2: PodSet 'node' failed"),
    ]
    # Turned False, or a condition that is not announced: nothing.
    done = {"conditions": [_cond("PodsStuck", "PodsStarted", "False"), _cond("Complete", "C")]}
    assert warnings_back({"conditions": [stuck]}, done, "w1") == []
