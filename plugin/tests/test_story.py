"""The story's types: a pod, an Event and a pod's use in short, and reading an answer back."""

from __future__ import annotations

from typing import Any

import pytest

from trainjob_api import constants as c
from trainjob_api.story import (
    Pod,
    PodUsage,
    QueueWait,
    TrainJobStory,
    about,
    by_time,
    event_of,
    pod_of,
    pod_usage,
)


def node_pod(name: str, index: int, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """Pod `index` of replicatedJob "node" on node n1, with `status` when given."""
    labels = {c.REPLICATED_JOB_NAME_LABEL: "node", c.JOB_COMPLETION_INDEX: str(index)}
    pod = {"metadata": {"name": name, "labels": labels}, "spec": {"nodeName": "n1"}}
    return pod if status is None else {**pod, "status": status}


def test_a_pod_in_short_counts_restarts_and_is_ready_when_all_its_containers_are() -> None:
    first = {"ready": True, "restartCount": 2}
    running = {"phase": "Running", "containerStatuses": [first, {"ready": True}]}
    short = pod_of(node_pod("a", 2, running), "worker1")
    assert (short.restarts, short.ready, short.index, short.node) == (2, True, "2", "n1")
    one_unready = {"phase": "Running", "containerStatuses": [first, {"ready": False}]}
    assert not pod_of(node_pod("a", 2, one_unready), "worker1").ready
    assert not pod_of(node_pod("b", 0), "worker1").ready  # no container status yet


def test_a_pod_carries_its_use_by_name() -> None:
    used = {"a": PodUsage(cpu_millicores=5, memory_bytes=6)}
    assert pod_of(node_pod("a", 0), "worker1", used).usage == used["a"]
    assert pod_of(node_pod("a", 0), "worker1").usage is None


def test_events_about_our_objects_only_and_oldest_first() -> None:
    events = [{"involvedObject": {"uid": "p1"}}, {"involvedObject": {"uid": "other"}}, {}]
    assert about(events, {"p1"}) == [events[0]]
    late = event_of({"lastTimestamp": "2026-11-27T09:00:02Z", "reason": "B"}, "w1")
    early = event_of({"eventTime": "2026-11-27T09:00:01Z", "reason": "A"}, "manager")
    assert [e.reason for e in by_time([late, early])] == ["A", "B"]
    assert early.first_timestamp == early.last_timestamp == "2026-11-27T09:00:01Z"


def test_an_event_message_is_cut_and_its_object_named() -> None:
    said = event_of(
        {"message": "x" * 5000, "involvedObject": {"kind": "Pod", "name": "p"}, "count": 3},
        "w1",
    )
    assert (len(said.message), said.object, said.count) == (1024, "Pod/p", 3)


def test_pod_usage_sums_the_containers_in_millicores_and_bytes() -> None:
    metrics = {
        "timestamp": "2026-11-27T09:00:00Z",
        "window": "15.011s",
        "containers": [
            {"name": "node", "usage": {"cpu": "250123456n", "memory": "300Mi"}},
            {"name": "sidecar", "usage": {"cpu": "1m", "memory": "1024Ki"}},
        ],
    }
    assert pod_usage(metrics) == PodUsage(
        cpu_millicores=252,  # 250.12m rounded up, and 1m
        memory_bytes=301 * 2**20,
        timestamp="2026-11-27T09:00:00Z",
        window="15.011s",
    )


@pytest.mark.parametrize(
    "metrics",
    [{}, {"containers": []}, {"containers": [{"usage": {"cpu": "lots"}}]}, {"containers": [7]}],
)
def test_pod_usage_of_nothing_or_nonsense_is_none(metrics: dict[str, Any]) -> None:
    assert pod_usage(metrics) is None


def test_on_the_wire_names_are_camel_case_and_read_back_the_same() -> None:
    story = TrainJobStory.model_validate(
        {
            "metadata": {"name": "tj", "namespace": "ns"},
            "copy": {"status": {"jobsStatus": [{"name": "node", "active": 2}], "other": 1}},
            "pods": [Pod(name="a", worker="w1", replicated_job="node").to_json()],
            "queues": [{"worker": "w2", "copy": "waiting", "pendingInClusterQueue": 3}],
            "aFieldOfANewerDispatcher": True,
        }
    )
    wire = story.to_json()
    assert wire["kind"] == "TrainJobStory" and wire["apiVersion"] == "view.trainjob.dev/v1alpha1"
    assert wire["copy"]["status"]["jobsStatus"][0]["active"] == 2
    assert wire["copy"]["status"]["other"] == 1  # the worker's other status fields kept
    assert wire["pods"][0]["replicatedJob"] == "node" and "aFieldOfANewerDispatcher" not in wire
    assert TrainJobStory.model_validate(wire) == story
    assert story.queues == [QueueWait(worker="w2", copy="waiting", pending_in_cluster_queue=3)]
