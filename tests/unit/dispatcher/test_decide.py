"""Pure parts of the dispatcher: kubeconfig vetting and dispatch decisions."""

from __future__ import annotations

from typing import Any

from clusters.helpers.builders import TrainJobBuilder
from dispatcher.capacity import Fit
from dispatcher.decide import (
    CapacityAware,
    External,
    Incremental,
    RemoteView,
    decide,
)
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
    no_queue.workload.raw["status"]["conditions"] = [
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "Misconfigured",
            "message": "LocalQueue q doesn't exist",
        }
    ]
    waiting = remote("w3")
    assert waiting.workload is not None
    waiting.workload.raw["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "no quota"}
    ]
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
    deactivated.workload.raw["spec"] = {"active": False}
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
    assert [(a.cluster, a.verb, a.obj["kind"]) for a in plan.remote] == [
        ("w1", "delete", "Workload"),
        ("w2", "create", "TrainJob"),
    ]
    # No Event while the TrainJob is suspended: the Started Event of the admission that
    # follows names the cluster (queueing). One still running (sent again) gets its own.
    assert plan.events == [] and created_event(plan) is None
    running = TrainJobBuilder().multikueue().suspended(False).obj()
    again = decide_for(wl, [remote("w2", admitted_at="2026-11-22T11:00:02Z")], trainjob=running)
    assert [tuple(e) for e in again.events] == [
        ("Normal", "Dispatched", "dispatched to cluster w2")
    ]


def test_admissions_in_the_same_second_are_shared_out_but_always_decided_alike() -> None:
    winners = set()
    for i in range(20):
        wl = manager_workload("QuotaReserved", nominated=["w1", "w2"])
        wl["metadata"]["name"] = f"trainjob-tj{i}-abcde"
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
    view.trainjob.raw["status"] = {"conditions": conditions or [], "jobsStatus": jobs}
    return view


def job_counts(**counts: int) -> list[Dict]:
    return [{"name": "node", "active": 0, "ready": 0, "succeeded": 0, "failed": 0, **counts}]


def test_pod_counts_that_move_nothing_are_held_but_outcomes_go_at_once() -> None:
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    manager_tj = TrainJobBuilder().multikueue().obj()
    manager_tj["status"] = {"clusterName": "w1", "conditions": [], "jobsStatus": job_counts()}

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
    manager_tj["status"] = {"clusterName": "w1"}
    assert sync(running_remote(job_counts()), 0.5).trainjob_status is None
    manager_tj["status"] = {"clusterName": "w1", "conditions": [], "jobsStatus": job_counts()}
    # The cluster's name, first seen with nothing else that matters, waits as well, longer
    # (pods may take a while to get ready): it goes with the first ready count, or after
    # FIRST_STATUS_HOLD_SECONDS. A change of cluster goes at once.
    manager_tj["status"] = {}
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
    manager_tj["status"] = {"clusterName": "w0", "conditions": [], "jobsStatus": job_counts()}
    moved = sync(running_remote(job_counts(active=1)), None).trainjob_status
    assert moved is not None and moved["clusterName"] == "w1"
    manager_tj["status"] = {"clusterName": "w1", "conditions": [], "jobsStatus": job_counts()}
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
    tj = TrainJobBuilder().multikueue().obj()
    tj["status"] = {
        "clusterName": there,
        "conditions": [{"type": "Complete", "status": "True", "reason": "Completed"}],
    }
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
    out_of_sync.workload.raw["status"]["conditions"].append(
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
    evicted = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")
    evicted.update(reason="Deactivated", message="The workload is deactivated")
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
    assert said[0] == (
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
    tj["status"] = first.trainjob_status
    wl = manager_workload("QuotaReserved", check="Rejected")
    wl["spec"]["active"] = False
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
    tj["status"] = plan.trainjob_status
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
    condition = plan.trainjob_status["conditions"][-1]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        "RuntimeDrift",
        "True",
        "RuntimeDrift",
        "w1: ClusterTrainingRuntime torch is missing there",
    )
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "RuntimeDrift")]


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
    wl["spec"].update(priorityClassRef=high, priority=100)
    same, stale = remote("w1", admitted_at="2026-11-22T11:00:01Z", trainjob=True), remote("w2")
    done, gone = remote("w0"), remote("w3", workload=False)
    assert same.workload is not None and stale.workload is not None and done.workload is not None
    # What the copies' cache keeps of them (dispatcher/remote.py _copy_seen)
    same.workload.raw["spec"] = {"priorityClassRef": high, "priority": 100}
    stale.workload.raw["spec"] = {"priority": 0}
    stale.workload.raw["metadata"]["uid"] = "copy-uid"
    done.workload.raw["spec"] = {"priority": 0}
    done.workload.raw["status"]["conditions"] = [{"type": "Finished", "status": "True"}]
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


TAKEN = "TrainJob ns/tj exists there and is not a copy from this manager (it is left as it is)"


def test_a_winner_whose_trainjob_name_is_taken_is_given_up_for_another_worker() -> None:
    w1 = remote("w1", admitted_at="2026-11-22T11:00:02Z")
    w1.taken = TAKEN
    plan = decide_for(manager_workload("QuotaReserved", cluster="w1"), [w1, remote("w2")])
    assert plan.check_state == ("Retry", f"w1: {TAKEN}; dispatching again")
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "RemoteNameTaken")]
    assert [a.obj["kind"] for a in plan.remote if a.verb == "create"] == []


def test_a_worker_with_a_name_taken_gets_no_copy_and_the_message_says_why() -> None:
    w1 = remote("w1", workload=False)
    w1.taken = TAKEN
    plan = decide_for(manager_workload("QuotaReserved"), [w1, remote("w2", workload=False)])
    assert [(a.cluster, a.verb) for a in plan.remote] == [("w2", "create")]
    assert plan.check_state == (
        "Pending",
        f"dispatched to w2; waiting for a cluster to admit it (not sent to w1: {TAKEN})",
    )


def _running_on(worker: str, since: str = "2026-11-22T11:00:00Z") -> Dict:
    """The manager TrainJob as the status brought back from `worker` leaves it."""
    tj = TrainJobBuilder().multikueue().obj()
    tj["status"] = {
        "clusterName": worker,
        "conditions": [
            {"type": "Suspended", "status": "False", "lastTransitionTime": since},
        ],
    }
    return tj


def test_a_run_sent_back_is_recorded_with_where_when_and_why() -> None:
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    plan = decide_for(wl, [remote("w1", connected=False, lost=61)], trainjob=_running_on("w1"))
    ended = plan.placement_ended
    assert ended is not None and (ended.worker, ended.started) == ("w1", "2026-11-22T11:00:00Z")
    assert ended.reason == "ClusterLost" and "lost for 61s" in ended.message
    assert ended.ended == "2026-11-22T12:00:00Z"
    # a brief disconnect ends nothing
    brief = decide_for(wl, [remote("w1", connected=False, lost=10)], trainjob=_running_on("w1"))
    assert brief.placement_ended is None


def test_an_eviction_on_the_manager_ends_the_run_unless_it_was_our_retry() -> None:
    wl = manager_workload("QuotaReserved", "Admitted", "Evicted", cluster="w1", check="Ready")
    evicted = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")
    evicted.update(reason="Preempted", message="Preempted to accommodate a workload")
    plan = decide_for(wl, [remote("w1", trainjob=True, running=True)], trainjob=_running_on("w1"))
    assert plan.placement_ended is not None
    assert (plan.placement_ended.worker, plan.placement_ended.reason) == ("w1", "Preempted")
    evicted.update(reason="AdmissionCheck", message="our Retry")
    plan = decide_for(wl, [remote("w1", trainjob=True, running=True)], trainjob=_running_on("w1"))
    assert plan.placement_ended is None
    # a copy sent since the eviction (admitted again, the condition not cleared yet) is not
    # the run that ended
    evicted.update(reason="Deactivated", lastTransitionTime="2026-11-22T11:30:00Z")
    for created, told in (("2026-11-22T11:00:00Z", True), ("2026-11-22T11:45:00Z", False)):
        there = remote("w1", trainjob=True, running=True)
        assert there.trainjob is not None
        there.trainjob.meta["creationTimestamp"] = created
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
    evicted_there.workload.raw["status"]["conditions"].append(
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
    back["status"]["conditions"] = [{"type": "Complete", "status": "True", "reason": "Completed"}]
    plan = decide_for(recalls["evicted"], [remote("w1", workload=False)], trainjob=back)
    assert plan.remote == [] and plan.check_state is None and plan.trainjob_status is None


def test_a_trainjob_that_opts_out_has_no_log_tails_kept_as_its_copy_goes() -> None:
    """The manager TrainJob's annotation decides (the worker's copy, as its watch keeps it,
    carries none of its annotations)."""
    wl, remotes = manager_workload("QuotaReserved"), [remote("w1", workload=False)]
    assert decide_for(wl, remotes).keep_tails is True
    opted_out = TrainJobBuilder().multikueue().obj()
    opted_out["metadata"].setdefault("annotations", {})["trainjob.dev/log-tails"] = "off"
    assert decide_for(wl, remotes, trainjob=opted_out).keep_tails is False


def test_a_status_that_cannot_fit_the_manager_trainjob_comes_back_without_its_extras() -> None:
    """Before: a manager TrainJob near etcd's limit (a tenant's long spec and kubectl's
    annotations, which the copy drops) took its copy's status whole: the write failed on
    every pass, and Complete never came back. Now the extras stay on the worker, said once."""
    big = TrainJobBuilder().multikueue().obj()
    big["metadata"]["annotations"] = {"kubectl.kubernetes.io/pad": "x" * 1_300_000}
    winner = remote("w1", admitted_at="2026-11-22T11:00:02Z", trainjob=True)
    assert winner.trainjob is not None
    metrics = [{"name": f"m{i}", "value": "v" * 60} for i in range(256)]
    winner.trainjob.raw["status"]["trainerStatus"] = {"progressPercentage": 100, "metrics": metrics}
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    winner.trainjob.raw["status"]["trainerStatus"]["metrics"] *= 6  # ~150 KB
    plan = decide_for(wl, [winner], trainjob=big)
    assert plan.trainjob_status == {
        "conditions": [{"type": "Complete", "status": "True"}],
        "clusterName": "w1",
        "trainerStatus": None,
    }
    (said,) = [e for e in plan.events if e.reason == "StatusTooLarge"]
    assert said.message.startswith("status.trainerStatus of the copy on w1 not brought back")
    # once what is left is only what cannot fit, nothing is written and nothing said again
    big["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "clusterName": "w1"}
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
