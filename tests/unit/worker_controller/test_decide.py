"""Decisions of the worker controller's reconcile, from observations to plans (no cluster)."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from kubebase.events import Event
from tests.support.builders import (
    OWNER,
    container,
    edit,
    initializer_runtime,
    make_runtime,
    make_trainjob,
    mpi_runtime,
    replicated_job,
    runtime_patch,
)
from tests.support.worker_plans import (
    EXIT_1,
    KILLED,
    NOW,
    OUR_SERVICE,
    Dict,
    as_made,
    conditions,
    job,
    kinds,
    observe,
    reported,
    suspend_patch,
    suspended,
)
from trainjob.models import TrainJob, parse_trainjob
from trainjob.naming import owner_of
from trainjob.progress import Wiring
from trainjob.queues import resources_key
from trainjob.runtime import resolve_runtime_info
from trainjob.runtime.templates import merge_struct
from trainjob_api import constants as c
from trainjob_api.pods import PodSpecView
from trainjob_api.views import FailedCreateView, JobView, ObjectView, RuntimeView, TrainJobView
from worker_controller import builders, digests, status
from worker_controller.decide import Blocked, Observed, Plan, decide, parse


def test_multikueue_trainjob_is_left_alone() -> None:
    tj = make_trainjob(managedBy="kueue.x-k8s.io/multikueue")
    plan = observe(tj, make_runtime())
    assert plan == Plan()


def test_missing_runtime_fails_with_its_name_and_recovers() -> None:
    tj = make_trainjob()
    plan = observe(tj)
    assert conditions(plan) == {"Failed": ("True", "RuntimeNotFound")}
    assert (
        "ClusterTrainingRuntime 'torch-distributed' not found"
        in plan.status["conditions"][0]["message"]
    )  # type: ignore[index]
    assert kinds(plan) == []

    edit(tj).status(plan.status)
    plan = observe(tj, make_runtime())
    assert conditions(plan) == {}
    assert kinds(plan) == [("Service", "tj"), ("Job", "tj-node-0")]
    assert [e.reason for e in plan.events] == ["RuntimeResolved"]


def test_running_again_with_nothing_changed_writes_nothing() -> None:
    tj = make_trainjob()
    first = observe(tj, make_runtime())
    edit(tj).status(first.status)

    def running() -> Plan:
        jobs = [job("tj-node-0", active=1, ready=1)]
        return observe(tj, make_runtime(), jobs=jobs, services=[OUR_SERVICE], named=OUR_SERVICE)

    edit(tj).status(running().status)  # the Job's counts, once
    third = running()
    assert kinds(third) == [] and third.status is None and third.events == []


def test_suspend_and_resume() -> None:
    tj = make_trainjob(suspend=True)
    (made,) = as_made(tj, make_runtime())
    running = reported(made, "running")
    plan = observe(tj, make_runtime(), jobs=[running], services=[OUR_SERVICE])
    assert conditions(plan) == {"Suspended": ("True", "Suspended")}
    assert [(o["metadata"]["name"], o["spec"]["suspend"]) for o in plan.patch] == [
        ("tj-node-0", True)
    ]
    assert plan.delete == []

    edit(tj).status(plan.status).suspend(False)
    resumed = observe(tj, make_runtime(), jobs=[suspended(running)], services=[OUR_SERVICE])
    assert conditions(resumed) == {"Suspended": ("False", "Resumed")}
    assert [(o["metadata"]["name"], o["spec"]["suspend"]) for o in resumed.patch] == [
        ("tj-node-0", False)
    ]


def test_a_suspended_jobs_pods_asking_for_other_resources_are_made_again_on_resume() -> None:
    # Kueue queues the TrainJob again for what it asks now (its Workload made again); a Job's
    # pod template cannot change, so one made for what it asked before goes while suspended.
    tj = make_trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "1"}}})
    (made,) = as_made(tj, make_runtime())
    running = reported(made, "running")
    for cpu, kept in (("1000m", True), ("2", False), ("0.5", False)):
        asks = make_trainjob(suspend=True, trainer={"resourcesPerNode": {"requests": {"cpu": cpu}}})
        edit(asks).status({})
        plan = observe(asks, make_runtime(), jobs=[running], services=[OUR_SERVICE])
        if kept:
            assert plan.delete == [] and [o["metadata"]["name"] for o in plan.patch] == [
                "tj-node-0"
            ]
        else:
            assert plan.delete == [("tj-node-0", running["metadata"]["uid"])], cpu
            assert plan.patch == [] and plan.create == []
    # What the pods run with counts, their stored template: a Job whose pods ask for more goes
    # though what is written on it (anyone with `edit` may write a Job's annotations) claims
    # what the TrainJob asks now; so does one whose resources another's webhook changed.
    same = make_trainjob(suspend=True, trainer={"resourcesPerNode": {"requests": {"cpu": "1"}}})
    edit(same).status({})
    eight = make_trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "8"}}})
    bigger = reported(as_made(eight, make_runtime())[0], "running")
    claim = {
        "trainjob.dev/pods-ask": resources_key(PodSpecView(running["spec"]["template"]["spec"]))
    }
    edit(bigger).annotations(claim)
    limited = {"requests": {"cpu": "1"}, "limits": {"memory": "512Mi"}}
    defaulted = edit(running).clone().container("node", resources=limited).obj()
    for outdated in (bigger, defaulted):
        plan = observe(same, make_runtime(), jobs=[outdated], services=[OUR_SERVICE])
        assert plan.delete == [("tj-node-0", running["metadata"]["uid"])]
        assert plan.patch == [] and plan.create == []
    # Never resumed as it was, had a pass not seen the TrainJob suspended: it goes, and once
    # gone it is made from what the TrainJob asks now.
    resumed = make_trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "1"}}})
    edit(resumed).status({})
    for held in (suspended(bigger), suspended(defaulted)):
        plan = observe(resumed, make_runtime(), jobs=[held], services=[OUR_SERVICE])
        assert plan.delete == [("tj-node-0", running["metadata"]["uid"])]
        assert plan.patch == [] and plan.create == []
    plan = observe(resumed, make_runtime(), jobs=[suspended(running)], services=[OUR_SERVICE])
    assert plan.delete == [] and [o["spec"] for o in plan.patch] == [{"suspend": False}]
    edit(asks).suspend(False)
    plan = observe(asks, make_runtime(), jobs=[], services=[OUR_SERVICE])
    (again,) = [o for o in plan.create if o["kind"] == "Job"]
    node = again["spec"]["template"]["spec"]["containers"][0]
    assert node["resources"]["requests"]["cpu"] == "0.5"
    # A finished Job stays as it is.
    done = reported(made, "complete")
    plan = observe(
        asks | {"spec": {**asks["spec"], "suspend": True}},
        make_runtime(),
        jobs=[done],
        services=[OUR_SERVICE],
    )
    assert plan.delete == []


def test_a_job_kept_is_suspended_and_resumed_by_writes_its_pod_template_cannot_refuse() -> None:
    """A Job's pod template cannot change, and the runtime may have changed since the Job was
    made (a new image: its pods still ask for the same): the suspension is `spec.suspend`
    alone, and the resume sets exactly the placement Kueue gives the TrainJob now (a key it
    no longer gives removed) with nothing else of the template."""

    def placed(selector: Dict, toleration: str, **spec: Any) -> Dict:
        patch = runtime_patch(
            "kueue.x-k8s.io/manager",
            "node",
            {"spec": {"nodeSelector": selector, "tolerations": [{"key": toleration}]}},
        )
        return make_trainjob(runtimePatches=[patch], **spec)

    first = placed({"pool": "a", "zone": "1"}, "t1")
    (made,) = as_made(first, make_runtime())
    running = reported(made, "running")
    moved = make_runtime(
        replicated_jobs=[replicated_job("node", "trainer", [container(image="v2")])]
    )
    # Kueue takes its placement off the TrainJob it evicts: the running Job is suspended by
    # `spec.suspend` alone all the same (a placement with it would be refused, and it would run on).
    stopped = edit(make_trainjob(suspend=True)).status({}).obj()
    plan = observe(stopped, moved, jobs=[running], services=[OUR_SERVICE])
    assert plan.delete == [] and plan.patch == [suspend_patch(made)]

    again = placed({"pool": "b"}, "t2")
    edit(again).status(plan.status)
    plan = observe(again, moved, jobs=[suspended(running)], services=[OUR_SERVICE])
    assert [(o["metadata"], o["spec"]) for o in plan.patch] == [
        (
            suspend_patch(made)["metadata"],
            {
                "suspend": False,
                "template": {
                    "spec": {
                        "nodeSelector": {"pool": "b", "zone": None},
                        "tolerations": [{"key": "t2"}],
                    }
                },
            },
        )
    ]
    # Running, nothing of its template is written again (the API server would refuse it).
    plan = observe(again, moved, jobs=[running], services=[OUR_SERVICE])
    assert plan.patch == []


def test_a_jobs_size_is_what_it_was_made_with_and_a_job_the_runtime_no_longer_names_stops() -> None:
    """Quota is taken for so many pods. A Job's parallelism and completions, which whoever may
    edit Jobs can change on an Indexed Job, are put back when grown (running or not); a
    runtime asking fewer nodes since has its Job resumed for that many; and while the TrainJob
    is suspended a Job its runtime no longer names (replicas lowered, a replicatedJob renamed)
    is suspended too: it would run on no quota at all."""
    tj = edit(make_trainjob(trainer={"numNodes": 4})).status({}).obj()
    (made,) = as_made(tj, make_runtime())
    running = reported(made, "running")
    grown = edit(running).clone().spec(parallelism=40, completions=40).obj()
    plan = observe(tj, make_runtime(), jobs=[grown], services=[OUR_SERVICE])
    assert [o["spec"] for o in plan.patch] == [{"parallelism": 4, "completions": 4}]
    # Asked bigger while its pods run (a runtime changed): not grown under them.
    more = edit(make_trainjob(trainer={"numNodes": 8})).status({}).obj()
    assert observe(more, make_runtime(), jobs=[running], services=[OUR_SERVICE]).patch == []
    # Each size on its own: one grown past what is asked made that, the other never grown.
    wider = edit(running).clone().spec(parallelism=9).obj()
    plan = observe(more, make_runtime(), jobs=[wider], services=[OUR_SERVICE])
    assert [o["spec"] for o in plan.patch] == [{"parallelism": 8}]
    # Completions past what is asked are made that with parallelism equal to them (the API
    # server takes no other change of an Indexed Job's completions).
    longer = edit(running).clone().spec(parallelism=2, completions=40).obj()
    plan = observe(tj, make_runtime(), jobs=[longer], services=[OUR_SERVICE])
    assert [o["spec"] for o in plan.patch] == [{"parallelism": 4, "completions": 4}]
    # Suspended with it, by `spec.suspend` alone (a size refused with it would keep it running).
    held = edit(make_trainjob(suspend=True, trainer={"numNodes": 4})).status({}).obj()
    plan = observe(held, make_runtime(), jobs=[grown], services=[OUR_SERVICE])
    assert plan.patch == [suspend_patch(made)]
    # Suspended already, made the size asked, naming no version (nothing placed, not resumed).
    shut = edit(suspended(grown)).resource_version("41").obj()
    (write,) = observe(held, make_runtime(), jobs=[shut], services=[OUR_SERVICE]).patch
    assert write["spec"] == {"parallelism": 4, "completions": 4}
    assert "resourceVersion" not in write["metadata"]
    # Resumed after the TrainJob was changed to ask for one node: resumed for one.
    one = edit(make_trainjob(trainer={"numNodes": 1})).status({}).obj()
    plan = observe(one, make_runtime(), jobs=[suspended(running)], services=[OUR_SERVICE])
    assert [o["spec"] for o in plan.patch] == [
        {"parallelism": 1, "completions": 1, "suspend": False}
    ]
    # Suspended, with a Job of a replicatedJob the runtime no longer has.
    renamed = make_runtime(replicated_jobs=[replicated_job("trainer", "trainer", [container()])])
    stopped = edit(make_trainjob(suspend=True, trainer={"numNodes": 4})).status({}).obj()
    plan = observe(stopped, renamed, jobs=[running], services=[OUR_SERVICE])
    assert plan.patch == [suspend_patch(made)] and plan.create == []
    # Running too: a Job it controls under a name its runtime has not (whoever may edit Jobs
    # can make one, naming the TrainJob as controller) is suspended; its own runs on.
    stranger = edit(running).clone().name("tj-node-0-99").uid("uid-tj-node-0-99").obj()
    plan = observe(tj, make_runtime(), jobs=[running, stranger], services=[OUR_SERVICE])
    assert plan.patch == [suspend_patch(stranger)] and plan.delete == []


def test_a_resume_names_the_version_it_was_planned_from_and_waits_for_the_start_time_cleared() -> (
    None
):
    """A suspended Job's placement is open to whoever may edit Jobs: the resume (and any
    placement written) names the resourceVersion read, so a placement written since is never
    resumed with (409, and the next pass reads it); a suspension never waits on one. Until the
    Job controller clears a just-suspended Job's startTime the API server refuses a placement:
    nothing is written till then."""
    patch = runtime_patch("kueue.x-k8s.io/manager", "node", {"spec": {"nodeSelector": {"p": "b"}}})
    tj = edit(make_trainjob(runtimePatches=[patch])).status({}).obj()
    (made,) = as_made(make_trainjob(), make_runtime())
    held = edit(suspended(reported(made, "running"))).resource_version("41").obj()
    plan = observe(tj, make_runtime(), jobs=[held], services=[OUR_SERVICE])
    (write,) = plan.patch
    assert write["metadata"]["resourceVersion"] == "41"
    assert write["spec"] == {"template": {"spec": {"nodeSelector": {"p": "b"}}}, "suspend": False}
    edit(held).status(startTime="2026-11-22T11:59:00Z")
    assert observe(tj, make_runtime(), jobs=[held], services=[OUR_SERVICE]).patch == []
    # Nothing to place: resumed at once, still by the version read.
    plain = edit(make_trainjob()).status({}).obj()
    (write,) = observe(plain, make_runtime(), jobs=[held], services=[OUR_SERVICE]).patch
    assert write["spec"] == {"suspend": False} and write["metadata"]["resourceVersion"] == "41"
    # A suspension names no version.
    running = edit(reported(made, "running")).resource_version("42").obj()
    stop = edit(make_trainjob(suspend=True)).status({}).obj()
    (write,) = observe(stop, make_runtime(), jobs=[running], services=[OUR_SERVICE]).patch
    assert "resourceVersion" not in write["metadata"] and write["spec"] == {"suspend": True}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("nodeSelector", {"pool": "a"}),
        ("tolerations", [{"key": "t"}]),
        ("schedulingGates", [{"name": "g"}]),
        ("affinity", {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}),
    ],
)
def test_a_resume_sets_each_scheduling_field_as_the_trainjob_gives_it(
    field: str, value: Any
) -> None:
    (made,) = as_made(make_trainjob(), make_runtime())
    held = suspended(reported(made, "running"))
    edit(held).template_spec(**{field: value})  # written while it was suspended
    tj = edit(make_trainjob()).status({}).obj()
    (write,) = observe(tj, make_runtime(), jobs=[held], services=[OUR_SERVICE]).patch
    assert write["spec"] == {"suspend": False, "template": {"spec": {field: None}}}


@pytest.mark.parametrize(
    ("have", "want"),
    [
        ({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": 2}}),
        (
            {"nodeAffinity": {"required": {"x": [1]}, "preferred": [2]}},
            {"nodeAffinity": {"preferred": [3]}},
        ),
        ({"a": [1, 2]}, {"a": [2]}),
        ({"a": {"b": 1}}, {"a": 5}),
        (5, {"a": {"b": 1}}),
        ({"a": 1}, None),
    ],
)
def test_a_placement_patch_turns_what_the_job_has_into_what_is_wanted(have: Any, want: Any) -> None:
    """RFC 7386 applied as the API server applies it (the stand-in's merge, held to it)."""
    patched = merge_struct({"f": copy.deepcopy(have)}, {"f": builders.merge_patch_to(have, want)})
    assert patched.get("f") == want


def test_jobs_asking_otherwise_are_judged_each_by_index_and_podset_never_twice_nor_running() -> (
    None
):
    """Each Job of each PodSet is judged by what its own PodSet asks; one being deleted is not
    deleted again; a running Job is never deleted for asking otherwise (its TrainJob is
    stopped first, by its Workload)."""
    runtime = make_runtime(
        replicated_jobs=[replicated_job("node", "trainer", [container()], replicas=2)]
    )
    tj = make_trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "1"}}})
    first, second = (reported(m, "running") for m in as_made(tj, runtime))
    edit(second).container("node", resources={"requests": {"cpu": "8"}})
    stopped = make_trainjob(suspend=True, trainer={"resourcesPerNode": {"requests": {"cpu": "1"}}})
    edit(stopped).status({})
    plan = observe(stopped, runtime, jobs=[first, second], services=[OUR_SERVICE])
    assert plan.delete == [("tj-node-1", second["metadata"]["uid"])]
    going = edit(suspended(second)).clone().deleting("2026-11-22T12:00:00Z").obj()
    assert observe(stopped, runtime, jobs=[first, going], services=[OUR_SERVICE]).delete == []
    resumed = make_trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "1"}}})
    edit(resumed).status({})
    plan = observe(resumed, runtime, jobs=[suspended(first), going], services=[OUR_SERVICE])
    assert plan.delete == [] and [o["metadata"]["name"] for o in plan.patch] == ["tj-node-0"]
    plan = observe(resumed, runtime, jobs=[first, second], services=[OUR_SERVICE])
    assert plan.delete == [] and plan.patch == []
    # PodSets asking each its own: a Job of each, as made, resumed as it is.
    init = make_trainjob(
        runtimeRef={"name": "torch-with-init"},
        trainer={"resourcesPerNode": {"requests": {"cpu": "2"}}},
    )
    info, _ = resolve_runtime_info(parse_trainjob(init), RuntimeView(initializer_runtime()))
    assert info is not None
    owner = owner_of(ObjectView(init))
    built = [builders.build_job(info, ps, 0, owner, suspend=True) for ps in info.pod_sets]
    made = [suspended(reported(m, "running")) for m in built]
    assert len({builders.pods_ask(ps) for ps in info.pod_sets}) == 2  # the node asks its own
    edit(init).status({})
    plan = observe(init, initializer_runtime(), jobs=made, services=[OUR_SERVICE])
    assert plan.delete == [] and [o["spec"] for o in plan.patch] == [{"suspend": False}] * 3


def test_deadline_counts_from_the_last_resume() -> None:
    tj = make_trainjob(activeDeadlineSeconds=30)
    edit(tj).conditions(
        {
            "type": "Suspended",
            "status": "False",
            "reason": "Resumed",
            "message": "",
            "lastTransitionTime": "2026-11-22T11:59:50Z",
        }
    )
    running = [job("tj-node-0", active=1, created="2026-11-22T11:00:00Z")]
    plan = observe(tj, make_runtime(), jobs=running, services=[OUR_SERVICE])
    assert "Failed" not in conditions(plan) and plan.requeue_after == 20.0

    late = observe(
        tj, make_runtime(), jobs=running, services=[OUR_SERVICE], now=NOW + dt.timedelta(seconds=25)
    )
    assert conditions(late)["Failed"] == ("True", "DeadlineExceeded")
    assert [(o["metadata"]["name"], o["spec"]["suspend"]) for o in late.patch] == [
        ("tj-node-0", True)
    ]


def test_failed_pod_set_fails_the_trainjob_naming_it() -> None:
    plan = observe(
        make_trainjob(),
        make_runtime(),
        jobs=[job("tj-node-0", failed="BackoffLimitExceeded")],
        services=[OUR_SERVICE],
    )
    assert conditions(plan) == {"Failed": ("True", "FailedJobs")}
    message = plan.status["conditions"][0]["message"]  # type: ignore[index]
    assert message == (
        "jobset failed due to one or more job failures (first failed job: tj-node-0); "
        "BackoffLimitExceeded: Job has reached the specified backoff limit"
    )
    assert plan.status["jobsStatus"] == [  # type: ignore[index]
        {"name": "node", "ready": 0, "succeeded": 0, "failed": 1, "active": 0, "suspended": 0}
    ]


def test_finished_trainjob_is_final() -> None:
    tj = make_trainjob()
    edit(tj).conditions(
        {
            "type": "Failed",
            "status": "True",
            "reason": "DeadlineExceeded",
            "message": "",
            "lastTransitionTime": "2026-11-22T11:00:00Z",
        }
    )
    # Even if the runtime disappears later, the final reason stays.
    assert observe(tj, None) == Plan()


def test_initializers_run_before_the_trainer() -> None:
    tj = make_trainjob(runtimeRef={"name": "torch-with-init"})
    runtime = initializer_runtime()
    plan = observe(tj, runtime, services=[OUR_SERVICE])
    assert kinds(plan) == [("Job", "tj-dataset-initializer-0")]
    plan = observe(
        tj, runtime, services=[OUR_SERVICE], jobs=[job("tj-dataset-initializer-0", complete=True)]
    )
    assert kinds(plan) == [("Job", "tj-model-initializer-0")]
    plan = observe(
        tj,
        runtime,
        services=[OUR_SERVICE],
        jobs=[
            job("tj-dataset-initializer-0", complete=True),
            job("tj-model-initializer-0", complete=True),
        ],
    )
    assert kinds(plan) == [("Job", "tj-node-0")]


def test_two_services_with_our_label_stop_everything() -> None:
    other = {"metadata": {"name": "extra", "labels": {"trainjob.dev/trainjob-name": "tj"}}}
    plan = observe(make_trainjob(), make_runtime(), services=[OUR_SERVICE, other])
    assert kinds(plan) == []
    assert conditions(plan) == {"ServiceConflict": ("True", "MultipleServices")}
    assert plan.events[0].type == "Warning"


def test_foreign_service_with_our_name_is_not_touched() -> None:
    foreign = {"metadata": {"name": "tj", "labels": {"app": "mine"}}}
    plan = observe(make_trainjob(), make_runtime(), named=foreign)
    assert kinds(plan) == []
    assert conditions(plan) == {"ServiceConflict": ("True", "ServiceNameTaken")}


def test_complete_when_all_pod_sets_complete() -> None:
    plan = observe(
        make_trainjob(),
        make_runtime(),
        jobs=[job("tj-node-0", complete=True)],
        services=[OUR_SERVICE],
    )
    assert conditions(plan) == {"Complete": ("True", "AllJobsCompleted")}
    assert kinds(plan) == []


def test_a_pod_group_policy_is_named_as_not_supported_in_a_condition_and_one_warning() -> None:
    runtime = make_runtime(podGroupPolicy={"coscheduling": {"scheduleTimeoutSeconds": 60}})
    first = observe(make_trainjob(), runtime, services=[OUR_SERVICE])
    assert [k for k, _ in kinds(first)] == ["Job"]
    assert conditions(first)["PodGroupPolicyIgnored"] == ("True", "PodGroupPolicyIgnored")
    warnings = [e for e in first.events if e.reason == "PodGroupPolicyIgnored"]
    assert len(warnings) == 1 and "podGroupPolicy" in warnings[0].message
    assert warnings[0].type == "Warning"
    tj = make_trainjob()
    edit(tj).status(first.status)
    again = observe(tj, runtime, jobs=[job("tj-node-0")], services=[OUR_SERVICE])
    assert not [e for e in again.events if e.reason == "PodGroupPolicyIgnored"]
    assert again.status is None or "PodGroupPolicyIgnored" in conditions(again)
    plain = observe(make_trainjob(), make_runtime(), services=[OUR_SERVICE])
    assert not [e for e in plain.events if e.reason == "PodGroupPolicyIgnored"]
    assert "PodGroupPolicyIgnored" not in conditions(plain)


def test_runtime_fields_this_worker_does_not_do_are_named_in_a_condition_and_one_warning() -> None:
    runtime = runtime_doing_less()
    first = observe(make_trainjob(), runtime, services=[OUR_SERVICE])
    assert [k for k, _ in kinds(first)] == ["Job"]  # the job runs all the same
    assert conditions(first)["RuntimeFieldsIgnored"] == ("True", "RuntimeFieldsIgnored")
    [warning] = [e for e in first.events if e.reason == "RuntimeFieldsIgnored"]
    assert warning.type == "Warning"
    assert "template.spec.failurePolicy.rules[0].action (RestartJob)" in warning.message
    assert "template.spec.startupPolicy.startupPolicyOrder" in warning.message
    plain = observe(make_trainjob(), make_runtime(), services=[OUR_SERVICE])
    assert "RuntimeFieldsIgnored" not in conditions(plain)


def test_a_multikueue_copy_labels_its_jobs_and_pods_with_the_managers_origin() -> None:
    tj = edit(make_trainjob()).labels({"kueue.x-k8s.io/multikueue-origin": "manager-a"}).obj()
    plan = observe(tj, make_runtime(), services=[OUR_SERVICE])
    (job,) = [o for o in plan.create if o["kind"] == "Job"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "manager-a"
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["kueue.x-k8s.io/multikueue-origin"] == "manager-a"
    local = observe(make_trainjob(), make_runtime(), services=[OUR_SERVICE])
    (job,) = [o for o in local.create if o["kind"] == "Job"]
    assert "kueue.x-k8s.io/multikueue-origin" not in job["spec"]["template"]["metadata"]["labels"]


def pod(name: str, replicated_job: str, phase: str | None, trainjob: str = "tj") -> Dict:
    """A pod as the API returns it (digests.pod_digest keeps what the count needs)."""
    return digests.pod_digest(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "resourceVersion": "7",
                "labels": {
                    "trainjob.dev/trainjob-name": trainjob,
                    "jobset.sigs.k8s.io/replicatedjob-name": replicated_job,
                    "app": "ignored",
                },
                "annotations": {"big": "x" * 100},
            },
            "spec": {"containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": phase} if phase else {},
        }
    )


def test_pods_are_counted_by_phase_per_pod_set_and_left_alone_when_not_watched() -> None:
    tj = make_trainjob(runtimeRef={"name": "torch-with-init"})
    runtime = initializer_runtime()
    jobs = [job("tj-dataset-initializer-0", complete=True), job("tj-model-initializer-0")]
    pods = [
        pod("a", "dataset-initializer", "Succeeded"),
        pod("b", "model-initializer", "Running"),
        pod("c", "model-initializer", None),  # just created: no phase yet
        pod("d", "model-initializer", "Unknown"),
        pod("e", "somebody-elses", "Running"),  # not a PodSet of the runtime: not counted
    ]
    plan = observe(tj, runtime, services=[OUR_SERVICE], jobs=jobs, pods=pods)
    assert plan.status is not None
    zero = {"pending": 0, "running": 0, "succeeded": 0, "failed": 0}
    assert plan.status["podsStatus"] == [
        {"name": "dataset-initializer", **zero, "succeeded": 1},
        {"name": "model-initializer", **zero, "running": 1, "pending": 1, "unknown": 1},
        {"name": "node", **zero},
    ]
    assert pods[0] == {
        "metadata": {
            "name": "a",
            "namespace": "default",
            "resourceVersion": "7",
            "labels": {
                "trainjob.dev/trainjob-name": "tj",
                "jobset.sigs.k8s.io/replicatedjob-name": "dataset-initializer",
            },
        },
        "status": {"phase": "Succeeded"},
    }
    assert digests.pod_owner(pods[0]) == ("default", "tj")
    # Pods not watched (or not listed yet): what the status says stays.
    edit(tj).status(plan.status)
    again = observe(tj, runtime, services=[OUR_SERVICE], jobs=jobs, pods=None)
    assert again.status is None
    # A change of phase alone is a status write.
    pods[1] = pod("b", "model-initializer", "Succeeded")
    moved = observe(tj, runtime, services=[OUR_SERVICE], jobs=jobs, pods=pods)
    assert moved.status is not None
    assert moved.status["podsStatus"][1]["succeeded"] == 1


def test_a_change_nothing_acts_on_is_held_and_the_rest_goes_at_once() -> None:
    tj = make_trainjob()
    running = [job("tj-node-0", active=1, ready=1)]
    first = observe(
        tj, make_runtime(), jobs=running, services=[OUR_SERVICE], named=OUR_SERVICE, pods=[]
    )
    edit(tj).status(first.status)
    pods = [pod("a", "node", "Running")]

    def step(jobs: list[Dict], held_for: float | None) -> Plan:
        return observe(
            tj,
            make_runtime(),
            jobs=jobs,
            services=[OUR_SERVICE],
            pods=pods,
            held_for=held_for,
            coalesce=2.0,
        )

    # A pod count alone is held 2 s from when it is first seen ...
    for held_for, wait in ((None, 2.0), (0.5, 1.5)):
        held = step(running, held_for)
        assert held.status is None and held.status_held and held.requeue_after == wait
    # ... and goes once they are over.
    later = step(running, 2.5)
    assert later.status is not None and later.status["podsStatus"][0]["running"] == 1
    assert not later.status_held
    # A Job's ready count, or a condition, goes at once, the pod count with it.
    finished = step([job("tj-node-0", complete=True)], 0.5)
    assert conditions(finished)["Complete"] == ("True", "AllJobsCompleted")
    assert finished.status is not None and finished.status["podsStatus"][0]["running"] == 1
    assert finished.requeue_after is None and not finished.status_held


def pod_with(name: str, phase: str, **container: Any) -> Dict:
    """A pod of PodSet `node` whose one container `node` is in the state given."""
    return digests.pod_digest(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "labels": {
                    "trainjob.dev/trainjob-name": "tj",
                    "jobset.sigs.k8s.io/replicatedjob-name": "node",
                },
            },
            "status": {"phase": phase, "containerStatuses": [{"name": "node", **container}]},
        }
    )


PULL = {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "nope:1"'}}


def test_what_is_wrong_with_a_pod_is_read_from_its_status() -> None:
    assert digests.pod_problem({"phase": "Running", "containerStatuses": [{"state": {}}]}) is None
    assert digests.pod_problem({"containerStatuses": [{"name": "n", "state": PULL}]}) == {
        "stuck": True,
        "container": "n",
        "reason": "ImagePullBackOff",
        "message": 'Back-off pulling image "nope:1"',
    }
    crashing = {
        "name": "n",
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}},
        "lastState": EXIT_1,
    }
    assert digests.pod_problem({"containerStatuses": [crashing]}) == {
        "stuck": True,
        "container": "n",
        "reason": "CrashLoopBackOff",
        "message": "back-off 10s; last run exited with code 1 (Error): bad input file",
    }
    # An init container that cannot start comes first; a normal ContainerCreating is fine.
    creating = {"name": "n", "state": {"waiting": {"reason": "ContainerCreating"}}}
    init = {"name": "i", "state": PULL}
    found = digests.pod_problem({"initContainerStatuses": [init], "containerStatuses": [creating]})
    assert found is not None and found["container"] == "i"
    assert digests.pod_problem({"containerStatuses": [creating]}) is None
    assert digests.pod_problem({"containerStatuses": [{"name": "n", "state": EXIT_1}]}) == {
        "stuck": False,
        "container": "n",
        "reason": "Error",
        "message": "exited with code 1 (Error): bad input file",
        "finishedAt": "2026-11-22T11:59:40Z",
    }
    evicted = {"phase": "Failed", "reason": "Evicted", "message": "low on memory"}
    assert digests.pod_problem(evicted) == {
        "stuck": False,
        "container": "",
        "reason": "Evicted",
        "message": "low on memory",
    }
    long = {"name": "n", "state": {"terminated": {"exitCode": 2, "message": "x" * 5000}}}
    message = digests.pod_problem({"containerStatuses": [long]})["message"]  # type: ignore[index]
    assert len(message) < 400 and message.endswith("...")


def test_a_failed_trainjob_says_what_its_first_failed_pod_said() -> None:
    pods = [
        pod_with("tj-node-0-0-a", "Failed", state=KILLED),  # killed after the first one failed
        pod_with("tj-node-0-0-b", "Failed", state=EXIT_1),
        pod_with("tj-node-0-0-c", "Running"),
    ]
    plan = observe(
        make_trainjob(),
        make_runtime(),
        jobs=[job("tj-node-0", failed="BackoffLimitExceeded")],
        services=[OUR_SERVICE],
        pods=pods,
    )
    assert plan.status is not None
    (failed,) = [c for c in plan.status["conditions"] if c["type"] == "Failed"]
    assert failed["reason"] == "FailedJobs"
    assert failed["message"] == (
        "jobset failed due to one or more job failures (first failed job: tj-node-0); "
        "BackoffLimitExceeded: Job has reached the specified backoff limit; pod tj-node-0-0-b "
        "container node exited with code 1 (Error): bad input file"
    )


def test_stuck_pods_and_refused_pods_show_as_a_condition_until_they_start() -> None:
    tj, runtime = make_trainjob(), make_runtime()
    running = [job("tj-node-0", active=1)]
    stuck = observe(
        tj,
        runtime,
        jobs=running,
        services=[OUR_SERVICE],
        pods=[pod_with("p", "Pending", state=PULL)],
    )
    assert conditions(stuck)["PodsStuck"] == ("True", "ImagePullBackOff")
    (event,) = [e for e in stuck.events if e.reason == "ImagePullBackOff"]
    assert event.type == "Warning"
    assert (
        event.message == 'pod p container node: ImagePullBackOff: Back-off pulling image "nope:1"'
    )
    edit(tj).status(stuck.status)
    fine = observe(
        tj, runtime, jobs=running, services=[OUR_SERVICE], pods=[pod_with("p", "Running")]
    )
    assert conditions(fine)["PodsStuck"] == ("False", "PodsStarted")
    assert fine.requeue_after is None
    # A Job short of pods whose pods the API refuses: the Job controller's reason.
    no_pods = job("tj-node-0", created="2026-11-22T11:59:50Z")
    obs = Observed(
        trainjob=parse_trainjob(make_trainjob()),
        runtime=RuntimeView(runtime),
        jobs={"tj-node-0": JobView(no_pods)},
        services=[OUR_SERVICE],
        service_named=None,
        now=NOW,
        pods=[],
        pod_create_failures={"tj-node-0": 'pods "tj-node-0-0-x" is forbidden: exceeded quota'},
    )
    refused = decide(obs)
    assert conditions(refused)["PodsStuck"] == ("True", "PodCreateFailed")
    (event,) = [e for e in refused.events if e.reason == "PodCreateFailed"]
    assert event.message == (
        'Job tj-node-0 cannot create its pods: pods "tj-node-0-0-x" is forbidden: exceeded quota'
    )
    # Not watched: left as it is.
    edit(tj).status(stuck.status)
    unwatched = observe(tj, runtime, jobs=running, services=[OUR_SERVICE], pods=None)
    assert unwatched.status is None or conditions(unwatched)["PodsStuck"][0] == "True"


def failed_create(job_name: str, uid: str, last: str, message: str = "exceeded quota") -> Dict:
    """A FailedCreate Event of the Job controller, as the worker controller keeps it."""
    return digests.event_digest(
        {
            "metadata": {"name": f"{job_name}.1", "namespace": "default", "resourceVersion": "3"},
            "involvedObject": {"kind": "Job", "name": job_name, "uid": uid},
            "reason": "FailedCreate",
            "message": f"Error creating: {message}",
            "lastTimestamp": last,
            "count": 4,
        }
    )


def test_a_refused_pod_is_read_from_the_jobs_own_recent_failed_create_events() -> None:
    running = job("tj-node-0", active=1, parallelism=2)
    edit(running).uid("u1").status(startTime="2026-11-22T11:59:00Z")
    assert status.jobs_short_of_pods({"tj-node-0": JobView(running)}) == ["tj-node-0"]
    assert status.jobs_short_of_pods({"a": JobView(job("a", active=1))}) == []
    assert status.jobs_short_of_pods({"a": JobView(job("a", suspend=True))}) == []
    assert status.jobs_short_of_pods({"a": JobView(job("a", failed="BackoffLimitExceeded"))}) == []
    event = failed_create("tj-node-0", "u1", "2026-11-22T11:59:30Z")
    assert event == {
        "metadata": {"name": "tj-node-0.1", "namespace": "default", "resourceVersion": "3"},
        "job": {"name": "tj-node-0", "uid": "u1"},
        "message": "Error creating: exceeded quota",
        "last": "2026-11-22T11:59:30Z",
    }
    assert digests.event_job(event) == ("default", "tj-node-0")
    older = failed_create("tj-node-0", "u1", "2026-11-22T11:59:20Z", "older")
    assert (
        status.create_failure(JobView(running), [FailedCreateView(older), FailedCreateView(event)])
        == "Error creating: exceeded quota"
    )
    # Before its last start (resumed since), or about a Job of that name before it: not its.
    before = failed_create("tj-node-0", "u1", "2026-11-22T11:58:00Z")
    other = failed_create("tj-node-0", "u0", "2026-11-22T11:59:30Z")
    assert (
        status.create_failure(JobView(running), [FailedCreateView(before), FailedCreateView(other)])
        is None
    )


def test_a_name_taken_is_a_condition_naming_the_object_and_clears_once_made() -> None:
    taken = Blocked("NameTaken", "PersistentVolumeClaim 'data-tj' exists and was not made for it")
    tj = make_trainjob()
    plan = observe(tj, make_runtime(), services=[OUR_SERVICE], blocked=taken)
    assert conditions(plan) == {"ObjectsBlocked": ("True", "NameTaken")}
    assert plan.events[0].type == "Warning" and "data-tj" in plan.events[0].message
    # Still planned: the executor tries again, and stops at the object it cannot make.
    assert kinds(plan) == [("Job", "tj-node-0")]
    edit(tj).status(plan.status)
    plan = observe(tj, make_runtime(), services=[OUR_SERVICE])
    assert conditions(plan) == {"ObjectsBlocked": ("False", "ObjectsCreated")}


# The labels every object made for the TrainJob carries.
OURS = {
    "jobset.sigs.k8s.io/jobset-name": "tj",
    "trainjob.dev/trainjob-name": "tj",
    "trainjob.dev/managed-by": "worker-controller",
}


AUDIENCE = "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status"


TRAINER_SECRETS = "/var/run/secrets/kubeflow/trainer"  # Trainer's paths for the token and CA


def test_trainer_pods_are_told_where_to_report_progress_with_the_ca_made_first() -> None:
    tj = make_trainjob()
    wiring = Wiring("https://srv.ns.svc:443", "PEM")
    plan = observe(tj, make_runtime(), services=[OUR_SERVICE], wiring=wiring)
    assert kinds(plan) == [("ConfigMap", "tj-tls-config"), ("Job", "tj-node-0")]
    config_map, job_made = plan.create
    assert config_map == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "tj-tls-config",
            "namespace": "ns",
            "labels": OURS,
            "ownerReferences": [OWNER],
        },
        "data": {"ca.crt": "PEM"},
    }
    pod = job_made["spec"]["template"]["spec"]
    trainer = pod["containers"][0]
    told = [e for e in trainer["env"] if e["name"].startswith("KUBEFLOW_TRAINER_")]
    assert told == [
        {"name": "KUBEFLOW_TRAINER_SERVER_URL", "value": wiring.url("ns", "tj")},
        {"name": "KUBEFLOW_TRAINER_SERVER_CA_CERT", "value": f"{TRAINER_SECRETS}/ca.crt"},
        {"name": "KUBEFLOW_TRAINER_SERVER_TOKEN", "value": f"{TRAINER_SECRETS}/token"},
    ]
    # the files those name: the volume below, mounted where the paths say
    assert trainer["volumeMounts"] == [
        {"name": "kubeflow-trainer-token", "mountPath": TRAINER_SECRETS, "readOnly": True}
    ]
    # The token is for this TrainJob's status only, the CA from the ConfigMap made first.
    assert pod["volumes"] == [
        {
            "name": "kubeflow-trainer-token",
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": AUDIENCE,
                            "expirationSeconds": 3600,
                            "path": "token",
                        }
                    },
                    {
                        "configMap": {
                            "name": "tj-tls-config",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                ]
            },
        }
    ]
    plain = observe(tj, make_runtime(), services=[OUR_SERVICE])
    assert kinds(plain) == [("Job", "tj-node-0")]


# ---- what a pass says: each condition as it is written, and the Event that announces it ----

SINCE = "2026-11-22T12:00:00Z"  # NOW, as a condition's lastTransitionTime
EARLIER = "2026-11-22T11:00:00Z"


def said(
    ctype: str, status: str, reason: str, message: str, since: str = SINCE, generation: int = 1
) -> Dict:
    """A TrainJob condition as the worker writes it."""
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }


def at_generation(tj: Dict, generation: int) -> Dict:
    return edit(tj).generation(generation).obj()


NOT_FOUND = (
    "ClusterTrainingRuntime 'torch-distributed' not found; the TrainJob starts once it exists"
)
SUSPENDED = said("Suspended", "True", "Suspended", "TrainJob is suspended", EARLIER)
BLOCKED = said(
    "ObjectsBlocked", "True", "NameTaken", "PersistentVolumeClaim 'data-tj' ...", EARLIER
)
PULLING = 'pod p container node: ImagePullBackOff: Back-off pulling image "nope:1"'
TWO_SERVICES = "2 Services name TrainJob 'tj' as their controller (extra, tj); remove all but one"
EXTRA_SERVICE = {"metadata": {"name": "extra", "labels": {"trainjob.dev/trainjob-name": "tj"}}}
FOREIGN_SERVICE = {"metadata": {"name": "tj", "labels": {"app": "mine"}}}
NAME_TAKEN = (
    "Service 'tj' exists and is not this TrainJob's (not controlled by it); rename or delete it"
)
QUOTA = 'pods "tj-node-0-0-x" is forbidden: exceeded quota'
BACKOFF = (
    "jobset failed due to one or more job failures (first failed job: tj-node-0); "
    "BackoffLimitExceeded: Job has reached the specified backoff limit"
)
DEADLINE = "TrainJob was active longer than activeDeadlineSeconds=30"
STARTED_30S_AGO = [job("tj-node-0", active=1, created="2026-11-22T11:59:30Z")]
FIELDS_IGNORED = (
    "the runtime sets fields this worker does not do, and the job runs without them "
    "(docs/operators/differences.md): template.spec.failurePolicy.rules[0].action (RestartJob), "
    "template.spec.startupPolicy.startupPolicyOrder"
)


def runtime_doing_less() -> Dict:
    """A runtime with two fields the worker does not do."""
    return (
        edit(make_runtime())
        .template_spec(
            failurePolicy={"maxRestarts": 3, "rules": [{"name": "one", "action": "RestartJob"}]},
            startupPolicy={"startupPolicyOrder": "InOrder"},
        )
        .obj()
    )


@pytest.mark.parametrize(
    ("tj", "before", "seen", "after", "events"),
    [
        pytest.param(
            make_trainjob(),
            [],
            {"runtime": None},
            [said("Failed", "True", "RuntimeNotFound", NOT_FOUND)],
            [Event("Warning", "RuntimeNotFound", NOT_FOUND)],
            id="runtime-missing",
        ),
        pytest.param(
            make_trainjob(),
            [said("Failed", "True", "RuntimeNotFound", NOT_FOUND, EARLIER)],
            {},
            [],
            [
                Event(
                    "Normal",
                    "RuntimeResolved",
                    "ClusterTrainingRuntime 'torch-distributed' found; starting",
                )
            ],
            id="runtime-found-again",
        ),
        pytest.param(
            make_trainjob(suspend=True),
            [],
            {"jobs": [job("tj-node-0", active=1)]},
            [said("Suspended", "True", "Suspended", "TrainJob is suspended")],
            [Event("Normal", "Suspended", "TrainJob is suspended")],
            id="suspended",
        ),
        pytest.param(  # a newer generation is recorded on the condition, with no Event
            at_generation(make_trainjob(suspend=True), 2),
            [SUSPENDED],
            {"jobs": [job("tj-node-0", suspend=True)]},
            [{**SUSPENDED, "observedGeneration": 2}],
            [],
            id="suspended-at-a-newer-generation",
        ),
        pytest.param(
            make_trainjob(),
            [SUSPENDED],
            {"jobs": [job("tj-node-0", suspend=True)]},
            [said("Suspended", "False", "Resumed", "TrainJob is resumed")],
            [Event("Normal", "Resumed", "TrainJob is resumed")],
            id="resumed",
        ),
        pytest.param(
            make_trainjob(),
            [],
            {"jobs": [job("tj-node-0", complete=True)]},
            [said("Complete", "True", "AllJobsCompleted", "jobset completed successfully")],
            [Event("Normal", "AllJobsCompleted", "jobset completed successfully")],
            id="complete",
        ),
        pytest.param(
            make_trainjob(),
            [],
            {"jobs": [job("tj-node-0", failed="BackoffLimitExceeded")]},
            [said("Failed", "True", "FailedJobs", BACKOFF)],
            [Event("Warning", "FailedJobs", BACKOFF)],
            id="pod-set-failed",
        ),
        pytest.param(
            make_trainjob(activeDeadlineSeconds=30),
            [],
            {"jobs": STARTED_30S_AGO},
            [said("Failed", "True", "DeadlineExceeded", DEADLINE)],
            [Event("Warning", "DeadlineExceeded", DEADLINE)],
            id="deadline-reached-to-the-second",
        ),
        pytest.param(
            make_trainjob(activeDeadlineSeconds=30),
            [],
            {"jobs": STARTED_30S_AGO, "now": NOW - dt.timedelta(seconds=0.5)},
            [],
            [],
            id="deadline-half-a-second-away",
        ),
        pytest.param(
            make_trainjob(),
            [BLOCKED],
            {},
            [
                said(
                    "ObjectsBlocked",
                    "False",
                    "ObjectsCreated",
                    "the objects the TrainJob needs are made",
                )
            ],
            [Event("Normal", "ObjectsCreated", "the objects the TrainJob needs are made")],
            id="objects-made",
        ),
        pytest.param(
            make_trainjob(),
            [said("PodsStuck", "True", "ImagePullBackOff", PULLING, EARLIER)],
            {"jobs": [job("tj-node-0", active=1)], "pods": [pod_with("p", "Running")]},
            [said("PodsStuck", "False", "PodsStarted", "no pod is stuck")],
            [Event("Normal", "PodsStarted", "no pod is stuck")],
            id="pods-started",
        ),
        pytest.param(  # the same reason with another message: written, not announced again
            make_trainjob(),
            [said("PodsStuck", "True", "ImagePullBackOff", "an older message", EARLIER)],
            {"jobs": [job("tj-node-0", active=1)], "pods": [pod_with("p", "Pending", state=PULL)]},
            [said("PodsStuck", "True", "ImagePullBackOff", PULLING, EARLIER)],
            [],
            id="pod-still-stuck-saying-more",
        ),
        pytest.param(
            make_trainjob(),
            [],
            {
                "jobs": [job("tj-node-0", created="2026-11-22T11:59:50Z")],
                "pods": [],
                "pod_create_failures": {"tj-node-0": QUOTA},
            },
            [
                said(
                    "PodsStuck",
                    "True",
                    "PodCreateFailed",
                    f"Job tj-node-0 cannot create its pods: {QUOTA}",
                )
            ],
            [Event("Warning", "PodCreateFailed", f"Job tj-node-0 cannot create its pods: {QUOTA}")],
            id="pods-refused",
        ),
        pytest.param(
            make_trainjob(),
            [],
            {"services": [OUR_SERVICE, EXTRA_SERVICE]},
            [said("ServiceConflict", "True", "MultipleServices", TWO_SERVICES)],
            [Event("Warning", "MultipleServices", TWO_SERVICES)],
            id="two-services",
        ),
        pytest.param(
            make_trainjob(),
            [],
            {"services": [], "named": FOREIGN_SERVICE},
            [said("ServiceConflict", "True", "ServiceNameTaken", NAME_TAKEN)],
            [Event("Warning", "ServiceNameTaken", NAME_TAKEN)],
            id="service-name-taken",
        ),
        pytest.param(
            make_trainjob(),
            [said("ServiceConflict", "True", "MultipleServices", TWO_SERVICES, EARLIER)],
            {},
            [said("ServiceConflict", "False", "ServiceReady", "exactly one headless Service")],
            [Event("Normal", "ServiceReady", "exactly one headless Service")],
            id="service-conflict-resolved",
        ),
        pytest.param(
            make_trainjob(),
            [],
            {"runtime": runtime_doing_less()},
            [said("RuntimeFieldsIgnored", "True", "RuntimeFieldsIgnored", FIELDS_IGNORED)],
            [Event("Warning", "RuntimeFieldsIgnored", FIELDS_IGNORED)],
            id="runtime-fields-ignored",
        ),
        pytest.param(  # the runtime no longer sets them
            make_trainjob(),
            [said("RuntimeFieldsIgnored", "True", "RuntimeFieldsIgnored", FIELDS_IGNORED, EARLIER)],
            {},
            [],
            [],
            id="runtime-fields-no-longer-ignored",
        ),
        pytest.param(  # the runtime no longer asks for a pod group
            make_trainjob(),
            [said("PodGroupPolicyIgnored", "True", "PodGroupPolicyIgnored", "...", EARLIER)],
            {},
            [],
            [],
            id="pod-group-no-longer-asked-for",
        ),
    ],
)
def test_each_decision_writes_its_condition_and_announces_it(
    tj: Dict, before: list[Dict], seen: dict[str, Any], after: list[Dict], events: list[Event]
) -> None:
    tj = edit(tj).clone().status({"conditions": copy.deepcopy(before)}).obj()
    seen = {"runtime": make_runtime(), "services": [OUR_SERVICE], **seen}
    plan = observe(tj, **seen)
    assert plan.status is not None
    assert plan.status["conditions"] == after
    assert plan.events == events


def test_a_pass_parses_its_trainjob_once_per_version() -> None:
    body = edit(make_trainjob()).uid("uid-decide-parse").resource_version("7").obj()
    first = parse(TrainJobView(body))
    assert isinstance(first, TrainJob)
    assert parse(TrainJobView(copy.deepcopy(body))) is first
    again = edit(copy.deepcopy(body)).resource_version("8").obj()
    assert parse(TrainJobView(again)) is not first


def test_a_trainjob_that_does_not_parse_is_one_warning_naming_the_field_and_nothing_else() -> None:
    assert parse(TrainJobView(make_trainjob(runtimeRef={"name": 5}))) == Plan(
        events=[
            Event(
                "Warning",
                c.EVENT_INVALID_TRAINJOB,
                "invalid TrainJob: spec.runtimeRef.name: Input should be a valid string",
            )
        ]
    )


def test_a_trainjob_being_deleted_is_left_to_its_garbage_collection() -> None:
    """Its Jobs and Service go with it (owner references): nothing is made, nothing said."""
    tj = edit(make_trainjob()).deleting().obj()
    assert observe(tj, make_runtime()) == Plan()
    assert kinds(observe(make_trainjob(), make_runtime())) != []


@pytest.mark.parametrize(
    ("managed_by", "ours"),
    [
        (None, True),
        ("", True),
        ("trainer.kubeflow.org/trainjob-controller", True),
        ("kueue.x-k8s.io/multikueue", False),
    ],
)
def test_a_trainjob_is_run_here_only_without_managed_by_or_with_the_built_in_one(
    managed_by: str | None, ours: bool
) -> None:
    tj = make_trainjob() if managed_by is None else make_trainjob(managedBy=managed_by)
    plan = observe(tj, make_runtime())
    assert kinds(plan) == ([("Service", "tj"), ("Job", "tj-node-0")] if ours else [])
    assert (plan == Plan()) is not ours


# ---- a TrainJob that ends or is suspended stops what runs: each Job suspended as it was made --

RESTARTED_ONCE = {"restarts": 1, "restartsCountTowardsMax": 1}
COMPLETE = said("Complete", "True", "AllJobsCompleted", "jobset completed successfully", EARLIER)


def launcher_first() -> Dict:
    """An MPI runtime whose success is its launcher's: the nodes may still run when it is done."""
    success = {"operator": "All", "targetReplicatedJobs": ["launcher"]}
    return edit(mpi_runtime()).template_spec(successPolicy=success).obj()


def gang_runtime() -> Dict:
    return make_runtime(podGroupPolicy={"coscheduling": {"scheduleTimeoutSeconds": 60}})


MPI_TJ = {"runtimeRef": {"name": "mpi-runtime"}}


@pytest.mark.parametrize(
    ("spec", "status", "runtime", "states", "apis"),
    [
        pytest.param(
            MPI_TJ, {}, launcher_first(), ["complete", "running"], frozenset(), id="succeeded"
        ),
        pytest.param(MPI_TJ, {}, mpi_runtime(), ["failed", "running"], frozenset(), id="failed"),
        pytest.param(
            {"suspend": True},
            RESTARTED_ONCE,
            make_runtime(),
            ["running"],
            frozenset(),
            id="suspended-after-a-restart",
        ),
        pytest.param(
            {"activeDeadlineSeconds": 30},
            RESTARTED_ONCE,
            make_runtime(),
            ["running"],
            frozenset(),
            id="deadline-exceeded-after-a-restart",
        ),
        pytest.param(
            {},
            {**RESTARTED_ONCE, "conditions": [COMPLETE]},
            make_runtime(),
            ["running"],
            frozenset(),
            id="already-complete",
        ),
        pytest.param(
            {},
            {"conditions": [COMPLETE]},
            gang_runtime(),
            ["running"],
            frozenset({"coscheduling"}),
            id="already-complete-in-a-pod-group",
        ),
    ],
)
def test_a_trainjob_that_ends_or_is_suspended_suspends_each_running_job_as_it_was_made(
    spec: Dict, status: Dict, runtime: Dict, states: list[str], apis: frozenset[str]
) -> None:
    """The suspension of Jobs whose pod template cannot change is a write of `spec.suspend`
    alone, naming each Job's UID: nothing of what the runtime says now, or of the restart or
    pod group a Job was made for, can have it refused."""
    tj = edit(make_trainjob(**copy.deepcopy(spec))).status(copy.deepcopy(status)).obj()
    made = as_made(tj, runtime, apis)
    assert len(made) == len(states)
    jobs = [reported(body, state) for body, state in zip(made, states, strict=True)]
    plan = observe(tj, runtime, jobs=jobs, services=[OUR_SERVICE], pod_group_apis=apis)
    still_running = [body for body, state in zip(made, states, strict=True) if state == "running"]
    assert plan.patch == [suspend_patch(body) for body in still_running]
    assert plan.create == [] and plan.delete == []


def test_the_objects_the_pods_need_come_before_the_jobs_all_owned_but_a_claim_kept() -> None:
    """MPI's hostfile and SSH Secret, and a claim per volumeClaimPolicies template: owned by
    the TrainJob (deleted with it) unless the policy keeps the claim after it (whenDeleted
    Retain, the default), which then says which TrainJob it was made for."""
    scratch = {"metadata": {"name": "scratch"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    data = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadOnlyMany"]}}
    claims = [
        {"templates": [scratch], "retentionPolicy": {"whenDeleted": "Delete"}},
        {"templates": [data]},
    ]
    runtime = edit(mpi_runtime()).template_spec(volumeClaimPolicies=claims).obj()
    plan = observe(
        make_trainjob(runtimeRef={"name": "mpi-runtime"}), runtime, services=[OUR_SERVICE]
    )
    assert plan.create[:3] == [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "tj-mpi-hostfile",
                "namespace": "ns",
                "labels": OURS,
                "ownerReferences": [OWNER],
            },
            "data": {"hostfile": "tj-node-0-0.tj slots=4\ntj-node-0-1.tj slots=4\n"},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "scratch-tj",
                "namespace": "ns",
                "labels": OURS,
                "ownerReferences": [OWNER],
            },
            "spec": {"accessModes": ["ReadWriteOnce"]},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "data-tj",
                "namespace": "ns",
                "labels": OURS,
                "annotations": {"trainjob.dev/claim-made-for": "ns/tj"},
            },
            "spec": {"accessModes": ["ReadOnlyMany"]},
        },
    ]
    assert kinds(plan)[3:] == [("Job", "tj-launcher-0"), ("Job", "tj-node-0")]
    assert plan.ssh_secret == "tj-mpi-ssh-auth"
    # Once its Jobs are made, none of them is made again.
    jobs = [reported(body, "running") for body in plan.create[3:]]
    again = observe(
        make_trainjob(runtimeRef={"name": "mpi-runtime"}),
        runtime,
        jobs=jobs,
        services=[OUR_SERVICE],
    )
    assert again.create == [] and again.ssh_secret is None


def test_a_finished_trainjob_suspends_every_job_it_controls_building_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Jobs that name the TrainJob as controller but not the runtime's names (the runtime's
    replicas lowered or a replicatedJob renamed since they were made; or anyone who may edit
    Jobs made them), each for another restart attempt, are suspended as the runtime's own is:
    one write of `spec.suspend` each, and no Job built (2,000 cost the pass no CPU)."""
    tj = make_trainjob()
    ours = reported(as_made(tj, make_runtime())[0], "running")
    strangers = []
    for i in range(2000):
        attempt = str(10_000_000_000 + i)
        stranger = (
            edit(ours)
            .clone()
            .name(f"tj-other-{i}")
            .label(c.RESTART_ATTEMPT_LABEL, attempt)
            .pod_label(c.RESTART_ATTEMPT_LABEL, attempt)
            .obj()
        )
        strangers.append(stranger)
    edit(tj).conditions(COMPLETE)
    built: list[str] = []
    build_job = builders.build_job

    def counted(*args: Any, **kwargs: Any) -> Dict:
        made = build_job(*args, **kwargs)
        built.append(made["metadata"]["name"])
        return made

    monkeypatch.setattr(builders, "build_job", counted)
    plan = observe(tj, make_runtime(), jobs=[ours, *strangers], services=[OUR_SERVICE])
    assert built == []
    assert plan.patch[0] == suspend_patch(ours)
    assert [(o["metadata"]["name"], o["spec"]) for o in plan.patch[1:]] == [
        (f"tj-other-{i}", {"suspend": True}) for i in range(2000)
    ]
    # One being deleted is not written.
    going = edit(ours).clone().deleting("2026-11-22T12:00:00Z").obj()
    plan = observe(tj, make_runtime(), jobs=[going], services=[OUR_SERVICE])
    assert plan.patch == []
    # A runtime gone by then changes nothing of that.
    assert observe(tj, None, jobs=[ours], services=[OUR_SERVICE]).patch == [suspend_patch(ours)]
