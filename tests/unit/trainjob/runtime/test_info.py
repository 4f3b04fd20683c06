"""The runtime framework's typed result (trainjob/runtime/info.py): what Kueue counts of each
PodSet, and which pod template a Workload holds."""

from __future__ import annotations

import pytest

from tests.support.builders import make_runtime, make_trainjob
from tests.unit.trainjob.runtime import info_for
from trainjob.runtime import PodSetShape


def test_kueue_counts_replicas_times_parallelism() -> None:
    assert PodSetShape("node", 3, 4).count == 12
    info = info_for(make_trainjob(trainer={"numNodes": 3}), make_runtime())
    node = info.pod_set("node")
    assert (node.replicas, node.parallelism, node.count) == (1, 3, 3)
    node.replicas = 2  # two Jobs of three pods each
    assert node.count == 6
    with pytest.raises(KeyError):
        info.pod_set("launcher")


def test_a_workload_holds_the_template_before_the_ml_policy_added_its_part() -> None:
    """Kueue's own TrainJob integration builds its PodSets before Trainer's plugins run: the
    queued template is the one without the policy's env, so a Workload made here is one a
    worker's Kueue takes as its TrainJob's."""
    info = info_for(make_trainjob(trainer={"numNodes": 2}), make_runtime())
    node = info.pod_set("node")
    ran = {e["name"] for e in node.container("node")["env"]}  # type: ignore[index]
    queued = node.queued_template["spec"]["containers"][0]
    assert "PET_NNODES" in ran
    assert "PET_NNODES" not in {e["name"] for e in queued.get("env") or []}
    assert node.queued_spec is node.queued_template["spec"]
    node.kueue_template = None  # before the framework keeps it: the pods' own
    assert node.queued_template is node.pod_template


def test_the_shape_changes_with_what_the_pods_ask_for() -> None:
    small = info_for(make_trainjob(trainer={"numNodes": 2}), make_runtime())
    asks = {"requests": {"cpu": "4"}}
    big = info_for(make_trainjob(trainer={"numNodes": 2, "resourcesPerNode": asks}), make_runtime())
    assert [s.name for s in small.shape] == ["node"] and small.shape[0].count == 2
    assert small.shape != big.shape  # more per pod: another Workload
    assert [(s.replicas, s.parallelism) for s in big.shape] == [(1, 2)]
    assert small.shape == info_for(make_trainjob(trainer={"numNodes": 2}), make_runtime()).shape
    assert small.pod_set("node").container("absent") is None
    # What Kueue counts is the queued template's: the policy's additions change no shape.
    node = small.pod_set("node")
    node.container("node")["resources"] = {"requests": {"cpu": "64"}}  # type: ignore[index]
    assert small.shape == info_for(make_trainjob(trainer={"numNodes": 2}), make_runtime()).shape
