"""The worker's status maths (worker_controller/status.py), pure: per-PodSet Job counts as
Trainer's jobsStatus, when a PodSet's dependencies are met, success by the JobSet template's
success policy, and what keeps pods from running."""

from __future__ import annotations

from typing import Any

import pytest

from kubebase.objects import Dict
from tests.support.builders import (
    edit,
    initializer_runtime,
    make_runtime,
    make_trainjob,
    mpi_runtime,
)
from tests.support.worker_plans import job
from tests.unit.trainjob.runtime import info_for
from trainjob.runtime import RuntimeInfo
from trainjob_api.views import FailedCreateView, JobView
from worker_controller import status


def jobs(*bodies: Dict) -> dict[str, JobView]:
    return {b["metadata"]["name"]: JobView(b) for b in bodies}


def mpi(success: Dict | None = None) -> RuntimeInfo:
    runtime = mpi_runtime()
    if success is not None:
        edit(runtime).template_spec(successPolicy=success)
    return info_for(make_trainjob(runtimeRef={"name": "mpi-runtime"}), runtime)


def test_jobs_status_counts_each_replicated_jobs_jobs_by_state() -> None:
    info = info_for(make_trainjob(trainer={"numNodes": 1}), make_runtime())
    info.pod_sets[0].replicas = 4  # four Jobs of one node each
    found = jobs(
        job("tj-node-0", active=1, ready=1),
        job("tj-node-1", complete=True, ready=1),  # finished: no longer counted ready
        job("tj-node-2", failed="BackoffLimitExceeded"),
        job("tj-node-3", suspend=True),
        job("other-node-0", active=1),  # not of this TrainJob
    )
    assert status.compute_jobs_status(info, found) == [
        {"name": "node", "ready": 1, "succeeded": 1, "failed": 1, "active": 1, "suspended": 1}
    ]


@pytest.mark.parametrize(
    ("success", "done", "succeeded"),
    [
        (None, {"tj-launcher-0"}, False),  # All by default: every PodSet
        (None, {"tj-launcher-0", "tj-node-0"}, True),
        ({"operator": "All", "targetReplicatedJobs": ["launcher"]}, {"tj-launcher-0"}, True),
        ({"operator": "Any", "targetReplicatedJobs": ["launcher", "node"]}, {"tj-node-0"}, True),
        ({"operator": "Any"}, set(), False),
        ({"operator": "All", "targetReplicatedJobs": ["node"]}, {"tj-launcher-0"}, False),
    ],
)
def test_success_follows_the_templates_success_policy(
    success: Dict | None, done: set[str], succeeded: bool
) -> None:
    info = mpi(success)
    found = jobs(*(job(n, complete=True) for n in sorted(done)))
    assert status.succeeded(info, found) is succeeded


def test_a_podset_is_complete_only_with_all_its_jobs() -> None:
    info = mpi()
    node = info.pod_set("node")
    node.replicas = 2
    assert not status.podset_complete(node, jobs(job("tj-node-0", complete=True)), "tj")
    both = jobs(job("tj-node-0", complete=True), job("tj-node-1", complete=True))
    assert status.podset_complete(node, both, "tj")
    assert status.podset_names(node, "tj") == ["tj-node-0", "tj-node-1"]


@pytest.mark.parametrize(
    ("found", "met"),
    [
        ({}, {"dataset-initializer": True, "model-initializer": False, "node": False}),
        (
            {"tj-dataset-initializer-0": {"active": 1, "ready": 1}},  # ready is not Complete
            {"dataset-initializer": True, "model-initializer": False, "node": False},
        ),
        (
            {"tj-dataset-initializer-0": {"complete": True}},
            {"dataset-initializer": True, "model-initializer": True, "node": False},
        ),
        (
            {
                "tj-dataset-initializer-0": {"complete": True},
                "tj-model-initializer-0": {"complete": True},
            },
            {"dataset-initializer": True, "model-initializer": True, "node": True},
        ),
    ],
)
def test_a_podset_starts_once_what_it_depends_on_is_complete(
    found: dict[str, dict[str, Any]], met: dict[str, bool]
) -> None:
    info = info_for(make_trainjob(runtimeRef={"name": "torch-with-init"}), initializer_runtime())
    have = jobs(*(job(name, **state) for name, state in found.items()))
    assert {ps.name: status.dependencies_met(ps, info, have) for ps in info.pod_sets} == met


def test_a_ready_dependency_is_met_by_ready_jobs() -> None:
    ready_launcher = [{"name": "launcher", "status": "Ready"}]
    runtime = edit(mpi_runtime()).replicated_job("node", dependsOn=ready_launcher).obj()
    info = info_for(make_trainjob(runtimeRef={"name": "mpi-runtime"}), runtime)
    node = info.pod_set("node")
    assert not status.dependencies_met(node, info, jobs(job("tj-launcher-0", active=1)))
    ready = jobs(job("tj-launcher-0", active=1, ready=1))
    assert status.dependencies_met(node, info, ready)


def test_running_jobs_short_of_pods_are_named() -> None:
    found = jobs(
        job("a", active=1, parallelism=2),  # one pod missing
        job("b", active=2, parallelism=2),
        job("c", active=0, parallelism=1, suspend=True),  # suspended: none wanted
        job("d", complete=True, parallelism=3),
    )
    assert status.jobs_short_of_pods(found) == ["a"]


def created_event(message: str, last: str, uid: str = "uid-j") -> FailedCreateView:
    return FailedCreateView({"job": {"name": "j", "uid": uid}, "message": message, "last": last})


def test_a_create_failure_is_the_last_said_about_this_job_since_it_started() -> None:
    body = edit(job("j", created="2026-11-22T12:00:00Z")).uid("uid-j").obj()
    view = JobView(body)
    events = [
        created_event("quota", "2026-11-22T12:00:05Z"),
        created_event("forbidden", "2026-11-22T12:00:09Z"),
        created_event("before it was made", "2026-11-22T11:00:00Z"),
        created_event("another job of the name", "2026-11-22T12:00:30Z", uid="uid-old"),
    ]
    assert status.create_failure(view, events) == "forbidden"
    assert status.create_failure(view, events[2:]) is None
    edit(body).status(startTime="2026-11-22T12:00:10Z")  # resumed since: those are old
    assert status.create_failure(JobView(body), events) is None


def test_pods_done_count_toward_what_a_job_wants() -> None:
    # one ran to its end, one runs: none missing
    half = edit(job("h", active=1, parallelism=2)).status(succeeded=1).obj()
    assert status.jobs_short_of_pods(jobs(half)) == []


def test_a_create_failure_event_that_names_no_uid_is_this_jobs() -> None:
    body = edit(job("j", created="2026-11-22T12:00:00Z")).uid("uid-j").obj()
    at_start = created_event("quota at the very start", "2026-11-22T12:00:00Z", uid="")
    assert status.create_failure(JobView(body), [at_start]) == "quota at the very start"


def test_a_ready_dependency_with_no_jobs_yet_is_not_met() -> None:
    ready_launcher = [{"name": "launcher", "status": "Ready"}]
    runtime = edit(mpi_runtime()).replicated_job("node", dependsOn=ready_launcher).obj()
    info = info_for(make_trainjob(runtimeRef={"name": "mpi-runtime"}), runtime)
    assert not status.dependencies_met(info.pod_set("node"), info, {})
