"""Pure parts of the dispatcher: kubeconfig vetting and dispatch decisions."""

from __future__ import annotations

from typing import Any

import pytest

from dispatcher.decisions import dependencies, placements
from dispatcher.decisions.capacity import Fit
from dispatcher.decisions.checkpoints import Checkpoint
from dispatcher.decisions.decide import (
    REMOTE_DEPENDENCY_REFUSED,
    REMOTE_NAME_TAKEN,
    CapacityAware,
    External,
    Guard,
    Incremental,
    RemoteView,
    Taken,
    decide,
)
from tests.support.builders import TrainJobBuilder, WorkloadBuilder, edit
from tests.support.dispatch import decide_for, manager_workload, observed, remote
from trainjob.status_writes import FIRST_STATUS_HOLD_SECONDS

Dict = dict[str, Any]


def created_event(plan: Any) -> str | None:
    """The Event posted once the TrainJob is created on the winner (only if that succeeds)."""
    return next((a.event[2] for a in plan.remote if a.event), None)


def test_copies_go_to_every_reachable_cluster_and_are_nominated() -> None:
    plan = decide_for(
        manager_workload("QuotaReserved"),
        [
            remote("w1", workload=False),
            remote("w2", workload=False),
            remote("w3", connected=False, lost=5, workload=False),
        ],
    )
    assert [(a.cluster, a.verb) for a in plan.remote] == [("w1", "create"), ("w2", "create")]
    assert plan.nominated == ["w1", "w2"]
    assert plan.check_state == (
        "Pending",
        "dispatched to w1, w2; waiting for a cluster to admit it",
    )


def test_the_pending_message_says_why_a_worker_cannot_admit_its_copy() -> None:
    no_namespace = remote("w1", workload=False)
    no_namespace.problem = "namespace 'ns' not found"
    no_queue = remote("w2")
    assert no_queue.workload is not None
    edit(no_queue.workload.raw).conditions(
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "Misconfigured",
            "message": "LocalQueue q doesn't exist",
        }
    )
    waiting = remote("w3")
    assert waiting.workload is not None
    edit(waiting.workload.raw).conditions(
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "no quota"}
    )
    plan = decide_for(manager_workload("QuotaReserved"), [no_namespace, no_queue, waiting])
    assert plan.check_state == (
        "Pending",
        "dispatched to w1, w2, w3; waiting for a cluster to admit it "
        "(w1: namespace 'ns' not found; w2: LocalQueue q doesn't exist)",
    )


def test_incremental_strategy_adds_clusters_round_by_round_in_config_order() -> None:
    wl = manager_workload("QuotaReserved")  # quota reserved at 11:00:00, an hour before NOW
    remotes = [remote(f"w{i}", workload=False) for i in range(1, 6)]
    for round_seconds, created, requeue in (
        (7200.0, ["w1", "w2"], 3600.0),  # still the first round
        (2500.0, ["w1", "w2", "w3", "w4"], 1400.0),  # the second: two more
        (1000.0, ["w1", "w2", "w3", "w4", "w5"], None),  # all of them: no more rounds
    ):
        plan = decide_for(wl, remotes, strategy=Incremental(batch=2, round_seconds=round_seconds))
        assert [a.cluster for a in plan.remote] == created
        assert plan.requeue_after == requeue


def test_leftovers_of_an_earlier_round_are_removed_before_dispatching_again() -> None:
    deactivated = remote("w1")
    assert deactivated.workload is not None
    edit(deactivated.workload.raw).whole_spec({"active": False})
    plan = decide_for(manager_workload("QuotaReserved"), [deactivated, remote("w2", trainjob=True)])
    assert sorted((a.cluster, a.verb, a.obj["kind"]) for a in plan.remote) == [
        ("w1", "delete", "Workload"),
        ("w2", "delete", "TrainJob"),
        ("w2", "delete", "Workload"),
    ]


def test_first_admitted_copy_wins_and_the_others_go() -> None:
    wl = manager_workload("QuotaReserved", nominated=["w1", "w2"])
    plan = decide_for(
        wl,
        [
            remote("w1", admitted_at="2026-11-22T11:00:05Z"),
            remote("w2", admitted_at="2026-11-22T11:00:02Z"),
        ],
        trainjob=TrainJobBuilder().multikueue().suspended().obj(),
    )
    # One pass: the winner named and the check Ready in one Workload write (as Kueue does),
    # the loser's copy removed and the TrainJob sent to the winner.
    assert plan.cluster_name == "w2"
    assert plan.check_state == ("Ready", 'The workload was admitted on "w2"')
    assert [(a.cluster, a.verb, a.obj["kind"], a.guard) for a in plan.remote] == [
        ("w1", "delete", "Workload", Guard("uid-w1-wl")),  # the copy seen, by its UID
        ("w2", "create", "TrainJob", None),
    ]
    # No Event while the TrainJob is suspended: the Started Event of the admission that
    # follows names the cluster (queueing). One still running (sent again) gets its own.
    assert plan.events == [] and created_event(plan) is None
    running = TrainJobBuilder().multikueue().suspended(False).obj()
    again = decide_for(wl, [remote("w2", admitted_at="2026-11-22T11:00:02Z")], trainjob=running)
    assert [e[:3] for e in again.events] == [("Normal", "Dispatched", "dispatched to cluster w2")]


def test_admissions_in_the_same_second_are_shared_out_but_always_decided_alike() -> None:
    winners = set()
    for i in range(20):
        wl = manager_workload("QuotaReserved", nominated=["w1", "w2"])
        edit(wl).name(f"trainjob-tj{i}-abcde")
        same = "2026-11-22T11:00:02Z"
        remotes = [remote("w1", admitted_at=same), remote("w2", admitted_at=same)]
        first = decide_for(wl, remotes).cluster_name
        assert decide_for(wl, list(reversed(remotes))).cluster_name == first
        winners.add(first)
    assert winners == {"w1", "w2"}


def test_winner_must_be_nominated_before_it_is_named() -> None:
    plan = decide_for(
        manager_workload("QuotaReserved", nominated=["w1"]),
        [remote("w1"), remote("w2", admitted_at="2026-11-22T11:00:02Z")],
    )
    assert plan.cluster_name is None and plan.nominated == ["w1", "w2"]


def test_winner_gets_the_trainjob_and_the_check_turns_ready() -> None:
    plan = decide_for(
        manager_workload("QuotaReserved", cluster="w1"),
        [remote("w1", admitted_at="2026-11-22T11:00:02Z"), remote("w2", workload=False)],
    )
    created = [a.obj for a in plan.remote if a.verb == "create"]
    assert len(created) == 1 and created[0]["kind"] == "TrainJob"
    assert (
        created[0]["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"]
        == "trainjob-tj-abcde"
    )
    assert "managedBy" not in created[0]["spec"] and created[0]["spec"]["suspend"] is True
    assert plan.check_state == ("Ready", 'The workload was admitted on "w1"')


def test_status_flows_back_with_the_cluster_name() -> None:
    plan = decide_for(
        manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready"),
        [remote("w1", admitted_at="2026-11-22T11:00:02Z", trainjob=True)],
    )
    assert plan.trainjob_status == {
        "conditions": [{"type": "Complete", "status": "True"}],
        "clusterName": "w1",
    }


def running_remote(jobs: list[Dict], conditions: list[Dict] | None = None) -> RemoteView:
    view = remote("w1", admitted_at="2026-11-22T11:00:02Z", trainjob=True)
    assert view.trainjob is not None
    edit(view.trainjob.raw).status({"conditions": conditions or [], "jobsStatus": jobs})
    return view


def job_counts(**counts: int) -> list[Dict]:
    return [{"name": "node", "active": 0, "ready": 0, "succeeded": 0, "failed": 0, **counts}]


def test_pod_counts_that_move_nothing_are_held_but_outcomes_go_at_once() -> None:
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    manager_tj = TrainJobBuilder().multikueue().obj()
    edit(manager_tj).status({"clusterName": "w1", "conditions": [], "jobsStatus": job_counts()})

    def sync(view: RemoteView, held_for: float | None) -> Any:
        return decide(
            observed(wl, manager_tj, [view], status_coalesce=2.0, status_held_for=held_for)
        )

    # Only `active` moved: held 2 s from when it is first seen ...
    first = sync(running_remote(job_counts(active=1)), None)
    assert first.trainjob_status is None and first.status_held and first.requeue_after == 2.0
    held = sync(running_remote(job_counts(active=1)), 0.5)
    assert held.trainjob_status is None and held.status_held and held.requeue_after == 1.5
    # So is the first jobsStatus, all zeros, where the manager had none yet.
    edit(manager_tj).status({"clusterName": "w1"})
    assert sync(running_remote(job_counts()), 0.5).trainjob_status is None
    edit(manager_tj).status({"clusterName": "w1", "conditions": [], "jobsStatus": job_counts()})
    # The cluster's name, first seen with nothing else that matters, waits as well, longer
    # (pods may take a while to get ready): it goes with the first ready count, or after
    # FIRST_STATUS_HOLD_SECONDS. A change of cluster goes at once.
    edit(manager_tj).status({})
    fresh = sync(running_remote(job_counts(active=1)), None)
    assert fresh.trainjob_status is None and fresh.status_held
    assert fresh.requeue_after == FIRST_STATUS_HOLD_SECONDS
    ready = sync(running_remote(job_counts(active=1, ready=1)), 0.5).trainjob_status
    assert ready is not None and ready["clusterName"] == "w1"
    later = sync(running_remote(job_counts(active=1)), 2.5)
    assert later.trainjob_status is None and later.status_held
    assert later.requeue_after == FIRST_STATUS_HOLD_SECONDS - 2.5
    late = sync(running_remote(job_counts(active=1)), FIRST_STATUS_HOLD_SECONDS + 0.5)
    assert late.trainjob_status is not None and late.trainjob_status["clusterName"] == "w1"
    edit(manager_tj).status({"clusterName": "w0", "conditions": [], "jobsStatus": job_counts()})
    moved = sync(running_remote(job_counts(active=1)), None).trainjob_status
    assert moved is not None and moved["clusterName"] == "w1"
    edit(manager_tj).status({"clusterName": "w1", "conditions": [], "jobsStatus": job_counts()})
    # ... and written once the 2 s are over.
    done = sync(running_remote(job_counts(active=1)), 2.5)
    assert done.trainjob_status is not None and not done.status_held
    # What PodsReady, reclaimablePods or the outcome derive from goes at once.
    for view in (
        running_remote(job_counts(active=1, ready=1)),
        running_remote(job_counts(succeeded=1)),
        running_remote(job_counts(failed=1)),
        running_remote(job_counts(), [{"type": "Complete", "status": "True"}]),
    ):
        assert sync(view, 0.1).trainjob_status is not None, view.trainjob


def test_brief_disconnect_changes_nothing_but_a_lost_worker_retries() -> None:
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    brief = decide_for(wl, [remote("w1", connected=False, lost=10)])
    assert brief.check_state is None and brief.remote == []
    assert brief.requeue_after == 50  # looked at again when the timeout runs out
    lost = decide_for(wl, [remote("w1", connected=False, lost=61)])
    assert lost.check_state is not None and lost.check_state[0] == "Retry"


def test_remote_workload_gone_while_reachable_retries_at_once() -> None:
    plan = decide_for(
        manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready"),
        [remote("w1", workload=False, trainjob=True, running=True)],
    )
    assert plan.check_state is not None and plan.check_state[0] == "Retry"


def test_after_our_retry_nothing_goes_out_until_kueue_evicts() -> None:
    # Our Retry written (clusterName cleared with it), Kueue not yet acted: still admitted, not
    # evicted. A new round now would write Pending over the Retry and cancel the eviction.
    waiting = manager_workload("QuotaReserved", "Admitted", check="Retry")
    plan = decide_for(waiting, [remote("w1", trainjob=True), remote("w2", workload=False)])
    assert plan.check_state is None and plan.nominated is None and plan.cluster_name is None
    assert [(a.cluster, a.verb) for a in plan.remote] == [("w1", "delete"), ("w1", "delete")]
    # Kueue evicts (our check back to Pending), then reserves quota again: a new round.
    again = decide_for(
        manager_workload("QuotaReserved"),
        [remote("w1", workload=False), remote("w2", workload=False)],
    )
    assert again.check_state is not None and again.check_state[0] == "Pending"
    assert [(a.cluster, a.verb) for a in again.remote] == [("w1", "create"), ("w2", "create")]


def test_finished_or_unreserved_workloads_leave_nothing_behind() -> None:
    for wl in (manager_workload("QuotaReserved", "Finished", cluster="w1"), manager_workload()):
        plan = decide_for(wl, [remote("w1", trainjob=True)])
        assert sorted(a.obj["kind"] for a in plan.remote) == ["TrainJob", "Workload"]
        assert all(a.verb == "delete" for a in plan.remote)


def test_finished_remote_objects_are_kept_for_the_retention() -> None:
    wl = manager_workload("QuotaReserved", "Finished", cluster="w1")  # finished 11:00:00
    tj = TrainJobBuilder().multikueue().obj()
    for retention, deletes, requeue in ((7200.0, 0, 3600.0), (60.0, 2, None)):
        plan = decide(observed(wl, tj, [remote("w1", trainjob=True)], retention=retention))
        assert len(plan.remote) == deletes and plan.requeue_after == requeue


# ---- the worker-lost clock (no threads started: only the connection bookkeeping) --------------


# ---- the manager TrainJob's own word before dispatch -------------------------------------------


# ---- the AdmissionCheck's Active condition, Kueue's reasons ------------------------------------


def decide_finished(remotes: list[RemoteView], *, there: str = "w1") -> Any:
    """A pass for a TrainJob whose status, brought back from `there`, says Complete."""
    tj = (
        TrainJobBuilder()
        .multikueue()
        .status(
            clusterName=there,
            conditions=[{"type": "Complete", "status": "True", "reason": "AllJobsCompleted"}],
        )
        .obj()
    )
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    return decide_for(wl, remotes, trainjob=tj)


def test_a_run_that_ended_on_the_winner_never_runs_again_whatever_happens_to_its_copies() -> None:
    removed = decide_finished([remote("w1", admitted_at="2026-11-22T11:00:02Z")])  # TrainJob gone
    both_gone = decide_finished([remote("w1", workload=False)])  # a person, a TTL, its GC
    lost = decide_finished([remote("w1", connected=False, lost=600)])
    for plan in (removed, both_gone, lost):
        assert plan.check_state is None, plan.check_state  # no Retry: no second dispatch
        assert not [a for a in plan.remote if a.verb == "create"]
        assert plan.events == []
    # An outcome from an earlier cluster does not count for this one: there it is still to run.
    elsewhere = decide_finished([remote("w1", admitted_at="2026-11-22T11:00:02Z")], there="w2")
    assert [a.obj["kind"] for a in elsewhere.remote if a.verb == "create"] == ["TrainJob"]


def test_a_copy_its_worker_found_out_of_sync_is_sent_again_once() -> None:
    out_of_sync = remote("w1", admitted_at="2026-11-22T11:00:02Z", trainjob=True, running=True)
    assert out_of_sync.workload is not None
    edit(out_of_sync.workload.raw).more_conditions(
        {"type": "Finished", "status": "True", "reason": "OutOfSync", "message": "changed"}
    )
    ready = decide_for(
        manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready"), [out_of_sync]
    )
    assert ready.check_state is not None and ready.check_state[0] == "Retry"
    assert "out of sync" in ready.check_state[1] and [e.reason for e in ready.events] == [
        "RemoteOutOfSync"
    ]
    assert ready.trainjob_status is None  # its status there is not the job's outcome
    already = decide_for(
        manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Retry"), [out_of_sync]
    )
    assert already.check_state is None and already.events == []


def test_an_external_dispatcher_decides_where_copies_go_and_we_never_nominate() -> None:
    ext = External()
    waiting = decide_for(
        manager_workload("QuotaReserved"), [remote("w1", workload=False)], strategy=ext
    )
    assert waiting.remote == [] and waiting.nominated is None
    assert waiting.check_state is not None and "external dispatcher" in waiting.check_state[1]
    # It nominated w2: a copy goes there only; one left on w1 from before goes.
    plan = decide_for(
        manager_workload("QuotaReserved", nominated=["w2"]),
        [remote("w1"), remote("w2", workload=False)],
        strategy=ext,
    )
    assert sorted((a.verb, a.cluster) for a in plan.remote) == [("create", "w2"), ("delete", "w1")]
    assert plan.nominated is None
    # Only a nominated cluster's admission wins.
    early = "2026-11-22T11:00:01Z"
    plan = decide_for(
        manager_workload("QuotaReserved", nominated=["w2"]),
        [remote("w1", admitted_at=early), remote("w2", admitted_at="2026-11-22T11:00:05Z")],
        strategy=ext,
    )
    assert plan.cluster_name == "w2" and plan.nominated is None


def test_evicted_on_the_manager_removes_every_copy_and_says_so_once_per_worker() -> None:
    wl = manager_workload("QuotaReserved", "Admitted", "Evicted", cluster="w1", check="Ready")
    edit(wl).condition("Evicted", reason="Deactivated", message="The workload is deactivated")
    plan = decide_for(
        wl,
        [
            remote("w1", admitted_at="2026-11-22T11:00:01Z", trainjob=True, running=True),
            remote("w2"),
        ],
    )
    assert [(a.cluster, a.verb, a.obj["kind"]) for a in plan.remote] == [
        ("w1", "delete", "TrainJob"),
        ("w1", "delete", "Workload"),
        ("w2", "delete", "Workload"),
    ]
    said = [a.event for a in plan.remote]
    assert said[1] is None and said[0] is not None and said[2] is not None
    assert said[0][:3] == (
        "Normal",
        "RemoteRemoved",
        "evicted on the manager (Deactivated: The workload is deactivated); copy on w1 removed",
    )
    # the run it names is over: the next round must not take w1 for its winner
    assert plan.forget_cluster and plan.writes_workload
    # Waiting for quota, never dispatched: copies (of an earlier round) go without a word.
    plan = decide_for(manager_workload(), [remote("w2")])
    assert [(a.cluster, a.event) for a in plan.remote] == [("w2", None)]
    assert not plan.forget_cluster


# ---- capacity-aware placement ----------------------------------------------------------------


def view(name: str, room: bool | None) -> RemoteView:
    found = None if room is None else Fit(room, True, "" if room else "no room now: cpu")
    return RemoteView(name, True, 0.0, None, None, fit=found)


def test_only_clusters_with_room_or_unknown_room_are_targets() -> None:
    remotes = [view("w1", False), view("w2", True), view("w3", None)]
    targets, _ = CapacityAware().targets(remotes, 0.0)
    assert [r.name for r in targets] == ["w2", "w3"]


def test_with_room_nowhere_the_inner_strategy_picks_among_all() -> None:
    remotes = [view("w1", False), view("w2", False)]
    assert [r.name for r in CapacityAware().targets(remotes, 0.0)[0]] == ["w1", "w2"]
    inner = Incremental(batch=1, round_seconds=60)
    targets, again = CapacityAware(inner).targets(remotes, 0.0)
    assert ([r.name for r in targets], again) == (["w1"], 60.0)


def test_a_full_worker_gets_no_copy_is_named_in_the_message_and_is_withheld() -> None:
    plan = decide_for(
        manager_workload("QuotaReserved"),
        [view("w1", False), view("w2", True)],
        strategy=CapacityAware(),
    )
    assert [(a.cluster, a.verb) for a in plan.remote] == [("w2", "create")]
    assert plan.nominated == ["w2"]
    assert plan.withheld == ["w1"]
    assert plan.check_state == (
        "Pending",
        "dispatched to w2; waiting for a cluster to admit it (not sent to w1: no room now: cpu)",
    )


# ---- giving up -------------------------------------------------------------------------------


def never(name: str) -> RemoteView:
    why = (
        f"never: PodSet node does not fit ClusterQueue cq-{name} (flavour default: cpu 16 "
        "wanted, 8 available)"
    )
    return RemoteView(name, True, 0.0, None, None, fit=Fit(False, False, why))


def test_no_worker_could_ever_hold_it_rejects_the_check_and_fails_the_trainjob() -> None:
    plan = decide_for(manager_workload("QuotaReserved"), [never("w1"), never("w2")])
    message = (
        "no worker cluster can ever admit it (w1: never: PodSet node does not fit ClusterQueue "
        "cq-w1 (flavour default: cpu 16 wanted, 8 available); w2: never: PodSet node does not "
        "fit ClusterQueue cq-w2 (flavour default: cpu 16 wanted, 8 available))"
    )
    assert plan.check_state == ("Rejected", message)
    assert plan.deactivate
    assert plan.remote == [], "no copy is sent anywhere"
    failed = plan.trainjob_status["conditions"][-1]
    assert (failed["type"], failed["status"], failed["reason"], failed["message"]) == (
        "Failed",
        "True",
        "NoClusterFits",
        message,
    )
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "NoClusterFits")]


def test_giving_up_names_the_workers_left_out_for_their_runtime_too() -> None:
    drifted = RemoteView("w2", True, 0.0, None, None)
    drifted.runtime_problem = "ClusterTrainingRuntime torch there differs from the manager's"
    plan = decide_for(manager_workload("QuotaReserved"), [never("w1"), drifted])
    state, message = plan.check_state or ("", "")
    assert state == "Rejected"
    assert message.endswith(
        "; w2: not sent: ClusterTrainingRuntime torch there differs from the manager's)"
    ), message


def test_once_failed_and_rejected_giving_up_again_writes_nothing() -> None:
    first = decide_for(manager_workload("QuotaReserved"), [never("w1")])
    tj = TrainJobBuilder().multikueue().obj()
    edit(tj).status(first.trainjob_status)
    wl = manager_workload("QuotaReserved", check="Rejected")
    edit(wl).spec(active=False)
    again = decide_for(wl, [never("w1")], trainjob=tj)
    assert (again.check_state, again.trainjob_status, again.events) == (None, None, [])
    assert not again.deactivate


def test_one_worker_that_could_hold_it_or_is_not_known_keeps_it_waiting() -> None:
    maybe = RemoteView("w2", True, 0.0, None, None, fit=Fit(False, True, "no room now: cpu"))
    unknown = RemoteView("w2", False, 5.0, None, None)  # unreachable: its room is not known
    for other in (maybe, unknown):
        plan = decide_for(manager_workload("QuotaReserved"), [never("w1"), other])
        assert plan.check_state is not None and plan.check_state[0] == "Pending"
        assert plan.trainjob_status is None


def test_the_rule_can_be_turned_off() -> None:
    wl, tj = manager_workload("QuotaReserved"), TrainJobBuilder().multikueue().obj()
    obs = observed(wl, tj, [never("w1")])
    obs.give_up_never_fits = False
    assert decide(obs).check_state[0] == "Pending"


def test_not_admitted_within_the_time_fails_it_naming_the_clusters() -> None:
    # Quota reserved at 11:00 (manager_workload), now is 12:00: an hour.
    wl, tj = manager_workload("QuotaReserved"), TrainJobBuilder().multikueue().obj()
    full = RemoteView("w1", True, 0.0, None, None, fit=Fit(False, True, "no room now: cpu"))
    down = RemoteView("w2", False, 30.0, None, None)
    obs = observed(wl, tj, [full, down])
    obs.give_up_after = 3600
    plan = decide(obs)
    assert plan.check_state == (
        "Rejected",
        "no worker cluster admitted it within 3600s of the manager's quota reservation (w1, w2 "
        "considered; w1: no room now: cpu; w2: unreachable)",
    )
    assert plan.trainjob_status["conditions"][-1]["reason"] == "NotAdmittedInTime"
    obs.give_up_after = 3601
    assert decide(obs).check_state[0] == "Pending"


# ---- a TrainJob's own choice of clusters -----------------------------------------------------


def test_clusters_the_trainjob_did_not_choose_get_no_copy_and_lose_theirs() -> None:
    chosen = remote("w1", workload=False)
    other = remote("w2")  # a copy from before the choice changed
    other.selected = False
    plan = decide_for(manager_workload("QuotaReserved"), [chosen, other])
    assert sorted((a.cluster, a.verb) for a in plan.remote) == [
        ("w1", "create"),
        ("w2", "delete"),
    ]
    assert plan.nominated == ["w1"]


def test_an_admission_on_a_cluster_not_chosen_never_wins() -> None:
    other = remote("w2", admitted_at="2026-11-22T11:00:05Z")
    other.selected = False
    plan = decide_for(manager_workload("QuotaReserved", nominated=["w2"]), [remote("w1"), other])
    assert plan.cluster_name is None


def test_no_chosen_cluster_active_is_a_condition_an_event_and_the_check_message() -> None:
    wl, tj = manager_workload("QuotaReserved"), TrainJobBuilder().multikueue().obj()
    unchosen = remote("w1", workload=False)
    unchosen.selected = False
    problem = "trainjob.dev/cluster-selector='pool=x' matches none of the clusters (w1)"
    obs = observed(wl, tj, [unchosen])
    obs.selection_problem = problem
    plan = decide(obs)
    assert plan.remote == []
    assert plan.check_state == (
        "Pending",
        f"dispatched to no cluster ({problem}); waiting for a cluster to admit it",
    )
    condition = plan.trainjob_status["conditions"][-1]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "ClustersSelected",
        "False",
        "NoClusterSelected",
    )
    assert [(e.type, e.reason, e.message) for e in plan.events] == [
        ("Warning", "NoClusterSelected", problem)
    ]
    # Once a chosen cluster is there, the condition goes.
    edit(tj).status(plan.trainjob_status)
    chosen = remote("w1", workload=False)
    plan = decide(observed(wl, tj, [chosen]))
    assert plan.trainjob_status == {"conditions": []}
    assert [a.verb for a in plan.remote] == ["create"]


# ---- runtime drift ---------------------------------------------------------------------------


def test_a_worker_whose_runtime_differs_gets_no_copy_and_the_drift_is_a_condition() -> None:
    drifted = remote("w1", workload=False)
    drifted.runtime_problem = "ClusterTrainingRuntime torch is missing there"
    plan = decide_for(manager_workload("QuotaReserved"), [drifted, remote("w2", workload=False)])
    assert [(a.cluster, a.verb) for a in plan.remote] == [("w2", "create")]
    assert plan.withheld == ["w1"], "another look once a runtime there changes"
    assert plan.check_state is not None and plan.check_state[1] == (
        "dispatched to w2; waiting for a cluster to admit it (not sent to w1: "
        "ClusterTrainingRuntime torch is missing there)"
    )
    drift = "w1: ClusterTrainingRuntime torch is missing there"
    assert plan.trainjob_status == {
        "conditions": [
            {
                "type": "RuntimeDrift",
                "status": "True",
                "reason": "RuntimeDrift",
                "message": drift,
                "lastTransitionTime": "2026-11-22T12:00:00Z",
                "observedGeneration": 1,
            }
        ]
    }
    assert [e[:3] for e in plan.events] == [("Warning", "RuntimeDrift", drift)]


def test_a_worker_with_drift_is_no_reason_to_give_up_at_once() -> None:
    drifted = never("w1")
    drifted.runtime_problem = "ClusterTrainingRuntime torch there differs from the manager's"
    plan = decide_for(manager_workload("QuotaReserved"), [drifted])
    assert plan.check_state is not None and plan.check_state[0] == "Pending"


def test_copies_take_a_changed_priority_and_are_left_alone_when_they_have_it() -> None:
    wl = manager_workload(
        "QuotaReserved", "Admitted", cluster="w1", nominated=["w1"], check="Ready"
    )
    high = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    edit(wl).spec(priorityClassRef=high, priority=100)
    same, stale = remote("w1", admitted_at="2026-11-22T11:00:01Z", trainjob=True), remote("w2")
    done, gone = remote("w0"), remote("w3", workload=False)
    assert same.workload is not None and stale.workload is not None and done.workload is not None
    # What the copies' cache keeps of them (dispatcher/workers/remote.py _copy_seen)
    edit(same.workload.raw).whole_spec({"priorityClassRef": high, "priority": 100})
    edit(stale.workload.raw).whole_spec({"priority": 0}).uid("copy-uid")
    edit(done.workload.raw).whole_spec({"priority": 0})
    edit(done.workload.raw).conditions({"type": "Finished", "status": "True"})
    plan = decide_for(wl, [done, gone, same, stale])
    patches = [a for a in plan.remote if a.verb == "patch"]
    # only the unfinished copy without it, named by name and uid (one of the same name made
    # since is not another's to patch)
    assert [(a.cluster, a.obj) for a in patches] == [
        (
            "w2",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {"name": "trainjob-tj-abcde", "namespace": "ns", "uid": "copy-uid"},
                "spec": {"priorityClassRef": high, "priority": 100},
            },
        )
    ]
    assert [a.guard for a in patches] == [Guard("copy-uid")]


TAKEN = Taken(
    REMOTE_NAME_TAKEN,
    "TrainJob ns/tj exists there and is not a copy from this manager (it is left as it is)",
)


REFUSED = Taken(
    REMOTE_DEPENDENCY_REFUSED,
    "Secret ns/hf-token cannot be copied there: the dispatcher's identity on that worker may "
    "not write it (the worker chart's worker.multikueueIdentity.dependencies grants it)",
)


@pytest.mark.parametrize("taken", [TAKEN, REFUSED], ids=["name-taken", "dependency-refused"])
def test_a_winner_whose_copy_cannot_be_made_is_given_up_saying_why(taken: Taken) -> None:
    """A name taken there and a dependency the worker refuses (a missing grant, not a name
    taken) each give the worker up with a reason of their own."""
    w1 = remote("w1", admitted_at="2026-11-22T11:00:02Z")
    w1.taken = taken
    plan = decide_for(manager_workload("QuotaReserved", cluster="w1"), [w1, remote("w2")])
    assert plan.check_state == ("Retry", f"w1: {taken.why}; dispatching again")
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", taken.reason)]
    assert [a.obj["kind"] for a in plan.remote if a.verb == "create"] == []


def test_a_worker_with_a_name_taken_gets_no_copy_and_the_message_says_why() -> None:
    w1 = remote("w1", workload=False)
    w1.taken = TAKEN
    plan = decide_for(manager_workload("QuotaReserved"), [w1, remote("w2", workload=False)])
    assert [(a.cluster, a.verb) for a in plan.remote] == [("w2", "create")]
    assert plan.check_state == (
        "Pending",
        f"dispatched to w2; waiting for a cluster to admit it (not sent to w1: {TAKEN.why})",
    )


def _running_on(worker: str, since: str = "2026-11-22T11:00:00Z") -> Dict:
    """The manager TrainJob as the status brought back from `worker` leaves it."""
    return (
        TrainJobBuilder()
        .multikueue()
        .status(
            clusterName=worker,
            conditions=[
                {"type": "Suspended", "status": "False", "lastTransitionTime": since},
            ],
        )
        .obj()
    )


def test_a_run_sent_back_is_recorded_with_where_when_and_why() -> None:
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    # its pods started at 11:00:30; the run started when the manager Workload was admitted
    # (when the worker's was), at 11:00:00
    running = _running_on("w1", since="2026-11-22T11:00:30Z")
    plan = decide_for(wl, [remote("w1", connected=False, lost=61)], trainjob=running)
    assert plan.placement_ended == placements.Ended(
        "w1",
        "2026-11-22T11:00:00Z",
        "2026-11-22T12:00:00Z",
        "ClusterLost",
        "cluster w1 lost for 61s; dispatching again",
    )
    # a brief disconnect ends nothing
    brief = decide_for(wl, [remote("w1", connected=False, lost=10)], trainjob=_running_on("w1"))
    assert brief.placement_ended is None


def test_an_eviction_on_the_manager_ends_the_run_unless_it_was_our_retry() -> None:
    wl = manager_workload("QuotaReserved", "Admitted", "Evicted", cluster="w1", check="Ready")
    edit(wl).condition("Evicted", reason="Preempted", message="Preempted to accommodate a workload")
    plan = decide_for(wl, [remote("w1", trainjob=True, running=True)], trainjob=_running_on("w1"))
    assert plan.placement_ended is not None
    assert (plan.placement_ended.worker, plan.placement_ended.reason) == ("w1", "Preempted")
    edit(wl).condition("Evicted", reason="AdmissionCheck", message="our Retry")
    plan = decide_for(wl, [remote("w1", trainjob=True, running=True)], trainjob=_running_on("w1"))
    assert plan.placement_ended is None
    # a copy sent since the eviction (admitted again, the condition not cleared yet) is not
    # the run that ended
    edit(wl).condition("Evicted", reason="Deactivated", lastTransitionTime="2026-11-22T11:30:00Z")
    for created, told in (("2026-11-22T11:00:00Z", True), ("2026-11-22T11:45:00Z", False)):
        there = remote("w1", trainjob=True, running=True)
        assert there.trainjob is not None
        edit(there.trainjob.raw).created(created)
        plan = decide_for(wl, [there], trainjob=_running_on("w1"))
        assert (plan.placement_ended is not None) is told, created


def test_a_run_that_ended_before_the_manager_recalled_it_is_brought_back_not_run_again() -> None:
    """The copy finished on w1, its status not back yet, when the manager took the quota
    back (a PodsReady timeout while the dispatcher's Lease moved, a preemption, its user): the
    outcome comes back and the copy stays; a copy that still runs is stopped as before."""
    recalls = {
        "evicted": manager_workload(
            "QuotaReserved", "Admitted", "Evicted", cluster="w1", check="Ready"
        ),
        "quota given back": manager_workload("Evicted", cluster="w1", check="Ready"),
        "our retry": manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Retry"),
    }
    for what, wl in recalls.items():
        for tj in (_running_on("w1"), TrainJobBuilder().multikueue().obj()):
            plan = decide_for(wl, [remote("w1", trainjob=True), remote("w2")], trainjob=tj)
            assert [(a.cluster, a.verb) for a in plan.remote] == [("w2", "delete")], what
            assert plan.trainjob_status is not None, what
            done = {c["type"]: c["status"] for c in plan.trainjob_status["conditions"]}
            assert done.get("Complete") == "True" and plan.trainjob_status["clusterName"] == "w1"
            assert not plan.forget_cluster and plan.placement_ended is None, what
            assert plan.check_state is None, what  # no Retry, no new round
        still = decide_for(
            wl, [remote("w1", trainjob=True, running=True)], trainjob=_running_on("w1")
        )
        assert ("w1", "delete") in [(a.cluster, a.verb) for a in still.remote], what
    # On the worker, the same: its Workload there evicted or gone as its last pod ended.
    evicted_there = remote("w1", admitted_at="2026-11-22T11:00:02Z", trainjob=True)
    assert evicted_there.workload is not None
    edit(evicted_there.workload.raw).more_conditions(
        {"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout", "message": "late"}
    )
    admitted = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    for there in (evicted_there, remote("w1", workload=False, trainjob=True)):
        plan = decide_for(admitted, [there], trainjob=_running_on("w1"))
        assert plan.check_state is None and plan.remote == [] and plan.events == []
        assert plan.trainjob_status is not None
        done = {c["type"]: c["status"] for c in plan.trainjob_status["conditions"]}
        assert done.get("Complete") == "True"
    # Brought back already: the copy is kept until the manager Workload finishes (step 1).
    back = _running_on("w1")
    edit(back).conditions({"type": "Complete", "status": "True", "reason": "AllJobsCompleted"})
    plan = decide_for(recalls["evicted"], [remote("w1", workload=False)], trainjob=back)
    assert plan.remote == [] and plan.check_state is None and plan.trainjob_status is None


def test_a_trainjob_copy_that_goes_has_its_tails_read_first_unless_opted_out_or_kept_none() -> None:
    """The plan says which deletions read their pods' tails first: a TrainJob copy's only, made
    for this very TrainJob (its tails are kept under the UID it names), unless the manager
    TrainJob opted out (its annotation decides: the worker's copy, as its watch keeps it,
    carries none of them) or the manager keeps no tails."""
    wl = manager_workload("QuotaReserved", "Finished", cluster="w1")
    tj = TrainJobBuilder().multikueue().obj()
    opted_out = TrainJobBuilder().multikueue().obj()
    edit(opted_out).annotation("trainjob.dev/log-tails", "off")

    def tails_read(trainjob: Dict | None, kept: bool, made_for: str | None) -> bool:
        there = remote("w1", trainjob=True)
        assert there.trainjob is not None
        if made_for is not None:
            edit(there.trainjob.raw).annotations({"kueue.x-k8s.io/multikueue-origin-uid": made_for})
        plan = decide(observed(wl, trainjob, [there], tails_kept=kept))
        assert {(a.verb, a.obj["kind"]) for a in plan.remote} == {
            ("delete", "TrainJob"),
            ("delete", "Workload"),
        }
        assert not [a for a in plan.remote if a.obj["kind"] == "Workload" and a.capture_tails]
        return any(a.capture_tails for a in plan.remote)

    uid = tj["metadata"]["uid"]
    assert tails_read(tj, True, uid)
    assert not tails_read(opted_out, True, opted_out["metadata"]["uid"])
    assert not tails_read(tj, False, uid)
    assert not tails_read(tj, True, "another-trainjobs-uid")  # kept under the UID it names
    assert not tails_read(tj, True, None)  # Kueue's copies name none
    assert not tails_read(None, True, uid)  # the TrainJob gone: the resync's to find


def test_a_status_that_cannot_fit_the_manager_trainjob_comes_back_without_its_extras() -> None:
    """Before: a manager TrainJob near etcd's limit (a tenant's long spec and kubectl's
    annotations, which the copy drops) took its copy's status whole: the write failed on
    every pass, and Complete never came back. Now the extras stay on the worker, said once."""
    big = TrainJobBuilder().multikueue().obj()
    edit(big).annotations({"kubectl.kubernetes.io/pad": "x" * 1_300_000})
    winner = remote("w1", admitted_at="2026-11-22T11:00:02Z", trainjob=True)
    assert winner.trainjob is not None
    metrics = [{"name": f"m{i}", "value": "v" * 60} for i in range(256)] * 6  # ~150 KB
    edit(winner.trainjob.raw).status(trainerStatus={"progressPercentage": 100, "metrics": metrics})
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    plan = decide_for(wl, [winner], trainjob=big)
    assert plan.trainjob_status == {
        "conditions": [{"type": "Complete", "status": "True"}],
        "clusterName": "w1",
        "trainerStatus": None,
    }
    (said,) = [e for e in plan.events if e.reason == "StatusTooLarge"]
    assert said.message.startswith("status.trainerStatus of the copy on w1 not brought back")
    # once what is left is only what cannot fit, nothing is written and nothing said again
    edit(big).status({"conditions": [{"type": "Complete", "status": "True"}], "clusterName": "w1"})
    again = decide_for(wl, [winner], trainjob=big)
    assert again.trainjob_status is None
    assert not [e for e in again.events if e.reason == "StatusTooLarge"]
    # a TrainJob of ordinary size takes it all
    small = decide_for(wl, [winner])
    assert small.trainjob_status is not None and small.trainjob_status["trainerStatus"]


def test_the_winners_missing_pieces_are_said_or_made_again_on_the_winner() -> None:
    """After the decision: the winner's Workload copy gone sends the job back (Retry, saying
    which worker); its TrainJob copy missing (its create failed) is made again there, and
    only there, with an Event naming it."""
    wl = manager_workload(
        "QuotaReserved", "Admitted", cluster="w1", nominated=["w1"], check="Ready"
    )
    gone = decide_for(wl, [remote("w1", workload=False), remote("w2", workload=False)])
    assert gone.check_state == ("Retry", "the Workload copy on w1 is gone")
    assert [(e.type, e.reason) for e in gone.events] == [("Warning", "RemoteWorkloadGone")]
    missing = decide_for(wl, [remote("w1", admitted_at="2026-11-22T11:00:01Z")])
    creates = [(a.cluster, a.obj["kind"]) for a in missing.remote if a.verb == "create"]
    assert creates == [("w1", "TrainJob")]
    made = [a.event for a in missing.remote if a.verb == "create"]
    assert [(e.type, e.reason, e.message) for e in made if e is not None] == [
        ("Normal", "CreatedRemote", "created TrainJob on cluster w1")
    ]
    assert missing.check_state is None  # Ready already
    there = remote("w1", admitted_at="2026-11-22T11:00:01Z", trainjob=True, running=True)
    assert [a for a in decide_for(wl, [there]).remote if a.verb == "create"] == []


def _padded(count: int, **fields: Any) -> list[Dict]:
    """`count` entries of about 100 bytes each (a long report or many Jobs)."""
    return [{"name": f"m{i}", **fields, "value": "v" * 60} for i in range(count)]


@pytest.mark.parametrize(
    ("jobs", "left"),
    [
        # the report alone takes it past the limit: the Jobs' counts still come back
        (_padded(3), ["trainerStatus"]),
        # without the report it is still too large: the Jobs' counts stay there too
        (_padded(1536), ["trainerStatus", "jobsStatus"]),
    ],
)
def test_each_part_of_a_status_too_large_to_bring_back_is_named_in_one_warning(
    jobs: list[Dict], left: list[str]
) -> None:
    big = TrainJobBuilder().multikueue().obj()
    edit(big).annotations({"kubectl.kubernetes.io/pad": "x" * 1_300_000})
    winner = remote("w1", admitted_at="2026-11-22T11:00:02Z", trainjob=True)
    assert winner.trainjob is not None
    edit(winner.trainjob.raw).status(
        trainerStatus={"metrics": _padded(1536)},  # ~150 KB
        jobsStatus=jobs,
    )
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    plan = decide_for(wl, [winner], trainjob=big)
    assert plan.trainjob_status == {
        "conditions": [{"type": "Complete", "status": "True"}],
        "clusterName": "w1",
        "jobsStatus": jobs,
        **{key: None for key in left},
    }
    fields = ", ".join(f"status.{key}" for key in left)
    assert [e[:3] for e in plan.events] == [
        (
            "Warning",
            "StatusTooLarge",
            f"{fields} of the copy on w1 not brought back: with it this TrainJob would be past "
            "the 1400000 bytes the API server stores; read it on the worker",
        )
    ]
    # a warning is no reason to send the job elsewhere: its run there goes on
    assert plan.check_state is None and plan.placement_ended is None


CHECKPOINT_REPORT = {
    "metrics": [
        {"name": "checkpoint", "value": "step-40.pt"},
        {"name": "checkpoint_step", "value": "40"},
    ]
}


RESUMED_FROM_THE_REPORT = {
    "TRAINJOB_CHECKPOINTS": "/ckpt/tj",
    "TRAINJOB_RESUME_FROM": "/ckpt/tj/step-40.pt",
    "TRAINJOB_RESUME_STEP": "40",
}


@pytest.mark.parametrize(
    ("status", "recorded", "env"),
    [
        # the run that ended last reported a checkpoint: the copy resumes from it, whatever
        # the record of runs holds
        ({"clusterName": "w0", "trainerStatus": CHECKPOINT_REPORT}, None, RESUMED_FROM_THE_REPORT),
        (
            {"clusterName": "w0", "trainerStatus": CHECKPOINT_REPORT},
            Checkpoint("step-20.pt", 20),
            RESUMED_FROM_THE_REPORT,
        ),
        # it reported none: the last checkpoint its record of runs holds
        (
            {"clusterName": "w0"},
            Checkpoint("step-20.pt", None),
            {"TRAINJOB_CHECKPOINTS": "/ckpt/tj", "TRAINJOB_RESUME_FROM": "/ckpt/tj/step-20.pt"},
        ),
        # neither: it starts afresh, told only where to keep them
        ({"clusterName": "w0"}, None, {"TRAINJOB_CHECKPOINTS": "/ckpt/tj"}),
    ],
)
def test_a_copy_sent_again_resumes_from_the_status_or_else_from_the_record_of_runs(
    status: Dict, recorded: Checkpoint | None, env: dict[str, str]
) -> None:
    tj = TrainJobBuilder().multikueue().obj()
    edit(tj).status(status)
    obs = observed(
        manager_workload("QuotaReserved", nominated=["w1"]),
        tj,
        [remote("w1", admitted_at="2026-11-22T11:00:02Z")],
        checkpoint_place="/ckpt/tj",
    )
    obs.recorded_checkpoint = recorded
    (sent,) = [a for a in decide(obs).remote if a.verb == "create"]
    assert {e["name"]: e["value"] for e in sent.obj["spec"]["trainer"]["env"]} == env


def _unselected(name: str) -> RemoteView:
    view = remote(name)
    view.selected = False
    return view


@pytest.mark.parametrize(
    ("remotes", "considered"),
    [
        # a worker that holds a copy and simply has no quota free for it has nothing to say
        ([remote("w1")], "w1 considered; each had a copy waiting for quota"),
        # no cluster the job chose: none considered
        ([_unselected("w1")], "none considered; each had a copy waiting for quota"),
        (
            [remote("w1"), remote("w2", connected=False, lost=5, workload=False)],
            "w1, w2 considered; w2: unreachable",
        ),
    ],
)
def test_the_time_out_message_names_the_workers_considered_and_what_kept_each(
    remotes: list[RemoteView], considered: str
) -> None:
    obs = observed(manager_workload("QuotaReserved"), TrainJobBuilder().multikueue().obj(), remotes)
    obs.give_up_after = 3600
    message = (
        "no worker cluster admitted it within 3600s of the manager's quota reservation "
        f"({considered})"
    )
    plan = decide(obs)
    assert plan.check_state == ("Rejected", message)
    assert [e[:3] for e in plan.events] == [("Warning", "NotAdmittedInTime", message)]


def test_giving_up_fails_the_trainjob_once_for_its_generation_and_keeps_its_first_words() -> None:
    first = decide_for(manager_workload("QuotaReserved"), [never("w1")])
    message = (
        "no worker cluster can ever admit it (w1: never: PodSet node does not fit ClusterQueue "
        "cq-w1 (flavour default: cpu 16 wanted, 8 available))"
    )
    assert first.trainjob_status == {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "NoClusterFits",
                "message": message,
                "lastTransitionTime": "2026-11-22T12:00:00Z",
                "observedGeneration": 1,
            }
        ]
    }
    # A later pass, the worker's notes changed (its queue shrank): the Failed condition already
    # says why, and is not rewritten on every pass.
    tj = TrainJobBuilder().multikueue().obj()
    edit(tj).status(first.trainjob_status)
    smaller = RemoteView(
        "w1", True, 0.0, None, None, fit=Fit(False, False, "never: cpu 16 wanted, 4 available")
    )
    wl = manager_workload("QuotaReserved", check="Rejected")
    edit(wl).spec(active=False)
    again = decide_for(wl, [smaller], trainjob=tj)
    assert (again.check_state, again.trainjob_status, again.events) == (None, None, [])


def test_a_workload_without_our_check_gets_no_check_state_written() -> None:
    """Kueue keeps only the checks of the flavours it assigned: with ours gone there is no
    state to write (and so no Workload write for it)."""
    wl = WorkloadBuilder().conditions("QuotaReserved").check("Pending", name="other").obj()
    plan = decide_for(wl, [remote("w1", workload=False)])
    assert [(a.cluster, a.verb) for a in plan.remote] == [("w1", "create")]
    assert plan.check_state is None


def test_a_quota_reservation_without_a_time_yet_counts_as_just_made() -> None:
    wl = manager_workload()
    edit(wl).conditions({"type": "QuotaReserved", "status": "True"})
    obs = observed(wl, TrainJobBuilder().multikueue().obj(), [remote("w1")])
    obs.give_up_after = 1
    plan = decide(obs)
    assert plan.check_state == ("Pending", "dispatched to w1; waiting for a cluster to admit it")
    assert plan.trainjob_status is None and plan.events == []


# ---- recalled by the manager -----------------------------------------------------------------


def _evicted_manager(**evicted: str) -> Dict:
    """The manager Workload admitted on w1 and evicted there since 11:00:00 (`evicted`: the
    Evicted condition's reason, message, lastTransitionTime)."""
    wl = manager_workload("QuotaReserved", "Admitted", "Evicted", cluster="w1", check="Ready")
    return edit(wl).condition("Evicted", **evicted).obj()


def _running_copy(created: str, name: str = "w1") -> RemoteView:
    there = remote(name, trainjob=True, running=True)
    assert there.trainjob is not None
    edit(there.trainjob.raw).created(created)
    return there


def _with_report(tj: Dict) -> Dict:
    return edit(tj).status(trainerStatus=CHECKPOINT_REPORT, restarts=2).obj()


@pytest.mark.parametrize(
    ("evicted", "remotes", "reason", "message", "started"),
    [
        (
            {"reason": "Preempted", "message": "Preempted to accommodate a workload"},
            [_running_copy("2026-11-22T10:59:00Z")],
            "Preempted",
            "evicted on the manager: Preempted to accommodate a workload",
            "2026-11-22T10:59:00Z",
        ),
        # Kueue gave no reason: the run still ended by an eviction
        (
            {"message": "gone"},
            [_running_copy("2026-11-22T10:59:00Z")],
            "Evicted",
            "evicted on the manager: gone",
            "2026-11-22T10:59:00Z",
        ),
        # the copy made in the very second of the eviction ran before it
        (
            {"reason": "Deactivated", "message": "by its user"},
            [_running_copy("2026-11-22T11:00:00Z")],
            "Deactivated",
            "evicted on the manager: by its user",
            "2026-11-22T11:00:00Z",
        ),
        # the run is the one on the worker the status names, whatever the order of the workers
        (
            {"reason": "Preempted", "message": "p"},
            [remote("w0"), _running_copy("2026-11-22T10:59:00Z")],
            "Preempted",
            "evicted on the manager: p",
            "2026-11-22T10:59:00Z",
        ),
    ],
)
def test_a_run_ended_by_an_eviction_on_the_manager_is_recorded_whole(
    evicted: dict[str, str],
    remotes: list[RemoteView],
    reason: str,
    message: str,
    started: str,
) -> None:
    """Where it ran, from when its copy was sent (not when its pods started), why it ended,
    and the checkpoint and restarts its worker reported."""
    tj = _with_report(_running_on("w1", since="2026-11-22T11:00:30Z"))
    plan = decide_for(_evicted_manager(**evicted), remotes, trainjob=tj)
    assert plan.placement_ended == placements.Ended(
        "w1", started, "2026-11-22T12:00:00Z", reason, message, "step-40.pt", 40, 2
    )


@pytest.mark.parametrize(
    ("wl", "forget"),
    [
        # evicted: Kueue leaves clusterName, which a new round must not take for its winner
        (manager_workload("QuotaReserved", "Admitted", "Evicted", cluster="w1"), True),
        # its quota given back without an eviction: the same
        (manager_workload("Admitted", cluster="w1"), True),
        # our Retry written, Kueue's eviction not come yet: Kueue clears it with the eviction
        (manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Retry"), False),
        # waiting for quota, never dispatched: nothing to clear
        (manager_workload(), False),
    ],
)
def test_a_recall_clears_the_cluster_name_only_when_the_run_it_names_is_over(
    wl: Dict, forget: bool
) -> None:
    plan = decide_for(wl, [remote("w1", trainjob=True, running=True)])
    assert [(a.cluster, a.verb, a.obj["kind"]) for a in plan.remote] == [
        ("w1", "delete", "TrainJob"),
        ("w1", "delete", "Workload"),
    ]
    assert plan.forget_cluster is forget
    assert plan.check_state is None and plan.nominated is None


def test_a_run_brought_back_finished_keeps_its_workload_copy_through_a_recall() -> None:
    """Its TrainJob copy gone already (removed by its TTL), the manager's status says it
    finished there: the recall has nothing to stop and the Workload copy is kept."""
    back = _running_on("w1")
    edit(back).conditions({"type": "Complete", "status": "True", "reason": "AllJobsCompleted"})
    wl = manager_workload("QuotaReserved", "Admitted", "Evicted", cluster="w1", check="Ready")
    plan = decide_for(wl, [remote("w1")], trainjob=back)
    assert plan.remote == [] and plan.check_state is None
    assert not plan.forget_cluster and plan.placement_ended is None


def test_a_new_round_removes_the_copy_of_an_earlier_run_even_once_it_finished() -> None:
    """Sent back (the check turned Retry), its run's copy on w1 finished before it was
    removed: that run was given up, its outcome is not the job's, and the job goes out again."""
    wl = manager_workload("QuotaReserved")
    plan = decide_for(
        wl, [remote("w1", trainjob=True), remote("w2", workload=False)], trainjob=_running_on("w1")
    )
    assert [(a.cluster, a.verb, a.obj["kind"]) for a in plan.remote] == [
        ("w1", "delete", "TrainJob"),
        ("w1", "delete", "Workload"),
        ("w2", "create", "Workload"),
    ]
    assert plan.trainjob_status is None
    assert plan.check_state == ("Pending", "dispatched to w2; waiting for a cluster to admit it")


# ---- the winner ------------------------------------------------------------------------------


def _out_of_sync(name: str) -> RemoteView:
    view = remote(name, admitted_at="2026-11-22T11:00:02Z")
    assert view.workload is not None
    edit(view.workload.raw).more_conditions(
        {"type": "Finished", "status": "True", "reason": "OutOfSync"}
    )
    return view


LOST_AT_THE_TIMEOUT = "cluster w1 lost for 60s; dispatching again"
UNCONFIGURED = "cluster w1 no longer configured (no MultiKueueCluster); dispatching again"
OUT_OF_SYNC = (
    "Remote workload on worker cluster 'w1' is out of sync with its user job, resetting for "
    "re-dispatch"
)


def _retry(reason: str, message: str) -> tuple[tuple[str, str], list[tuple[str, str, str]]]:
    """The check's Retry and the Warning Event saying why."""
    return ("Retry", message), [("Warning", reason, message)]


@pytest.mark.parametrize(
    ("remotes", "said", "removed"),
    [
        ([remote("w1", connected=False, lost=60)], _retry("ClusterLost", LOST_AT_THE_TIMEOUT), []),
        (
            [remote("w1", connected=False, lost=float("inf"))],
            _retry("ClusterLost", UNCONFIGURED),
            [],
        ),
        ([_out_of_sync("w1")], _retry("RemoteOutOfSync", OUT_OF_SYNC), []),
        # a loser's Workload copy, not admitted there, goes; the winner's run goes on
        (
            [
                remote("w1", admitted_at="2026-11-22T11:00:02Z", trainjob=True, running=True),
                remote("w2"),
            ],
            (None, []),
            [("w2", "delete", "Workload")],
        ),
    ],
)
def test_the_winners_state_decides_whether_the_job_is_sent_again(
    remotes: list[RemoteView],
    said: tuple[Any, list[tuple[str, ...]]],
    removed: list[tuple[str, ...]],
) -> None:
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    plan = decide_for(wl, remotes)
    assert [(a.cluster, a.verb, a.obj["kind"]) for a in plan.remote] == removed
    assert (plan.check_state, [e[:3] for e in plan.events]) == said


# ---- finished on the manager -----------------------------------------------------------------


def _finished(since: str | None) -> Dict:
    """The manager Workload finished at `since` (None: no time on its Finished condition)."""
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    finished: Dict = {"type": "Finished", "status": "True", "reason": "Succeeded"}
    if since is not None:
        finished["lastTransitionTime"] = since
    return edit(wl).more_conditions(finished).obj()


@pytest.mark.parametrize(
    ("since", "retention", "removed", "requeue"),
    [
        # kept for the retention: looked at again when it runs out (an hour and 100 s)
        ("2026-11-22T11:00:00Z", 3700.0, [], 100.0),
        # the retention over to the second: the copies go
        ("2026-11-22T11:00:00Z", 3600.0, [("w1", "delete", "Workload")], None),
        # when it finished is not known: they go at once
        (None, 3700.0, [("w1", "delete", "Workload")], None),
    ],
)
def test_copies_of_a_finished_workload_are_kept_for_the_retention_then_removed(
    since: str | None, retention: float, removed: list[tuple[str, ...]], requeue: float | None
) -> None:
    tj = TrainJobBuilder().multikueue().obj()
    plan = decide(observed(_finished(since), tj, [remote("w1")], retention=retention))
    assert [(a.cluster, a.verb, a.obj["kind"]) for a in plan.remote] == removed
    assert plan.requeue_after == requeue
    assert plan.check_state is None and plan.trainjob_status is None


# ---- held for its Secrets and ConfigMaps -----------------------------------------------------

MISSING_SECRET = "Secret ns/creds (referenced by PodSet node) does not exist"


def test_a_job_held_for_a_missing_secret_recalls_its_copies_and_its_nomination() -> None:
    """A copy already out would hold quota on its worker for a job that cannot start: it goes,
    and so do the clusters nominated for it."""
    needs = dependencies.Needs(problem=MISSING_SECRET, reason="DependencyMissing")
    obs = observed(
        manager_workload("QuotaReserved", nominated=["w1"]),
        TrainJobBuilder().multikueue().obj(),
        [remote("w1"), remote("w2", workload=False)],
        needs=needs,
    )
    plan = decide(obs)
    assert [(a.cluster, a.verb, a.obj["kind"]) for a in plan.remote] == [
        ("w1", "delete", "Workload")
    ]
    assert plan.nominated == []
    assert plan.check_state == ("Pending", f"not dispatched: {MISSING_SECRET}")
    assert plan.trainjob_status == {
        "conditions": [
            {
                "type": "DependenciesMissing",
                "status": "True",
                "reason": "DependencyMissing",
                "message": MISSING_SECRET,
                "lastTransitionTime": "2026-11-22T12:00:00Z",
                "observedGeneration": 1,
            }
        ]
    }
    assert [e[:3] for e in plan.events] == [("Warning", "DependencyMissing", MISSING_SECRET)]


@pytest.mark.parametrize(
    ("copied", "ensured"),
    [
        ({"Secret/creds": "digest-1"}, []),  # in place there, as the manager holds it
        ({"Secret/creds": "digest-0"}, ["creds"]),  # changed on the manager since
        ({}, ["creds"]),  # not there (its copy removed by hand)
    ],
)
def test_the_winner_is_sent_a_secret_only_when_its_copy_there_is_not_the_managers(
    copied: dict[str, str], ensured: list[str]
) -> None:
    winner = remote("w1", admitted_at="2026-11-22T11:00:02Z", trainjob=True, running=True)
    assert winner.workload is not None
    edit(winner.workload.raw).uid("copy-uid")
    winner.copied = copied
    needs = dependencies.Needs([dependencies.Source("Secret", "creds", "uid-s", "digest-1")])
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    plan = decide(observed(wl, TrainJobBuilder().multikueue().obj(), [winner], needs=needs))
    assert [a.obj["metadata"]["name"] for a in plan.remote if a.verb == "ensure"] == ensured


# ---- the first admission ---------------------------------------------------------------------


def test_a_winner_already_holding_the_trainjob_copy_is_not_sent_it_again() -> None:
    """Its TrainJob made in a pass whose Workload write then failed: the next pass names the
    winner and leaves the copy there as it is."""
    wl = manager_workload("QuotaReserved", nominated=["w1"])
    there = remote("w1", admitted_at="2026-11-22T11:00:02Z", trainjob=True, running=True)
    plan = decide_for(wl, [there])
    assert plan.cluster_name == "w1"
    assert plan.check_state == ("Ready", 'The workload was admitted on "w1"')
    assert plan.remote == []


def test_naming_a_cluster_nominated_is_the_whole_pass() -> None:
    """Kueue takes clusterName only from the nominated clusters: the pass that nominates the
    one admitted writes only that, and leaves the check as it is."""
    plan = decide_for(
        manager_workload("QuotaReserved", nominated=["w1"]),
        [remote("w1"), remote("w2", admitted_at="2026-11-22T11:00:02Z")],
    )
    assert plan.nominated == ["w1", "w2"]
    assert (plan.cluster_name, plan.check_state, plan.remote) == (None, None, [])


# ---- copies out ------------------------------------------------------------------------------

TORCH_MISSING = "ClusterTrainingRuntime torch is missing there"


def _drifted(name: str, *, workload: bool = False) -> RemoteView:
    view = remote(name, workload=workload)
    view.runtime_problem = TORCH_MISSING
    return view


def _no_data(name: str) -> RemoteView:
    view = remote(name, workload=False)
    view.data_problem = "no PersistentVolumeClaim ns/data there"
    return view


@pytest.mark.parametrize(
    ("remotes", "strategy", "sent", "nominated", "withheld", "message"),
    [
        # room nowhere: every worker gets a copy (the first to free room admits it), and none
        # is said to be withheld
        (
            [view("w1", False), view("w2", False)],
            CapacityAware(),
            ["w1", "w2"],
            ["w1", "w2"],
            [],
            "dispatched to w1, w2; waiting for a cluster to admit it",
        ),
        # a worker left for a later round is not withheld for want of room
        (
            [view("w1", True), view("w2", None)],
            Incremental(batch=1, round_seconds=7200),
            ["w1"],
            ["w1"],
            [],
            "dispatched to w1; waiting for a cluster to admit it",
        ),
        # a copy made before its runtime drifted goes, and the worker is no longer nominated
        (
            [_drifted("w1", workload=True), remote("w2", workload=False)],
            None,
            ["w2"],
            ["w2"],
            ["w1"],
            f"dispatched to w2; waiting for a cluster to admit it (not sent to w1: "
            f"{TORCH_MISSING})",
        ),
        (
            [remote("w1", connected=False, lost=5, workload=False)],
            None,
            [],
            None,
            [],
            "dispatched to no reachable cluster; waiting for a cluster to admit it",
        ),
        (
            [remote("w1", workload=False)],
            External(),
            [],
            None,
            [],
            "dispatched to no cluster yet (an external dispatcher nominates them); waiting for a "
            "cluster to admit it",
        ),
    ],
)
def test_copies_go_where_the_strategy_says_and_the_check_says_where_and_why_not_elsewhere(
    remotes: list[RemoteView],
    strategy: Any,
    sent: list[str],
    nominated: list[str] | None,
    withheld: list[str],
    message: str,
) -> None:
    plan = decide_for(manager_workload("QuotaReserved"), remotes, strategy=strategy)
    assert [a.cluster for a in plan.remote if a.verb == "create"] == sent
    assert plan.nominated == nominated
    assert plan.withheld == withheld
    assert plan.check_state == ("Pending", message)


@pytest.mark.parametrize(
    ("remotes", "ctype", "reason", "message"),
    [
        (
            [_drifted("w1"), _drifted("w2"), remote("w3", workload=False)],
            "RuntimeDrift",
            "RuntimeDrift",
            f"w1: {TORCH_MISSING}; w2: {TORCH_MISSING}",
        ),
        (
            [_no_data("w1"), _no_data("w2")],
            "DataUnavailable",
            "NoClusterHasData",
            "no chosen worker holds its data (w1: no PersistentVolumeClaim ns/data there; w2: no "
            "PersistentVolumeClaim ns/data there); it waits until one does",
        ),
    ],
)
def test_why_the_job_waits_is_a_condition_naming_each_worker(
    remotes: list[RemoteView], ctype: str, reason: str, message: str
) -> None:
    plan = decide_for(manager_workload("QuotaReserved"), remotes)
    assert plan.trainjob_status == {
        "conditions": [
            {
                "type": ctype,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": "2026-11-22T12:00:00Z",
                "observedGeneration": 1,
            }
        ]
    }
    assert [e[:3] for e in plan.events] == [("Warning", reason, message)]


def test_incremental_dispatch_by_default_takes_three_clusters_each_five_minutes() -> None:
    remotes = [remote(f"w{i}", workload=False) for i in range(1, 8)]
    targets, again = Incremental().targets(remotes, 299.0)
    assert ([r.name for r in targets], again) == (["w1", "w2", "w3"], 1.0)
    targets, again = Incremental().targets(remotes, 300.0)
    assert ([r.name for r in targets], again) == (["w1", "w2", "w3", "w4", "w5", "w6"], 300.0)


def test_a_recall_after_the_last_runs_worker_left_the_config_still_clears_the_copies() -> None:
    """The manager TrainJob's status still names w9, where its last run was; w9 has since
    been taken out of the MultiKueueConfig (so it is not among the workers), and the Workload
    waits for quota again: the copies out go as for any recall."""
    waiting = manager_workload("Evicted")
    plan = decide_for(
        waiting, [remote("w1"), remote("w2", workload=False)], trainjob=_running_on("w9")
    )
    assert [(a.cluster, a.verb, a.obj["kind"]) for a in plan.remote] == [
        ("w1", "delete", "Workload")
    ]
    assert plan.check_state is None and plan.placement_ended is None
