"""Volcano's PodGroup (trainjob/runtime/podgroups/volcano.py), as Trainer v2.3's volcano
plugin makes it: the queue, the pods' priority class, the network topology."""

from __future__ import annotations

import pytest

from kubebase.objects import Dict
from tests.support.builders import edit
from tests.unit.trainjob.runtime.podgroups import gang_runtime, info_of, resolved
from trainjob.runtime.podgroups import BY_NAME, build_pod_group

PLUGIN = BY_NAME["volcano"]
QUEUE = "scheduling.volcano.sh/queue-name"
COUNTS = {"minMember": 3, "minResources": {"cpu": "3500m", "memory": str(2 * 2**31)}}


@pytest.mark.parametrize(
    ("policy", "annotations", "own"),
    [
        ({}, {}, {"priorityClassName": "research"}),
        ({}, {QUEUE: "research"}, {"queue": "research", "priorityClassName": "research"}),
        (
            {"networkTopology": {"mode": "soft"}},
            {QUEUE: "q"},
            {
                "queue": "q",
                "priorityClassName": "research",
                "networkTopology": {"mode": "soft", "highestTierAllowed": 1},
            },
        ),
        (
            {"networkTopology": {"highestTierAllowed": 3}},
            {},
            {
                "priorityClassName": "research",
                "networkTopology": {"mode": "hard", "highestTierAllowed": 3},
            },
        ),
    ],
)
def test_a_group_takes_the_queue_the_priority_class_and_the_topology(
    policy: Dict, annotations: Dict, own: Dict
) -> None:
    meta = {"annotations": annotations} if annotations else {}
    group = build_pod_group(info_of(gang_runtime({"volcano": policy}, **meta), 2), PLUGIN)
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1" and group["kind"] == "PodGroup"
    assert group["metadata"] == {"name": "tj", "namespace": "ns"}
    assert group["spec"] == {**COUNTS, **own}


@pytest.mark.parametrize(
    ("policy", "meta", "says"),
    [
        ({"volcano": {}}, {"annotations": {QUEUE: ""}}, f"{QUEUE}] is empty"),
        ({"volcano": {"networkTopology": {"mode": "strict"}}}, {}, "networkTopology.mode"),
    ],
)
def test_a_policy_that_cannot_be_made_is_refused_naming_it(
    policy: Dict, meta: Dict, says: str
) -> None:
    _, problem = resolved(gang_runtime(policy, **meta))
    assert problem is not None and problem.reason == "RuntimeInvalid"
    assert says in problem.message


def test_an_empty_queue_is_refused_only_when_volcano_makes_the_group() -> None:
    info, problem = resolved(gang_runtime({"coscheduling": {}}, annotations={QUEUE: ""}))
    assert problem is None and info is not None


def test_the_pods_class_is_the_last_roles_that_names_one() -> None:
    runtime = gang_runtime({"volcano": {}})
    edit(runtime).pod_spec("node", priorityClassName="urgent")
    group = build_pod_group(info_of(runtime, 2), PLUGIN)
    assert group["spec"]["priorityClassName"] == "urgent"  # the launcher's came first
