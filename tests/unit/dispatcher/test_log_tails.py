"""Which kept log tails go, and what is kept of a pod."""

from __future__ import annotations

from typing import Any

from dispatcher.copy_pods import pick_pod
from dispatcher.log_tails import LABEL, _entry, doomed
from trainjob import constants as c


def tail(uid: str, created: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"log-tail-{uid}",
            "labels": {LABEL: uid},
            "creationTimestamp": created,
        }
    }


def test_the_tails_of_gone_trainjobs_go_then_the_oldest_beyond_the_bound() -> None:
    items = [
        tail("a", "2026-11-26T10:00:00Z"),
        tail("b", "2026-11-26T09:00:00Z"),
        tail("gone", "2026-11-26T11:00:00Z"),
        tail("c", "2026-11-26T12:00:00Z"),
    ]
    going = [i["metadata"]["labels"][LABEL] for i in doomed(items, {"a", "b", "c"}, kept=2)]
    assert going == ["gone", "b"]
    assert doomed(items, {"a", "b", "c", "gone"}, kept=10) == []
    assert len(doomed(items, {"a", "b", "c", "gone"}, kept=0)) == 4


def test_a_kept_pod_can_be_picked_again_by_role_and_index() -> None:
    pod = {
        "metadata": {
            "name": "tj-node-0-1-x",
            "labels": {c.REPLICATED_JOB_NAME_LABEL: "node", c.JOB_COMPLETION_INDEX: "1", "x": "y"},
        },
        "spec": {"containers": [{"name": "node", "image": "big"}], "nodeName": "n1"},
        "status": {"phase": "Failed", "containerStatuses": [{"restartCount": 3, "ready": False}]},
    }
    kept = _entry(pod, "worker1")
    assert kept["worker"] == "worker1" and kept["status"]["phase"] == "Failed"
    assert "x" not in kept["metadata"]["labels"] and kept["spec"]["containers"] == [
        {"name": "node"}
    ]
    assert pick_pod([kept], {"node": "1"}) is kept
