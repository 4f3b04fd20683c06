"""Gang scheduling on a worker (worker_controller/pod_groups.py): the PodGroup a runtime's
podGroupPolicy asks for, as Kubeflow Trainer v2.3 makes it, and what the pass decides with
and without that PodGroup's API (no cluster; the bed's tests/e2e/test_pod_groups.py installs
the CRDs)."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.helpers.builders import (
    OWNER,
    container,
    make_runtime,
    make_trainjob,
    replicated_job,
)
from tests.support.worker_plans import OUR_SERVICE, Dict, as_made, conditions, job, observe
from trainjob.models import parse_trainjob
from trainjob.runtime import resolve_runtime_info
from worker_controller import pod_groups

RESOURCES = {"requests": {"cpu": "1500m", "memory": "2Gi"}, "limits": {"cpu": "2"}}


def gang_runtime(policy: Dict, **meta: Any) -> Dict:
    """A launcher (1 pod, its own requests and an init container) and a trainer step."""
    launcher = replicated_job(
        "launcher",
        None,
        [container("launcher", resources={"requests": {"cpu": "250m"}})],
    )
    spec = launcher["template"]["spec"]["template"]["spec"]
    spec["initContainers"] = [container("wait", resources={"requests": {"cpu": "500m"}})]
    spec["priorityClassName"] = "research"
    runtime = make_runtime(
        replicated_jobs=[launcher, replicated_job("node", "trainer", [container()])],
        podGroupPolicy=policy,
    )
    if meta:
        runtime["spec"]["template"]["metadata"] = meta
    return runtime


def trainjob(nodes: int = 3) -> Dict:
    return make_trainjob(trainer={"numNodes": nodes, "resourcesPerNode": RESOURCES})


def info_of(tj: Dict, runtime: Dict) -> Any:
    info, problem = resolve_runtime_info(parse_trainjob(tj), runtime)
    assert problem is None, problem
    return info


def test_a_coscheduling_group_counts_every_pod_and_what_they_all_request() -> None:
    runtime = gang_runtime({"coscheduling": {}})
    info = info_of(trainjob(), runtime)
    group = pod_groups.build_pod_group(info)
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and group["kind"] == "PodGroup"
    assert group["metadata"] == {"name": "tj", "namespace": "ns"}
    # 1 launcher (max(250m, init 500m)) + 3 nodes of 1500m / 2Gi
    assert group["spec"] == {
        "minMember": 4,
        "minResources": {"cpu": "5", "memory": str(3 * 2**31)},
        "scheduleTimeoutSeconds": 60,
    }
    runtime["spec"]["podGroupPolicy"]["coscheduling"]["scheduleTimeoutSeconds"] = 5
    info = info_of(trainjob(1), runtime)
    group = pod_groups.build_pod_group(info)
    assert group["spec"]["minMember"] == 2 and group["spec"]["scheduleTimeoutSeconds"] == 5
    assert group["spec"]["minResources"] == {"cpu": "2", "memory": str(2**31)}


def test_a_volcano_group_takes_the_queue_the_priority_class_and_the_topology() -> None:
    policy = {"volcano": {"networkTopology": {"mode": "soft"}}}
    runtime = gang_runtime(policy, annotations={"scheduling.volcano.sh/queue-name": "research"})
    info = info_of(trainjob(2), runtime)
    group = pod_groups.build_pod_group(info)
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "3500m", "memory": str(2 * 2**31)},
        "queue": "research",
        "priorityClassName": "research",
        "networkTopology": {"mode": "soft", "highestTierAllowed": 1},
    }
    plain = info_of(trainjob(2), gang_runtime({"volcano": {}}))
    spec = pod_groups.build_pod_group(plain)["spec"]
    assert "queue" not in spec and "networkTopology" not in spec


@pytest.mark.parametrize(
    ("policy", "meta", "says"),
    [
        ({"coscheduling": {}, "volcano": {}}, {}, "sets both coscheduling and volcano"),
        (
            {"volcano": {}},
            {"annotations": {"scheduling.volcano.sh/queue-name": ""}},
            "scheduling.volcano.sh/queue-name] is empty",
        ),
        ({"volcano": {"networkTopology": {"mode": "strict"}}}, {}, "networkTopology.mode"),
        ({"coscheduling": {"scheduleTimeoutSeconds": -1}}, {}, "scheduleTimeoutSeconds"),
    ],
)
def test_a_policy_that_cannot_be_made_is_refused_naming_it(
    policy: Dict, meta: Dict, says: str
) -> None:
    _, problem = resolve_runtime_info(parse_trainjob(trainjob()), gang_runtime(policy, **meta))
    assert problem is not None and problem.reason == "RuntimeInvalid"
    assert says in problem.message


def pod_meta(obj: Dict) -> Dict:
    return obj["spec"]["template"]["metadata"]


@pytest.mark.parametrize(
    ("policy", "field", "key"),
    [
        ("coscheduling", "labels", "scheduling.x-k8s.io/pod-group"),
        ("volcano", "annotations", "scheduling.k8s.io/group-name"),
    ],
)
def test_where_the_api_is_served_the_group_comes_before_the_jobs_and_every_pod_names_it(
    policy: str, field: str, key: str
) -> None:
    runtime = gang_runtime({policy: {}})
    plan = observe(trainjob(), runtime, services=[OUR_SERVICE], pod_group_apis=frozenset({policy}))
    made = [(o["kind"], o["metadata"]["name"]) for o in plan.create]
    assert made[0] == ("PodGroup", "tj") and {k for k, _ in made[1:]} == {"Job"}
    group = plan.create[0]
    assert group["metadata"]["ownerReferences"] == [OWNER]
    assert group["metadata"]["labels"]["trainjob.dev/trainjob-name"] == "tj"
    for obj in plan.create[1:]:
        assert pod_meta(obj)[field][key] == "tj"
    assert "PodGroupPolicyIgnored" not in conditions(plan)
    # The other scheduler's API served instead: ungrouped, and said.
    other = "volcano" if policy == "coscheduling" else "coscheduling"
    plan = observe(trainjob(), runtime, services=[OUR_SERVICE], pod_group_apis=frozenset({other}))
    assert all(o["kind"] == "Job" for o in plan.create)
    assert all(key not in (pod_meta(o).get(field) or {}) for o in plan.create)
    assert conditions(plan)["PodGroupPolicyIgnored"] == ("True", "PodGroupPolicyIgnored")
    message = plan.status["conditions"][0]["message"]  # type: ignore[index]
    assert f"podGroupPolicy.{policy}" in message and "does not serve" in message


def named(name: str, labels: Dict | None = None, **state: Any) -> Dict:
    """A Job of `trainjob(1)` on the gang runtime, its pods as made (their labels as given)."""
    out = job(name, **state)
    made = {o["metadata"]["name"]: o for o in as_made(trainjob(1), gang_runtime({}))}
    out["spec"]["template"] = {
        "metadata": {"labels": labels or {}},
        "spec": made[name]["spec"]["template"]["spec"],
    }
    return out


def test_jobs_keep_what_they_were_made_with_when_the_api_comes_or_goes() -> None:
    """A pod template is never changed on a live Job: a CRD installed while the job runs does
    not group its pods (they are not relabelled), nor does one removed ungroup them."""
    runtime = gang_runtime({"coscheduling": {}})
    served = frozenset({"coscheduling"})
    tj = trainjob(1)
    first = observe(tj, runtime, services=[OUR_SERVICE])
    tj["status"] = first.status
    ungrouped = [named("tj-launcher-0", active=1), named("tj-node-0", active=1)]
    plan = observe(tj, runtime, jobs=ungrouped, services=[OUR_SERVICE], pod_group_apis=served)
    assert plan.create == [] and plan.patch == []
    assert conditions(plan)["PodGroupPolicyIgnored"] == ("True", "PodGroupPolicyIgnored")
    assert not plan.events  # said once

    group = {"scheduling.x-k8s.io/pod-group": "tj"}
    grouped = [named("tj-launcher-0", group, active=1), named("tj-node-0", group, active=1)]
    plan = observe(trainjob(1), runtime, jobs=grouped, services=[OUR_SERVICE])
    assert plan.create == [] and plan.patch == []
    assert "PodGroupPolicyIgnored" not in conditions(plan)
    # Suspended (Kueue evicts it): the Jobs are suspended as they were made, label and all
    # (a write of spec.suspend alone).
    suspended = make_trainjob(suspend=True, trainer={"numNodes": 1, "resourcesPerNode": RESOURCES})
    plan = observe(suspended, runtime, jobs=grouped, services=[OUR_SERVICE])
    assert sorted(o["metadata"]["name"] for o in plan.patch) == ["tj-launcher-0", "tj-node-0"]
    assert all(o["spec"] == {"suspend": True} for o in plan.patch)
