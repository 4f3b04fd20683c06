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


def test_a_first_cluster_name_goes_at_once_when_counts_that_matter_are_there_already() -> None:
    """Counts count for PodsReady only beside a clusterName: a status Kueue's own MultiKueue
    brought back before the switch has ready counts and no clusterName, so the dispatcher's
    first write of it must not wait (its Workload's waitForPodsReady runs meanwhile)."""
    kueues = {"jobsStatus": [{"name": "node", "ready": 1, "active": 1}]}
    assert not can_wait(kueues, {"clusterName": "w1"})
    # as the dispatcher writes it: the copy's whole status, the same counts, and its cluster
    assert not can_wait(kueues, {**kueues, "clusterName": "w1"})
    assert not can_wait({}, {**kueues, "clusterName": "w1"})
    # every later status repeats the cluster: a count nothing acts on still waits
    moved = {**RUNNING, "jobsStatus": [{"name": "node", "ready": 1, "active": 2}]}
    assert can_wait(RUNNING, moved)
    starting = {"clusterName": "w1", "jobsStatus": [{"name": "node", "active": 1}]}
    assert can_wait({}, starting)  # nothing ready yet: waits for the first count that matters
    assert hold({}, starting, 2.0, None) == 30.0


def test_a_failed_count_alone_goes_at_once_and_a_names_last_entry_is_its_count() -> None:
    assert not can_wait(RUNNING, {"jobsStatus": [{"name": "node", "ready": 1, "failed": 1}]})
    said_twice = [{"name": "node", "ready": 2}, {"name": "node", "ready": 1, "active": 2}]
    assert can_wait(RUNNING, {"jobsStatus": said_twice})  # the last says what RUNNING says


def test_a_jobs_status_that_is_no_list_counts_as_none() -> None:
    no_list = {"jobsStatus": {"node": {"ready": 1, "failed": 1}}}
    assert can_wait(RUNNING, no_list) == can_wait(RUNNING, {"jobsStatus": []})
    assert not can_wait(RUNNING, no_list)  # RUNNING's ready count is gone
