"""The worker controller's passes over a runtime's failurePolicy (what the policy decides:
tests/unit/trainjob/runtime/test_failure.py): a failed Job restarts the TrainJob's Jobs (the
count written first, the old Jobs deleted, the new made once the old are gone), until
maxRestarts, then fails it with JobSet's reason."""

from __future__ import annotations

from typing import Any

import pytest

from kubebase.events import Event
from tests.support.builders import (
    NULL,
    edit,
    initializer_runtime,
    make_runtime,
    make_trainjob,
    mpi_runtime,
)
from tests.support.worker_plans import (
    EXIT_1,
    KILLED,
    OUR_SERVICE,
    as_made,
    conditions,
    job,
    observe,
    reported,
    suspend_patch,
)
from trainjob_api import constants as c
from worker_controller import digests

Dict = dict[str, Any]


# ---- the worker controller's passes --------------------------------------------------------


def runtime_with(policy: Dict) -> Dict:
    return edit(make_runtime()).template_spec(failurePolicy=policy).obj()


def trainjob(restarts: int = 0, counted: int | None = None) -> Dict:
    tj = make_trainjob()
    if restarts:
        counts_toward_max = restarts if counted is None else counted
        edit(tj).status(restarts=restarts, restartsCountTowardsMax=counts_toward_max)
    return tj


def of_attempt(body: Dict, attempt: int, uid: str = "") -> Dict:
    labels = {
        "jobset.sigs.k8s.io/restart-attempt": str(attempt),
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
    }
    return edit(body).labels(labels).uid(uid or f"uid-{attempt}").obj()


def test_a_failed_job_under_max_restarts_writes_the_restart_first() -> None:
    runtime = runtime_with({"maxRestarts": 1})
    plan = observe(
        trainjob(),
        runtime,
        jobs=[of_attempt(job("tj-node-0", failed="BackoffLimitExceeded"), 0)],
        services=[OUR_SERVICE],
    )
    assert plan.status is not None
    assert (plan.status["restarts"], plan.status["restartsCountTowardsMax"]) == (1, 1)
    assert "Failed" not in conditions(plan)
    assert plan.delete == [] and plan.create == []  # the Jobs go once the count is written
    [event] = [e for e in plan.events if e.reason == "RestartJobSetFailurePolicyAction"]
    assert event.type == "Warning" and "(first failed job: tj-node-0)" in event.message


def test_the_next_pass_deletes_the_old_jobs_then_makes_them_again() -> None:
    runtime = runtime_with({"maxRestarts": 1})
    old = of_attempt(job("tj-node-0", failed="BackoffLimitExceeded"), 0)
    going = observe(trainjob(1), runtime, jobs=[old], services=[OUR_SERVICE])
    assert going.delete == [("tj-node-0", "uid-0")]
    assert going.create == []  # its name is held until the old Job is gone
    assert going.status is None or "Failed" not in conditions(going)
    edit(old).deleting("2026-11-29T10:00:00Z")
    waiting = observe(trainjob(1), runtime, jobs=[old], services=[OUR_SERVICE])
    assert waiting.delete == [] and waiting.create == []  # deleting already: asked once
    made = observe(trainjob(1), runtime, jobs=[], services=[OUR_SERVICE])
    [new] = [o for o in made.create if o["kind"] == "Job"]
    assert new["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"
    assert (
        new["spec"]["template"]["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"
    )


def test_restarts_used_up_fail_the_trainjob_with_jobsets_reason() -> None:
    runtime = runtime_with({"maxRestarts": 1})
    plan = observe(
        trainjob(1),
        runtime,
        jobs=[of_attempt(job("tj-node-0", failed="BackoffLimitExceeded"), 1)],
        services=[OUR_SERVICE],
    )
    assert conditions(plan)["Failed"] == ("True", "ReachedMaxRestarts")
    assert plan.status is not None and plan.status["restarts"] == 1
    failed_condition = next(c for c in plan.status["conditions"] if c["type"] == "Failed")
    assert "BackoffLimitExceeded" in failed_condition["message"]


def test_a_fail_fast_rule_on_a_named_reason_fails_at_once() -> None:
    runtime = runtime_with(
        {
            "maxRestarts": 5,
            "rules": [
                {
                    "name": "deadline",
                    "action": "FailJobSet",
                    "onJobFailureReasons": ["DeadlineExceeded"],
                }
            ],
        }
    )
    deadline = of_attempt(job("tj-node-0", failed="DeadlineExceeded"), 0)
    plan = observe(trainjob(), runtime, jobs=[deadline], services=[OUR_SERVICE])
    assert conditions(plan)["Failed"] == ("True", "FailJobSetFailurePolicyAction")
    assert plan.status is not None and "restarts" not in plan.status
    other = of_attempt(job("tj-node-0", failed="BackoffLimitExceeded"), 0)
    restarted = observe(trainjob(), runtime, jobs=[other], services=[OUR_SERVICE])
    assert restarted.status is not None and restarted.status["restarts"] == 1


def test_blocking_recreate_makes_no_job_while_an_old_one_remains() -> None:
    two_nodes = make_trainjob()
    edit(two_nodes).spec(trainer={"numNodes": 1})
    runtime = runtime_with({"maxRestarts": 1, "restartStrategy": "BlockingRecreate"})
    other = {
        "name": "other",
        "template": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}},
    }
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    edit(runtime).template_spec(replicatedJobs=[*jobs, other])
    old = of_attempt(job("tj-other-0"), 0)
    edit(old).label("jobset.sigs.k8s.io/replicatedjob-name", "other").deleting(
        "2026-11-29T10:00:00Z"
    )
    blocked = observe(trainjob(1), runtime, jobs=[old], services=[OUR_SERVICE])
    assert [o for o in blocked.create if o["kind"] == "Job"] == []
    recreate = runtime_with({"maxRestarts": 1})
    edit(recreate).template_spec(
        replicatedJobs=runtime["spec"]["template"]["spec"]["replicatedJobs"]
    )
    made = observe(trainjob(1), recreate, jobs=[old], services=[OUR_SERVICE])
    assert [o["metadata"]["name"] for o in made.create if o["kind"] == "Job"] == ["tj-node-0"]


def test_jobs_of_a_later_attempt_than_the_status_fail_rather_than_restart_again() -> None:
    runtime = runtime_with({"maxRestarts": 3})
    plan = observe(
        trainjob(),  # the status lost its count (a CRD that prunes it)
        runtime,
        jobs=[of_attempt(job("tj-node-0", failed="BackoffLimitExceeded"), 2)],
        services=[OUR_SERVICE],
    )
    assert conditions(plan)["Failed"] == ("True", "RestartsLost")


def test_without_a_failure_policy_a_failed_job_fails_the_trainjob_as_before() -> None:
    plan = observe(
        trainjob(),
        make_runtime(),
        jobs=[of_attempt(job("tj-node-0", failed="BackoffLimitExceeded"), 0)],
        services=[OUR_SERVICE],
    )
    assert conditions(plan)["Failed"] == ("True", "FailedJobs")
    assert plan.status is not None and "restarts" not in plan.status


def test_each_restart_adds_to_the_counts_and_one_that_ignores_max_restarts_only_to_restarts() -> (
    None
):
    """restarts counts every restart; restartsCountTowardsMax only those that count (JobSet's
    RestartJobSetAndIgnoreMaxRestarts does not), from what the status held before."""
    counting = runtime_with({"maxRestarts": 5})
    ignoring = runtime_with(
        {
            "maxRestarts": 5,
            "rules": [{"action": "RestartJobSetAndIgnoreMaxRestarts"}],
        }
    )
    for runtime, want in ((counting, (3, 3)), (ignoring, (3, 2))):
        plan = observe(
            trainjob(restarts=2, counted=2),
            runtime,
            jobs=[of_attempt(job("tj-node-0", failed="BackoffLimitExceeded"), 2)],
            services=[OUR_SERVICE],
        )
        assert plan.status is not None
        assert (plan.status["restarts"], plan.status["restartsCountTowardsMax"]) == want


@pytest.mark.parametrize(
    ("targets", "label", "failed_now"),
    [(["node"], "node", True), (["initializer"], "node", False), (["node"], "initializer", False)],
)
def test_a_rule_for_a_replicated_job_reads_which_one_from_the_jobs_label(
    targets: list[str], label: str, failed_now: bool
) -> None:
    """The failed Job's replicated job is its label's, not its name's (`tj-node-0` labelled
    `initializer` is the initializer's)."""
    runtime = runtime_with(
        {"maxRestarts": 5, "rules": [{"action": "FailJobSet", "targetReplicatedJobs": targets}]}
    )
    failed = of_attempt(job("tj-node-0", failed="BackoffLimitExceeded"), 0)
    edit(failed).label("jobset.sigs.k8s.io/replicatedjob-name", label)
    plan = observe(trainjob(), runtime, jobs=[failed], services=[OUR_SERVICE])
    assert ("Failed" in conditions(plan)) == failed_now, conditions(plan)


# ---- what the TrainJob says when its failurePolicy decides, and what it stops ---------------

BACKOFF = "Job has reached the specified backoff limit"
MAX_RESTARTS = "jobset failed due to reaching max number of restarts"
FAIL_ACTION = "applying FailJobSet failure policy action"


def mpi_with(policy: Dict | None) -> Dict:
    """A launcher and its nodes, each a PodSet of its own, under `policy` (None: null)."""
    return edit(mpi_runtime()).template_spec(failurePolicy=NULL if policy is None else policy).obj()


def said_failed(reason: str, message: str) -> Dict:
    return {
        "type": "Failed",
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-22T12:00:00Z",
        "observedGeneration": 1,
    }


@pytest.mark.parametrize(
    ("policy", "launcher", "node", "reason", "message"),
    [
        pytest.param(
            {"maxRestarts": 1},
            {},
            {"reason": "BackoffLimitExceeded", "message": BACKOFF},
            "ReachedMaxRestarts",
            f"{MAX_RESTARTS} (first failed job: tj-node-0); BackoffLimitExceeded: {BACKOFF}",
            id="restarts-used-up",
        ),
        pytest.param(
            {
                "maxRestarts": 5,
                "rules": [
                    {"action": "FailJobSet", "onJobFailureMessagePatterns": ["backoff limit$"]}
                ],
            },
            {},
            {"reason": "BackoffLimitExceeded", "message": BACKOFF},
            "FailJobSetFailurePolicyAction",
            f"{FAIL_ACTION} (first failed job: tj-node-0); BackoffLimitExceeded: {BACKOFF}",
            id="a-rule-on-the-jobs-message",
        ),
        pytest.param(  # a Failed condition without a reason: only its message is quoted
            {"maxRestarts": 1},
            {},
            {"message": BACKOFF},
            "ReachedMaxRestarts",
            f"{MAX_RESTARTS} (first failed job: tj-node-0); {BACKOFF}",
            id="no-reason",
        ),
        pytest.param(  # nor a message: only its reason
            {"maxRestarts": 1},
            {},
            {"reason": "DeadlineExceeded"},
            "ReachedMaxRestarts",
            f"{MAX_RESTARTS} (first failed job: tj-node-0); DeadlineExceeded",
            id="no-message",
        ),
        pytest.param(  # the earliest failure is named, whichever PodSet comes first
            {"maxRestarts": 1},
            {"reason": "BackoffLimitExceeded", "lastTransitionTime": "2026-11-22T11:59:30Z"},
            {"reason": "DeadlineExceeded", "lastTransitionTime": "2026-11-22T11:59:10Z"},
            "ReachedMaxRestarts",
            f"{MAX_RESTARTS} (first failed job: tj-node-0); DeadlineExceeded",
            id="earliest-failure-named",
        ),
        pytest.param(  # a failure of no known time counts as the earliest (as JobSet's zero time)
            {"maxRestarts": 1},
            {"reason": "DeadlineExceeded", "lastTransitionTime": "2026-11-22T11:59:10Z"},
            {"reason": "BackoffLimitExceeded"},
            "ReachedMaxRestarts",
            f"{MAX_RESTARTS} (first failed job: tj-node-0); BackoffLimitExceeded",
            id="failure-of-no-known-time-first",
        ),
    ],
)
def test_a_failure_the_policy_does_not_restart_fails_the_trainjob_saying_why(
    policy: Dict, launcher: Dict, node: Dict, reason: str, message: str
) -> None:
    """On the TrainJob's last allowed attempt: JobSet's reason, the Job that decided it and
    what it said (no pod is watched here to say more); a Warning says the same, and a Job
    that still runs is suspended as it was made."""
    runtime = mpi_with(policy)
    tj = make_trainjob(runtimeRef={"name": "mpi-runtime"})
    edit(tj).status(restarts=1, restartsCountTowardsMax=1)
    made_launcher, made_node = as_made(tj, runtime)
    first = reported(made_launcher, "failed", **launcher) if launcher else None
    jobs = [first or reported(made_launcher, "running"), reported(made_node, "failed", **node)]
    plan = observe(tj, runtime, jobs=jobs, services=[OUR_SERVICE])
    assert plan.status is not None
    assert plan.status["conditions"] == [said_failed(reason, message)]
    assert (plan.status["restarts"], plan.status["restartsCountTowardsMax"]) == (1, 1)
    assert plan.events == [Event("Warning", reason, message)]
    assert plan.patch == ([] if launcher else [suspend_patch(made_launcher)])


def test_jobs_of_a_later_attempt_are_named_in_the_failure_and_the_running_ones_suspended() -> None:
    runtime = initializer_runtime()
    edit(runtime).template_spec(failurePolicy={"maxRestarts": 3})
    tj = make_trainjob(runtimeRef={"name": "torch-with-init"})
    jobs = [
        of_attempt(job("tj-dataset-initializer-0", complete=True), 2),
        of_attempt(job("tj-model-initializer-0", active=1), 2),
    ]
    plan = observe(tj, runtime, jobs=jobs, services=[OUR_SERVICE])
    message = (
        "Jobs tj-dataset-initializer-0, tj-model-initializer-0 were made for restart 1 or "
        "later, but status.restarts does not say so: the TrainJob CRD may not be this "
        "product's (kubectl apply --server-side -k crds/); not restarted again"
    )
    assert plan.status is not None
    assert plan.status["conditions"] == [said_failed("RestartsLost", message)]
    assert plan.events == [Event("Warning", "RestartsLost", message)]
    # suspended by a write of spec.suspend alone: nothing of restart 1 reaches the Job of 2
    assert [(o["metadata"]["name"], o["spec"]) for o in plan.patch] == [
        ("tj-model-initializer-0", {"suspend": True})
    ]
    assert plan.create == [] and plan.delete == []


def pod_of(podset: str, name: str, state: Dict) -> Dict:
    """A failed pod of `podset`, its one container named as the PodSet, in `state`."""
    labels = {c.TRAINJOB_NAME_LABEL: "tj", c.REPLICATED_JOB_NAME_LABEL: podset}
    return digests.pod_digest(
        {
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "status": {
                "phase": "Failed",
                "containerStatuses": [{"name": podset, "state": state}],
            },
        }
    )


NODE_SAID = "; pod tj-node-0-0-b container node exited with code 1 (Error): bad input file"


def failed_node(policy: Dict | None) -> Any:
    """An MPI TrainJob whose launcher runs and whose node Job failed: the launcher's pod was
    killed after (exit 137, the first PodSet's), the node's exited 1 saying why."""
    runtime = mpi_with(policy)
    tj = make_trainjob(runtimeRef={"name": "mpi-runtime"})
    launcher, node = as_made(tj, runtime)
    jobs = [reported(launcher, "running"), reported(node, "failed", reason="BackoffLimitExceeded")]
    pods = [
        pod_of("launcher", "tj-launcher-0-0-a", KILLED),
        pod_of("node", "tj-node-0-0-b", EXIT_1),
    ]
    return observe(tj, runtime, jobs=jobs, services=[OUR_SERVICE], pods=pods)


def test_a_failure_says_what_the_pods_of_the_job_that_decided_it_said() -> None:
    """The pod words are the failed Job's PodSet's (the node's), not the first PodSet's, on
    the Failed condition and on a restart's Warning alike."""
    plan = failed_node(None)
    (failed,) = [x for x in plan.status["conditions"] if x["type"] == "Failed"]
    assert failed["reason"] == "FailedJobs" and failed["message"].endswith(NODE_SAID), failed
    assert "(first failed job: tj-node-0)" in failed["message"]
    plan = failed_node({"maxRestarts": 2})
    (event,) = plan.events
    assert event.reason == "RestartJobSetFailurePolicyAction", plan.events
    assert event.message.endswith(NODE_SAID), event.message
