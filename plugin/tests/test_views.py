"""Typed views over the JSON (plugin/trainjob_api/views.py): what each reads."""

from __future__ import annotations

import pytest

from kubebase.objects import Dict
from trainjob_api import constants as c
from trainjob_api.views import (
    ConditionView,
    ConfigMapView,
    FailedCreateView,
    JobView,
    PodSetPhases,
    PodView,
    RuntimeView,
    TrainJobView,
    WorkloadView,
    replicated_job_statuses,
)


def test_a_condition_reads_its_fields_and_absent_ones_as_empty() -> None:
    found = TrainJobView(
        {
            "status": {
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "FailedJobs",
                        "message": "m",
                        "lastTransitionTime": "t1",
                    }
                ]
            }
        }
    ).condition("Failed")
    assert found is not None and found.true
    assert (found.type, found.reason, found.message, found.since) == (
        "Failed",
        "FailedJobs",
        "m",
        "t1",
    )
    bare = ConditionView({"type": "Complete"})
    assert (bare.status, bare.true, bare.reason, bare.since) == ("", False, "", None)
    assert TrainJobView({}).condition("Failed") is None


@pytest.mark.parametrize(
    ("labels", "annotations", "queue", "prebuilt", "queued"),
    [
        ({}, {}, None, None, False),
        ({c.KUEUE_QUEUE_NAME_LABEL: ""}, {}, None, None, False),  # an empty one names none
        ({c.KUEUE_QUEUE_NAME_LABEL: "q"}, {}, "q", None, True),
        ({c.KUEUE_PREBUILT_WORKLOAD_LABEL: "wl"}, {}, None, "wl", True),  # before Kueue 0.18
        # Kueue 0.19's annotation first, the label for readers that know only the label
        (
            {c.KUEUE_PREBUILT_WORKLOAD_LABEL: "old"},
            {c.KUEUE_PREBUILT_WORKLOAD_ANNOTATION: "wl"},
            None,
            "wl",
            True,
        ),
        ({}, {c.KUEUE_PREBUILT_WORKLOAD_ANNOTATION: "wl"}, None, "wl", True),  # Kueue 0.19
        ({}, {c.KUEUE_PREBUILT_WORKLOAD_ANNOTATION: ""}, None, None, False),
    ],
)
def test_a_trainjob_is_queued_by_its_queue_label_or_a_prebuilt_workload(
    labels: dict[str, str],
    annotations: dict[str, str],
    queue: str | None,
    prebuilt: str | None,
    queued: bool,
) -> None:
    tj = TrainJobView({"metadata": {"labels": labels, "annotations": annotations}})
    assert (tj.queue_name, tj.prebuilt_workload, tj.queued) == (queue, prebuilt, queued)


def test_a_jobs_end_is_its_true_complete_or_failed_condition() -> None:
    failed = JobView({"status": {"conditions": [{"type": "Failed", "status": "True"}]}})
    assert failed.failure is not None and not failed.complete and failed.finished
    stale = JobView({"status": {"conditions": [{"type": "Failed", "status": "False"}]}})
    assert stale.failure is None and not stale.finished


def test_a_workloads_check_state_and_its_eviction() -> None:
    wl = WorkloadView(
        {
            "status": {
                "admissionChecks": [{"name": "mk", "state": "Retry", "message": "again"}],
                "conditions": [
                    {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "by x"},
                    {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "t"},
                ],
            }
        }
    )
    check = wl.check("mk")
    assert check is not None and (check.name, check.state, check.message) == (
        "mk",
        "Retry",
        "again",
    )
    assert wl.check("other") is None
    assert wl.eviction_message == "Preempted: by x"
    assert WorkloadView({}).eviction_message == "the Workload is no longer admitted"


def test_a_pod_digest_and_a_failed_create_digest_read_back() -> None:
    pod = PodView(
        {
            "metadata": {"name": "p", "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "node"}},
            "status": {
                "phase": "Failed",
                "problem": {"stuck": False, "reason": "Error", "container": "c"},
            },
        }
    )
    assert (pod.replicated_job, pod.phase) == ("node", "Failed")
    assert pod.problem is not None and not pod.problem.stuck and pod.problem.finished_at == ""
    assert PodView({"metadata": {}, "status": {}}).phase == "Pending"
    assert PodView({"status": {}}).problem is None
    event = FailedCreateView({"job": {"name": "j", "uid": "u"}, "message": "no", "last": "t"})
    assert (event.job_name, event.job_uid, event.message, event.last) == ("j", "u", "no", "t")


def test_a_runtime_reads_its_template_gang_and_claim_templates_and_skips_nameless_ones() -> None:
    template_spec = {
        "volumeClaimPolicies": [
            {"templates": [{"metadata": {"name": "data"}}, {"metadata": {"name": "ckpt"}}]},
            {"templates": [{"metadata": {}}, None]},  # a template without a name makes nothing
            None,
        ]
    }
    rt = RuntimeView({"spec": {"template": {"spec": template_spec}, "podGroupPolicy": {}}})
    assert rt.template_spec is template_spec
    assert rt.claim_templates == ["data", "ckpt"]
    assert not rt.gang  # an empty podGroupPolicy names no scheduler
    gang = RuntimeView({"spec": {"podGroupPolicy": {"coscheduling": {}}}})
    assert gang.gang and gang.claim_templates == [] and gang.template_spec == {}


@pytest.mark.parametrize(
    ("spec", "template_spec", "labels", "sizes"),
    [
        ({}, {}, {}, (None, None)),
        ({"template": "x", "parallelism": "2", "completions": None}, {}, {}, (None, None)),
        ({"parallelism": True, "completions": 2.0}, {}, {}, (None, None)),
        ({"template": [{"spec": {"containers": []}}]}, {}, {}, (None, None)),
        ({"template": {"metadata": ["x"], "spec": 5}}, {}, {}, (None, None)),
        (
            {
                "template": {
                    "metadata": {"labels": {"a": "1", "b": 2, "c": None}},
                    "spec": {"containers": []},
                },
                "parallelism": 3,
                "completions": 4,
            },
            {"containers": []},
            {"a": "1"},
            (3, 4),
        ),
    ],
)
def test_a_jobs_pod_template_reads_whatever_its_shape(
    spec: Dict, template_spec: Dict, labels: dict[str, str], sizes: tuple[int | None, int | None]
) -> None:
    job = JobView({"spec": spec})
    assert job.template_spec == template_spec
    assert job.template_labels == labels
    assert (job.size("parallelism"), job.size("completions")) == sizes


def test_a_job_is_started_once_its_start_time_is_set() -> None:
    assert JobView({"status": {"startTime": "2026-12-07T08:00:00Z"}}).started
    assert not JobView({"status": {"startTime": None}}).started
    assert not JobView({}).started


def test_a_jobs_status_entry_counts_whatever_is_written() -> None:
    entries = replicated_job_statuses(
        [
            {"name": "node", "ready": 2, "succeeded": "3", "failed": -1, "active": "x"},
            "junk",
            5,
            {"name": "init", "ready": [1], "succeeded": float("inf"), "failed": {}},
        ]
    )
    assert [e.name for e in entries] == ["node", "init"]
    node, init = entries
    states = ("ready", "succeeded", "failed", "active", "suspended")
    assert [node.count(s) for s in states] == [2, 3, 0, 0, 0]
    assert [init.count(s) for s in states] == [0, 0, 0, 0, 0]
    assert replicated_job_statuses({"name": "node"}) == []
    assert replicated_job_statuses({"node": {"ready": 1}}) == []


def test_a_podsets_phases_count_whatever_is_written() -> None:
    phases = PodSetPhases({"name": "node", "running": "x", "pending": -2, "failed": "3"})
    assert [phases.count(p) for p in PodSetPhases.PHASES] == [0, 0, 0, 3, 0]


@pytest.mark.parametrize(
    ("status", "metrics"),
    [
        ({"trainerStatus": {"metrics": [{"name": "loss", "value": "0.1"}]}}, [("loss", "0.1")]),
        ({"trainerStatus": {"metrics": [{"name": "loss"}, "x", {"name": 1, "value": "v"}]}}, []),
        ({"trainerStatus": {"metrics": "many"}}, []),
        ({"trainerStatus": ["not", "an", "object"]}, None),
        ({"trainerStatus": {}}, None),
        ({}, None),
    ],
)
def test_a_trainer_status_reads_only_what_trainers_schema_allows(
    status: Dict, metrics: list[tuple[str, str]] | None
) -> None:
    found = TrainJobView({"status": status}).trainer_status
    assert (None if found is None else found.metrics) == metrics
    assert ConfigMapView({"data": {"k": "v", "n": 1}}).text("k") == "v"
    assert ConfigMapView({"data": {"k": "v", "n": 1}}).text("n") is None
    assert ConfigMapView({"data": ["k"]}).text("k") is None
