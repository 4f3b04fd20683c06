"""The scheduler-plugins' coscheduling PodGroup (trainjob/runtime/podgroups/coscheduling.py),
as Trainer v2.3's coscheduling plugin makes it."""

from __future__ import annotations

import pytest

from kubebase.objects import Dict
from tests.support.builders import container, edit
from tests.unit.trainjob.runtime.podgroups import (
    RESOURCES,
    gang_runtime,
    gang_trainjob,
    info_of,
    resolved,
)
from trainjob.models import parse_trainjob
from trainjob.runtime import resolve_runtime_info
from trainjob.runtime.podgroups import BY_NAME, build_pod_group
from trainjob_api.views import RuntimeView

PLUGIN = BY_NAME["coscheduling"]
GIB = 2**30


@pytest.mark.parametrize(
    ("policy", "nodes", "spec"),
    [
        # 1 launcher (max(250m, its init container's 500m)) + 3 nodes of 1500m / 2Gi
        ({}, 3, {"minMember": 4, "minResources": {"cpu": "5", "memory": str(6 * GIB)}}),
        ({}, 1, {"minMember": 2, "minResources": {"cpu": "2", "memory": str(2 * GIB)}}),
        ({"scheduleTimeoutSeconds": 5}, 1, {"minMember": 2, "scheduleTimeoutSeconds": 5}),
        ({"scheduleTimeoutSeconds": 0}, 1, {"minMember": 2, "scheduleTimeoutSeconds": 0}),
    ],
)
def test_a_group_counts_every_pod_what_they_request_and_the_timeout(
    policy: Dict, nodes: int, spec: Dict
) -> None:
    group = build_pod_group(info_of(gang_runtime({"coscheduling": policy}), nodes), PLUGIN)
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and group["kind"] == "PodGroup"
    assert group["metadata"] == {"name": "tj", "namespace": "ns"}
    assert {"scheduleTimeoutSeconds": 60, **spec}.items() <= group["spec"].items()
    assert set(group["spec"]) == {"minMember", "minResources", "scheduleTimeoutSeconds"}


@pytest.mark.parametrize(
    ("policy", "says"),
    [
        ({"coscheduling": {}, "volcano": {}}, "sets both coscheduling and volcano"),
        ({"coscheduling": {"scheduleTimeoutSeconds": -1}}, "scheduleTimeoutSeconds"),
    ],
)
def test_a_policy_that_cannot_be_made_is_refused_naming_it(policy: Dict, says: str) -> None:
    _, problem = resolved(gang_runtime(policy))
    assert problem is not None and problem.reason == "RuntimeInvalid"
    assert says in problem.message


def test_a_resource_no_pod_requests_is_left_out() -> None:
    """A quantity of zero (a TrainJob that sets `nvidia.com/gpu: 0` per node) adds nothing
    the scheduler must find room for."""
    runtime = gang_runtime({"coscheduling": {}})
    no_gpu = {**RESOURCES["requests"], "nvidia.com/gpu": "0"}
    trainjob = gang_trainjob(2, resources={**RESOURCES, "requests": no_gpu})
    info, problem = resolve_runtime_info(parse_trainjob(trainjob), RuntimeView(runtime))
    assert info is not None, problem
    assert build_pod_group(info, PLUGIN)["spec"]["minResources"] == {
        "cpu": "3500m",
        "memory": str(4 * GIB),
    }


def test_pods_that_request_nothing_give_no_min_resources() -> None:
    runtime = gang_runtime({"coscheduling": {}})
    for rj in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = rj["template"]["spec"]["template"]["spec"]
        for ctr in [*pod.get("containers", []), *pod.get("initContainers", [])]:
            ctr.pop("resources", None)
    body = gang_trainjob(2, resources=None)
    info, problem = resolve_runtime_info(parse_trainjob(body), RuntimeView(runtime))
    assert info is not None, problem
    assert build_pod_group(info, PLUGIN)["spec"] == {"minMember": 3, "scheduleTimeoutSeconds": 60}


def test_min_resources_count_the_templates_requests_as_trainer_does() -> None:
    """Trainer v2.3 counts a pod of the gang with Kubernetes' PodRequests over its template as
    written: a sidecar adds to the containers, a limit given without a request adds nothing,
    and the pod's own requests stand for its containers' CPU."""
    runtime = gang_runtime({"coscheduling": {}})
    edit(runtime).pod_spec(
        "launcher",
        initContainers=[
            container("proxy", resources={"requests": {"cpu": "1"}}) | {"restartPolicy": "Always"},
            container("cap", resources={"limits": {"memory": "64Gi"}}),
        ],
    )
    info = info_of(runtime, nodes=2)
    # launcher 250m + its 1-CPU sidecar; 2 nodes of 1500m, 2Gi (their 2-CPU limit aside)
    assert build_pod_group(info, PLUGIN)["spec"]["minResources"] == {
        "cpu": "4250m",
        "memory": str(4 * GIB),
    }
    edit(runtime).pod_spec("launcher", resources={"requests": {"cpu": "3"}})
    assert build_pod_group(info_of(runtime, nodes=2), PLUGIN)["spec"]["minResources"]["cpu"] == "6"
