"""Which status changes may wait (trainjob/status_writes.py)."""

from __future__ import annotations

from trainjob.status_writes import can_wait, hold

RUNNING = {
    "clusterName": "w1",
    "jobsStatus": [{"name": "node", "ready": 1, "active": 1}],
    "trainerStatus": {"progressPercentage": 10},
}


def test_counts_nothing_acts_on_may_wait() -> None:
    patch = {"jobsStatus": [{"name": "node", "ready": 1, "active": 2}]}
    assert can_wait(RUNNING, patch)
    assert hold(RUNNING, patch, 2.0, None) == 2.0
    assert hold(RUNNING, patch, 2.0, 2.5) is None


def test_an_outcome_count_or_a_condition_goes_at_once() -> None:
    assert not can_wait(RUNNING, {"jobsStatus": [{"name": "node", "ready": 0, "failed": 1}]})
    assert not can_wait(RUNNING, {"conditions": [{"type": "Complete", "status": "True"}]})
    assert not can_wait(RUNNING, {"clusterName": "w2"})


def test_new_progress_goes_at_once_and_the_same_progress_may_wait() -> None:
    assert not can_wait(RUNNING, {"trainerStatus": {"progressPercentage": 20}})
    assert hold(RUNNING, {"trainerStatus": {"progressPercentage": 20}}, 2.0, None) is None
    assert can_wait(RUNNING, {"trainerStatus": {"progressPercentage": 10}})
