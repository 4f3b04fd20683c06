"""Why a manager TrainJob cannot be queued or dispatched, said on it
(dispatcher/decisions/intake.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from dispatcher.decisions.intake import (
    not_dispatchable,
    reconcile_intake,
    undecided_for,
    undispatched_message,
)
from tests.support.builders import TrainJobBuilder, edit, make_trainjob
from tests.support.dispatch import NOW, manager_workload
from trainjob.runtime import RuntimeProblem
from trainjob_api.views import TrainJobView, WorkloadView

Dict = dict[str, Any]


def test_runtime_problem_on_the_manager_becomes_a_condition_and_an_event_once() -> None:
    body = TrainJobBuilder().multikueue().obj()
    problem = RuntimeProblem("RuntimeNotFound", "ClusterTrainingRuntime 'x' not found")
    plan = reconcile_intake(TrainJobView(body), problem, NOW)
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
    assert [e[:3] for e in plan.events] == [
        ("Warning", "RuntimeNotFound", "ClusterTrainingRuntime 'x' not found")
    ]
    edit(body).status(plan.status)
    again = reconcile_intake(TrainJobView(body), problem, NOW)
    assert again.status is None and again.events == []
    fixed = reconcile_intake(TrainJobView(body), None, NOW)
    assert fixed.status == {"conditions": []}
    assert [e[1] for e in fixed.events] == ["RuntimeResolved"]


def test_intake_leaves_a_dispatched_trainjob_and_final_failures_alone() -> None:
    problem = RuntimeProblem("RuntimeInvalid", "bad")
    dispatched = TrainJobBuilder().status(clusterName="worker1").obj()
    assert reconcile_intake(TrainJobView(dispatched), problem, NOW).status is None
    # Its Workload names the worker while the TrainJob's own clusterName still waits.
    sent = manager_workload("QuotaReserved", "Admitted", cluster="worker1", check="Ready")
    assert (
        reconcile_intake(TrainJobView(make_trainjob()), problem, NOW, WorkloadView(sent)).status
        is None
    )
    assert reconcile_intake(TrainJobView(make_trainjob()), problem, NOW).status is not None
    final = (
        TrainJobBuilder()
        .status(conditions=[{"type": "Failed", "status": "True", "reason": "FailedJobs"}])
        .obj()
    )
    assert reconcile_intake(TrainJobView(final), None, NOW).status is None


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
        return not_dispatchable(
            WorkloadView(wl), {"mk"}, lambda cq: cq_has, "kueue.x-k8s.io/multikueue"
        )

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
    edit(evicted).more_conditions(
        {"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout"}
    )
    assert decide_nd(evicted) is None
    # Right after a Retry (a remote eviction), seen: admitted, not evicted, no clusterName, our
    # check Pending since a moment (chaos soak, seed 3). Not a verdict until that Pending state
    # is older than the grace; a Pending state that old still is one.
    now = dt.datetime(2026, 11, 23, 18, 0, 28, tzinfo=dt.UTC)
    reset = _admitted(("mk", "Pending"))
    edit(reset).status(
        admissionChecks=[
            {"name": "mk", "state": "Pending", "lastTransitionTime": "2026-11-23T18:00:27Z"}
        ]
    )
    assert not_dispatchable(WorkloadView(reset), {"mk"}, lambda cq: True, "x", now) is None
    later = now + dt.timedelta(seconds=11)
    assert not_dispatchable(WorkloadView(reset), {"mk"}, lambda cq: True, "x", later) is not None
    # Meanwhile nothing is dispatched for it (the pass waits out the rest of the grace).
    assert undecided_for(WorkloadView(reset), {"mk"}, now) == 9.0
    assert undecided_for(WorkloadView(reset), {"mk"}, later) is None
    assert undecided_for(WorkloadView(_admitted(("mk", "Ready"))), {"mk"}, now) is None


def test_a_trainjob_multikueue_does_not_dispatch_is_told_why_naming_the_fields() -> None:
    plain = make_trainjob()
    assert "spec.managedBy is unset" in undispatched_message(
        TrainJobView(plain), "kueue.x-k8s.io/multikueue"
    )
    assert "names no queue (label kueue.x-k8s.io/queue-name)" in undispatched_message(
        TrainJobView(plain), "kueue.x-k8s.io/multikueue"
    )
    queued = make_trainjob(managedBy="trainer.kubeflow.org/trainjob-controller")
    edit(queued).labels({"kueue.x-k8s.io/queue-name": "local"})
    message = undispatched_message(TrainJobView(queued), "trainjob.dev/multikueue")
    assert "spec.managedBy is 'trainer.kubeflow.org/trainjob-controller'" in message
    assert "its queue 'local'" in message
    assert "has no admission check with controllerName trainjob.dev/multikueue" in message
