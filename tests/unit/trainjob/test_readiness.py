"""PodsReady and reclaimablePods of a TrainJob's Workload: Kueue's rules, and the queue plan."""

from __future__ import annotations

import datetime as dt
from typing import Any

from tests.support.builders import edit, initializer_runtime, make_runtime, make_trainjob
from trainjob import jobframework, readiness
from trainjob import workload as wlmod
from trainjob.models import parse_runtime, parse_trainjob
from trainjob.runtime import RuntimeInfo, build_runtime_info, resolve_runtime_info
from trainjob_api.views import RuntimeView, WorkloadView, replicated_job_statuses

Dict = dict[str, Any]
NOW = dt.datetime(2026, 11, 23, 12, 0, 0, tzinfo=dt.UTC)
EARLIER = "2026-11-23T11:00:00Z"


def info_for(trainjob: Dict, runtime: Dict) -> RuntimeInfo:
    spec = runtime["spec"]["template"].get("spec", {})
    return build_runtime_info(parse_trainjob(trainjob), parse_runtime(runtime), spec)


def js(name: str, ready: int = 0, succeeded: int = 0) -> Dict:
    return {"name": name, "ready": ready, "succeeded": succeeded, "failed": 0, "active": ready}


def ready(pod_sets: Any, *entries: Dict) -> bool:
    return readiness.all_pods_ready(pod_sets, replicated_job_statuses(list(entries)))


def cond(ctype: str, status: bool, reason: str, when: str = EARLIER) -> Dict:
    return {
        "type": ctype,
        "status": "True" if status else "False",
        "reason": reason,
        "message": "",
        "lastTransitionTime": when,
    }


def workload(*conditions: Dict, podsets: list[tuple[str, int]], **status: Any) -> Dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns", "generation": 1, "ownerReferences": []},
        "spec": {"queueName": "q", "podSets": [{"name": n, "count": c} for n, c in podsets]},
        "status": {"conditions": list(conditions), **status},
    }


ADMITTED = (cond("QuotaReserved", True, "QuotaReserved"), cond("Admitted", True, "Admitted"))


def pods_ready(wl: Dict, ready: bool) -> tuple[bool, str, str]:
    return readiness.compute_pods_ready(WorkloadView(wl), ready)


def reclaimable(shape: Any, jobs_status: list[Dict], wl: Dict) -> list[Dict]:
    statuses = replicated_job_statuses(jobs_status)
    return readiness.compute_reclaimable_pods(shape, statuses, WorkloadView(wl))


# ---- the pure rules --------------------------------------------------------------------------


def test_all_pods_ready_counts_child_jobs_ready_or_succeeded_across_every_podset() -> None:
    runtime = initializer_runtime()
    info = info_for(make_trainjob(runtimeRef={"name": runtime["metadata"]["name"]}), runtime)
    names = [ps.name for ps in info.pod_sets]
    assert names == ["dataset-initializer", "model-initializer", "node"]
    done_inits = [js("dataset-initializer", succeeded=1), js("model-initializer", succeeded=1)]
    assert ready(info.shape, *done_inits, js("node", ready=1))
    assert not ready(info.shape, *done_inits)  # the trainer Job is not there yet
    assert not ready(info.shape, *done_inits, js("node"))
    assert not ready(info.shape)


def test_a_jobs_status_is_read_as_counts_whatever_its_shape_the_last_entry_of_a_name_winning() -> (
    None
):
    shape = info_for(make_trainjob(), make_runtime()).shape
    assert ready(shape, {"name": "node", "ready": "1"})
    assert not ready(shape, {"name": "node", "ready": "x", "succeeded": -1})
    assert ready(shape, {"name": "node", "ready": 0}, {"name": "node", "ready": 1})
    assert not ready(shape, {"name": "node", "ready": 1}, {"name": "node", "ready": 0})
    # the Workload's reclaimablePods likewise: a count that is none reads as 0
    for count in (None, "x", [2], -1, "-1", float("inf")):
        kept = workload(podsets=[("node", 1)], reclaimablePods=[{"name": "node", "count": count}])
        assert not readiness.reclaimable_changed(WorkloadView(kept), [{"name": "node", "count": 0}])


def test_pods_ready_state_machine_follows_kueue() -> None:
    admitted = workload(*ADMITTED, podsets=[("node", 1)])
    waiting = workload(podsets=[("node", 1)])
    assert pods_ready(waiting, True) == (
        False,
        "WaitForStart",
        "Not all pods are ready or succeeded",
    )
    assert pods_ready(admitted, False)[:2] == (
        False,
        "WaitForStart",
    )
    assert pods_ready(admitted, True)[:2] == (True, "Started")
    started = workload(*ADMITTED, cond("PodsReady", True, "Started"), podsets=[("node", 1)])
    assert pods_ready(started, False) == (
        False,
        "WaitForRecovery",
        "At least one pod has failed, waiting for recovery",
    )
    recovering = workload(
        *ADMITTED, cond("PodsReady", False, "WaitForRecovery"), podsets=[("node", 1)]
    )
    assert pods_ready(recovering, False)[:2] == (
        False,
        "WaitForRecovery",
    )
    assert pods_ready(recovering, True)[:2] == (True, "Recovered")
    recovered = workload(*ADMITTED, cond("PodsReady", True, "Recovered"), podsets=[("node", 1)])
    assert pods_ready(recovered, True)[:2] == (True, "Recovered")
    assert pods_ready(recovered, False)[:2] == (
        False,
        "WaitForRecovery",
    )


def test_reclaimable_pods_are_the_pods_of_succeeded_child_jobs_capped_by_the_podset() -> None:
    runtime = make_runtime(
        "two",
        ml_policy={"numNodes": 3, "torch": {}},
        replicated_jobs=[
            {
                "name": "init",
                "replicas": 2,
                "template": {
                    "spec": {
                        "parallelism": 2,
                        "completions": 2,
                        "template": {"spec": {"containers": [{"name": "i", "image": "i"}]}},
                    }
                },
            },
            *make_runtime()["spec"]["template"]["spec"]["replicatedJobs"],
        ],
    )
    info = info_for(make_trainjob(runtimeRef={"name": "two"}), runtime)
    assert [(ps.name, ps.replicas, ps.count) for ps in info.pod_sets] == [
        ("init", 2, 4),
        ("node", 1, 3),
    ]
    wl = workload(*ADMITTED, podsets=[("init", 4), ("node", 3)])
    assert reclaimable(info.shape, [js("init", succeeded=1)], wl) == [{"name": "init", "count": 2}]
    both = [js("init", succeeded=2), js("node", ready=1)]
    assert reclaimable(info.shape, both, wl) == [{"name": "init", "count": 4}]
    smaller = workload(*ADMITTED, podsets=[("init", 3), ("node", 3)])
    assert reclaimable(info.shape, both, smaller) == [{"name": "init", "count": 3}]
    assert reclaimable(info.shape, [js("node", ready=1)], wl) == []


# ---- in the Kueue integration's plan ----------------------------------------------------------


RUNTIME = make_runtime("torch", kind="TrainingRuntime", namespace="ns")


def plan_for(wl: Dict, status: Dict | None = None, *, suspend: bool = False) -> Any:
    body = make_trainjob(runtimeRef={"name": "torch", "kind": "TrainingRuntime"}, suspend=suspend)
    edit(body).labels({"kueue.x-k8s.io/queue-name": "q"}).status(status or {})
    edit(wl).owners({"uid": body["metadata"]["uid"]})
    return jobframework.reconcile_queueing(observed(body, RUNTIME, wl))


def observed(body: Dict, runtime: Dict, wl: Dict) -> jobframework.QueueObserved:
    """The integration's view of `body`, its Workload's PodSets holding the pod templates made
    from `body` (the counts as the test gives them)."""
    tj = parse_trainjob(body)
    info = resolve_runtime_info(tj, RuntimeView(runtime))[0]
    assert info is not None
    for built, given in zip(wlmod.build_pod_sets(info), wl["spec"]["podSets"], strict=False):
        given.setdefault("template", built["template"])
    return jobframework.observe(tj, RuntimeView(runtime), WorkloadView(wl), {}, None, False, NOW)


def test_new_workload_gets_pods_ready_false_wait_for_start_once() -> None:
    plan = plan_for(workload(podsets=[("node", 1)]), suspend=True)
    assert plan.workload_readiness == {
        "conditions": [
            {
                "type": "PodsReady",
                "status": "False",
                "reason": "WaitForStart",
                "message": "Not all pods are ready or succeeded",
                "lastTransitionTime": "2026-11-23T12:00:00Z",
                "observedGeneration": 1,
            }
        ]
    }
    written = workload(cond("PodsReady", False, "WaitForStart"), podsets=[("node", 1)])
    assert plan_for(written, suspend=True).workload_readiness is None


def test_running_trainjob_turns_pods_ready_true_from_its_jobs_status() -> None:
    wl = workload(*ADMITTED, cond("PodsReady", False, "WaitForStart"), podsets=[("node", 1)])
    plan = plan_for(wl, {"jobsStatus": [js("node", ready=1)]})
    assert plan.workload_readiness is not None
    (pods_ready,) = plan.workload_readiness["conditions"]
    assert (pods_ready["status"], pods_ready["reason"]) == ("True", "Started")
    assert pods_ready["lastTransitionTime"] == "2026-11-23T12:00:00Z"
    assert plan.trainjob_patch is None and plan.workload_status is None


def test_manager_counts_only_the_status_of_the_cluster_the_workload_runs_on() -> None:
    stale = {"clusterName": "worker1", "jobsStatus": [js("node", ready=1)]}
    wl = workload(*ADMITTED, cond("PodsReady", False, "WaitForStart"), podsets=[("node", 1)])
    edit(wl).status(clusterName="worker2")
    assert plan_for(wl, stale).workload_readiness is None  # still WaitForStart
    edit(wl).status(clusterName="worker1")
    plan = plan_for(wl, stale)
    assert plan.workload_readiness["conditions"][0]["reason"] == "Started"


def test_reclaimable_pods_travel_with_pods_ready_in_one_apply() -> None:
    initializers = initializer_runtime()["spec"]["template"]["spec"]["replicatedJobs"]
    runtime = make_runtime(
        "torch", kind="TrainingRuntime", namespace="ns", replicated_jobs=initializers
    )
    wl = workload(
        *ADMITTED,
        cond("PodsReady", False, "WaitForStart"),
        podsets=[("dataset-initializer", 1), ("model-initializer", 1), ("node", 1)],
    )
    body = make_trainjob(runtimeRef={"name": "torch", "kind": "TrainingRuntime"})
    edit(body).labels({"kueue.x-k8s.io/queue-name": "q"}).status(
        {"jobsStatus": [js("dataset-initializer", succeeded=1)]}
    )
    edit(wl).owners({"uid": body["metadata"]["uid"]})
    plan = jobframework.reconcile_queueing(observed(body, runtime, wl))
    assert plan.workload_readiness == {
        "conditions": [cond("PodsReady", False, "WaitForStart") | {"message": ""}],
        "reclaimablePods": [{"name": "dataset-initializer", "count": 1}],
    }


def test_eviction_resets_pods_ready_in_the_same_write_as_the_quota() -> None:
    wl = workload(
        *ADMITTED,
        cond("PodsReady", True, "Started"),
        cond("Evicted", True, "PodsReadyTimeout"),
        podsets=[("node", 1)],
    )
    plan = plan_for(wl, {"jobsStatus": [js("node")]}, suspend=True)
    assert plan.workload_readiness is None
    assert plan.workload_status is not None
    got = {c["type"]: (c["status"], c["reason"]) for c in plan.workload_status["conditions"]}
    assert got["PodsReady"] == ("False", "WaitForStart")
    assert got["QuotaReserved"] == ("False", "Pending")
    # Kueue requeues after PodsReadyTimeout only once the backoff is over.
    assert got["Requeued"] == ("False", "PodsReadyTimeout")
    assert plan.workload_status["admission"] is None


def test_finished_trainjob_leaves_pods_ready_alone() -> None:
    wl = workload(*ADMITTED, cond("PodsReady", True, "Started"), podsets=[("node", 1)])
    done = {"conditions": [cond("Complete", True, "AllJobsCompleted")], "jobsStatus": [js("node")]}
    plan = plan_for(wl, done)
    assert plan.workload_readiness is None
    assert plan.workload_status is not None  # Finished, nothing else
    assert [c["type"] for c in plan.workload_status["conditions"]][-1] == "Finished"


def test_a_blocked_start_keeps_an_admitted_trainjob_suspended() -> None:
    body = make_trainjob(runtimeRef={"name": "torch", "kind": "TrainingRuntime"}, suspend=True)
    edit(body).labels({"kueue.x-k8s.io/queue-name": "q"})
    wl = workload(*ADMITTED, cond("PodsReady", False, "WaitForStart"), podsets=[("node", 1)])
    edit(wl).owners({"uid": body["metadata"]["uid"]})
    obs = observed(body, RUNTIME, wl)
    assert jobframework.reconcile_queueing(obs).trainjob_patch is not None  # starts
    obs.start_blocked = "admitted without the MultiKueue check"
    assert jobframework.reconcile_queueing(obs).trainjob_patch is None


def test_pods_ready_is_written_again_when_its_reason_alone_changes() -> None:
    waiting = WorkloadView(
        workload(cond("PodsReady", False, "WaitForStart"), podsets=[("node", 1)])
    )
    assert readiness.pods_ready_changed(waiting, False, "WaitForRecovery")
    assert not readiness.pods_ready_changed(waiting, False, "WaitForStart")
    started = WorkloadView(workload(cond("PodsReady", True, "Started"), podsets=[("node", 1)]))
    assert readiness.pods_ready_changed(started, True, "Recovered")
    assert readiness.pods_ready_changed(started, False, "Started")


def test_a_jobs_status_that_is_no_list_leaves_what_the_workload_says() -> None:
    wl = workload(*ADMITTED, cond("PodsReady", True, "Started"), podsets=[("node", 1)])
    assert plan_for(wl, {"jobsStatus": {"node": {"ready": 0}}}).workload_readiness is None
