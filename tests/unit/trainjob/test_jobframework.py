"""The Kueue integration both controllers run for a queued TrainJob (trainjob/jobframework.py):
its decision step by step, the Workload it builds, the placement it starts with, and the
admission webhook's changes (trainjob/admission.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from tests.support.builders import OWNER, container, edit, make_runtime, replicated_job
from tests.unit.trainjob import HIGH, RUNTIME, WL_NAME, info_of
from tests.unit.trainjob import queued_trainjob as trainjob
from trainjob import admission, jobframework, jobframework_io
from trainjob import workload as wlmod
from trainjob.jobframework import QueuePlan
from trainjob.models import parse_trainjob
from trainjob.queues import ResourceFlavorView
from trainjob_api.views import ObjectView, RuntimeView, WorkloadView

Dict = dict[str, Any]
NOW = dt.datetime(2026, 11, 23, 12, 0, 0, tzinfo=dt.UTC)
EARLIER = "2026-11-23T11:00:00Z"


def cond(ctype: str, status: bool, reason: str, message: str = "") -> Dict:
    return {
        "type": ctype,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": EARLIER,
    }


def workload_for(body: Dict, *conditions: Dict, **status: Any) -> Dict:
    """The Workload the integration built for `body`, as the API returns it."""
    wl = wlmod.build_workload(parse_trainjob(body), info_of(body), "q")
    edit(wl).resource_version("7").generation(1).status({"conditions": list(conditions), **status})
    return wl


RESERVED = cond("QuotaReserved", True, "QuotaReserved")
ADMITTED = cond("Admitted", True, "Admitted")
EVICTED = cond("Evicted", True, "Preempted", "Preempted to accommodate a higher priority")
ASSIGNED = {
    "admission": {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "node", "flavors": {"cpu": "fast"}, "count": 1}],
    }
}


def plan(
    body: Dict,
    wl: Dict | None,
    *,
    runtime: Dict | None = RUNTIME,
    jobs_active: bool = False,
    priority: wlmod.Priority | wlmod.ClassMissing | None = None,
    flavors: dict[str, Dict] | None = None,
) -> QueuePlan:
    obs = jobframework.observe(
        parse_trainjob(body),
        None if runtime is None else RuntimeView(runtime),
        None if wl is None else WorkloadView(wl),
        {name: ResourceFlavorView(f) for name, f in (flavors or {}).items()},
        priority,
        jobs_active,
        NOW,
    )
    return jobframework.reconcile_queueing(obs)


def reasons(p: QueuePlan) -> list[str]:
    return [e.reason for e in p.events]


# ---- the decision, step by step --------------------------------------------------------------


def test_1_a_trainjob_without_a_queue_is_not_kueues() -> None:
    assert plan(trainjob(queue=None, suspend=False), None) == QueuePlan()


def test_2_finished_marks_the_workload_finished_once_guarded_by_its_version() -> None:
    body = trainjob(suspend=False)
    edit(body).status({"conditions": [cond("Complete", True, "AllJobsCompleted", "all done")]})
    wl = workload_for(body, RESERVED, ADMITTED, **ASSIGNED)
    p = plan(body, wl)
    assert p.workload_version == "7"
    finished = next(c for c in p.workload_status["conditions"] if c["type"] == "Finished")
    assert (finished["status"], finished["reason"], finished["message"]) == (
        "True",
        "Succeeded",
        "all done",
    )
    assert reasons(p) == ["FinishedWorkload"] and p.trainjob_patch is None
    edit(wl).more_conditions(finished)
    assert plan(body, wl) == QueuePlan()  # already Finished: nothing more


def test_3_no_workload_yet_builds_one_and_keeps_the_trainjob_suspended() -> None:
    body = trainjob(suspend=False)
    p = plan(body, None, priority=HIGH)
    assert p.create_workload == wlmod.build_workload(parse_trainjob(body), info_of(body), "q", HIGH)
    assert p.trainjob_patch == {"spec": {"suspend": True}}
    missing = plan(trainjob(), None, runtime=None)  # no runtime: nothing to build yet
    assert missing.create_workload is None and missing.trainjob_patch is None
    prebuilt = trainjob()
    edit(prebuilt).labels({"kueue.x-k8s.io/prebuilt-workload-name": "given"})
    assert plan(prebuilt, None).create_workload is None  # someone else makes it


GOLD_MISSING = wlmod.ClassMissing("WorkloadPriorityClass", "gold", "metadata.labels[x]")


def test_3_a_priority_class_that_does_not_exist_makes_no_workload_and_says_so() -> None:
    """Kueue makes no Workload for a job whose priority class does not exist (one made
    without would queue at 0, above a negative default's): none is made, the TrainJob stays
    suspended, a Warning says it once (an Event of one name for this TrainJob and class), and
    the pass asks for another once the class's read has run its TTL."""
    body = trainjob(suspend=False)
    p = plan(body, None, priority=GOLD_MISSING)
    assert p.create_workload is None
    assert p.trainjob_patch == {"spec": {"suspend": True}}
    assert p.requeue_after == jobframework.CLASS_TTL
    (event,) = p.events
    assert (event.type, event.reason) == ("Warning", "ErrWorkloadCompose")
    assert "WorkloadPriorityClass 'gold' (metadata.labels[x]) not found" in event.message
    again = plan(trainjob(), None, priority=GOLD_MISSING)
    assert again.trainjob_patch is None and again.events[0].name == event.name
    other = plan(body, None, priority=wlmod.ClassMissing("PriorityClass", "gold", "pods"))
    assert event.name is not None and other.events[0].name != event.name
    assert plan(body, None, priority=HIGH).requeue_after is None


def test_the_once_name_is_per_trainjob_uid_reason_and_class() -> None:
    """An Event said once is said again for another TrainJob of the name (another UID),
    another class, or the other step's reason."""
    name = plan(trainjob(), None, priority=GOLD_MISSING).events[0].name
    again = edit(trainjob()).uid("another-uid").obj()
    assert plan(again, None, priority=GOLD_MISSING).events[0].name != name
    silver = wlmod.ClassMissing("WorkloadPriorityClass", "silver", "metadata.labels[x]")
    assert plan(trainjob(), None, priority=silver).events[0].name != name
    body = trainjob()
    five_a = plan(body, workload_for(body), priority=GOLD_MISSING).events[0].name
    assert five_a is not None and five_a != name


def test_5a_a_label_changed_to_a_missing_class_keeps_the_workloads_priority() -> None:
    body = trainjob()
    wl = workload_for(body)
    edit(wl).spec(priorityClassRef=HIGH.ref, priority=100)
    p = plan(body, wl, priority=GOLD_MISSING)
    assert p.workload_patch is None or "spec" not in p.workload_patch
    assert [(e.type, e.reason) for e in p.events] == [("Warning", "UpdatedWorkload")]
    assert "the Workload keeps its priority" in p.events[0].message


def test_4_pods_ready_waits_for_start_once_admitted() -> None:
    body = trainjob(suspend=False)
    p = plan(body, workload_for(body, RESERVED, ADMITTED, **ASSIGNED), jobs_active=True)
    assert p.workload_readiness is not None
    (pods_ready,) = p.workload_readiness["conditions"]
    assert (pods_ready["type"], pods_ready["status"], pods_ready["reason"]) == (
        "PodsReady",
        "False",
        "WaitForStart",
    )


def test_4_a_status_that_names_no_cluster_leaves_pods_ready_as_it_is() -> None:
    """On a manager Kueue's own MultiKueue ran before the switch: the TrainJob's status is its
    copy's, with no clusterName, while the Workload says where it runs. Its counts are not
    read as that run's (they name none), nor as no pod ready: PodsReady stays as it is
    until the dispatcher's first status write names the cluster."""
    body = trainjob(managedBy="kueue.x-k8s.io/multikueue", suspend=False)
    ready = cond("PodsReady", True, "Started")
    wl = workload_for(body, RESERVED, ADMITTED, ready, **ASSIGNED, clusterName="worker1")
    kueues = {"jobsStatus": [{"name": "node", "ready": 1, "active": 1}]}
    edit(body).status(kueues)
    assert plan(body, wl).workload_readiness is None
    edit(body).status({**kueues, "clusterName": "worker1"})
    assert plan(body, wl).workload_readiness is None  # ready, as it says
    edit(body).status({**kueues, "clusterName": "worker0"})  # an earlier run's: not this one's
    (pods_ready,) = (plan(body, wl).workload_readiness or {})["conditions"]
    assert (pods_ready["status"], pods_ready["reason"]) == ("False", "WaitForRecovery")
    edit(body).status({"jobsStatus": [{"name": "node", "ready": 0, "active": 1}]})
    assert plan(body, wl).workload_readiness is None
    edit(body).status(clusterName="worker1")
    (pods_ready,) = (plan(body, wl).workload_readiness or {})["conditions"]
    assert (pods_ready["status"], pods_ready["reason"]) == ("False", "WaitForRecovery")
    # a TrainJob run where it is (a worker's, or a manager's own): neither names a cluster
    local = trainjob(suspend=False)
    edit(local).status(kueues)
    here = workload_for(local, RESERVED, ADMITTED, **ASSIGNED)
    (pods_ready,) = (plan(local, here).workload_readiness or {})["conditions"]
    assert (pods_ready["status"], pods_ready["reason"]) == ("True", "Started")


def test_5_a_prebuilt_workload_is_adopted_without_taking_control() -> None:
    body = trainjob()
    edit(body).labels({"kueue.x-k8s.io/prebuilt-workload-name": WL_NAME})
    wl = workload_for(body)
    edit(wl).owners()
    p = plan(body, wl)
    assert p.workload_patch == {"metadata": {"ownerReferences": [{**OWNER, "controller": False}]}}
    assert p.workload_version == "7"


def test_6_a_pending_workload_follows_the_trainjob_queue_and_pod_sets() -> None:
    body = trainjob()
    wl = workload_for(body)
    moved = trainjob(queue="other")
    p = plan(moved, wl)
    assert p.workload_patch == {"spec": {"queueName": "other"}}
    assert reasons(p) == ["UpdatedWorkload"]
    bigger = trainjob(trainer={"numNodes": 4})
    p = plan(bigger, wl)
    assert p.delete_workload == WL_NAME and reasons(p) == ["DeletedWorkload"]
    assert p.workload_readiness is None


def bigger_pods(**more: Any) -> Dict:
    """The TrainJob, its pods asking for more than its Workload was made with."""
    return trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "8"}}}, **more)


def test_6_a_pending_workload_is_rebuilt_when_its_pods_ask_for_more_or_less() -> None:
    wl = workload_for(trainjob())
    edit(wl).uid("wl-uid")
    p = plan(bigger_pods(), wl)
    assert p.delete_workload == WL_NAME and reasons(p) == ["DeletedWorkload"]
    assert p.delete_workload_uid == "wl-uid"  # that one only, never one made since
    wl = workload_for(bigger_pods())
    assert plan(trainjob(), wl).delete_workload == WL_NAME


def test_6b_quota_taken_for_smaller_pods_never_starts_bigger_ones() -> None:
    # Changed (the TrainJob, or its runtime) once Kueue had taken quota for what it was: the
    # Workload goes, so that one made from the TrainJob as it is now queues for what it needs.
    for given in (RESERVED,), (RESERVED, ADMITTED):
        wl = workload_for(trainjob(), *given, **ASSIGNED)
        edit(wl).uid("wl-uid")
        p = plan(bigger_pods(), wl)
        assert p.delete_workload == WL_NAME and reasons(p) == ["DeletedWorkload"]
        assert p.delete_workload_uid == "wl-uid"
        assert p.trainjob_patch is None  # suspended it stays: never started
        assert p.workload_version == "7" and p.workload_readiness is None
    # Running: stopped as well, in the same pass.
    wl = workload_for(trainjob(), RESERVED, ADMITTED, **ASSIGNED)
    p = plan(bigger_pods(suspend=False), wl, jobs_active=True)
    assert p.trainjob_patch == {"spec": {"suspend": True}}
    assert p.delete_workload == WL_NAME and reasons(p) == ["Stopped", "DeletedWorkload"]
    assert "No matching Workload" in p.events[0].message
    # More pods the same way.
    p = plan(trainjob(suspend=False, trainer={"numNodes": 3}), wl, jobs_active=True)
    assert p.delete_workload == WL_NAME and p.trainjob_patch == {"spec": {"suspend": True}}


def test_6b_the_same_quota_written_another_way_is_the_same_workload() -> None:
    # "1" is "1000m", and a limit stands for a request not given, as for a pod.
    limits = trainjob(trainer={"resourcesPerNode": {"limits": {"cpu": "2", "memory": "1Gi"}}})
    both = {
        "requests": {"cpu": "2000m", "memory": 1073741824},
        "limits": {"cpu": 2, "memory": "1Gi"},
    }
    wl = workload_for(limits, RESERVED, ADMITTED, **ASSIGNED)
    spec = wl["spec"]["podSets"][0]["template"]["spec"]
    spec["containers"][0]["resources"] = both
    p = plan(limits, wl)
    assert p.delete_workload is None and reasons(p) == ["Started"]
    # A limit raised, a claim added: each another Workload.
    for change in (
        {"limits": {"cpu": "3", "memory": "1Gi"}},
        {"limits": {"cpu": "2", "memory": "1Gi"}, "claims": [{"name": "gpu"}]},
    ):
        spec["containers"][0]["resources"] = change
        assert plan(limits, wl).delete_workload == WL_NAME, change


def test_6b_a_prebuilt_workload_is_the_senders_to_rebuild() -> None:
    body = bigger_pods()
    edit(body).labels({"kueue.x-k8s.io/prebuilt-workload-name": WL_NAME})
    wl = workload_for(trainjob(), RESERVED, ADMITTED, **ASSIGNED)
    p = plan(body, wl)
    assert p.delete_workload is None and reasons(p) == ["WorkloadOutOfSync"]
    # On the manager, a TrainJob MultiKueue dispatches keeps its Workload (its copies were sent
    # with it): the copy on the worker is the one held to it.
    dispatched = bigger_pods(suspend=False, managedBy="kueue.x-k8s.io/multikueue")
    p = plan(dispatched, wl, jobs_active=True)
    assert p.delete_workload is None and p.trainjob_patch is None


def test_7_admitted_starts_with_kueues_placement_in_one_write() -> None:
    body = trainjob()
    wl = workload_for(body, RESERVED, ADMITTED, **ASSIGNED)
    fast = {"metadata": {"name": "fast"}, "spec": {"nodeLabels": {"tier": "fast"}}}
    p = plan(body, wl, flavors={"fast": fast})
    placed = wlmod.build_admission_patch(WorkloadView(wl), {"fast": ResourceFlavorView(fast)})
    assert p.trainjob_patch == {
        "spec": {
            "suspend": False,
            "runtimePatches": [{**placed, "time": "2026-11-23T12:00:00Z"}],
        }
    }
    assert [e[:3] for e in p.events] == [("Normal", "Started", "Admitted by clusterQueue cq")]
    # On a MultiKueue manager the Workload names the worker that admitted it: so does the Event.
    dispatched = workload_for(body, RESERVED, ADMITTED, **ASSIGNED, clusterName="worker1")
    assert plan(body, dispatched).events[0].message == (
        "Admitted by clusterQueue cq; dispatched to cluster worker1"
    )
    obs = jobframework.observe(
        parse_trainjob(body), RuntimeView(RUNTIME), WorkloadView(wl), {}, None, False, NOW
    )
    obs.start_blocked = "not dispatchable"
    assert jobframework.reconcile_queueing(obs).trainjob_patch is None  # a controller said no


def test_8_running_without_admission_stops() -> None:
    body = trainjob(suspend=False)
    wl = workload_for(body, RESERVED, ADMITTED, EVICTED, **ASSIGNED)
    p = plan(body, wl, jobs_active=True)
    assert p.trainjob_patch == {"spec": {"suspend": True}}
    assert reasons(p) == ["Stopped"] and "Preempted" in p.events[0].message


def test_9_stopped_and_quiet_drops_the_placement_and_hands_the_quota_back() -> None:
    body = trainjob(runtimePatches=[{"manager": "kueue.x-k8s.io/manager"}])
    wl = workload_for(body, RESERVED, ADMITTED, EVICTED, **ASSIGNED)
    assert plan(body, wl, jobs_active=True).workload_status is None  # pods still running
    p = plan(body, wl)
    assert p.trainjob_patch == {"spec": {"runtimePatches": []}}
    assert p.workload_status is not None and p.workload_status["admission"] is None
    by_type = {c["type"]: (c["status"], c["reason"]) for c in p.workload_status["conditions"]}
    assert by_type["QuotaReserved"] == ("False", "Pending")
    assert by_type["Admitted"] == ("False", "NoReservation")
    assert by_type["Requeued"] == ("True", "Preempted")  # Kueue requeues a preemption at once
    assert by_type["PodsReady"] == ("False", "WaitForStart")
    assert p.workload_version == "7" and p.workload_readiness is None


# ---- the admission webhook's changes --------------------------------------------------------


def admitted(body: Dict, namespace: str = "ns") -> admission.Admitted:
    """`body` under admission in `namespace`, as an AdmissionReview's request holds it."""
    return admission.Admitted({"object": body, "namespace": namespace})


def test_mutate_suspends_queued_trainjobs_and_routes_them_to_multikueue_when_asked() -> None:
    assert admission.mutate_on_create(admitted(trainjob(suspend=False)), NOW) == {"suspend": True}
    assert admission.mutate_on_create(admitted(trainjob(suspend=True)), NOW) == {}
    assert admission.mutate_on_create(admitted(trainjob(queue=None, suspend=False)), NOW) == {}
    routed = admission.mutate_on_create(
        admitted(trainjob(suspend=False)), NOW, multikueue_queue=True
    )
    assert routed == {"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue"}
    # An explicit managedBy, even "", is the user's: the API judges it, we do not change it.
    mine = trainjob(managedBy="")
    assert admission.mutate_on_create(admitted(mine), NOW, multikueue_queue=True) == {}
    # ... except the built-in value, Trainer's CRD default: routed as if unset (as Kueue does).
    builtin = trainjob(managedBy="trainer.kubeflow.org/trainjob-controller")
    assert admission.mutate_on_create(admitted(builtin), NOW, multikueue_queue=True) == {
        "managedBy": "kueue.x-k8s.io/multikueue"
    }
    assert (
        admission.mutate_on_create(admitted(builtin), NOW) == {}
    )  # on a worker it stays the built-in one
    assert (
        admission.mutate_on_create(admitted(trainjob(queue=None)), NOW, multikueue_queue=True) == {}
    )


def test_a_trainjob_without_a_queue_defaults_to_the_namespaces_default_local_queue() -> None:
    unqueued = trainjob(queue=None, suspend=False)
    assert admission.defaults_to_queue(admitted(unqueued, "ns"), True) == "default"
    assert admission.defaults_to_queue(admitted(unqueued, "ns"), False) is None
    assert admission.defaults_to_queue(admitted(trainjob(queue="q"), "ns"), True) is None
    # Kueue's shipped managedJobsNamespaceSelector leaves these namespaces out
    assert admission.defaults_to_queue(admitted(unqueued, "kube-system"), True) is None
    copy_ = trainjob(queue=None)
    edit(copy_).annotations({"kueue.x-k8s.io/prebuilt-workload-name": "wl"})
    assert admission.defaults_to_queue(admitted(copy_, "ns"), True) is None
    # Defaulted, it is queued like any other: suspended, and labelled in the same patch
    changes = admission.mutate_on_create(admitted(unqueued), NOW, queue="default")
    assert changes == {"suspend": True}
    ops = admission.trainjob_patch(admitted(unqueued), changes, queue="default")
    assert {
        "op": "add",
        "path": "/metadata/labels/kueue.x-k8s.io~1queue-name",
        "value": "default",
    } in ops


def test_5b_a_prebuilt_workload_its_trainjob_no_longer_matches_finishes_out_of_sync() -> None:
    body = trainjob(suspend=False, trainer={"numNodes": 3})  # changed after the copy was made
    edit(body).labels({"kueue.x-k8s.io/prebuilt-workload-name": WL_NAME})
    wl = workload_for(trainjob())  # one node, as sent
    edit(wl).status({"conditions": [RESERVED, ADMITTED], **ASSIGNED})
    p = plan(body, wl, jobs_active=True)
    finished = next(c for c in p.workload_status["conditions"] if c["type"] == "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "OutOfSync")
    assert reasons(p) == ["WorkloadOutOfSync"] and p.workload_version == "7"
    # Running, it is stopped in the same pass: no Job is made for it from what it is now.
    assert p.trainjob_patch == {"spec": {"suspend": True}}
    # From then on it runs on nothing: a running TrainJob stops, a suspended one never starts.
    edit(wl).more_conditions(finished)
    assert plan(body, wl, jobs_active=True).trainjob_patch == {"spec": {"suspend": True}}
    edit(body).suspend()
    assert plan(body, wl).trainjob_patch is None


def test_runtime_patch_times_follow_trainers_webhook() -> None:
    earlier = "2026-11-23T11:00:00Z"
    user = {"manager": "me", "trainingRuntimeSpec": {"template": {}}}
    kueue = {"manager": "kueue.x-k8s.io/manager", "time": earlier}
    # On create: an entry without a time gets now, one with a time keeps it.
    body = trainjob(runtimePatches=[user, kueue])
    assert admission.mutate_on_create(admitted(body), NOW)["runtimePatches"] == [
        {**user, "time": "2026-11-23T12:00:00Z"},
        kueue,
    ]
    assert "runtimePatches" not in admission.mutate_on_create(
        admitted(trainjob(runtimePatches=[kueue])), NOW
    )


def test_pod_set_shapes_are_resolved_once_per_spec_and_runtime_version() -> None:
    body = trainjob(trainer={"numNodes": 2})
    edit(body).uid("uid-shape").generation(1).resource_version("7")
    raw = edit(RUNTIME).clone().uid("uid-runtime").resource_version("3").obj()
    runtime = RuntimeView(raw)
    first = jobframework_io._shape(parse_trainjob(body), runtime)
    assert first is not None and [(ps.name, ps.count) for ps in first[0] or ()] == [("node", 2)]
    # A status write: a new resourceVersion, the same generation (spec): the same shape.
    status_only = edit(body).clone().resource_version("8").status({"conditions": []}).obj()
    assert jobframework_io._shape(parse_trainjob(status_only), runtime) is first
    # A new spec (generation), or a new runtime version, is resolved again.
    resized = (
        edit(body).clone().generation(2).resource_version("9").spec(trainer={"numNodes": 3}).obj()
    )
    again = jobframework_io._shape(parse_trainjob(resized), runtime)
    assert again is not None and [ps.count for ps in again[0] or ()] == [3]
    # The runtime changed (a dataset initializer added): its new version, the same spec.
    initializer = replicated_job("dataset-initializer", "dataset-initializer", [container("init")])
    node = replicated_job("node", "trainer", [container()])  # the default runtime's
    changed = make_runtime(replicated_jobs=[initializer, node])
    edit(changed).uid("uid-runtime").resource_version("4")
    newer = jobframework_io._shape(parse_trainjob(body), RuntimeView(changed))
    assert newer is not None and [ps.name for ps in newer[0] or ()] == [
        "dataset-initializer",
        "node",
    ]
    gone = jobframework_io._shape(parse_trainjob(body), None)
    assert gone is not None and gone[0] is None and gone[1] is not None
    assert gone[1].reason == "RuntimeNotFound"
    # Not a stored version (no generation): nothing names its content, nothing is kept.
    edit(body).generation(None)
    assert jobframework_io._shape(parse_trainjob(body), runtime) is None


def test_the_crd_check_names_a_trainjob_crd_that_would_drop_our_status() -> None:
    from trainjob.crd import crd_problem

    def crd(status: Dict) -> ObjectView:
        schema = {"openAPIV3Schema": {"properties": {"status": status}}}
        return ObjectView({"spec": {"versions": [{"name": "v1alpha1", "schema": schema}]}})

    ours = crd({"properties": {"clusterName": {"type": "string"}, "conditions": {}}})
    assert crd_problem(ours) is None
    assert crd_problem(crd({"x-kubernetes-preserve-unknown-fields": True})) is None
    theirs = crd_problem(crd({"properties": {"conditions": {}, "jobsStatus": {}}}))
    assert theirs is not None and "has no status.clusterName" in theirs
    assert "not installed" in str(crd_problem(None))
    # a served version without a schema holds none of our fields; another version is not ours
    served = ObjectView({"spec": {"versions": [{"name": "v1alpha1"}]}})
    assert "has no status.clusterName" in str(crd_problem(served))
    other = ObjectView({"spec": {"versions": [{"name": "v2", "schema": {}}]}})
    assert "does not serve" in str(crd_problem(other))


def test_a_workload_follows_its_trainjobs_priority_class_label_as_kueue_does() -> None:
    wl = {"spec": {"priorityClassRef": HIGH.ref, "priority": 100}, "status": {}}
    assert not jobframework.follows_label(WorkloadView(wl), "high")
    assert jobframework.follows_label(WorkloadView(wl), "low")
    pod_class = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "p"}
    assert not jobframework.follows_label(
        WorkloadView({"spec": {"priorityClassRef": pod_class}}), "low"
    )
    reserved = {"spec": {}, "status": {"conditions": [cond("QuotaReserved", True, "x", "")]}}
    assert not jobframework.follows_label(
        WorkloadView(reserved), "low"
    )  # no class can be added now


def test_manage_jobs_without_queue_name_holds_only_unqueued_trainjobs_kueue_manages() -> None:
    loose = trainjob(queue=None, suspend=False)
    assert admission.held_without_queue(admitted(loose, "ns"), True)
    assert not admission.held_without_queue(admitted(loose, "ns"), False)
    assert not admission.held_without_queue(admitted(loose, "kube-system"), True)
    assert not admission.held_without_queue(admitted(trainjob(queue="q"), "ns"), True)
    assert admission.mutate_on_create(admitted(loose), NOW, hold=True) == {"suspend": True}
