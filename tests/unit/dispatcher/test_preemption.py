"""What a worker's preemption would cost (dispatcher/decisions/preemption.py): the victims its
Kueue would pick, as Kueue v0.19's classical preemption within a ClusterQueue picks them
(pkg/scheduler/preemption: CandidatesOrdering, SatisfiesPreemptionPolicy, fillBackWorkloads),
and the training each would lose."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from dispatcher.decisions.preemption import (
    Cost,
    Held,
    Victim,
    cost,
    held_of,
    held_seen,
    show_lost,
    victims,
)
from trainjob.queues import Amounts, ClusterQueueView, Table
from trainjob_api import constants as c

NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


def at(minutes_ago: float) -> dt.datetime:
    return NOW - dt.timedelta(minutes=minutes_ago)


def cq(
    policy: str | None = "LowerPriority", *, small: bool = False, **spec: Any
) -> ClusterQueueView:
    """ClusterQueue "cq": one resource group of cpu and memory, flavour "big" (8 cpu), after
    flavour "small" (2 cpu) with `small`."""
    flavors = [
        {
            "name": name,
            "resources": [
                {"name": "cpu", "nominalQuota": cpu},
                {"name": "memory", "nominalQuota": "64Gi"},
            ],
        }
        for name, cpu in ([("small", "2")] if small else []) + [("big", "8")]
    ]
    body: dict[str, Any] = {
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": flavors}],
        **spec,
    }
    if policy is not None:
        body["preemption"] = {"withinClusterQueue": policy}
    return ClusterQueueView({"metadata": {"name": "cq"}, "spec": body})


def held(
    name: str,
    cpu: int,
    *,
    priority: int = 0,
    admitted: float = 10,
    flavor: str = "big",
    created: str = "2026-11-22T10:00:00Z",
    evicted: bool = False,
) -> Held:
    return Held(
        namespace="ns",
        name=name,
        uid=f"uid-{name}",
        cluster_queue="cq",
        priority=priority,
        usage=Table({(flavor, "cpu"): Decimal(cpu)}),
        reserved_at=at(admitted),
        created=created,
        evicted=evicted,
    )


def asks(cpu: int) -> list[tuple[str, Amounts]]:
    return [("node", Amounts({"cpu": Decimal(cpu)}))]


def picked(
    wants: int, on: list[Held], *, priority: int = 100, queue: ClusterQueueView | None = None
) -> list[str] | None:
    found = victims(asks(wants), priority, "2026-11-22T11:00:00Z", queue or cq(), on, NOW)
    return None if found is None else sorted(h.name for h in found)


def test_lower_priority_first_then_the_latest_admitted() -> None:
    full = [
        held("old-low", 2, priority=1, admitted=60),
        held("new-low", 2, priority=1, admitted=5),
        held("lowest", 2, priority=0, admitted=120),
        held("mid", 2, priority=5, admitted=1),
    ]
    assert picked(2, full) == ["lowest"]
    assert picked(4, full) == ["lowest", "new-low"]
    assert picked(6, full) == ["lowest", "new-low", "old-low"]


def test_evicted_ones_go_first() -> None:
    full = [held("a", 4, admitted=1), held("b", 4, priority=3, admitted=2, evicted=True)]
    assert picked(4, full) == ["b"]


def test_victims_not_needed_once_a_later_one_is_taken_are_put_back() -> None:
    """Kueue's fill-back: a small victim taken first and then a large one that alone makes
    room: the small one stays."""
    full = [held("small", 1, priority=0), held("large", 6, priority=1), held("rest", 1, priority=9)]
    assert picked(6, full) == ["large"]


def test_only_what_the_policy_lets_go_and_only_users_of_what_is_short() -> None:
    full = [
        held("same", 4, priority=100, created="2026-11-22T11:30:00Z"),
        held("older-same", 2, priority=100, created="2026-11-22T10:30:00Z"),
        held("elsewhere", 2, priority=0, flavor="small"),
        held("low", 2, priority=0),
    ]
    assert picked(2, full, queue=cq(small=True)) == ["elsewhere"]  # the first flavour's
    assert picked(2, full) == ["low"]  # "small" is not this ClusterQueue's: not short of it
    # LowerPriority never takes the same priority; LowerOrNewerEqualPriority takes those
    # created after the preemptor
    assert picked(4, full) is None
    # "low" taken, then "same"; "low" put back (4 free without it)
    assert picked(4, full, queue=cq("LowerOrNewerEqualPriority")) == ["same"]
    # "low", "older-same" (same time, UID first), "same"; "older-same" put back
    assert picked(6, full, queue=cq("Any")) == ["low", "same"]


@pytest.mark.parametrize(
    "queue",
    [cq(None), cq("Never"), cq("LowerPriority", cohortName="team")],
    ids=["no-policy", "never", "in-a-cohort"],
)
def test_what_is_not_simulated_is_unknown(queue: ClusterQueueView) -> None:
    assert picked(2, [held("low", 8)], queue=queue) is None


def test_unknown_when_it_fits_already_or_no_victims_make_room_or_no_flavour_could_hold_it() -> None:
    assert picked(2, [held("low", 4)]) is None  # room without preempting
    assert picked(4, [held("high", 8, priority=200)]) is None
    assert picked(9, [held("low", 8)]) is None


def test_the_first_flavour_whose_quota_could_hold_it_is_the_one_preempted_in() -> None:
    full = [held("small-user", 2, flavor="small"), held("big-user", 8, flavor="big")]
    assert picked(2, full, queue=cq(small=True)) == ["small-user"]
    assert picked(3, full, queue=cq(small=True)) == ["big-user"]


def test_training_lost_from_the_last_checkpoint_or_from_admission() -> None:
    fresh = dataclasses.replace(held("a", 1, admitted=60), checkpoint_at=at(4))
    stale = dataclasses.replace(held("b", 1, admitted=30), checkpoint_at=at(45))  # a run before
    plain = held("c", 1, admitted=10)
    found = cost([fresh, stale, plain], NOW)
    assert found == Cost(
        (
            Victim("ns", "a", 240.0, True),
            Victim("ns", "b", 1800.0, False),
            Victim("ns", "c", 600.0, False),
        )
    )
    assert found.lost == 2640.0
    assert str(found) == "preempts 3 jobs, ~44 min of training lost"
    assert cost([dataclasses.replace(plain, reserved_at=None)], NOW) is None


def test_costs_compare_by_whole_minutes_then_victims() -> None:
    def of(*lost: float) -> Cost:
        return Cost(tuple(Victim("ns", f"v{i}", s, False) for i, s in enumerate(lost)))

    assert of(59).rank == of(1).rank
    assert of(61).rank > of(59).rank
    assert of(30, 20).rank > of(55).rank
    assert str(of(240)) == "preempts 1 job, ~4 min of training lost"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "~0 s"), (89, "~89 s"), (90, "~2 min"), (5399, "~90 min"), (5400, "~1.5 h")],
)
def test_lost_time_as_people_say_it(seconds: float, shown: str) -> None:
    assert show_lost(seconds) == shown


def workload(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "name": "trainjob-old-1",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "3",
            "creationTimestamp": "2026-11-22T09:00:00Z",
            "labels": {c.KUEUE_MULTIKUEUE_ORIGIN_LABEL: "mgr", "other": "x" * 100},
            "ownerReferences": [
                {"kind": "TrainJob", "name": "old", "controller": True, "uid": "t1"},
                {"kind": "ConfigMap", "name": "not-it", "uid": "t2"},
            ],
        },
        "spec": {"priority": 7, "podSets": [{"name": "node", "template": {"spec": {}}}]},
        "status": status,
    }


ADMITTED = {
    "conditions": [
        {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-11-22T11:00:00Z"}
    ],
    "admission": {
        "clusterQueue": "cq",
        "podSetAssignments": [
            {"name": "node", "flavors": {"cpu": "big"}, "resourceUsage": {"cpu": "3"}},
            {"name": "init", "flavors": {"cpu": "big"}, "resourceUsage": {"cpu": "500m"}},
        ],
    },
}


def test_the_watch_keeps_what_the_estimate_reads_and_no_more() -> None:
    kept = held_seen(workload(**ADMITTED), "mgr")
    assert set(kept) == {"metadata", "held"}
    assert kept["metadata"] == {
        "name": "trainjob-old-1", "namespace": "ns", "uid": "u1", "resourceVersion": "3"
    }  # fmt: skip
    assert held_of(kept) == Held(
        namespace="ns",
        name="trainjob-old-1",
        uid="u1",
        cluster_queue="cq",
        priority=7,
        usage=Table({("big", "cpu"): Decimal("3.5")}),
        reserved_at=at(60),
        created="2026-11-22T09:00:00Z",
        evicted=False,
        trainjob=("old", "t1"),
        ours=True,
    )
    theirs = held_of(held_seen(workload(**ADMITTED), "another-manager"))
    assert theirs is not None and not theirs.ours


def test_one_not_holding_quota_is_kept_as_who_it_is() -> None:
    pending = held_seen(workload(conditions=[]), "mgr")
    assert set(pending) == {"metadata"} and held_of(pending) is None
    done = dict(
        ADMITTED, conditions=[*ADMITTED["conditions"], {"type": "Finished", "status": "True"}]
    )
    assert set(held_seen(workload(**done), "mgr")) == {"metadata"}


@pytest.mark.parametrize(
    "broken",
    [
        {"resourceUsage": {"cpu": "lots"}},
        {"resourceUsage": ["cpu"]},
    ],
    ids=["quantity", "usage-not-a-map"],
)
def test_a_hold_that_cannot_be_read_is_no_victim(broken: dict[str, Any]) -> None:
    status = copy.deepcopy(ADMITTED)
    status["admission"]["podSetAssignments"][0].update(broken)
    assert held_of(held_seen(workload(**status), "mgr")) is None


def test_an_admission_time_that_cannot_be_read_is_no_victim() -> None:
    status = copy.deepcopy(ADMITTED)
    status["conditions"][0]["lastTransitionTime"] = "yesterday"
    assert held_of(held_seen(workload(**status), "mgr")) is None


def test_one_already_evicted_is_kept_so() -> None:
    status = copy.deepcopy(ADMITTED)
    status["conditions"].append({"type": "Evicted", "status": "True", "reason": "Preempted"})
    found = held_of(held_seen(workload(**status), "mgr"))
    assert found is not None and found.evicted
