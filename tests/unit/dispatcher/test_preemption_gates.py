"""Kueue's orchestrated preemption in the dispatch decision (decide.py: `_preemption_gate`,
`_open`): copies made gated, a gate opened on one worker at a time, the oldest signal first,
the next after the timeout; Kueue v0.19's `workloadToOpenPreemptionGate` is the reference."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from dispatcher.controller.reconcile import REMOTE_RETRY_SECONDS
from dispatcher.decisions import preemption
from dispatcher.decisions.decide import (
    COST_GRACE,
    ESTIMATE_POLL,
    DispatchPlan,
    RemoteView,
    decide,
)
from dispatcher.decisions.preemption import Cost, Victim
from dispatcher.decisions.selection import CLUSTER_NAMES_ANNOTATION
from dispatcher.settings import DispatcherSettings
from kubebase.kinds import EVENT
from kubebase.objects import Dict
from tests.support.builders import TrainJobBuilder, edit, make_runtime
from tests.support.dispatch import (
    GATED_WORKLOAD_UID,
    MULTIKUEUE_GATE,
    gated,
    manager_workload,
    observed,
    remote,
)
from tests.support.whole_pass import (
    World,
    blocked_on_gate,
    both_caches,  # noqa: F401 (the fixture the whole-pass cases run under)
    event_tuples,
    fleet,
    reserve,
)
from trainjob.workload import workload_name
from trainjob_api import constants as c

WAITING = edit(manager_workload("QuotaReserved")).uid(GATED_WORKLOAD_UID).obj()
TIMEOUT = 300.0


def decided(remotes: list[RemoteView], **kw: Any) -> DispatchPlan:
    kw.setdefault("preemption_gated", True)
    kw.setdefault("preemption_timeout", TIMEOUT)
    return decide(observed(WAITING, TrainJobBuilder().multikueue().obj(), remotes, **kw))


def opened(plan: DispatchPlan) -> list[str]:
    return [a.cluster for a in plan.remote if a.verb == "open"]


@pytest.mark.parametrize("on", [False, True])
def test_copies_carry_multikueues_gate_only_with_orchestrated_preemption(on: bool) -> None:
    plan = decided(
        [remote("w1", workload=False), remote("w2", workload=False)], preemption_gated=on
    )
    specs = [a.obj["spec"] for a in plan.remote if a.verb == "create"]
    assert len(specs) == 2
    want = [{"name": MULTIKUEUE_GATE}] if on else None
    assert all(spec.get("preemptionGates") == want for spec in specs), specs


def test_of_the_workers_that_would_preempt_the_first_to_say_so_is_let() -> None:
    plan = decided(
        [
            gated("w1", blocked_since="2026-11-22T11:59:30Z"),
            gated("w2", blocked_since="2026-11-22T11:59:10Z"),
            gated("w3"),  # room without preempting, or not judged yet: nothing to open
        ]
    )
    assert opened(plan) == ["w2"]
    (action,) = [a for a in plan.remote if a.verb == "open"]
    assert action.obj["metadata"] == {
        "name": "trainjob-tj-abcde", "namespace": "ns", "uid": "uid-w2", "resourceVersion": "7"
    }  # fmt: skip
    now = "2026-11-22T12:00:00Z"
    state = {"name": MULTIKUEUE_GATE, "position": "Open", "lastTransitionTime": now}
    assert action.obj["status"] == {"preemptionGates": [state]}
    assert action.event is not None and action.event.reason == "PreemptionAllowed"
    assert "w2 may preempt to admit it" in action.event.message
    assert "since 2026-11-22T11:59:10Z" in action.event.message
    assert plan.requeue_after == TIMEOUT
    assert plan.check_state is not None and "(w2 may preempt to admit it)" in plan.check_state[1]


def test_no_other_gate_opens_before_the_timeout_and_the_next_opens_after_it() -> None:
    blocked = "2026-11-22T11:50:00Z"
    within = decided(
        [gated("w1", opened_at="2026-11-22T11:59:00Z"), gated("w2", blocked_since=blocked)]
    )
    assert opened(within) == []
    assert within.requeue_after == TIMEOUT - 60
    assert within.check_state is not None and "w1 may preempt" in within.check_state[1]
    after = decided(
        [gated("w1", opened_at="2026-11-22T11:54:59Z"), gated("w2", blocked_since=blocked)]
    )
    assert opened(after) == ["w2"]
    assert after.check_state is not None
    assert "(w1 may preempt to admit it; w2 may preempt to admit it)" in after.check_state[1]


def test_a_worker_lost_for_good_no_longer_holds_the_open_gate_a_brief_outage_does() -> None:
    blocked = gated("w2", blocked_since="2026-11-22T11:59:00Z")
    brief = gated("w1", opened_at="2026-11-22T11:59:30Z", connected=False, lost=5)
    assert opened(decided([brief, blocked])) == []
    lost = gated("w1", opened_at="2026-11-22T11:59:30Z", connected=False, lost=61)
    assert opened(decided([lost, blocked])) == ["w2"]


def test_only_a_copy_made_with_the_gate_is_opened_whatever_the_setting_says_now() -> None:
    ungated = gated("w1", blocked_since="2026-11-22T11:59:00Z", gate=False)
    assert opened(decided([ungated])) == []
    still_gated = gated("w1", blocked_since="2026-11-22T11:59:00Z")
    assert opened(decided([still_gated], preemption_gated=False)) == ["w1"]


def test_the_gate_state_of_another_gate_is_kept_and_ours_set_open() -> None:
    copy = gated("w1", blocked_since="2026-11-22T11:59:00Z")
    assert copy.workload is not None
    other = {"name": "example.com/other", "position": "Closed", "lastTransitionTime": "x"}
    closed = {"name": MULTIKUEUE_GATE, "position": "Closed", "lastTransitionTime": "y"}
    edit(copy.workload.raw).status(preemptionGates=[other, closed])
    (action,) = [a for a in decided([copy]).remote if a.verb == "open"]
    gates = action.obj["status"]["preemptionGates"]
    assert gates[0] == other and gates[1]["name"] == MULTIKUEUE_GATE
    assert gates[1]["position"] == "Open"


def test_a_copy_made_for_another_workload_of_its_name_is_neither_opened_nor_holding() -> None:
    """An orphan of an earlier Workload of the same name (a prebuilt name a tenant reuses)
    is the garbage collector's: its gate is not opened, and its open gate keeps no other
    worker waiting."""
    orphan = gated("w1", blocked_since="2026-11-22T11:59:00Z", made_for="uid-earlier")
    assert opened(decided([orphan])) == []
    holding = gated("w1", opened_at="2026-11-22T11:59:50Z", made_for="uid-earlier")
    assert opened(decided([holding, gated("w2", blocked_since="2026-11-22T11:59:00Z")])) == ["w2"]


@pytest.mark.parametrize(
    ("opened_at", "wait"),
    [
        ("2026-11-22T11:59:00", TIMEOUT - 60),  # no zone: UTC
        ("9999-12-31T23:59:59Z", TIMEOUT),  # ahead of our clock: as now
        ("not a time", None),  # unreadable: long ago, the next opens
    ],
)
def test_an_open_gates_time_of_any_shape_is_read_without_failing_the_pass(
    opened_at: str, wait: float | None
) -> None:
    plan = decided(
        [gated("w1", opened_at=opened_at), gated("w2", blocked_since="2026-11-22T11:59:00Z")]
    )
    assert opened(plan) == ([] if wait is not None else ["w2"])
    assert plan.requeue_after == (wait if wait is not None else TIMEOUT)


def test_a_gate_the_dispatcher_opened_keeps_the_next_waiting_though_its_copy_is_gone() -> None:
    blocked = gated("w2", blocked_since="2026-11-22T11:59:00Z")
    recent = decided([blocked], gate_opened_last=("w1", "2026-11-22T11:59:00Z"))
    assert opened(recent) == [] and recent.requeue_after == TIMEOUT - 60
    assert opened(decided([blocked], gate_opened_last=("w1", "2026-11-22T11:54:59Z"))) == ["w2"]


def test_the_dispatchers_memory_of_an_opening_on_a_worker_lost_for_good_holds_nothing() -> None:
    """The copy of the worker let preempt can no longer be read once it is lost: what the
    dispatcher remembers of the opening counts as the copy would have, until that worker is
    lost for good (then the next may preempt), not for the whole timeout."""
    blocked = gated("w2", blocked_since="2026-11-22T11:59:00Z")
    memory = ("w1", "2026-11-22T11:59:30Z")
    lost = remote("w1", connected=False, lost=61)
    assert opened(decided([lost, blocked], gate_opened_last=memory)) == ["w2"]
    brief = remote("w1", connected=False, lost=5)
    assert opened(decided([brief, blocked], gate_opened_last=memory)) == []


def test_ties_go_to_the_same_worker_on_every_pass_by_the_hash_admissions_ties_go_by() -> None:
    same = "2026-11-22T11:59:00Z"
    first = opened(decided([gated("w2", blocked_since=same), gated("w3", blocked_since=same)]))
    again = opened(decided([gated("w3", blocked_since=same), gated("w2", blocked_since=same)]))
    # sha1 of "<workload>/<worker>": w3's sorts before w2's (by name it would be w2)
    assert first == again == ["w3"]


# ---- the whole pass: the copies on the workers, through their API ---------------------------


@contextlib.contextmanager
def sent_gated(*workers: str, cpu: str | None = None, **settings: Any) -> Iterator[World]:
    """A MultiKueue TrainJob (its node asking for `cpu`) whose quota the manager's Kueue
    reserved, its copies sent gated to `workers` (orchestrated preemption on); the world
    closed after the block."""
    runtime = make_runtime()
    built = TrainJobBuilder().queue("q").multikueue()
    submitted = (built.resources(cpu=cpu) if cpu else built).obj()
    world, _ctx = fleet(
        [runtime, submitted],
        {w: [runtime] for w in workers},
        orchestrated_preemption=True,
        **settings,
    )
    world.context = _ctx  # type: ignore[attr-defined]  # for the tests that reconnect a worker
    try:
        world.settle(("ns", "tj"))
        reserve(world, "manager")
        world.settle(("ns", "tj"))
        yield world
    finally:
        world.close()


def _copy(world: World, worker: str) -> Any:
    tj = world.get("manager", c.TRAINJOB, "tj")
    assert tj is not None
    return world.get(worker, c.WORKLOAD, workload_name("tj", tj["metadata"]["uid"]))


@pytest.mark.usefixtures("both_caches")
def test_the_gate_opens_on_the_worker_that_first_would_preempt_and_the_manager_says_so() -> None:
    workers = ("worker1", "worker2", "worker3")
    with sent_gated(*workers) as world:
        for worker in workers:
            copy = _copy(world, worker)
            assert copy is not None and copy["spec"]["preemptionGates"] == [
                {"name": MULTIKUEUE_GATE}
            ]
        blocked_on_gate(world, "worker3", "2026-01-01T00:00:05Z")
        blocked_on_gate(world, "worker2", "2026-01-01T00:00:01Z")
        world.settle(("ns", "tj"))
        positions = {
            w: [
                g["position"]
                for g in (_copy(world, w).get("status") or {}).get("preemptionGates") or []
            ]
            for w in workers
        }
        assert positions == {"worker1": [], "worker2": ["Open"], "worker3": []}
        # the dispatcher remembers where it opened it (a worker lost for good holds nothing)
        ctx = world.context  # type: ignore[attr-defined]
        noted = ctx.workers.gate_opened(
            _copy(world, "worker2")["metadata"]["annotations"][
                "kueue.x-k8s.io/multikueue-origin-uid"
            ]
        )
        assert noted is not None and noted[0] == "worker2"
        # worker2's Kueue preempts now, blocked no more; within the timeout no other may
        letting = _copy(world, "worker2")
        edit(letting).without_condition("BlockedOnPreemptionGates")
        world.apis["worker2"].put(letting)
        world.settle(("ns", "tj"))
        assert not (_copy(world, "worker3").get("status") or {}).get("preemptionGates")
        allowed = [e for e in event_tuples(world.apis["manager"]) if e[1] == "PreemptionAllowed"]
        assert allowed == [("Normal", "PreemptionAllowed", "tj")]


def test_an_opening_met_by_a_conflict_is_tried_again_soon_on_the_copy_as_it_is_now() -> None:
    """The copy changed between the watch and the write (its Kueue wrote it): the opening is
    refused, and the pass comes back within seconds, not when the timeout ends."""
    with sent_gated("worker1", "worker2", behind=False) as world:
        blocked_on_gate(world, "worker2", "2026-01-01T00:00:01Z")
        name = _copy(world, "worker2")["metadata"]["name"]
        raced, _again = world.run_raced(("ns", "tj"), "worker2", c.WORKLOAD, name)
        status = c.WORKLOAD.path("ns", name, "status")
        assert ("PATCH", status, 409) in raced.refused["worker2"]
        assert raced.requeue_after == REMOTE_RETRY_SECONDS
        world.settle(("ns", "tj"))
        gates = _copy(world, "worker2")["status"]["preemptionGates"]
        assert [g["position"] for g in gates] == ["Open"]


@pytest.mark.usefixtures("both_caches")
def test_a_tenant_deselecting_the_worker_let_preempt_lets_no_other_before_the_timeout() -> None:
    """Its copy deleted takes the copy's record of the opening with it: the dispatcher's own
    keeps a TrainJob that cycles its choice of clusters from preempting on each in turn."""
    with sent_gated("worker1", "worker2", "worker3") as world:
        blocked_on_gate(world, "worker2", "2026-01-01T00:00:01Z")
        world.settle(("ns", "tj"))
        assert _copy(world, "worker2")["status"]["preemptionGates"][0]["position"] == "Open"
        blocked_on_gate(world, "worker3", "2026-01-01T00:00:02Z")
        tj = world.get("manager", c.TRAINJOB, "tj")
        assert tj is not None
        edit(tj).annotations({CLUSTER_NAMES_ANNOTATION: "worker1,worker3"})
        world.apis["manager"].put(tj)
        world.settle(("ns", "tj"))
        assert _copy(world, "worker2") is None
        assert not (_copy(world, "worker3").get("status") or {}).get("preemptionGates")


def test_the_next_gate_opens_once_the_timeout_has_passed_to_the_second() -> None:
    blocked = gated("w2", blocked_since="2026-11-22T11:50:00Z")
    at = decided([gated("w1", opened_at="2026-11-22T11:55:00Z"), blocked])  # 300s ago
    assert opened(at) == ["w2"]
    before = decided([gated("w1", opened_at="2026-11-22T11:55:01Z"), blocked])  # 299s ago
    assert opened(before) == [] and before.requeue_after == 1


def test_a_worker_lost_exactly_the_lost_timeout_ago_no_longer_holds_the_gate() -> None:
    blocked = gated("w2", blocked_since="2026-11-22T11:59:00Z")
    lost = gated("w1", opened_at="2026-11-22T11:59:30Z", connected=False, lost=60)
    assert opened(decided([lost, blocked])) == ["w2"]
    nearly = gated("w1", opened_at="2026-11-22T11:59:30Z", connected=False, lost=59.9)
    assert opened(decided([nearly, blocked])) == []


def test_an_open_copy_still_blocked_is_not_opened_again_the_next_is() -> None:
    # w1's Kueue still says it is blocked after its gate opened (it could not preempt after
    # all): after the timeout the turn is w2's, not w1's again, though w1 said so first.
    still = gated("w1", blocked_since="2026-11-22T11:50:00Z", opened_at="2026-11-22T11:54:00Z")
    plan = decided([still, gated("w2", blocked_since="2026-11-22T11:51:00Z")])
    assert opened(plan) == ["w2"]


def test_the_timeout_runs_from_the_gate_opened_last() -> None:
    plan = decided(
        [
            gated("w1", opened_at="2026-11-22T11:40:00Z"),
            gated("w2", opened_at="2026-11-22T11:59:00Z"),
            gated("w3", blocked_since="2026-11-22T11:30:00Z"),
        ]
    )
    assert opened(plan) == [] and plan.requeue_after == TIMEOUT - 60


def test_a_gate_open_without_a_time_counts_as_opened_long_ago_and_still_held() -> None:
    plan = decided([gated("w1", opened_at=""), gated("w2", blocked_since="2026-11-22T11:59:00Z")])
    assert opened(plan) == ["w2"]
    assert plan.check_state is not None
    assert "(w1 may preempt to admit it; w2 may preempt to admit it)" in plan.check_state[1]


def test_a_blocked_condition_no_longer_true_or_without_a_time() -> None:
    false = gated("w1", blocked_since="2026-11-22T11:59:00Z")
    assert false.workload is not None
    edit(false.workload.raw).condition("BlockedOnPreemptionGates", status="False")
    assert opened(decided([false])) == []
    assert opened(decided([gated("w1", blocked_since="")])) == ["w1"]


def test_a_disconnected_worker_is_never_the_one_let_preempt() -> None:
    away = gated("w1", blocked_since="2026-11-22T11:50:00Z", connected=False, lost=5)
    plan = decided([away, gated("w2", blocked_since="2026-11-22T11:59:00Z")])
    assert opened(plan) == ["w2"]


def test_the_sooner_of_a_rounds_wait_and_the_gates_wait_brings_the_pass_back() -> None:
    from dispatcher.decisions.decide import Incremental

    remotes = [
        gated("w1", opened_at="2026-11-22T11:59:00Z"),
        gated("w2", blocked_since="2026-11-22T11:59:30Z"),
        remote("w3", workload=False),
    ]
    obs = observed(
        WAITING, TrainJobBuilder().multikueue().obj(), remotes,
        preemption_gated=True, preemption_timeout=TIMEOUT,
    )  # fmt: skip
    plan = decide(obs, Incremental(batch=2, round_seconds=10_000))
    assert plan.requeue_after == TIMEOUT - 60


def test_a_copy_made_gated_holds_multikueues_gate_only_not_the_managers() -> None:
    managers = {
        **WAITING,
        "spec": {**WAITING["spec"], "preemptionGates": [{"name": "example.com/m"}]},
    }
    plan = decide(
        observed(
            managers, TrainJobBuilder().multikueue().obj(), [remote("w1", workload=False)],
            preemption_gated=True,
        )
    )  # fmt: skip
    (spec,) = [a.obj["spec"] for a in plan.remote if a.verb == "create"]
    assert spec["preemptionGates"] == [{"name": MULTIKUEUE_GATE}]


@pytest.mark.usefixtures("both_caches")
def test_the_timeout_a_pass_judges_by_is_the_settings() -> None:
    from kubebase.kinds import EVENT

    with sent_gated("worker1", single_cluster_preemption_timeout=42) as world:
        blocked_on_gate(world, "worker1", "2026-01-01T00:00:01Z")
        world.settle(("ns", "tj"))
        events = world.apis["manager"].objects(EVENT)
        (allowed,) = [e for e in events if e["reason"] == "PreemptionAllowed"]
        assert "within 42s" in allowed["message"]


def test_the_dispatchers_memory_of_an_opening_lasts_the_timeout_and_is_let_go_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dispatcher.settings import DispatcherSettings
    from dispatcher.workers import connections

    clock = [1000.0]
    monkeypatch.setattr(connections.time, "monotonic", lambda: clock[0])
    settings = DispatcherSettings(single_cluster_preemption_timeout=300)
    workers = connections.WorkerConnections(settings, Any, lambda *_: None)
    workers.note_gate_opened("a", "w1", "2026-11-22T11:55:00Z")
    clock[0] += 299.9
    assert workers.gate_opened("a") == ("w1", "2026-11-22T11:55:00Z")
    clock[0] += 0.1  # the timeout, to the tenth of a second
    assert workers.gate_opened("a") is None
    workers.note_gate_opened("b", "w2", "2026-11-22T12:00:00Z")  # lets "a" go, keeps "b"
    assert set(workers._gates) == {"b"}


# ---- the cost order (preemption.py estimates each blocked worker's) ---------------------------


def costing(view: RemoteView, *lost_minutes: float) -> RemoteView:
    """`view` with what its preemption would cost: a victim per figure, its training lost."""
    view.preemption = Cost(
        tuple(Victim("ns", f"v{i}", m * 60, False) for i, m in enumerate(lost_minutes))
    )
    return view


def test_by_cost_the_worker_whose_preemption_loses_least_training_is_let_first() -> None:
    plan = decided(
        [
            costing(gated("w1", blocked_since="2026-11-22T11:59:10Z"), 30, 20, 2),
            costing(gated("w2", blocked_since="2026-11-22T11:59:30Z"), 4),
            costing(gated("w3", blocked_since="2026-11-22T11:59:20Z"), 9),
        ],
        preemption_by_cost=True,
    )
    assert opened(plan) == ["w2"]
    (action,) = [a for a in plan.remote if a.verb == "open"]
    assert action.event is not None
    assert action.event.message == (
        "w2 may preempt to admit it: there it preempts 1 job, ~4 min of training lost, the "
        "least of the workers that would have to (instead of w3: preempts 1 job, ~9 min of "
        "training lost; w1: preempts 3 jobs, ~52 min of training lost); another worker may "
        "only if it has not admitted it within 300s"
    )
    assert plan.requeue_after == TIMEOUT


def test_by_cost_ties_within_a_minute_then_fewer_victims_then_kueues_order() -> None:
    first, later = "2026-11-22T11:59:10Z", "2026-11-22T11:59:30Z"
    tie = [
        costing(gated("w1", blocked_since=later), 4.2),
        costing(gated("w2", blocked_since=first), 4.9),
    ]
    assert opened(decided(tie, preemption_by_cost=True)) == ["w2"]
    fewer = [
        costing(gated("w1", blocked_since=later), 2),
        costing(gated("w2", blocked_since=first), 1, 1),
    ]
    assert opened(decided(fewer, preemption_by_cost=True)) == ["w1"]


def test_kueues_order_when_a_cost_is_unknown_or_the_order_is_kueues() -> None:
    def fleet_of() -> list[RemoteView]:
        return [
            costing(gated("w1", blocked_since="2026-11-22T11:59:10Z"), 50),
            costing(gated("w2", blocked_since="2026-11-22T11:59:30Z"), 1),
        ]

    assert opened(decided(fleet_of())) == ["w1"]  # the order is Kueue's
    unknown = fleet_of()
    unknown[1].preemption = None
    plan = decided(unknown, preemption_by_cost=True)
    assert opened(plan) == ["w1"]
    (action,) = [a for a in plan.remote if a.verb == "open"]
    assert action.event is not None and "the first to need to" in action.event.message


def test_by_cost_a_copy_not_judged_yet_is_waited_for_a_little() -> None:
    """Its Kueue may yet say it would have to preempt, at a lower cost: the cost order waits
    COST_GRACE seconds from the first signal, not for ever."""

    def fleet_of(blocked_since: str) -> list[RemoteView]:
        return [costing(gated("w1", blocked_since=blocked_since), 50), gated("w2")]

    soon = decided(fleet_of("2026-11-22T11:59:56Z"), preemption_by_cost=True)
    assert opened(soon) == []
    assert soon.requeue_after == COST_GRACE - 4
    late = decided(fleet_of(f"2026-11-22T11:59:{60 - COST_GRACE:02.0f}Z"), preemption_by_cost=True)
    assert opened(late) == ["w1"]
    admitted = gated("w2")
    assert admitted.workload is not None
    edit(admitted.workload.raw).more_conditions({"type": "QuotaReserved", "status": "True"})
    judged = [costing(gated("w1", blocked_since="2026-11-22T11:59:56Z"), 50), admitted]
    assert opened(decided(judged, preemption_by_cost=True)) == ["w1"]


def _rfc3339(minutes_ago: float) -> str:
    when = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _training_here(
    world: World, worker: str, name: str, cpu: str, admitted: float, **meta: Any
) -> None:
    """A Workload admitted in `worker`'s ClusterQueue "cq" `admitted` minutes ago, holding
    `cpu` of it, at priority 0 (below the job's: `_preempting`)."""
    since = _rfc3339(admitted)
    world.apis[worker].put(
        {
            "apiVersion": c.KUEUE_API,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", **meta},
            "spec": {"queueName": "q", "priority": 0, "podSets": []},
            "status": {
                "conditions": [
                    {"type": t, "status": "True", "reason": t, "lastTransitionTime": since}
                    for t in ("QuotaReserved", "Admitted")
                ],
                "admission": {
                    "clusterQueue": "cq",
                    "podSetAssignments": [
                        {
                            "name": "node",
                            "flavors": {"cpu": "default"},
                            "resourceUsage": {"cpu": cpu},
                        }
                    ],
                },
            },
        }
    )


def _preempting(world: World, *workers: str) -> None:
    """The workers' ClusterQueue "cq" preempts Workloads of a lower priority for a pending
    one, and the job's priority is 10 (its manager Workload's, which its copies follow)."""
    tj = world.get("manager", c.TRAINJOB, "tj")
    assert tj is not None
    wl = world.get("manager", c.WORKLOAD, workload_name("tj", tj["metadata"]["uid"]))
    assert wl is not None
    edit(wl).spec(priority=10)
    world.apis["manager"].put(wl)
    world.settle(("ns", "tj"))
    for worker in workers:
        cq = world.get(worker, c.CLUSTER_QUEUE, "cq", namespace=None)
        assert cq is not None
        edit(cq).spec(preemption={"withinClusterQueue": "LowerPriority"})
        world.apis[worker].put(cq)


def _worker2_cheaper(world: World) -> None:
    """Both workers' queues ("cq", 8 CPU) preempting for the job: worker1 full with two jobs
    admitted an hour ago, worker2 with one admitted five minutes ago."""
    _preempting(world, "worker1", "worker2")
    _training_here(world, "worker1", "local-a", "4", admitted=60)
    _training_here(world, "worker1", "local-b", "4", admitted=61)
    _training_here(world, "worker2", "local-c", "8", admitted=5)


def _opened_on(world: World, workers: tuple[str, ...]) -> list[str]:
    return [
        w
        for w in workers
        if any(
            g.get("position") == "Open"
            for g in (_copy(world, w).get("status") or {}).get("preemptionGates") or []
        )
    ]


@pytest.mark.usefixtures("both_caches")
@pytest.mark.parametrize("order", ["Cost", "Kueue"])
def test_by_cost_the_worker_with_the_least_training_to_lose_preempts(order: str) -> None:
    """Two full workers: worker1 holds two jobs admitted an hour ago, worker2 one admitted
    five minutes ago. worker1's Kueue says first that it is blocked; by cost worker2 is let
    preempt, by Kueue's order worker1."""
    workers = ("worker1", "worker2")
    with sent_gated(*workers, cpu="8", preemption_order=order) as world:
        _worker2_cheaper(world)
        blocked_on_gate(world, "worker1", _rfc3339(2))
        blocked_on_gate(world, "worker2", _rfc3339(1))
        world.settle(("ns", "tj"))
        assert _opened_on(world, workers) == (["worker2"] if order == "Cost" else ["worker1"])
        (message,) = [
            e["message"]
            for e in world.apis["manager"].objects(EVENT)
            if e["reason"] == "PreemptionAllowed"
        ]
        if order == "Cost":
            assert message.startswith(
                "worker2 may preempt to admit it: there it preempts 1 job, ~5 min of training "
                "lost, the least of the workers that would have to (instead of worker1: "
                "preempts 2 jobs, ~2.0 h of training lost)"
            ), message
        else:
            assert "its Kueue was the first to need to" in message


@pytest.mark.usefixtures("both_caches")
@pytest.mark.parametrize(
    "why",
    ["not-listed", "not-connected", "connecting", "was-down", "no-kubeconfig", "setting-off"],
)
def test_by_cost_a_worker_whose_workloads_are_not_listed_yet_is_waited_for(
    why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica just started: worker2's watch of what holds quota there has not listed it
    yet, or worker2 has no connection yet at all (its MultiKueueCluster said Active). Its
    cost is pending, and the pass waits for it rather than let worker1, the first to say it
    is blocked, by Kueue's order; once known, the cheaper worker2 is let. A worker with no
    connection that was down before, or has no usable kubeconfig, is not waited for."""
    workers = ("worker1", "worker2")
    with sent_gated(*workers, cpu="8") as world:
        _worker2_cheaper(world)
        blocked_on_gate(world, "worker1", _rfc3339(0.2))
        blocked_on_gate(world, "worker2", _rfc3339(0.1))
        connections = world.context.workers  # type: ignore[attr-defined]
        worker2 = connections.remotes["worker2"]
        if why == "not-listed":
            monkeypatch.setattr(worker2._held, "list_now", lambda: None)  # its list under way
            worker2._held_ok = False
            worker2._estimate_unheard.add("held")
        elif why == "connecting":  # connected again: not even its copies listed yet
            for informer in worker2.informers:
                monkeypatch.setattr(informer, "list_now", lambda: None)
            for kind in worker2._ok:
                monkeypatch.setitem(worker2._ok, kind, False)
                monkeypatch.setitem(worker2._tried, kind, False)
            monkeypatch.setattr(worker2, "workload", lambda namespace, name: None)
            monkeypatch.setattr(worker2, "trainjob", lambda namespace, name: None)
        else:
            monkeypatch.delitem(connections.remotes, "worker2")
        if why == "was-down":  # and stays unconnected
            monkeypatch.setattr(connections, "connect", lambda mkc: None)
            mkc = world.get("manager", c.MULTIKUEUE_CLUSTER, "worker2", namespace=None)
            assert mkc is not None
            down = {"type": "Active", "status": "False", "lastTransitionTime": _rfc3339(60)}
            mkc.setdefault("status", {})["conditions"] = [down]
            world.apis["manager"].put(mkc)
        if why == "no-kubeconfig":
            monkeypatch.setitem(connections._problems, "worker2", ("BadConfig", "no kubeconfig"))
        if why == "setting-off":  # copies made gated are still opened; no estimate is coming
            ctx = world.context  # type: ignore[attr-defined]
            off = ctx.settings.model_copy(update={"orchestrated_preemption": False})
            monkeypatch.setattr(ctx, "settings", off)
        world.settle(("ns", "tj"))
        if why in ("was-down", "no-kubeconfig", "setting-off"):
            assert _opened_on(world, workers) == ["worker1"]
            return
        assert _opened_on(world, workers) == []
        # another look once worker2 is listed (watches.on_remote_room)
        assert world.context.withheld[("ns", "tj")] == {"worker2"}  # type: ignore[attr-defined]
        monkeypatch.undo()  # listed, connected
        world.settle(("ns", "tj"))
        assert _opened_on(world, workers) == ["worker2"]


@pytest.mark.usefixtures("both_caches")
def test_by_cost_a_copy_made_without_the_gate_is_not_waited_for_though_its_estimate_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """worker2's copy was made before orchestrated preemption was on: no gate of ours to
    open, and no cost to weigh, so its watches not having listed it keeps nobody waiting."""
    workers = ("worker1", "worker2")
    with sent_gated(*workers, cpu="8") as world:
        _preempting(world, *workers)
        _training_here(world, "worker1", "local-a", "8", admitted=60)
        blocked_on_gate(world, "worker1", _rfc3339(0.2))
        ungated = _copy(world, "worker2")
        edit(ungated).spec(preemptionGates=None)
        world.apis["worker2"].put(ungated)
        worker2 = world.context.workers.remotes["worker2"]  # type: ignore[attr-defined]
        monkeypatch.setattr(worker2._held, "list_now", lambda: None)  # its list under way
        worker2._held_ok = False
        worker2._estimate_unheard.add("held")
        world.settle(("ns", "tj"))
        assert "preemptionGates" not in _copy(world, "worker2")["spec"]
        assert _opened_on(world, workers) == ["worker1"]


@pytest.mark.usefixtures("both_caches")
@pytest.mark.parametrize("since", ["recent", ""], ids=["with-a-time", "without-a-time"])
def test_what_a_preemption_would_cost_is_worked_out_only_once_a_copy_is_blocked(
    since: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimate reads every Workload holding quota in the queue: a pass works it out
    only while one of the job's copies says it is blocked on the gate (with a time or
    without: blocked all the same), never for a job whose copies merely wait."""
    from dispatcher.workers.remote import RemoteCluster

    priced: list[str] = []
    estimate = RemoteCluster.preemption_cost

    def counted(self: RemoteCluster, *given: Any) -> Any:
        priced.append(self.name)
        return estimate(self, *given)

    monkeypatch.setattr(RemoteCluster, "preemption_cost", counted)
    workers = ("worker1", "worker2")
    with sent_gated(*workers, cpu="8") as world:
        _worker2_cheaper(world)
        world.settle(("ns", "tj"))
        assert priced == []
        blocked_on_gate(world, "worker1", _rfc3339(0.2) if since else "")
        world.settle(("ns", "tj"))
        assert set(priced) == {"worker1", "worker2"}


Report = tuple[str, "float | str", "int | None"]  # checkpoint, minutes ago or a time, step


@pytest.mark.usefixtures("both_caches")
@pytest.mark.parametrize(
    ("reports", "cheaper", "owner"),
    [
        ([], "worker2", "u-old"),  # worker1's job lost an hour, worker2's 5 minutes
        ([("step-400.pt", 1, None)], "worker1", "u-old"),
        # a Workload labelled ours, owned by another TrainJob of that name, borrows nothing
        ([("step-400.pt", 1, None)], "worker2", "u-another"),
        # the later checkpoint counts, from when its report said so
        ([("step-100.pt", 50, None), ("step-400.pt", 1, None)], "worker1", "u-old"),
        ([("step-400.pt", 7, None)], "worker2", "u-old"),  # 7 minutes against 5
        # the same one told again: from when it was first told, 7 minutes ago
        ([("step-400.pt", 7, None), ("step-400.pt", 1, None)], "worker2", "u-old"),
        # one name saved again at a later step is a later checkpoint
        ([("latest.pt", 7, 100), ("latest.pt", 1, 900)], "worker1", "u-old"),
        # a time before year 1 in UTC: counted as now, not a failed pass
        ([("step-400.pt", "0001-01-01T00:00:00+05:00", None)], "worker1", "u-old"),
    ],
    ids=[
        "none",
        "lately",
        "not-its-owner",
        "the-latest",
        "earlier",
        "told-again",
        "same-name-later-step",
        "before-year-one",
    ],
)
def test_a_victims_training_counts_from_the_checkpoint_its_copy_last_reported(
    reports: list[Report], cheaper: str, owner: str
) -> None:
    """worker1's one job is a copy of ours admitted an hour ago, whose reports named
    checkpoints; worker2's was admitted five minutes ago and never reported one."""
    with _old_copy_on_worker1(owner) as (world, _ctx, old):
        world.apis["worker1"].put(old)
        world.settle(("ns", "tj"))  # the copy seen before its reports
        for report in reports:
            world.apis["worker1"].put(old | {"status": {"trainerStatus": _report(*report)}})
            world.settle(("ns", "tj"))
        assert _preempts_on(world) == cheaper


@pytest.mark.usefixtures("both_caches")
def test_a_checkpoint_named_before_the_watch_saw_the_copy_counts_as_none() -> None:
    """When it was saved is not known (the copy was listed with it): from the admission."""
    with _old_copy_on_worker1("u-old") as (world, _ctx, old):
        told = _report("step-400.pt", 1, None)
        world.apis["worker1"].put(old | {"status": {"trainerStatus": told}})
        world.settle(("ns", "tj"))
        assert _preempts_on(world) == "worker2"


@pytest.mark.usefixtures("both_caches")
def test_a_reconnected_worker_keeps_the_checkpoints_seen_before() -> None:
    with _old_copy_on_worker1("u-old") as (world, ctx, old):
        world.apis["worker1"].put(old)
        world.settle(("ns", "tj"))  # the copy seen before its reports
        told = _report("step-400.pt", 1, None)
        world.apis["worker1"].put(old | {"status": {"trainerStatus": told}})
        world.settle(("ns", "tj"))
        ctx.workers._connect("worker1", {}, "a new kubeconfig")
        for informer in ctx.workers.remotes["worker1"].informers:
            assert informer.synced.wait(5)
        assert _preempts_on(world) == "worker1"


def test_an_estimate_that_fails_leaves_kueues_order(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(preemption, "victims", broken)
    with _old_copy_on_worker1("u-old") as (world, _ctx, _old):
        # worker2 is the cheaper, but its estimate fails: worker1 said first it is blocked
        assert _preempts_on(world) == "worker1"


def _report(name: str, when: float | str, step: int | None) -> Dict:
    metrics = [{"name": "checkpoint", "value": name}]
    if step is not None:
        metrics.append({"name": "checkpoint_step", "value": str(step)})
    told = when if isinstance(when, str) else _rfc3339(when)
    return {"lastUpdatedTime": told, "metrics": metrics}


@contextlib.contextmanager
def _old_copy_on_worker1(owner: str) -> Iterator[tuple[World, Any, Dict]]:
    """worker1 full with "trainjob-old", a Workload labelled a copy of ours, admitted an
    hour ago, its owner reference naming TrainJob "old" of UID `owner`; worker2 full with a
    job admitted 5 minutes ago; the job sent gated to both. Yields the world, the
    dispatcher's context and the body of TrainJob "old" (UID "u-old", not put yet)."""
    workers = ("worker1", "worker2")
    origin = DispatcherSettings().origin
    with sent_gated(*workers, cpu="8") as world:
        ctx = world.context
        _preempting(world, *workers)
        ours = {c.KUEUE_MULTIKUEUE_ORIGIN_LABEL: origin}
        ref = {"kind": "TrainJob", "name": "old", "uid": owner, "controller": True}
        _training_here(
            world, "worker1", "trainjob-old", "8", admitted=60, labels=ours, ownerReferences=[ref]
        )
        _training_here(world, "worker2", "local-c", "8", admitted=5)
        old = TrainJobBuilder("old").obj() | {
            "metadata": {"name": "old", "namespace": "ns", "uid": "u-old", "labels": ours}
        }
        yield world, ctx, old


def _preempts_on(world: World) -> str:
    """worker1's Kueue says it is blocked first; where the gate opens."""
    blocked_on_gate(world, "worker1", _rfc3339(2))
    blocked_on_gate(world, "worker2", _rfc3339(1))
    world.settle(("ns", "tj"))
    (opened,) = _opened_on(world, ("worker1", "worker2"))
    return opened


@pytest.mark.parametrize(
    ("settings", "watched"),
    [
        ({}, False),
        ({"orchestrated_preemption": True}, True),
        ({"orchestrated_preemption": True, "preemption_order": "Kueue"}, False),
    ],
    ids=["off", "by-cost", "kueues-order"],
)
def test_every_workload_of_a_worker_is_watched_only_for_the_cost_order(
    settings: dict[str, Any], watched: bool
) -> None:
    world, ctx = fleet([], {"worker1": []}, **settings)
    try:
        informers = ctx.workers.remotes["worker1"].informers
        # our copies always; every one only for the cost order
        assert sum(i.kind == c.WORKLOAD for i in informers) == (2 if watched else 1)
    finally:
        world.close()


def test_by_cost_only_a_gated_copy_not_yet_judged_is_waited_for() -> None:
    """A copy made without the gate, or one whose gate is already open (its timeout past),
    will never say it is blocked on it: the cost order does not wait for them."""
    blocked = costing(gated("w2", blocked_since="2026-11-22T11:59:56Z"), 5)
    ungated = gated("w1", gate=False)
    assert opened(decided([ungated, blocked], preemption_by_cost=True)) == ["w2"]
    blocked = costing(gated("w2", blocked_since="2026-11-22T11:59:56Z"), 5)
    holding = gated("w1", opened_at="2026-11-22T11:54:00Z")
    assert opened(decided([holding, blocked], preemption_by_cost=True)) == ["w2"]


def test_by_cost_the_grace_counts_from_the_first_copy_said_blocked() -> None:
    plan = decided(
        [
            costing(gated("w1", blocked_since="2026-11-22T11:59:45Z"), 50),
            costing(gated("w2", blocked_since="2026-11-22T11:59:58Z"), 5),
            gated("w3"),
        ],
        preemption_by_cost=True,
    )
    assert opened(plan) == ["w2"]


@pytest.mark.parametrize(
    ("estimate", "waits"),
    [
        ((), True),  # it would be admitted there as it is
        ((3,), True),  # by preempting, for less than the blocked worker's best
        ((50,), False),  # as much as the best blocked: not worth the wait
        ((80, 1), False),  # more
        (None, True),  # not known: the short grace
    ],
    ids=["fits", "cheaper", "as-much", "dearer", "unknown"],
)
def test_by_cost_a_copy_not_judged_yet_is_waited_for_as_long_as_its_estimate_is_worth(
    estimate: tuple[float, ...] | None, waits: bool
) -> None:
    """A worker whose Kueue has not judged the copy yet (one preemption under way in its
    queue holds the next back until it ends) is waited for `preemption_cost_wait` seconds
    when the estimate says it would admit the job as it is or for less; only COST_GRACE
    when the estimate cannot tell; not at all when it would cost as much or more."""
    wait = 60.0

    def fleet_of(seconds_ago: float) -> list[RemoteView]:
        when = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC) - dt.timedelta(seconds=seconds_ago)
        unjudged = gated("w2")
        if estimate is not None:
            costing(unjudged, *estimate)
        blocked = costing(gated("w1", blocked_since=when.strftime("%Y-%m-%dT%H:%M:%SZ")), 50)
        return [blocked, unjudged]

    def plan(seconds_ago: float) -> DispatchPlan:
        return decided(fleet_of(seconds_ago), preemption_by_cost=True, preemption_cost_wait=wait)

    patience = (COST_GRACE if estimate is None else wait) if waits else 0.0
    if waits:
        early = plan(patience - 4)
        assert opened(early) == [] and early.requeue_after == 4
    assert opened(plan(patience)) == ["w1"]


def test_by_cost_an_unjudged_copy_is_weighed_against_the_cheapest_blocked_worker() -> None:
    """Worth waiting for only if it would cost less than the best already blocked: one
    dearer than that (though cheaper than another blocked) is not waited for."""
    fleet = [
        costing(gated("w1", blocked_since="2026-11-22T11:59:50Z"), 50),
        costing(gated("w2", blocked_since="2026-11-22T11:59:55Z"), 10),
        costing(gated("w3"), 30),  # below w1's cost, above w2's
    ]
    assert opened(decided(fleet, preemption_by_cost=True, preemption_cost_wait=60)) == ["w2"]


def test_by_cost_the_longest_wait_any_unjudged_copy_is_worth_is_waited() -> None:
    """Several not judged yet: the pass waits as long as the most promising one is worth
    (`preemption_cost_wait` for a cheaper one), not as little as another's (COST_GRACE for
    one that cannot be told, none for a dearer one)."""
    for other in (gated("w2"), costing(gated("w2"), 80)):
        fleet = [
            costing(gated("w1", blocked_since="2026-11-22T11:59:30Z"), 50),
            other,
            costing(gated("w3"), 3),
        ]
        plan = decided(fleet, preemption_by_cost=True, preemption_cost_wait=60)
        assert opened(plan) == [] and plan.requeue_after == 30


def test_kueues_order_does_not_wait_for_an_estimate_pending_on_its_watches() -> None:
    """Only the cost order needs the estimate: with --preemption-order Kueue, a worker whose
    watches have not listed it yet keeps nobody waiting."""
    listing = gated("w2")
    listing.preemption_pending = True
    plan = decided([gated("w1", blocked_since="2026-11-22T11:59:50Z"), listing])
    assert opened(plan) == ["w1"]


def test_the_cost_waits_default_and_bounds_are_the_documented_ones() -> None:
    """60 s by default (docs/operators/kueue.md), 0 allowed (wait for no unjudged copy), not
    less; a worker whose cost cannot be told is waited for COST_GRACE, as its help says."""
    settings = DispatcherSettings()
    assert settings.preemption_cost_wait == 60
    assert DispatcherSettings(preemption_cost_wait=0).preemption_cost_wait == 0
    with pytest.raises(ValueError):
        DispatcherSettings(preemption_cost_wait=-1)
    with pytest.raises(ValueError):  # at most an hour: never for ever
        DispatcherSettings(preemption_cost_wait=3601)
    help_text = DispatcherSettings.model_fields["preemption_cost_wait"].description or ""
    assert f"waited for {COST_GRACE:g} seconds" in help_text
    cheaper = [
        costing(gated("w1", blocked_since="2026-11-22T11:59:59Z"), 50),
        costing(gated("w2"), 3),
    ]
    assert opened(decided(cheaper, preemption_by_cost=True, preemption_cost_wait=0)) == ["w1"]


def test_by_cost_an_estimate_pending_on_its_watches_is_waited_for_then_kueues_order() -> None:
    """A replica just started, its copies already blocked: the worker whose watches have not
    listed it yet is looked at again every ESTIMATE_POLL seconds, rather than the first
    pass falling back on Kueue's order; for `preemption_cost_wait` seconds at most."""

    def plan(seconds_ago: float) -> DispatchPlan:
        now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)

        def ago(seconds: float) -> str:
            return (now - dt.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")

        first = gated("w1", blocked_since=ago(seconds_ago))
        first.preemption_pending = True
        second = costing(gated("w2", blocked_since=ago(seconds_ago - 5)), 1)
        return decided([first, second], preemption_by_cost=True, preemption_cost_wait=60)

    early = plan(20)
    assert opened(early) == [] and early.requeue_after == ESTIMATE_POLL
    assert early.awaited == ["w1"]  # woken once w1 is listed
    connecting = remote("w3", connected=False)  # its copies not known yet
    connecting.preemption_pending = True
    first = gated("w1", blocked_since="2026-11-22T11:59:50Z")
    waits = decided([costing(first, 5), connecting], preemption_by_cost=True)
    assert opened(waits) == [] and waits.requeue_after == ESTIMATE_POLL
    connecting.selected = False  # a worker the job may not go to is not waited for
    assert opened(decided([costing(first, 5), connecting], preemption_by_cost=True)) == ["w1"]
    assert plan(59.5).requeue_after == pytest.approx(0.5)
    assert opened(plan(60)) == ["w1"]  # not known in time: Kueue's order


def test_by_cost_a_blocked_workers_estimate_that_it_fits_as_it_is_is_not_known() -> None:
    """Its Kueue says it must preempt; an estimate of no victims disagrees (it sees the
    worker otherwise): the order is Kueue's, as for any unknown cost."""
    first = costing(gated("w1", blocked_since="2026-11-22T11:59:10Z"))
    assert first.preemption is not None and not first.preemption.victims
    later = costing(gated("w2", blocked_since="2026-11-22T11:59:30Z"), 1)
    plan = decided([later, first], preemption_by_cost=True)
    assert opened(plan) == ["w1"]
    (action,) = [a for a in plan.remote if a.verb == "open"]
    assert action.event is not None and "the first to need to" in action.event.message


@pytest.mark.usefixtures("both_caches")
def test_by_cost_a_worker_where_the_job_would_fit_is_waited_for_before_one_preempts() -> None:
    """worker1 full and blocked; worker2 has room, by what its Workloads hold (nothing), but
    its Kueue has not judged the copy yet: the pass waits for it (the setting's seconds),
    rather than let worker1 evict training; worker1 is let once that wait is over."""
    workers = ("worker1", "worker2")
    with sent_gated(*workers, cpu="8", preemption_cost_wait=120) as world:
        _preempting(world, *workers)
        _training_here(world, "worker1", "local-a", "8", admitted=60)
        blocked_on_gate(world, "worker1", _rfc3339(1))
        world.settle(("ns", "tj"))
        assert _opened_on(world, workers) == []
        blocked_on_gate(world, "worker1", _rfc3339(2.5))  # as if blocked longer ago
        world.settle(("ns", "tj"))
        assert _opened_on(world, workers) == ["worker1"]


def test_a_worker_taken_out_takes_its_checkpoints_memory_with_it() -> None:
    world, ctx = fleet([], {"worker1": [], "worker2": []}, orchestrated_preemption=True)
    try:
        assert set(ctx.workers._checkpoints) == {"worker1", "worker2"}
        ctx.workers.forget("worker1")
        assert set(ctx.workers._checkpoints) == {"worker2"}
    finally:
        world.close()
