"""Whether a Workload fits a worker's ClusterQueue (dispatcher/decisions/capacity.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from dispatcher.decisions.capacity import (
    Fit,
    cohort_of,
    fit,
    podset_requests,
    quota_summary,
    show_amount,
)
from tests.support.builders import edit
from trainjob.queues import ClusterQueueView, PodSetView
from trainjob_api.views import WorkloadView

Dict = dict[str, Any]


def workload(*podsets: tuple[str, int, Dict]) -> WorkloadView:
    return WorkloadView(
        {
            "metadata": {"name": "wl", "namespace": "ns"},
            "spec": {
                "queueName": "q",
                "podSets": [
                    {
                        "name": name,
                        "count": count,
                        "template": {"spec": {"containers": [{"resources": {"requests": req}}]}},
                    }
                    for name, count, req in podsets
                ],
            },
        }
    )


def cluster_queue(
    name: str = "cq",
    flavors: list[tuple[str, Dict[str, Any]]] | None = None,
    reserved: dict[str, Dict] | None = None,
    cohort: str | None = None,
    active: bool = True,
) -> ClusterQueueView:
    """`flavors`: (flavour, {resource: nominal or (nominal, borrowingLimit, lendingLimit)})."""
    flavors = flavors or [("default", {"cpu": "8", "memory": "16Gi"})]
    covered = sorted({r for _, res in flavors for r in res})
    spec: Dict = {
        "resourceGroups": [
            {
                "coveredResources": covered,
                "flavors": [
                    {"name": f, "resources": [_quota(r, q) for r, q in res.items()]}
                    for f, res in flavors
                ],
            }
        ]
    }
    if cohort:
        spec["cohortName"] = cohort
    status: Dict = {
        "conditions": [{"type": "Active", "status": "True" if active else "False"}],
        "flavorsReservation": [
            {"name": f, "resources": [{"name": r, "total": t} for r, t in res.items()]}
            for f, res in (reserved or {}).items()
        ],
    }
    return ClusterQueueView({"metadata": {"name": name}, "spec": spec, "status": status})


def _quota(resource: str, q: Any) -> Dict:
    if isinstance(q, tuple):
        nominal, borrow, lend = q
        out = {"name": resource, "nominalQuota": nominal}
        if borrow is not None:
            out["borrowingLimit"] = borrow
        if lend is not None:
            out["lendingLimit"] = lend
        return out
    return {"name": resource, "nominalQuota": q}


def test_a_pod_counts_its_containers_its_largest_init_container_and_its_overhead() -> None:
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"resources": {"requests": {"cpu": "1"}}},
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "4", "memory": "512Mi"}}}],
        "overhead": {"cpu": "100m"},
    }
    req = PodSetView({"name": "node", "template": {"spec": spec}}).pod_requests
    assert (req["cpu"], req["memory"]) == (Decimal("4.1"), 1024**3)


def test_podsets_multiply_by_their_count_and_count_pods() -> None:
    wl = workload(("launcher", 1, {"cpu": "1"}), ("node", 4, {"cpu": "2", "memory": "1Gi"}))
    assert podset_requests(wl) == [
        ("launcher", {"cpu": 1, "pods": 1}),
        ("node", {"cpu": 8, "memory": 4 * 1024**3, "pods": 4}),
    ]


def test_fits_in_free_quota() -> None:
    cq = cluster_queue(reserved={"default": {"cpu": "4"}})
    assert fit(workload(("node", 2, {"cpu": "2"})), cq, []) == Fit(True, True)


def test_full_now_but_fits_an_empty_queue() -> None:
    cq = cluster_queue(reserved={"default": {"cpu": "7"}})
    got = fit(workload(("node", 2, {"cpu": "1"})), cq, [])
    assert (got.now, got.ever) == (False, True)
    # No amounts in the "now" reason: it is in the check's message, written only on change.
    assert got.why == "no room now: PodSet node does not fit ClusterQueue cq (flavour default: cpu)"


def test_larger_than_the_queue_ever_is_never_with_the_amounts() -> None:
    got = fit(workload(("node", 3, {"cpu": "4"})), cluster_queue(), [])
    assert got == Fit(
        False,
        False,
        "never: PodSet node does not fit ClusterQueue cq (flavour default: cpu 12 wanted, "
        "8 available)",
    )


def test_a_resource_the_queue_does_not_cover_is_no_room_but_no_reason_to_give_up() -> None:
    # The worker's Kueue may ignore the resource (resources.excludeResourcePrefixes).
    got = fit(workload(("node", 1, {"nvidia.com/gpu": "1"})), cluster_queue(), [])
    assert got == Fit(False, True, "ClusterQueue cq has no quota for nvidia.com/gpu")


def test_flavours_are_tried_in_order_and_podsets_take_the_room_as_they_go() -> None:
    cq = cluster_queue(flavors=[("small", {"cpu": "4"}), ("big", {"cpu": "8"})])
    # 3 + 3 cpu: the first PodSet takes "small", the second no longer fits there but in "big".
    assert fit(workload(("a", 1, {"cpu": "3"}), ("b", 1, {"cpu": "3"})), cq, []).now
    # 10 cpu in one PodSet fits no flavour, though 12 cpu are there in all.
    assert not fit(workload(("a", 1, {"cpu": "10"})), cq, []).ever


def test_borrowing_from_the_cohort_up_to_the_borrowing_limit() -> None:
    lender = cluster_queue("lender", cohort="c", reserved={"default": {"cpu": "2"}})
    cq = cluster_queue(
        flavors=[("default", {"cpu": ("8", "4", None)})],
        cohort="c",
        reserved={"default": {"cpu": "8"}},
    )
    # 6 cpu free in the lender, but at most 4 may be borrowed.
    assert fit(workload(("node", 4, {"cpu": "1"})), cq, [lender]).now
    assert not fit(workload(("node", 5, {"cpu": "1"})), cq, [lender]).now
    assert fit(workload(("node", 12, {"cpu": "1"})), cq, [lender]).ever
    assert not fit(workload(("node", 13, {"cpu": "1"})), cq, [lender]).ever


def test_a_lending_limit_bounds_what_the_cohort_offers() -> None:
    lender = cluster_queue("lender", flavors=[("default", {"cpu": ("8", None, "2")})], cohort="c")
    cq = cluster_queue(flavors=[("default", {"cpu": "8"})], cohort="c")
    assert fit(workload(("node", 10, {"cpu": "1"})), cq, [lender]).ever
    assert not fit(workload(("node", 11, {"cpu": "1"})), cq, [lender]).ever


def test_without_a_cohort_nothing_is_borrowed() -> None:
    other = cluster_queue("other")
    assert not fit(workload(("node", 9, {"cpu": "1"})), cluster_queue(), [other]).ever


def test_cohort_members_are_the_other_queues_of_the_same_cohort() -> None:
    a, b, c = cluster_queue("a", cohort="x"), cluster_queue("b", cohort="x"), cluster_queue("c")
    assert cohort_of(a, [a, b, c]) == [b]
    assert cohort_of(c, [a, b, c]) == []


def test_an_inactive_queue_has_no_room_now_but_is_no_reason_to_give_up() -> None:
    got = fit(workload(("node", 1, {"cpu": "1"})), cluster_queue(active=False), [])
    assert (got.now, got.ever, got.why) == (False, True, "ClusterQueue cq is not active")


def test_a_missing_local_queue_has_no_room_but_is_no_reason_to_give_up() -> None:
    got = fit(workload(("node", 1, {"cpu": "1"})), None, [], "q")
    assert (got.now, got.ever, got.why) == (False, True, "no LocalQueue q with its ClusterQueue")


def test_quota_summary_says_quota_reserved_and_used_per_flavour_and_resource() -> None:
    cq = cluster_queue(
        flavors=[("default", {"cpu": "8", "memory": "16Gi"}), ("spot", {"cpu": "4"})],
        reserved={"default": {"cpu": "6", "memory": "1Gi"}, "spot": {"cpu": "500m"}},
        cohort="team",
    )
    edit(cq.raw).status(
        flavorsUsage=[{"name": "default", "resources": [{"name": "cpu", "total": "2"}]}],
        pendingWorkloads=3,
        admittedWorkloads=1,
    )
    summary = quota_summary(cq).to_json()
    assert summary["name"] == "cq" and summary["cohort"] == "team" and summary["active"]
    assert (summary["pendingWorkloads"], summary["admittedWorkloads"]) == (3, 1)
    assert summary["reservingWorkloads"] == 0
    default, spot = summary["flavors"]
    assert default["name"] == "default"
    assert default["resources"][0] == {
        "name": "cpu",
        "nominalQuota": "8",
        "reserved": "6",
        "used": "2",
        "share": 0.75,
    }
    assert default["resources"][1]["used"] == "0"  # no use reported for memory
    assert spot["resources"] == [
        {"name": "cpu", "nominalQuota": "4", "reserved": "500m", "used": "0", "share": 0.125}
    ]


def test_quota_summary_of_a_zero_quota_and_an_over_reservation() -> None:
    cq = cluster_queue(
        flavors=[("default", {"cpu": "0", "memory": "1Gi"})],
        reserved={"default": {"memory": "2Gi"}},
    )
    cpu, memory = quota_summary(cq).flavors[0].resources
    assert cpu.share == 0.0 and memory.share == 1.0


def test_bytes_are_shown_in_the_largest_binary_unit_that_divides_them() -> None:
    assert show_amount("memory", Decimal(1 << 40)) == "1Ti"
    assert show_amount("memory", Decimal(1536 << 20)) == "1536Mi"
    assert show_amount("memory", Decimal(1000)) == "1000"
    assert show_amount("hugepages-2Mi", Decimal(4 << 20)) == "4Mi"
    assert show_amount("cpu", Decimal(2048)) == "2048"
    assert show_amount("cpu", Decimal("0.5")) == "500m"


@pytest.mark.parametrize("quantity", ["1e30", "1e1.5"])
def test_a_quantity_that_cannot_be_read_waits_saying_so_and_fails_no_pass(quantity: str) -> None:
    """Out of range, or allowed by the CRD's pattern but not a quantity a pod may ask: the job
    does not fit now, may later (its TrainJob may be mended), and says why; the pass that asks
    goes on (it used to raise there, and was retried with a traceback)."""
    got = fit(workload(("node", 1, {"cpu": quantity})), cluster_queue(), [])
    assert (got.now, got.ever) == (False, True)
    assert got.why.startswith("a quantity its pods ask for cannot be read") and quantity in got.why
