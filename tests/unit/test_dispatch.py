"""Pure parts of the dispatcher: kubeconfig vetting and dispatch decisions."""

from __future__ import annotations

import base64
import datetime as dt
import time
from typing import Any

import pytest
import yaml

from dispatcher.admissionchecks import check_active, parameters_problem
from dispatcher.capacity import Fit
from dispatcher.copies import is_our_copy, remote_trainjob, remote_workload
from dispatcher.dispatch import (
    CapacityAware,
    DispatchObserved,
    External,
    Incremental,
    RemoteView,
    reconcile_dispatch,
)
from dispatcher.intake import (
    not_dispatchable,
    reconcile_intake,
    undecided_for,
    undispatched_message,
)
from dispatcher.kubeconfigs import check_kubeconfig
from dispatcher.kueue_status import down_since
from dispatcher.remote import RemoteCluster
from kubecontrol.certs import issue
from tests.factories import make_trainjob
from trainjob.runtime import RuntimeProblem
from trainjob.status_writes import FIRST_STATUS_HOLD_SECONDS

Dict = dict[str, Any]
NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


# A real CA: the check loads it, as the connection would.
CA_DATA = base64.b64encode(issue(["127.0.0.1"], dt.datetime.now(dt.UTC)).ca_crt).decode()


def kubeconfig(cluster: Dict | None = None, user: Dict | None = None) -> bytes:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "w",
            "clusters": [
                {
                    "name": "w",
                    "cluster": cluster
                    or {"server": "https://127.0.0.1:6443", "certificate-authority-data": CA_DATA},
                }
            ],
            "users": [{"name": "u", "user": user or {"token": "abc"}}],
            "contexts": [{"name": "w", "context": {"cluster": "w", "user": "u"}}],
        }
    ).encode()


def test_a_good_kubeconfig_passes() -> None:
    cfg, problem = check_kubeconfig(kubeconfig(), "s")
    assert problem is None and cfg is not None


@pytest.mark.parametrize(
    ("cluster", "user", "reason", "fragment"),
    [
        (
            {"server": "https://1.2.3.4", "insecure-skip-tls-verify": True},
            None,
            "InsecureKubeConfig",
            "insecure-skip-tls-verify",
        ),
        (
            {"server": "https://1.2.3.4", "certificate-authority": "/ca.crt"},
            None,
            "InsecureKubeConfig",
            "certificate-authority-data",
        ),
        ({"server": ""}, None, "BadKubeConfig", "no server URL"),
        ({"server": "https://bad_host!"}, None, "InsecureKubeConfig", "is not an https URL"),
        (None, {"tokenFile": "/t"}, "InsecureKubeConfig", "tokenFile"),
        (None, {"exec": {"command": "x"}}, "InsecureKubeConfig", "exec"),
        (None, {"auth-provider": {"name": "gcp"}}, "InsecureKubeConfig", "auth-provider"),
        (None, {"username": "a", "password": "b"}, "InsecureKubeConfig", "basic auth"),
    ],
)
def test_kubeconfigs_kueue_refuses_are_refused_with_the_reason(
    cluster: Dict | None, user: Dict | None, reason: str, fragment: str
) -> None:
    cfg, problem = check_kubeconfig(kubeconfig(cluster, user), "worker1-secret")
    assert cfg is None and problem is not None
    assert problem.reason == reason and fragment in problem.message
    assert "worker1-secret" in problem.message


def test_garbage_and_missing_kubeconfigs_are_bad() -> None:
    for raw in (b"", b"clusters: [", b"just a string"):
        _, problem = check_kubeconfig(raw, "s")
        assert problem is not None and problem.reason == "BadKubeConfig"


def _edited(edit: Any) -> bytes:
    cfg = yaml.safe_load(kubeconfig())
    edit(cfg)
    return yaml.safe_dump(cfg).encode()


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda k: k.update({"current-context": "elsewhere"}), "'elsewhere' names no context"),
        (lambda k: k.pop("current-context"), "current-context is not set"),
        (
            lambda k: k["clusters"][0]["cluster"].update({"certificate-authority-data": "%%"}),
            "certificate-authority-data is not base64",
        ),
        (lambda k: k.update({"clusters": ["w"]}), "clusters[0] must be a mapping with a name"),
        (lambda k: k["contexts"][0].update({"context": "w"}), "must have a `context` mapping"),
        (
            lambda k: k["contexts"][0]["context"].update({"cluster": "nope"}),
            "names cluster 'nope', which is not listed",
        ),
        (
            lambda k: k["users"][0]["user"].update({"client-key-data": "not base64!"}),
            "client-key-data is not base64",
        ),
        (  # base64, but not a certificate: no connection could be made with it
            lambda k: k["clusters"][0]["cluster"].update({"certificate-authority-data": "Q0E="}),
            "cannot connect with it (SSLError",
        ),
    ],
)
def test_malformed_kubeconfigs_are_bad_naming_the_field_never_the_data(
    edit: Any, fragment: str
) -> None:
    raw = _edited(edit)
    cfg, problem = check_kubeconfig(raw, "worker1-secret")
    assert cfg is None and problem is not None
    assert problem.reason == "BadKubeConfig" and fragment in problem.message, problem.message
    assert CA_DATA not in problem.message and "abc" not in problem.message


def manager_workload(
    *conds: str,
    cluster: str | None = None,
    nominated: list[str] | None = None,
    check: str = "Pending",
) -> Dict:
    status: Dict = {
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": "2026-11-22T11:00:00Z"}
            for t in conds
        ],
        "admissionChecks": [{"name": "mk", "state": check, "message": ""}],
    }
    if cluster:
        status["clusterName"] = cluster
    if nominated:
        status["nominatedClusterNames"] = nominated
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "trainjob-tj-abcde",
            "namespace": "ns",
            "resourceVersion": "1",
            "labels": {"kueue.x-k8s.io/job-uid": "uid-tj"},
        },
        "spec": {"queueName": "q", "podSets": [{"name": "node", "count": 2}]},
        "status": status,
    }


def remote(
    name: str,
    *,
    connected: bool = True,
    lost: float = 0.0,
    admitted_at: str | None = None,
    workload: bool = True,
    trainjob: bool = False,
) -> RemoteView:
    wl = None
    if workload:
        conds = (
            [{"type": "Admitted", "status": "True", "lastTransitionTime": admitted_at}]
            if admitted_at
            else []
        )
        wl = {
            "kind": "Workload",
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "metadata": {"name": "trainjob-tj-abcde", "namespace": "ns"},
            "status": {"conditions": conds},
        }
    tj = (
        {
            "kind": "TrainJob",
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "metadata": {"name": "tj", "namespace": "ns"},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]},
        }
        if trainjob
        else None
    )
    return RemoteView(name, connected, lost, wl, tj)


def decide(wl: Dict, remotes: list[RemoteView], **kw: Any) -> Any:
    tj = kw.pop("trainjob", None) or make_trainjob(managedBy="kueue.x-k8s.io/multikueue")
    return reconcile_dispatch(
        DispatchObserved(
            workload=wl,
            trainjob=tj,
            check="mk",
            remotes=remotes,
            origin="multikueue",
            worker_lost_timeout=60,
            now=NOW,
        ),
        **kw,
    )


def created_event(plan: Any) -> str | None:
    """The Event posted once the TrainJob is created on the winner (only if that succeeds)."""
    return next((a.event[2] for a in plan.remote if a.event), None)


def test_copies_go_to_every_reachable_cluster_and_are_nominated() -> None:
    plan = decide(
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
    no_queue.workload["status"]["conditions"] = [
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "Misconfigured",
            "message": "LocalQueue q doesn't exist",
        }
    ]
    waiting = remote("w3")
    assert waiting.workload is not None
    waiting.workload["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "no quota"}
    ]
    plan = decide(manager_workload("QuotaReserved"), [no_namespace, no_queue, waiting])
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
        plan = decide(wl, remotes, strategy=Incremental(batch=2, round_seconds=round_seconds))
        assert [a.cluster for a in plan.remote] == created
        assert plan.requeue_after == requeue


def test_leftovers_of_an_earlier_round_are_removed_before_dispatching_again() -> None:
    deactivated = remote("w1")
    assert deactivated.workload is not None
    deactivated.workload["spec"] = {"active": False}
    plan = decide(manager_workload("QuotaReserved"), [deactivated, remote("w2", trainjob=True)])
    assert sorted((a.cluster, a.verb, a.obj["kind"]) for a in plan.remote) == [
        ("w1", "delete", "Workload"),
        ("w2", "delete", "TrainJob"),
        ("w2", "delete", "Workload"),
    ]


def test_first_admitted_copy_wins_and_the_others_go() -> None:
    wl = manager_workload("QuotaReserved", nominated=["w1", "w2"])
    plan = decide(
        wl,
        [
            remote("w1", admitted_at="2026-11-22T11:00:05Z"),
            remote("w2", admitted_at="2026-11-22T11:00:02Z"),
        ],
        trainjob=make_trainjob(managedBy="kueue.x-k8s.io/multikueue", suspend=True),
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
    running = make_trainjob(managedBy="kueue.x-k8s.io/multikueue", suspend=False)
    again = decide(wl, [remote("w2", admitted_at="2026-11-22T11:00:02Z")], trainjob=running)
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
        first = decide(wl, remotes).cluster_name
        assert decide(wl, list(reversed(remotes))).cluster_name == first
        winners.add(first)
    assert winners == {"w1", "w2"}


def test_winner_must_be_nominated_before_it_is_named() -> None:
    plan = decide(
        manager_workload("QuotaReserved", nominated=["w1"]),
        [remote("w1"), remote("w2", admitted_at="2026-11-22T11:00:02Z")],
    )
    assert plan.cluster_name is None and plan.nominated == ["w1", "w2"]


def test_winner_gets_the_trainjob_and_the_check_turns_ready() -> None:
    plan = decide(
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
    plan = decide(
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
    view.trainjob["status"] = {"conditions": conditions or [], "jobsStatus": jobs}
    return view


def job_counts(**counts: int) -> list[Dict]:
    return [{"name": "node", "active": 0, "ready": 0, "succeeded": 0, "failed": 0, **counts}]


def test_pod_counts_that_move_nothing_are_held_but_outcomes_go_at_once() -> None:
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    manager_tj = make_trainjob(managedBy="kueue.x-k8s.io/multikueue")
    manager_tj["status"] = {"clusterName": "w1", "conditions": [], "jobsStatus": job_counts()}

    def sync(view: RemoteView, held_for: float | None) -> Any:
        return reconcile_dispatch(
            DispatchObserved(
                workload=wl,
                trainjob=manager_tj,
                check="mk",
                remotes=[view],
                origin="multikueue",
                worker_lost_timeout=60,
                now=NOW,
                status_coalesce=2.0,
                status_held_for=held_for,
            )
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
    brief = decide(wl, [remote("w1", connected=False, lost=10)])
    assert brief.check_state is None and brief.remote == []
    assert brief.requeue_after == 50  # looked at again when the timeout runs out
    lost = decide(wl, [remote("w1", connected=False, lost=61)])
    assert lost.check_state is not None and lost.check_state[0] == "Retry"


def test_remote_workload_gone_while_reachable_retries_at_once() -> None:
    plan = decide(
        manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready"),
        [remote("w1", workload=False, trainjob=True)],
    )
    assert plan.check_state is not None and plan.check_state[0] == "Retry"


def test_after_our_retry_nothing_goes_out_until_kueue_evicts() -> None:
    # Our Retry written (clusterName cleared with it), Kueue not yet acted: still admitted, not
    # evicted. A new round now would write Pending over the Retry and cancel the eviction.
    waiting = manager_workload("QuotaReserved", "Admitted", check="Retry")
    plan = decide(waiting, [remote("w1", trainjob=True), remote("w2", workload=False)])
    assert plan.check_state is None and plan.nominated is None and plan.cluster_name is None
    assert [(a.cluster, a.verb) for a in plan.remote] == [("w1", "delete"), ("w1", "delete")]
    # Kueue evicts (our check back to Pending), then reserves quota again: a new round.
    again = decide(
        manager_workload("QuotaReserved"),
        [remote("w1", workload=False), remote("w2", workload=False)],
    )
    assert again.check_state is not None and again.check_state[0] == "Pending"
    assert [(a.cluster, a.verb) for a in again.remote] == [("w1", "create"), ("w2", "create")]


def test_finished_or_unreserved_workloads_leave_nothing_behind() -> None:
    for wl in (manager_workload("QuotaReserved", "Finished", cluster="w1"), manager_workload()):
        plan = decide(wl, [remote("w1", trainjob=True)])
        assert sorted(a.obj["kind"] for a in plan.remote) == ["TrainJob", "Workload"]
        assert all(a.verb == "delete" for a in plan.remote)


def test_remote_copies_drop_what_belongs_to_the_manager() -> None:
    wl = remote_workload(manager_workload("QuotaReserved"), "multikueue")
    assert wl["metadata"]["labels"] == {"kueue.x-k8s.io/multikueue-origin": "multikueue"}
    assert "ownerReferences" not in wl["metadata"] and "status" not in wl
    tj = make_trainjob(
        managedBy="kueue.x-k8s.io/multikueue",
        runtimePatches=[{"manager": "kueue.x-k8s.io/manager"}, {"manager": "user"}],
    )
    out = remote_trainjob(tj, "wl", "multikueue")
    assert out["spec"]["runtimePatches"] == [{"manager": "user"}]


def test_finished_remote_objects_are_kept_for_the_retention() -> None:
    wl = manager_workload("QuotaReserved", "Finished", cluster="w1")  # finished 11:00:00
    tj = make_trainjob(managedBy="kueue.x-k8s.io/multikueue")
    for retention, deletes, requeue in ((7200.0, 0, 3600.0), (60.0, 2, None)):
        plan = reconcile_dispatch(
            DispatchObserved(
                workload=wl,
                trainjob=tj,
                check="mk",
                remotes=[remote("w1", trainjob=True)],
                origin="multikueue",
                worker_lost_timeout=60,
                now=NOW,
                retention=retention,
            )
        )
        assert len(plan.remote) == deletes and plan.requeue_after == requeue


# ---- the worker-lost clock (no threads started: only the connection bookkeeping) --------------


def remote_cluster(down: float | None = None) -> RemoteCluster:
    return RemoteCluster(
        "w1",
        yaml.safe_load(kubeconfig()),
        "origin",
        lambda ns, name, urgent: None,
        "test",
        down_since=down,
    )


def test_a_cluster_still_connecting_after_start_up_is_never_lost() -> None:
    rc = remote_cluster()
    assert rc.connecting and not rc.connected and rc.disconnected_for() == 0.0
    rc._set_ok("Workload", True)
    assert rc.connecting and rc.disconnected_for() == 0.0  # the TrainJob watch has not listed yet
    rc._set_ok("TrainJob", True)
    assert rc.connected and not rc.connecting and rc.down_since is None


def test_first_failure_after_start_up_starts_the_clock_now_unless_an_outage_is_on_record() -> None:
    fresh = remote_cluster()
    fresh._set_ok("Workload", False, "ConnectionRefused")
    assert fresh.down_since is not None and 0.0 <= fresh.disconnected_for() < 5
    on_record = remote_cluster(down=time.time() - 100)
    on_record._set_ok("Workload", False, "ConnectionRefused")
    on_record._set_ok("TrainJob", False, "ConnectionRefused")
    assert 100 <= on_record.disconnected_for() < 105  # the clock survived the restart


def test_the_clock_stops_on_reconnect_and_restarts_on_the_next_outage() -> None:
    rc = remote_cluster(down=time.time() - 500)
    rc._set_ok("Workload", True)
    rc._set_ok("TrainJob", True)
    assert rc.disconnected_for() == 0.0 and rc.down_since is None
    rc._set_ok("TrainJob", False, "timeout")
    assert 0.0 <= rc.disconnected_for() < 5


def test_down_since_comes_from_the_active_condition() -> None:
    def mkc(status: str) -> Dict:
        cond = {"type": "Active", "status": status, "lastTransitionTime": "2026-11-22T12:00:00Z"}
        return {"metadata": {"name": "w1"}, "status": {"conditions": [cond]}}

    assert down_since(mkc("False")) == NOW.timestamp()
    assert down_since(mkc("True")) is None
    assert down_since({"metadata": {"name": "w1"}}) is None


# ---- the manager TrainJob's own word before dispatch -------------------------------------------


def test_runtime_problem_on_the_manager_becomes_a_condition_and_an_event_once() -> None:
    body = make_trainjob(managedBy="kueue.x-k8s.io/multikueue")
    problem = RuntimeProblem("RuntimeNotFound", "ClusterTrainingRuntime 'x' not found")
    plan = reconcile_intake(body, problem, NOW)
    assert plan.status == {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "RuntimeNotFound",
                "message": "ClusterTrainingRuntime 'x' not found",
                "lastTransitionTime": "2026-11-22T12:00:00Z",
                "observedGeneration": 1,
            }
        ]
    }
    assert plan.events == [("Warning", "RuntimeNotFound", "ClusterTrainingRuntime 'x' not found")]
    body["status"] = plan.status
    again = reconcile_intake(body, problem, NOW)
    assert again.status is None and again.events == []
    fixed = reconcile_intake(body, None, NOW)
    assert fixed.status == {"conditions": []}
    assert [e[1] for e in fixed.events] == ["RuntimeResolved"]


def test_intake_leaves_a_dispatched_trainjob_and_final_failures_alone() -> None:
    problem = RuntimeProblem("RuntimeInvalid", "bad")
    dispatched = make_trainjob()
    dispatched["status"] = {"clusterName": "worker1"}
    assert reconcile_intake(dispatched, problem, NOW).status is None
    # Its Workload names the worker while the TrainJob's own clusterName still waits.
    sent = manager_workload("QuotaReserved", "Admitted", cluster="worker1", check="Ready")
    assert reconcile_intake(make_trainjob(), problem, NOW, sent).status is None
    assert reconcile_intake(make_trainjob(), problem, NOW).status is not None
    final = make_trainjob()
    final["status"] = {
        "conditions": [{"type": "Failed", "status": "True", "reason": "PodSetFailed"}]
    }
    assert reconcile_intake(final, None, NOW).status is None


# ---- the AdmissionCheck's Active condition, Kueue's reasons ------------------------------------


def test_check_active_names_missing_and_inactive_clusters_as_kueue_does() -> None:
    assert check_active(None, {"w1": True, "w2": True}) == (
        True,
        "Active",
        "The admission check is active",
    )
    assert check_active(None, {"w1": True, "ghost": None}) == (
        True,
        "SomeActiveClusters",
        "Missing clusters: ['ghost']",
    )
    assert check_active(None, {"w1": False, "ghost": None}) == (
        False,
        "NoUsableClusters",
        "Missing clusters: ['ghost'], Inactive clusters: ['w1']",
    )
    active, reason, message = check_active("spec.parameters must name a MultiKueueConfig", {})
    assert (active, reason) == (False, "BadConfig")
    assert message == (
        "Cannot load the AdmissionChecks parameters: spec.parameters must name a MultiKueueConfig"
    )


def test_admission_check_parameters_must_reference_a_multikueue_config() -> None:
    good = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "c"}
    assert parameters_problem(good) is None
    wrong = parameters_problem({**good, "kind": "ProvisioningRequestConfig"})
    assert wrong is not None and "'kueue.x-k8s.io'/'ProvisioningRequestConfig'" in wrong
    assert parameters_problem({}) == "spec.parameters must name a MultiKueueConfig"


def _admitted(*checks: tuple[str, str], cluster: str | None = None) -> Dict:
    status: Dict = {
        "conditions": [
            {"type": "QuotaReserved", "status": "True"},
            {"type": "Admitted", "status": "True"},
        ],
        "admission": {"clusterQueue": "cq"},
        "admissionChecks": [{"name": n, "state": s} for n, s in checks],
    }
    if cluster:
        status["clusterName"] = cluster
    return {"metadata": {"name": "wl"}, "status": status}


def test_not_dispatchable_only_when_kueue_admitted_without_counting_our_check() -> None:
    def decide_nd(wl: Dict, cq_has: bool = True) -> str | None:
        return not_dispatchable(wl, {"mk"}, lambda cq: cq_has, "kueue.x-k8s.io/multikueue")

    # Kueue dropped our check (no flavour assigned), or has not dropped it yet (still Pending).
    assert "without the MultiKueue admission check" in (decide_nd(_admitted()) or "")
    assert decide_nd(_admitted(("mk", "Pending"))) is not None
    # A queue without our check at all says so.
    assert "has no admission check" in (decide_nd(_admitted(), cq_has=False) or "")
    # Normal flows: Ready; Retry just written (Kueue evicts next; found by the chaos soak);
    # dispatched before Kueue dropped the check; not admitted.
    assert decide_nd(_admitted(("mk", "Ready"))) is None
    assert decide_nd(_admitted(("mk", "Retry"))) is None
    assert decide_nd(_admitted(cluster="worker1")) is None
    assert decide_nd({"metadata": {"name": "wl"}, "status": {}}) is None
    # Evicted while admitted (PodsReadyTimeout, a lost worker): Kueue resets our check to
    # Pending and clears clusterName before the quota goes (found by the chaos soak, seed 2).
    evicted = _admitted(("mk", "Pending"))
    evicted["status"]["conditions"].append(
        {"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout"}
    )
    assert decide_nd(evicted) is None
    # Right after a Retry (a remote eviction), seen: admitted, not evicted, no clusterName, our
    # check Pending since a moment (chaos soak, seed 3). Not a verdict until that Pending state
    # is older than the grace; a Pending state that old still is one.
    now = dt.datetime(2026, 11, 23, 18, 0, 28, tzinfo=dt.UTC)
    reset = _admitted(("mk", "Pending"))
    reset["status"]["admissionChecks"][0]["lastTransitionTime"] = "2026-11-23T18:00:27Z"
    assert not_dispatchable(reset, {"mk"}, lambda cq: True, "x", now) is None
    later = now + dt.timedelta(seconds=11)
    assert not_dispatchable(reset, {"mk"}, lambda cq: True, "x", later) is not None
    # Meanwhile nothing is dispatched for it (the pass waits out the rest of the grace).
    assert undecided_for(reset, {"mk"}, now) == 9.0
    assert undecided_for(reset, {"mk"}, later) is None
    assert undecided_for(_admitted(("mk", "Ready")), {"mk"}, now) is None


def test_remote_copies_carry_the_manager_objects_uid_for_tracing() -> None:
    manager_wl = manager_workload("QuotaReserved")
    manager_wl["metadata"]["uid"] = "uid-wl"
    wl = remote_workload(manager_wl, "multikueue")
    assert wl["metadata"]["annotations"] == {"kueue.x-k8s.io/multikueue-origin-uid": "uid-wl"}
    tj = make_trainjob(managedBy="kueue.x-k8s.io/multikueue")
    tj["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    out = remote_trainjob(tj, "wl", "multikueue")
    assert out["metadata"]["annotations"] == {
        "kueue.x-k8s.io/multikueue-origin-uid": "uid-tj",
        # Kueue 0.19 names the prebuilt Workload in an annotation (the label stays too)
        "kueue.x-k8s.io/prebuilt-workload-name": out["metadata"]["labels"][
            "kueue.x-k8s.io/prebuilt-workload-name"
        ],
    }


def decide_finished(remotes: list[RemoteView], *, there: str = "w1") -> Any:
    """A pass for a TrainJob whose status, brought back from `there`, says Complete."""
    tj = make_trainjob(managedBy="kueue.x-k8s.io/multikueue")
    tj["status"] = {
        "clusterName": there,
        "conditions": [{"type": "Complete", "status": "True", "reason": "Completed"}],
    }
    wl = manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready")
    return decide(wl, remotes, trainjob=tj)


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
    out_of_sync = remote("w1", admitted_at="2026-11-22T11:00:02Z", trainjob=True)
    assert out_of_sync.workload is not None
    out_of_sync.workload["status"]["conditions"].append(
        {"type": "Finished", "status": "True", "reason": "OutOfSync", "message": "changed"}
    )
    ready = decide(
        manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Ready"), [out_of_sync]
    )
    assert ready.check_state is not None and ready.check_state[0] == "Retry"
    assert "out of sync" in ready.check_state[1] and [e.reason for e in ready.events] == [
        "RemoteOutOfSync"
    ]
    assert ready.trainjob_status is None  # its status there is not the job's outcome
    already = decide(
        manager_workload("QuotaReserved", "Admitted", cluster="w1", check="Retry"), [out_of_sync]
    )
    assert already.check_state is None and already.events == []


def test_an_external_dispatcher_decides_where_copies_go_and_we_never_nominate() -> None:
    ext = External()
    waiting = decide(
        manager_workload("QuotaReserved"), [remote("w1", workload=False)], strategy=ext
    )
    assert waiting.remote == [] and waiting.nominated is None
    assert waiting.check_state is not None and "external dispatcher" in waiting.check_state[1]
    # It nominated w2: a copy goes there only; one left on w1 from before goes.
    plan = decide(
        manager_workload("QuotaReserved", nominated=["w2"]),
        [remote("w1"), remote("w2", workload=False)],
        strategy=ext,
    )
    assert sorted((a.verb, a.cluster) for a in plan.remote) == [("create", "w2"), ("delete", "w1")]
    assert plan.nominated is None
    # Only a nominated cluster's admission wins.
    early = "2026-11-22T11:00:01Z"
    plan = decide(
        manager_workload("QuotaReserved", nominated=["w2"]),
        [remote("w1", admitted_at=early), remote("w2", admitted_at="2026-11-22T11:00:05Z")],
        strategy=ext,
    )
    assert plan.cluster_name == "w2" and plan.nominated is None


def test_a_trainjob_multikueue_does_not_dispatch_is_told_why_naming_the_fields() -> None:
    plain = make_trainjob()
    assert "spec.managedBy is unset" in undispatched_message(plain, "kueue.x-k8s.io/multikueue")
    assert "names no queue (label kueue.x-k8s.io/queue-name)" in undispatched_message(
        plain, "kueue.x-k8s.io/multikueue"
    )
    queued = make_trainjob(managedBy="trainer.kubeflow.org/trainjob-controller")
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "local"}
    message = undispatched_message(queued, "trainjob.dev/multikueue")
    assert "spec.managedBy is 'trainer.kubeflow.org/trainjob-controller'" in message
    assert "its queue 'local'" in message
    assert "has no admission check with controllerName trainjob.dev/multikueue" in message


def test_evicted_on_the_manager_removes_every_copy_and_says_so_once_per_worker() -> None:
    wl = manager_workload("QuotaReserved", "Admitted", "Evicted", cluster="w1", check="Ready")
    evicted = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")
    evicted.update(reason="Deactivated", message="The workload is deactivated")
    plan = decide(
        wl, [remote("w1", admitted_at="2026-11-22T11:00:01Z", trainjob=True), remote("w2")]
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
    # Waiting for quota, never dispatched: copies (of an earlier round) go without a word.
    plan = decide(manager_workload(), [remote("w2")])
    assert [(a.cluster, a.event) for a in plan.remote] == [("w2", None)]


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
    plan = decide(
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
    plan = decide(manager_workload("QuotaReserved"), [never("w1"), never("w2")])
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


def test_once_failed_and_rejected_giving_up_again_writes_nothing() -> None:
    first = decide(manager_workload("QuotaReserved"), [never("w1")])
    tj = make_trainjob(managedBy="kueue.x-k8s.io/multikueue")
    tj["status"] = first.trainjob_status
    wl = manager_workload("QuotaReserved", check="Rejected")
    wl["spec"]["active"] = False
    again = decide(wl, [never("w1")], trainjob=tj)
    assert (again.check_state, again.trainjob_status, again.events) == (None, None, [])
    assert not again.deactivate


def test_one_worker_that_could_hold_it_or_is_not_known_keeps_it_waiting() -> None:
    maybe = RemoteView("w2", True, 0.0, None, None, fit=Fit(False, True, "no room now: cpu"))
    unknown = RemoteView("w2", False, 5.0, None, None)  # unreachable: its room is not known
    for other in (maybe, unknown):
        plan = decide(manager_workload("QuotaReserved"), [never("w1"), other])
        assert plan.check_state is not None and plan.check_state[0] == "Pending"
        assert plan.trainjob_status is None


def test_the_rule_can_be_turned_off() -> None:
    wl, tj = manager_workload("QuotaReserved"), make_trainjob(managedBy="kueue.x-k8s.io/multikueue")
    obs = DispatchObserved(wl, tj, "mk", [never("w1")], "multikueue", 60, NOW)
    obs.give_up_never_fits = False
    assert reconcile_dispatch(obs).check_state[0] == "Pending"


def test_not_admitted_within_the_time_fails_it_naming_the_clusters() -> None:
    # Quota reserved at 11:00 (manager_workload), now is 12:00: an hour.
    wl, tj = manager_workload("QuotaReserved"), make_trainjob(managedBy="kueue.x-k8s.io/multikueue")
    full = RemoteView("w1", True, 0.0, None, None, fit=Fit(False, True, "no room now: cpu"))
    down = RemoteView("w2", False, 30.0, None, None)
    obs = DispatchObserved(wl, tj, "mk", [full, down], "multikueue", 60, NOW)
    obs.give_up_after = 3600
    plan = reconcile_dispatch(obs)
    assert plan.check_state == (
        "Rejected",
        "no worker cluster admitted it within 3600s of the manager's quota reservation (w1, w2 "
        "considered; w1: no room now: cpu; w2: unreachable)",
    )
    assert plan.trainjob_status["conditions"][-1]["reason"] == "NotAdmittedInTime"
    obs.give_up_after = 3601
    assert reconcile_dispatch(obs).check_state[0] == "Pending"


# ---- a TrainJob's own choice of clusters -----------------------------------------------------


def test_clusters_the_trainjob_did_not_choose_get_no_copy_and_lose_theirs() -> None:
    chosen = remote("w1", workload=False)
    other = remote("w2")  # a copy from before the choice changed
    other.selected = False
    plan = decide(manager_workload("QuotaReserved"), [chosen, other])
    assert sorted((a.cluster, a.verb) for a in plan.remote) == [
        ("w1", "create"),
        ("w2", "delete"),
    ]
    assert plan.nominated == ["w1"]


def test_an_admission_on_a_cluster_not_chosen_never_wins() -> None:
    other = remote("w2", admitted_at="2026-11-22T11:00:05Z")
    other.selected = False
    plan = decide(manager_workload("QuotaReserved", nominated=["w2"]), [remote("w1"), other])
    assert plan.cluster_name is None


def test_no_chosen_cluster_active_is_a_condition_an_event_and_the_check_message() -> None:
    wl, tj = manager_workload("QuotaReserved"), make_trainjob(managedBy="kueue.x-k8s.io/multikueue")
    unchosen = remote("w1", workload=False)
    unchosen.selected = False
    problem = "trainjob.dev/cluster-selector='pool=x' matches none of the clusters (w1)"
    obs = DispatchObserved(wl, tj, "mk", [unchosen], "multikueue", 60, NOW)
    obs.selection_problem = problem
    plan = reconcile_dispatch(obs)
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
    plan = reconcile_dispatch(DispatchObserved(wl, tj, "mk", [chosen], "multikueue", 60, NOW))
    assert plan.trainjob_status == {"conditions": []}
    assert [a.verb for a in plan.remote] == ["create"]


# ---- runtime drift ---------------------------------------------------------------------------


def test_a_worker_whose_runtime_differs_gets_no_copy_and_the_drift_is_a_condition() -> None:
    drifted = remote("w1", workload=False)
    drifted.runtime_problem = "ClusterTrainingRuntime torch is missing there"
    plan = decide(manager_workload("QuotaReserved"), [drifted, remote("w2", workload=False)])
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
    plan = decide(manager_workload("QuotaReserved"), [drifted])
    assert plan.check_state is not None and plan.check_state[0] == "Pending"


def test_copies_take_a_changed_priority_and_are_left_alone_when_they_have_it() -> None:
    wl = manager_workload(
        "QuotaReserved", "Admitted", cluster="w1", nominated=["w1"], check="Ready"
    )
    high = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    wl["spec"].update(priorityClassRef=high, priority=100)
    same, stale = remote("w1", admitted_at="2026-11-22T11:00:01Z", trainjob=True), remote("w2")
    assert same.workload is not None and stale.workload is not None
    # What the copies' cache keeps of them (dispatcher/remote.py _copy_seen)
    same.workload["spec"] = {"priorityClassRef": high, "priority": 100}
    stale.workload["spec"] = {"priority": 0}
    patches = [a for a in decide(wl, [same, stale]).remote if a.verb == "patch"]
    assert [(a.cluster, a.obj["spec"]) for a in patches] == [
        ("w2", {"priorityClassRef": high, "priority": 100})
    ]


TAKEN = "TrainJob ns/tj exists there and is not a copy from this manager (it is left as it is)"


def test_a_winner_whose_trainjob_name_is_taken_is_given_up_for_another_worker() -> None:
    w1 = remote("w1", admitted_at="2026-11-22T11:00:02Z")
    w1.taken = TAKEN
    plan = decide(manager_workload("QuotaReserved", cluster="w1"), [w1, remote("w2")])
    assert plan.check_state == ("Retry", f"w1: {TAKEN}; dispatching again")
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "RemoteNameTaken")]
    assert [a.obj["kind"] for a in plan.remote if a.verb == "create"] == []


def test_a_worker_with_a_name_taken_gets_no_copy_and_the_message_says_why() -> None:
    w1 = remote("w1", workload=False)
    w1.taken = TAKEN
    plan = decide(manager_workload("QuotaReserved"), [w1, remote("w2", workload=False)])
    assert [(a.cluster, a.verb) for a in plan.remote] == [("w2", "create")]
    assert plan.check_state == (
        "Pending",
        f"dispatched to w2; waiting for a cluster to admit it (not sent to w1: {TAKEN})",
    )


def test_a_copy_of_another_manager_object_or_origin_is_not_ours() -> None:
    copy = remote_trainjob(make_trainjob("tj"), "wl", "multikueue")
    assert is_our_copy(copy, copy)
    foreign = {"metadata": {"name": "tj", "labels": {}}}
    assert not is_our_copy(foreign, copy)
    replaced = make_trainjob("tj")
    replaced["metadata"]["uid"] = "uid-replaced"
    assert not is_our_copy(remote_trainjob(replaced, "wl", "multikueue"), copy)
    assert not is_our_copy(remote_trainjob(make_trainjob("tj"), "wl", "other-manager"), copy)
