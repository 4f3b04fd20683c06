"""Kueue's queues as views (trainjob/queues.py): what a ClusterQueue and a LocalQueue say."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from kubebase.objects import Dict
from tests.support.dispatch import NOW
from tests.support.pods import RICH_CONTAINER, RICH_POD
from trainjob import queues
from trainjob.queues import (
    AdmissionCheckView,
    ClusterQueueView,
    LocalQueueView,
    MultiKueueClusterView,
    MultiKueueConfigView,
    PodSetView,
    ResourceGroup,
)
from trainjob_api.pods import PodSpecView


def key_of(spec: Dict) -> str:
    """`resources_key` of a pod spec as written."""
    return queues.resources_key(PodSpecView(spec))


def asked_of(spec: Dict, *, limits_as_requests: bool = True) -> queues.Amounts:
    """`pod_requests` of a pod spec as written."""
    return queues.pod_requests(PodSpecView(spec), limits_as_requests=limits_as_requests)


CQ = ClusterQueueView(
    {
        "metadata": {"name": "cq"},
        "spec": {
            "cohortName": "team",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "on-demand",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "8", "borrowingLimit": "2"},
                                {"name": "memory", "nominalQuota": "16Gi", "lendingLimit": "4Gi"},
                            ],
                        },
                        {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "500m"}]},
                    ],
                }
            ],
        },
        "status": {
            "flavorsReservation": [{"name": "spot", "resources": [{"name": "cpu", "total": "1"}]}],
            "flavorsUsage": [],
            "pendingWorkloads": 2,
            "admittedWorkloads": 1,
            "conditions": [{"type": "Active", "status": "False"}],
        },
    }
)


def test_a_cluster_queues_quotas_in_order_with_their_limits() -> None:
    quotas = CQ.quotas()
    assert quotas.groups == (ResourceGroup(("cpu", "memory"), ("on-demand", "spot")),)
    assert quotas.nominal == {
        ("on-demand", "cpu"): 8,
        ("on-demand", "memory"): 16 * 1024**3,
        ("spot", "cpu"): Decimal("0.5"),
    }
    assert quotas.borrow == {("on-demand", "cpu"): 2}
    assert quotas.lend == {("on-demand", "memory"): 4 * 1024**3}
    assert quotas.covered == {"cpu", "memory"}


def test_an_amount_not_there_reads_as_none_of_it_and_a_limit_not_there_as_no_limit() -> None:
    """Reserved and nominal amounts read zero where a (flavour, resource) is absent, and the
    read adds nothing; a borrowing or lending limit that is absent is no limit, never zero."""
    quotas = CQ.quotas()
    assert CQ.reserved[("on-demand", "cpu")] == 0 and quotas.nominal[("spot", "gpu")] == 0
    reserved = CQ.reserved
    _ = reserved[("spot", "gpu")]
    assert reserved == {("spot", "cpu"): 1}
    assert ("spot", "cpu") not in quotas.borrow and type(quotas.borrow) is dict


def test_a_cluster_queues_state_and_counts() -> None:
    assert CQ.cohort == "team" and not CQ.active
    assert CQ.reserved == {("spot", "cpu"): 1} and CQ.used == {}
    assert (CQ.counts.pending, CQ.counts.reserving, CQ.counts.admitted) == (2, None, 1)
    fresh = ClusterQueueView({"metadata": {"name": "new"}})
    assert fresh.active and fresh.cohort is None and fresh.quotas().groups == ()


def test_a_local_queue_names_its_cluster_queue() -> None:
    lq = LocalQueueView({"spec": {"clusterQueue": "cq"}, "status": {"pendingWorkloads": 0}})
    assert lq.cluster_queue == "cq" and lq.counts.pending == 0
    assert LocalQueueView({}).cluster_queue == ""


def test_a_podset_without_a_count_has_one_pod_and_without_requests_asks_nothing() -> None:
    ps = PodSetView({"name": "node", "template": {"spec": {"containers": [{"name": "c"}]}}})
    assert (ps.name, ps.count, ps.pod_requests) == ("node", 1, {})


def test_a_podsets_limit_stands_for_the_request_it_does_not_give() -> None:
    """As Kueue counts a PodSet's pod: what Trainer's PodGroup counts (requests as written)
    is not what a queue is asked for."""
    limited = {"name": "c", "resources": {"limits": {"cpu": "2"}}}
    ps = PodSetView({"name": "node", "template": {"spec": {"containers": [limited]}}})
    assert ps.pod_requests == {"cpu": 2}


def test_the_checks_a_cluster_queue_asks_for_and_what_a_check_and_a_config_name() -> None:
    cq = ClusterQueueView(
        {
            "spec": {
                "admissionChecks": ["a"],
                "admissionChecksStrategy": {"admissionChecks": [{"name": "b", "onFlavors": ["x"]}]},
            }
        }
    )
    assert cq.admission_checks == {"a", "b"} and CQ.admission_checks == set()
    check = AdmissionCheckView(
        {"spec": {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {"name": "mk"}}}
    )
    assert check.controller_name == "kueue.x-k8s.io/multikueue"
    assert check.parameters == {"name": "mk"} and AdmissionCheckView({}).parameters == {}
    assert MultiKueueConfigView({"spec": {"clusters": ["w1", "w2"]}}).clusters == ["w1", "w2"]


def test_a_clusters_down_since_comes_from_its_active_condition() -> None:
    def mkc(status: str) -> dict[str, object]:
        cond = {"type": "Active", "status": status, "lastTransitionTime": "2026-11-22T12:00:00Z"}
        return {"metadata": {"name": "w1"}, "status": {"conditions": [cond]}}

    assert MultiKueueClusterView(mkc("False")).down_since == NOW.timestamp()
    assert MultiKueueClusterView(mkc("True")).down_since is None
    assert MultiKueueClusterView({"metadata": {"name": "w1"}}).down_since is None


def test_a_cluster_names_its_sources() -> None:
    secret = {"spec": {"clusterSource": {"kubeConfig": {"location": "w1-secret"}}}}
    profile = {"spec": {"clusterSource": {"clusterProfileRef": {"name": "p1"}}}}
    assert MultiKueueClusterView(secret).source_name("kubeConfig") == "w1-secret"
    assert MultiKueueClusterView(secret).kubeconfig_location_type == "Secret"
    assert MultiKueueClusterView(secret).source_name("clusterProfileRef") is None
    assert MultiKueueClusterView(profile).source_name("clusterProfileRef") == "p1"
    assert MultiKueueClusterView(profile).profile_ref == {"name": "p1"}


def pod(**resources: Any) -> Dict:
    return {"containers": [{"resources": resources}]}


def test_what_a_pod_asks_for_is_one_key_by_value() -> None:
    key = key_of
    one = pod(requests={"cpu": "1", "memory": "1Gi"})
    assert key(one) == key(pod(requests={"cpu": "1000m", "memory": 1073741824}))
    limits = pod(limits={"cpu": "1", "memory": "1Gi"})
    both = pod(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})
    assert key(limits) == key(both)  # a limit stands for a request not given
    assert key(limits) != key(one)  # and is a limit too
    # under the same limits, a request changed; the same requests, a limit raised
    capped = pod(requests={"cpu": "1"}, limits={"cpu": "4"})
    assert key(capped) != key(pod(requests={"cpu": "3"}, limits={"cpu": "4"}))
    assert key(capped) != key(pod(requests={"cpu": "1"}, limits={"cpu": "8"}))
    init = {**one, "initContainers": [{"resources": {"requests": {"memory": "1Gi"}}}]}
    bigger_init = {**one, "initContainers": [{"resources": {"requests": {"memory": "64Gi"}}}]}
    assert key(init) != key(bigger_init)
    for other in (
        pod(requests={"cpu": "2", "memory": "1Gi"}),
        pod(requests={"cpu": "1"}),
        {"containers": one["containers"] * 2},
        {**one, "initContainers": [{"resources": {"requests": {"cpu": "1"}}}]},
        pod(requests={"cpu": "1", "memory": "1Gi"}, claims=[{"name": "gpu"}]),
        pod(requests={"cpu": "not a quantity", "memory": "1Gi"}),
    ):
        assert key(other) != key(one), other
    # JSON the API server would not store counts as nothing, never an error
    odd: list[Dict] = [
        {"containers": "x"},
        {"containers": ["x", None, 3]},
        {"containers": [{"resources": []}]},
        pod(claims=["x"], requests=["cpu"]),
    ]
    for each in odd:
        assert len(key(each)) == 32, each
    assert key({"containers": ["x", None]}) == key({})


def test_a_pod_asks_for_more_than_its_containers_requests() -> None:
    """What else makes a pod take more of a node and a queue: an init container that keeps
    running (a sidecar, counted with the containers), the pod's own resources, its overhead
    and RuntimeClass, its resource claims and what a container's claim asks of them."""
    key = key_of
    base: Dict = {
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "32"}}}],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "32"}}}],
    }
    sidecar = copy.deepcopy(base)
    sidecar["initContainers"][0]["restartPolicy"] = "Always"
    claimed = copy.deepcopy(base)
    claimed["containers"][0]["resources"]["claims"] = [{"name": "gpu", "request": "big"}]
    other_request = copy.deepcopy(claimed)
    other_request["containers"][0]["resources"]["claims"] = [{"name": "gpu", "request": "small"}]
    for more in (
        sidecar,
        {**base, "resources": {"requests": {"cpu": "64"}}},
        {**base, "overhead": {"cpu": "1"}},
        {**base, "runtimeClassName": "kata"},
        {**base, "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "8-gpus"}]},
        claimed,
    ):
        assert key(more) != key(base), more
    assert key(claimed) != key(other_request)


def test_what_a_pod_asks_for_is_as_the_api_server_keeps_it() -> None:
    """Finer than a nano, a quantity is kept rounded up; -0 is 0 (apimachinery's Quantity):
    a Workload stored through a webhook that writes them back so is the same Workload."""
    key = key_of
    assert key(pod(requests={"cpu": "1.0000000001"})) == key(pod(requests={"cpu": "1000000001n"}))
    assert key(pod(requests={"cpu": "-0"})) == key(pod(requests={"cpu": "0"}))
    assert key(pod(requests={"cpu": "1e-12"})) == key(pod(requests={"cpu": "1n"}))
    big = "9223372036854775807"
    assert key(pod(requests={"memory": big})) != key(pod(requests={"memory": "1"}))


def _changed(value: object) -> object:
    """Another value of the same JSON kind (a quantity map stays a quantity map)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return [*value, *value]
    assert isinstance(value, dict)
    if value and all(isinstance(v, str) for v in value.values()):
        return {**value, "memory": "8Gi", "cpu": "3"}
    return {**value, "requests": {"cpu": "7"}}


def test_what_a_pod_asks_is_read_the_same_from_its_asks_alone() -> None:
    """A cache keeps a pod template's `pod_asks` only (worker_controller/digests.py): with any
    one field of a pod spec or of a container changed, `resources_key` and `pod_requests` read
    the same from what it keeps as from the whole spec. A field they start reading that the
    asks do not keep fails here by name."""
    assert key_of(queues.pod_asks(RICH_POD)) == key_of(RICH_POD)
    variants: list[tuple[str, Dict]] = []
    for field, value in RICH_POD.items():
        variants.append((field, {**RICH_POD, field: _changed(value)}))
    for kind in ("initContainers", "containers"):
        for field, value in RICH_CONTAINER.items():
            container = {**RICH_POD[kind][0], field: _changed(value)}
            variants.append((f"{kind}[].{field}", {**RICH_POD, kind: [container]}))
    told_apart = set()
    for where, spec in variants:
        asks = queues.pod_asks(spec)
        assert key_of(asks) == key_of(spec), where
        assert asked_of(asks) == asked_of(spec), where
        if key_of(spec) != key_of(RICH_POD):
            told_apart.add(where)
    # what the key reads, each change seen (so the table above reaches it)
    assert told_apart >= {
        "resources", "overhead", "runtimeClassName", "resourceClaims",
        "containers[].resources", "initContainers[].resources", "initContainers[].restartPolicy",
    }  # fmt: skip
    dropped = set(RICH_POD) - set(queues.pod_asks(RICH_POD))
    assert {"volumes", "nodeSelector", "priorityClassName"} <= dropped
    assert queues.pod_asks(RICH_POD)["containers"] == [
        {"name": "trainer", "resources": RICH_CONTAINER["resources"], "restartPolicy": "Always"}
    ]


def _ctr(cpu: str | None = None, *, limit: str | None = None, sidecar: bool = False) -> Dict:
    resources: Dict = {}
    if cpu is not None:
        resources["requests"] = {"cpu": cpu}
    if limit is not None:
        resources["limits"] = {"cpu": limit}
    return {"name": "c", "resources": resources, **({"restartPolicy": "Always"} if sidecar else {})}


@pytest.mark.parametrize(
    ("spec", "cpu"),
    [
        ({"containers": [_ctr("1"), _ctr("2")]}, "3"),  # the containers' sum
        ({"containers": [_ctr(limit="2")]}, "2"),  # a limit stands for a request not given
        ({"containers": [_ctr("1", limit="4")]}, "1"),  # a request given is the request
        ({"containers": [_ctr("1")], "initContainers": [_ctr("4")]}, "4"),  # the largest init
        (
            {"containers": [_ctr("1")], "initContainers": [_ctr("2", sidecar=True)]},
            "3",
        ),  # a sidecar adds
        # an init container runs beside the sidecars started before it, not those after
        ({"containers": [_ctr("1")], "initContainers": [_ctr("2", sidecar=True), _ctr("5")]}, "7"),
        ({"containers": [_ctr("1")], "initContainers": [_ctr("5"), _ctr("2", sidecar=True)]}, "5"),
        # five 100-CPU sidecars beside one 100-CPU container
        ({"containers": [_ctr("100")], "initContainers": [_ctr("100", sidecar=True)] * 5}, "600"),
        # the pod's own requests in place of its containers' (pod-level resources), its limit
        # standing for a request not given
        ({"containers": [_ctr("1"), _ctr("1")], "resources": {"requests": {"cpu": "8"}}}, "8"),
        # in place of, even below, its containers' sum (Kubernetes' PodRequests replaces it)
        ({"containers": [_ctr("4"), _ctr("4")], "resources": {"requests": {"cpu": "2"}}}, "2"),
        ({"containers": [_ctr("1")], "resources": {"limits": {"cpu": "6"}}}, "6"),
        ({"containers": [_ctr("1")], "overhead": {"cpu": "250m"}}, "1.25"),  # plus the overhead
    ],
)
def test_a_pod_asks_for_what_kueue_counts_of_it(spec: Dict, cpu: str) -> None:
    """A pod's requests as Kueue 0.19 counts a PodSet's pod (Kubernetes' PodRequests, its
    limits standing for requests not given): what the dispatcher's fit and a gang's
    minResources are made of."""
    assert asked_of(spec)["cpu"] == Decimal(cpu)


def test_the_pods_own_requests_stand_only_for_cpu_memory_and_hugepages() -> None:
    spec: Dict = {
        "containers": [
            {"resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}}
        ],
        "resources": {"requests": {"memory": "4Gi", "hugepages-2Mi": "1Gi", "nvidia.com/gpu": "8"}},
    }
    asked = asked_of(spec)
    assert asked["cpu"] == 1 and asked["memory"] == 4 * 2**30 and asked["hugepages-2Mi"] == 2**30
    assert asked["nvidia.com/gpu"] == 1


def test_what_a_pod_asks_of_json_the_api_server_would_not_store_is_read_the_same() -> None:
    """`pod_asks` of a spec whose containers are not objects (which `resources_key` counts as
    nothing) keeps nothing of them, never an error, and reads as the spec does."""
    for spec in (
        {"containers": "x"},
        {"containers": ["x", None, 3]},
        {"initContainers": [None], "containers": [{"name": "c", "resources": []}]},
    ):
        asks = queues.pod_asks(spec)
        assert key_of(asks) == key_of(spec), spec
    assert queues.pod_asks({"containers": ["x", None, {"name": "c"}]}) == {
        "containers": [{"name": "c"}]
    }


@pytest.mark.parametrize(
    ("spec", "cpu"),
    [
        ({"containers": [{"resources": {"requests": ["1"], "limits": "2"}}]}, 0),
        ({"containers": [_ctr("1")], "initContainers": [{"resources": {"requests": 5}}]}, 1),
        ({"containers": [_ctr("1")], "resources": {"requests": ["cpu"]}, "overhead": "1"}, 1),
    ],
)
def test_a_pods_requests_limits_or_overhead_of_the_wrong_type_ask_for_nothing(
    spec: Dict, cpu: int
) -> None:
    """A requests, limits or overhead that is not a map (a tenant's pod template, whatever
    CRD holds it) asks for nothing: never an exception in a controller's pass."""
    assert asked_of(spec)["cpu"] == cpu
    assert asked_of(spec, limits_as_requests=False)["cpu"] == cpu


def test_requests_of_the_wrong_type_leave_the_limits_standing_for_them() -> None:
    spec: Dict = {"containers": [{"resources": {"requests": ["1"], "limits": {"cpu": "2"}}}]}
    assert asked_of(spec)["cpu"] == 2
    assert asked_of(spec, limits_as_requests=False)["cpu"] == 0
