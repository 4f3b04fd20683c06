"""What the worker controller's caches keep of its Jobs, Workloads, pods and FailedCreate
Events (worker_controller/digests.py, the informers' transforms)."""

from __future__ import annotations

import copy
import json

from kubebase.objects import Dict
from tests.support.builders import edit
from tests.support.pods import RICH_POD
from trainjob.naming import owner_reference
from trainjob.queues import resources_key
from trainjob.runtime import podgroups
from trainjob.runtime.info import PodSetShape
from trainjob.workload import pod_sets_match
from trainjob_api import constants as c
from trainjob_api.pods import PodSpecView
from trainjob_api.views import JobView, WorkloadView
from worker_controller import builders, digests


def test_a_pods_digest_keeps_its_names_its_phase_and_what_is_wrong_and_nothing_else() -> None:
    pod = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "resourceVersion": "5",
            "uid": "u",
            "labels": {c.TRAINJOB_NAME_LABEL: "tj", c.REPLICATED_JOB_NAME_LABEL: "node", "x": "y"},
            "annotations": {"big": "z" * 1000},
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {
            "containerStatuses": [
                {"name": "c", "state": {"waiting": {"reason": "ErrImagePull", "message": "no"}}}
            ]
        },
    }
    assert digests.pod_digest(pod) == {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "resourceVersion": "5",
            "labels": {c.TRAINJOB_NAME_LABEL: "tj", c.REPLICATED_JOB_NAME_LABEL: "node"},
        },
        "status": {
            "phase": "Pending",
            "problem": {"stuck": True, "container": "c", "reason": "ErrImagePull", "message": "no"},
        },
    }
    assert digests.pod_owner(pod) == ("ns", "tj")


def test_an_events_last_time_falls_back_as_the_api_fills_them() -> None:
    base = {"metadata": {"name": "e", "namespace": "ns", "creationTimestamp": "t0"}}
    assert digests.event_digest(base)["last"] == "t0"
    assert digests.event_digest({**base, "eventTime": "t1"})["last"] == "t1"
    series = {**base, "eventTime": "t1", "series": {"lastObservedTime": "t2"}}
    assert digests.event_digest(series)["last"] == "t2"
    assert digests.event_digest({**series, "lastTimestamp": "t3"})["last"] == "t3"
    assert digests.event_job({**base, "job": {"name": "j"}}) == ("ns", "j")


# Where each gang scheduler's pods name their group (podgroups.PLUGINS: coscheduling, Volcano)
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"


def _job(pod_spec: Dict, **spec: object) -> Dict:
    """A Job as the API server sends it, its pods made from `pod_spec`."""
    labels = {c.RESTART_ATTEMPT_LABEL: "2", c.TRAINJOB_NAME_LABEL: "tj"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "tj-node-0", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                     "labels": {**labels}, "ownerReferences": [owner_reference("tj", "t")]},
        "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed",
                 "backoffLimit": 0, "selector": {"matchLabels": {"x": "y"}},
                 "template": {"metadata": {"labels": {**labels, GROUP_LABEL: "tj"},
                                           "annotations": {GROUP_ANNOTATION: "tj"}},
                              "spec": copy.deepcopy(pod_spec)},
                 **spec},
        "status": {"active": 2, "ready": 1, "startTime": "2026-12-04T10:00:00Z",
                   "conditions": [{"type": "Suspended", "status": "False"}]},
    }  # fmt: skip


def test_a_jobs_digest_reads_as_the_job_and_keeps_none_of_its_pods_image_command_or_env() -> None:
    """What the worker's passes read of a Job (its size, suspension, attempt, pod group, what
    its pods ask and where they may run, its status) reads the same from the digest its cache
    keeps; the containers' image, command, environment and the volumes are not kept."""
    for suspended in (True, False):
        job = _job(RICH_POD, suspend=suspended)
        if suspended:  # the Job controller has taken its pods and start time away
            edit(job).status({"conditions": [{"type": "Suspended", "status": "True"}]})
        full, kept = JobView(job), JobView(digests.job_digest(copy.deepcopy(job)))
        assert builders.asked_by(kept) == builders.asked_by(full)
        assert builders.attempt_of(kept) == builders.attempt_of(full) == 2
        for plugin in podgroups.PLUGINS:
            assert podgroups.names_group(kept, plugin, "tj")
        for field in ("parallelism", "suspended", "complete", "ready", "active", "failure"):
            assert getattr(kept, field) == getattr(full, field), field
        # made to run elsewhere, resumed: the same write from either
        desired = _job({**RICH_POD, "nodeSelector": {"pool": "b"}, "tolerations": []})
        edit(desired).suspend(False).spec(parallelism=1, completions=1)
        write = builders.job_patch(JobView(desired), kept)
        assert write == builders.job_patch(JobView(desired), full)
        assert write is not None
        placed = write["spec"].get("template", {}).get("spec")
        if suspended:  # its pods gone: placed where the TrainJob is admitted now, resumed
            assert placed == {"nodeSelector": {"pool": "b"}, "tolerations": []}
        else:  # running: made no bigger than asked, its placement never touched
            assert placed is None and write["spec"]["parallelism"] == 1
    kept_job = digests.job_digest(copy.deepcopy(job))
    assert {k: v for k, v in kept_job["spec"].items() if k != "template"} == {
        k: v for k, v in job["spec"].items() if k != "template"
    }
    assert kept_job["metadata"] == job["metadata"] and kept_job["status"] == job["status"]
    text = json.dumps(kept_job)
    for gone in ("pytorch:2.6", "torchrun", "EPOCHS", "creds", "emptyDir", "29500"):
        assert gone not in text, gone


def test_a_workloads_digest_reads_as_the_workload_and_keeps_none_of_its_pods_image() -> None:
    """What the worker's Kueue integration reads of a Workload (do its PodSets still describe
    the TrainJob, the priority class its pods name, its size, its admission) reads the same
    from the digest its cache keeps, a MultiKueue copy's or ours."""
    pod_set = {
        "name": "node",
        "count": 2,
        "minCount": 1,
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": copy.deepcopy(RICH_POD)},
        "topologyRequest": {"podIndexLabel": "batch.kubernetes.io/job-completion-index"},
    }
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "trainjob-tj-1", "namespace": "ns", "resourceVersion": "9"},
        "spec": {"queueName": "q", "priority": 5,
                 "podSets": [pod_set, {**pod_set, "name": "launcher"}]},
        "status": {"admission": {"clusterQueue": "cq"}},
    }  # fmt: skip
    full = WorkloadView(workload)
    kept = WorkloadView(digests.workload_digest(copy.deepcopy(workload)))
    asks = resources_key(PodSpecView(RICH_POD))
    for shapes in (
        [PodSetShape("node", 1, 2, asks), PodSetShape("launcher", 1, 2, asks)],
        [
            PodSetShape("node", 1, 2, asks),
            PodSetShape("launcher", 1, 2, resources_key(PodSpecView({}))),
        ],
    ):
        assert pod_sets_match(kept, shapes) == pod_sets_match(full, shapes)
    assert pod_sets_match(kept, [PodSetShape("node", 1, 2, asks)] * 2) is False
    same = [PodSetShape("node", 1, 2, asks), PodSetShape("launcher", 1, 2, asks)]
    assert pod_sets_match(kept, same) is True
    bigger = [PodSetShape("node", 2, 2, asks), PodSetShape("launcher", 1, 2, asks)]
    assert pod_sets_match(kept, bigger) is False  # the same PodSets, more pods in one
    for ps, whole in zip(kept.pod_sets, full.pod_sets, strict=True):
        assert {k: v for k, v in ps.items() if k != "template"} == {
            k: v for k, v in whole.items() if k != "template"
        }
        assert ps["template"]["metadata"] == whole["template"]["metadata"]
        assert ps["template"]["spec"]["priorityClassName"] == "high"
    assert kept.status == full.status and kept.spec["priority"] == 5
    assert "pytorch:2.6" not in json.dumps(kept.raw)


def test_a_digest_of_json_the_api_server_would_not_store_is_never_an_error() -> None:
    """A transform that raised would fail every list of its kind. A pod template (or its spec)
    that is not an object is kept as one whose pods ask nothing; any other part not understood
    (a Job's spec, a Workload's podSets, a PodSet not an object or with no template) as it is."""
    odds: list[object] = ["x", 3, None, ["resources"]]
    for odd in odds:
        templates: list[object] = [odd, {"metadata": {}, "spec": odd}]
        for template in templates:
            kept = JobView(digests.job_digest({"spec": {"template": copy.deepcopy(template)}}))
            assert builders.asked_by(kept) == resources_key(PodSpecView({})), template
        assert digests.job_digest({"spec": copy.deepcopy(odd)}) == {"spec": odd}
        workload = {"spec": {"podSets": odd}}
        assert digests.workload_digest(copy.deepcopy(workload)) == workload
    pod_sets: list[object] = ["x", None, 3, {"name": "n", "count": 2}]
    workload = {"spec": {"podSets": copy.deepcopy(pod_sets)}}
    assert digests.workload_digest(workload)["spec"]["podSets"] == pod_sets
