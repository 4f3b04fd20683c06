"""What a worker's preemption would cost (dispatcher/decisions/preemption.py): the victims its
Kueue would pick, as Kueue v0.19's classical preemption within a ClusterQueue picks them
(pkg/scheduler/preemption: CandidatesOrdering, SatisfiesPreemptionPolicy, fillBackWorkloads),
and the training each would lose."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import time
from decimal import Decimal
from types import SimpleNamespace
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
from dispatcher.workers.remote import ESTIMATE_PENDING_MAX, QUEUE_KINDS, Noted, RemoteCluster
from tests.support.builders import WorkloadBuilder, edit
from tests.support.kubeconfigs import remote_cluster
from trainjob.queues import Amounts, ClusterQueueView, Table
from trainjob_api import constants as c
from trainjob_api.views import WorkloadView

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


def test_none_taken_when_it_fits_as_it_is() -> None:
    assert picked(2, [held("low", 4)]) == []


def test_unknown_when_no_victims_make_room_or_no_flavour_could_hold_it() -> None:
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


# The owners of `workload()`: the TrainJob that controls it, and another.
CONTROLLER = {"kind": "TrainJob", "name": "old", "controller": True, "uid": "t1"}
NOT_IT = {"kind": "ConfigMap", "name": "not-it", "uid": "t2"}


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
            "ownerReferences": [dict(CONTROLLER), dict(NOT_IT)],
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
    by_jobset = workload(**ADMITTED)  # controlled by another kind: no TrainJob's checkpoints
    edit(by_jobset).owners({**CONTROLLER, "kind": "JobSet"}, dict(NOT_IT))
    held = held_of(held_seen(by_jobset, "mgr"))
    assert held is not None and held.trainjob is None


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


# ---- what the mutation run found uncovered ---------------------------------------------------


def test_a_resource_its_admission_gives_no_flavour_is_not_counted() -> None:
    status: Any = copy.deepcopy(ADMITTED)
    status["admission"]["podSetAssignments"][0]["resourceUsage"]["example.com/nic"] = "1"
    found = held_of(held_seen(workload(**status), "mgr"))
    assert found is not None and found.usage == Table({("big", "cpu"): Decimal("3.5")})


def test_the_owner_is_the_controlling_trainjob_and_a_priority_is_a_number() -> None:
    obj = workload(**ADMITTED)
    watcher = {"kind": "TrainJob", "name": "watcher", "uid": "t0"}
    edit(obj).owners(watcher, dict(CONTROLLER), dict(NOT_IT)).spec(priority=True)
    found = held_of(held_seen(obj, "mgr"))
    assert found is not None and found.trainjob == ("old", "t1") and found.priority == 0


def test_an_admission_time_without_a_zone_is_utc() -> None:
    status: Any = copy.deepcopy(ADMITTED)
    status["conditions"][0]["lastTransitionTime"] = "2026-11-22T11:00:00"
    found = held_of(held_seen(workload(**status), "mgr"))
    assert found is not None and found.reserved_at == at(60)
    assert cost([found], NOW) == Cost((Victim("ns", "trainjob-old-1", 3600.0, False),))


def test_each_podset_takes_the_first_flavour_with_room_left_after_the_ones_before() -> None:
    """Two PodSets of 2 cpu: the first fills "small" (2 cpu), the second goes to "big"."""
    two = [("a", Amounts({"cpu": Decimal(2)})), ("b", Amounts({"cpu": Decimal(2)}))]
    full = [held("big-user", 8, flavor="big")]
    found = victims(two, 100, "2026-11-22T11:00:00Z", cq(small=True), full, NOW)
    assert found is not None and [h.name for h in found] == ["big-user"]


def test_an_equal_priority_is_let_go_only_if_created_strictly_after_a_known_time() -> None:
    queue = cq("LowerOrNewerEqualPriority")
    same_time = [held("twin", 8, priority=100, created="2026-11-22T11:00:00Z")]
    assert picked(4, same_time, queue=queue) is None
    later = [held("later", 8, priority=100, created="2026-11-22T11:00:01Z")]
    assert picked(4, later, queue=queue) == ["later"]
    unknown = victims(asks(4), 100, "", queue, later, NOW)
    assert unknown is None


def test_one_holding_quota_without_an_admission_time_counts_as_admitted_now() -> None:
    full = [
        held("recent", 4, admitted=5),
        dataclasses.replace(held("timeless", 4), reserved_at=None),
    ]
    assert picked(4, full) == ["timeless"]


def test_an_exact_fit_needs_no_preemption() -> None:
    assert picked(4, [held("low", 4)]) == []


def test_a_victim_kept_in_fill_back_still_holds_its_quota_for_the_earlier_ones() -> None:
    """a, b and c taken (lowest priority first) before the copy fits; b cannot be put back,
    a can: b and c are the victims."""
    full = [
        held("a", 1, priority=0),
        held("b", 3, priority=1),
        held("c", 3, priority=2),
        held("keep", 1, priority=200),
    ]
    assert picked(5, full) == ["b", "c"]


def test_training_lost_is_never_negative_and_a_checkpoint_at_admission_is_no_checkpoint() -> None:
    ahead = dataclasses.replace(held("a", 1), reserved_at=NOW + dt.timedelta(minutes=5))
    assert cost([ahead], NOW) == Cost((Victim("ns", "a", 0.0, False),))
    same = dataclasses.replace(held("b", 1, admitted=10), checkpoint_at=at(10))
    assert cost([same], NOW) == Cost((Victim("ns", "b", 600.0, False),))


# ---- the worker's estimate (remote.py: preemption_cost, _note_checkpoint) ---------------------


def _asking(cpu: int, priority: int | None, created: str = "") -> WorkloadView:
    return WorkloadView(WorkloadBuilder().asks(str(cpu)).priority(priority).created(created).obj())


def _worker(
    on: list[Held],
    queue: ClusterQueueView | None = None,
    *,
    listed: bool = True,
    readable: bool = True,
    noted: dict[tuple[str, str], Noted] | None = None,
) -> Any:
    """What RemoteCluster.preemption_cost reads of a worker: its ClusterQueue "cq" (the
    LocalQueue "q" points to), the held watch (listed or not) and the checkpoints noted."""
    kept = [{"metadata": {}, "held": h} for h in on]
    found = queue or cq()
    worker = SimpleNamespace(
        name="worker1",
        _held=SimpleNamespace(group=lambda name: kept if name == "cq" else []),
        _held_ok=listed,
        _readable=lambda kinds: readable,
        local_queue=lambda ns, name: SimpleNamespace(cluster_queue="cq"),
        cluster_queue=lambda name: found if name == "cq" else None,
        _checkpoints=noted or {},
    )
    worker._estimate = lambda *given: RemoteCluster._estimate(worker, *given)  # type: ignore[arg-type]
    return worker


def _estimated(worker: Any, wl: WorkloadView, copy_: WorkloadView) -> Cost | None:
    return RemoteCluster.preemption_cost(worker, wl, copy_, NOW)


def test_nothing_is_estimated_before_the_held_watch_has_listed() -> None:
    full = [held("low", 8)]
    wl = _asking(4, 100)
    assert _estimated(_worker(full), wl, wl) == Cost((Victim("ns", "low", 600.0, False),))
    assert _estimated(_worker(full, listed=False), wl, wl) is None
    assert _estimated(_worker(full, readable=False), wl, wl) is None  # its queues unread


def test_an_estimate_is_pending_until_each_watch_it_reads_has_listed_or_failed() -> None:
    """A replica just started (or a worker connected again) cannot estimate before its
    watches have listed the worker: pending, which the cost order waits for, the waiting
    jobs woken once the last has (on_room); one whose list failed (say, refused) is unknown,
    which leaves Kueue's order; and none is pending for longer than ESTIMATE_PENDING_MAX."""
    woken: list[str] = []
    worker = SimpleNamespace(
        name="worker1",
        connected=False,
        connecting=True,  # nothing listed yet: not even its copies are known
        _held=object(),
        _held_ok=False,
        _read_ok={},
        _estimate_unheard={"LocalQueue", "ClusterQueue", "held"},
        _made_at=time.monotonic(),
        _on_room=woken.append,
    )
    worker._heard = lambda watch: RemoteCluster._heard(worker, watch)  # type: ignore[arg-type]

    def pending() -> bool:
        return bool(RemoteCluster.estimate_pending.fget(worker))  # type: ignore[attr-defined]

    assert pending()
    worker.connected, worker.connecting = True, False
    assert pending()
    RemoteCluster._set_held_ok(worker, True)  # type: ignore[arg-type]
    RemoteCluster._set_read_ok(worker, "LocalQueue", True)  # type: ignore[arg-type]
    assert pending() and woken == []  # the ClusterQueues not listed yet
    RemoteCluster._set_read_ok(worker, "ClusterQueue", False, "Forbidden")  # type: ignore[arg-type]
    assert not pending() and woken == ["worker1"]
    RemoteCluster._set_read_ok(worker, "ClusterQueue", True)  # type: ignore[arg-type]
    assert woken == ["worker1"]  # woken once, when the last was heard
    worker._estimate_unheard.add("held")
    assert pending()
    worker._made_at -= ESTIMATE_PENDING_MAX + 1  # a list that never ends holds none for ever
    assert not pending()
    worker._made_at = time.monotonic()
    worker.connected = False  # an unreachable worker's estimate is not coming
    assert not pending()
    worker._held, worker.connecting = None, True  # no estimate without the cost order
    assert not pending()


def test_an_estimate_whose_held_list_failed_is_unknown_not_pending() -> None:
    """The watch of what holds quota there refused (say, Forbidden): the estimate is not
    coming, whatever the queues' lists do; the cost order does not wait for it."""
    worker = SimpleNamespace(
        name="worker1", connected=True, connecting=False, _held=object(), _held_ok=False,
        _read_ok={}, _estimate_unheard={"held"}, _made_at=time.monotonic(),
        _on_room=lambda name: None,
    )  # fmt: skip
    worker._heard = lambda watch: RemoteCluster._heard(worker, watch)  # type: ignore[arg-type]
    RemoteCluster._set_held_ok(worker, False, "Forbidden")  # type: ignore[arg-type]
    assert not RemoteCluster.estimate_pending.fget(worker)  # type: ignore[attr-defined]


@pytest.mark.parametrize("last", ["held", *QUEUE_KINDS])
def test_a_new_connection_is_pending_until_the_held_watch_and_both_queue_watches_have_listed(
    last: str,
) -> None:
    """A worker's connection just made (a replica started, the cost order on): its estimate
    is pending while connecting, and once connected until each watch it reads has listed,
    the held one and the LocalQueues' and ClusterQueues' alike."""
    worker = remote_cluster()
    assert not worker.estimate_pending  # the cost order off: no held watch, nothing coming
    worker = RemoteCluster("w1", worker.cluster, "origin", lambda ns, name, urgent: None, held=True)
    assert worker.connecting and worker.estimate_pending
    for kind in worker._ok:
        worker._set_ok(kind, True)
    assert worker.connected and worker.estimate_pending
    for watch in ("held", *QUEUE_KINDS):
        if watch != last:
            _listed(worker, watch)
    assert worker.estimate_pending
    _listed(worker, last)
    assert not worker.estimate_pending


def test_a_worker_connected_again_is_pending_until_its_failed_watches_list_again() -> None:
    """The same connection back after an outage: what a preemption there would cost is
    pending (not unknown, which would leave Kueue's order) until the held watch, which
    failed meanwhile, has listed the worker again."""
    worker = RemoteCluster(
        "w1", remote_cluster().cluster, "origin", lambda ns, name, urgent: None, held=True
    )
    for kind in worker._ok:
        worker._set_ok(kind, True)
    for watch in ("held", *QUEUE_KINDS):
        _listed(worker, watch)
    assert not worker.estimate_pending
    worker._made_at -= ESTIMATE_PENDING_MAX + 1  # up long before the outage
    for kind in worker._ok:
        worker._set_ok(kind, False)
    worker._set_held_ok(False, "connection refused")
    for kind in worker._ok:
        worker._set_ok(kind, True)  # its copies listed again, the held watch not yet
    assert worker.estimate_pending  # the bound counts from the reconnection
    _listed(worker, "held")
    assert not worker.estimate_pending


def test_a_watch_that_fails_while_connected_leaves_no_estimate_pending() -> None:
    """A held watch refused (say, Forbidden) while the worker stays connected: the estimate
    is unknown, not pending, however often the copies' watches list again."""
    worker = RemoteCluster(
        "w1", remote_cluster().cluster, "origin", lambda ns, name, urgent: None, held=True
    )
    for kind in worker._ok:
        worker._set_ok(kind, True)
    for kind in QUEUE_KINDS:
        _listed(worker, kind)
    worker._set_held_ok(False, "Forbidden")
    assert not worker.estimate_pending
    for kind in worker._ok:
        worker._set_ok(kind, True)  # listed again while connected: no reconnection
    assert not worker.estimate_pending


def _listed(worker: RemoteCluster, watch: str) -> None:
    if watch == "held":
        worker._set_held_ok(True)
    else:
        worker._set_read_ok(watch, True)


def test_the_copys_own_priority_and_creation_are_what_its_kueue_preempts_with() -> None:
    full = [held("mid", 8, priority=5)]
    manager = _asking(4, 0)
    assert _estimated(_worker(full), manager, _asking(4, 10)) is not None
    assert _estimated(_worker(full), manager, _asking(4, None)) is None  # the manager's: 0
    newer = [held("newer", 8, priority=10, created="2026-11-22T11:30:00Z")]
    queue = cq("LowerOrNewerEqualPriority")
    copy_ = _asking(4, 10, created="2026-11-22T11:00:00Z")
    assert _estimated(_worker(newer, queue), _asking(4, 10), copy_) is not None


def test_only_our_copys_checkpoint_counts_for_a_workload_it_owns() -> None:
    mine = dataclasses.replace(held("trainjob-old", 8, admitted=60), trainjob=("old", "u-old"))
    noted: dict[tuple[str, str], Noted] = {("ns", "old"): ("u-old", "step-400.pt", None, at(2))}
    wl = _asking(4, 100)
    ours = _estimated(_worker([dataclasses.replace(mine, ours=True)], noted=noted), wl, wl)
    assert ours == Cost((Victim("ns", "trainjob-old", 120.0, True),))
    theirs = _estimated(_worker([mine], noted=noted), wl, wl)
    assert theirs == Cost((Victim("ns", "trainjob-old", 3600.0, False),))


def _report(
    uid: str,
    checkpoint: str | None,
    when: object = "2020-01-01T11:50:00Z",
    *,
    more: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    """A copy's progress report naming `checkpoint` (None: none), the metrics `more` after."""
    named = [] if checkpoint is None else [{"name": "checkpoint", "value": checkpoint}]
    status: dict[str, Any] = {"lastUpdatedTime": when, "metrics": [*named, *more]}
    return {
        "metadata": {"namespace": "ns", "name": "old", "uid": uid},
        "status": {"trainerStatus": status},
    }


def _noted(*changes: tuple[str, dict[str, Any]]) -> dict[tuple[str, str], Noted]:
    noted: dict[tuple[str, str], Noted] = {}
    keeper = SimpleNamespace(_checkpoints=noted)
    for type_, obj in changes:
        RemoteCluster._note_checkpoint(keeper, type_, obj)  # type: ignore[arg-type]
    return noted


SEEN = ("ADDED", _report("u1", None))  # the copy seen before it named a checkpoint


def test_a_checkpoint_is_noted_from_its_first_report_per_trainjob_copy() -> None:
    def told(minute: int) -> tuple[str, dt.datetime]:  # well behind any test machine's clock
        when = dt.datetime(2020, 1, 1, 11, minute, tzinfo=dt.UTC)
        return when.strftime("%Y-%m-%dT%H:%M:%SZ"), when

    (first, first_at), (later, _) = told(50), told(58)
    again = _noted(
        SEEN,
        ("MODIFIED", _report("u1", "step-4.pt", first)),
        ("MODIFIED", _report("u1", "step-4.pt", later)),
    )
    assert again == {("ns", "old"): ("u1", "step-4.pt", None, first_at)}
    # a new TrainJob of the name first seen naming one: when it was saved is not known
    recreated = _noted(
        SEEN,
        ("MODIFIED", _report("u1", "step-4.pt", first)),
        ("ADDED", _report("u2", "step-4.pt", later)),
    )
    assert recreated == {("ns", "old"): ("u2", "step-4.pt", None, None)}


def test_a_checkpoint_is_forgotten_when_its_trainjob_goes_or_reports_none() -> None:
    named = ("MODIFIED", _report("u1", "step-4.pt"))
    assert _noted(SEEN, named, ("DELETED", _report("u1", "step-4.pt"))) == {}
    gone = _noted(SEEN, named, ("MODIFIED", _report("u1", None)))
    assert gone == {("ns", "old"): ("u1", None, None, None)}


def test_a_reports_time_ahead_or_unreadable_counts_as_when_it_was_seen() -> None:
    ahead = _noted(SEEN, ("MODIFIED", _report("u1", "step-4.pt", "9999-12-31T23:59:59Z")))
    unreadable = _noted(SEEN, ("MODIFIED", _report("u1", "step-4.pt", "not a time")))
    for noted in (ahead, unreadable):
        (_, _, _, seen) = noted[("ns", "old")]
        assert seen is not None
        assert dt.datetime(2020, 6, 1, tzinfo=dt.UTC) < seen < NOW.replace(year=3000)


def test_a_step_of_more_digits_than_a_step_has_is_no_step() -> None:
    """int() refuses past 4,300 digits: such a report must name its checkpoint, not raise."""
    step = {"name": "checkpoint_step", "value": "9" * 5000}
    report = _report("u1", "step-4.pt", more=(step,))
    noted = _noted(SEEN, ("MODIFIED", report))
    assert noted[("ns", "old")][1:3] == ("step-4.pt", None)


def test_equal_candidates_go_by_uid_whatever_order_they_are_listed_in() -> None:
    assert picked(4, [held("b", 4), held("a", 4)], queue=cq("Any")) == ["a"]
