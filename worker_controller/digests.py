"""What the worker controller's caches keep of its Jobs, Workloads, pods and of the Job
controller's FailedCreate Events (the informers' transforms, worker_controller/watches.py):
digests, read back through views (plugin/trainjob_api/views.py: JobView, WorkloadView, PodView,
FailedCreateView). No I/O; a Job's or Workload's digest is made in the object given (the
informer's own, just decoded)."""

from __future__ import annotations

from typing import Any

from kubebase.objects import Dict
from trainjob.queues import pod_asks
from trainjob_api import constants as c
from worker_controller.builders import SCHEDULING_FIELDS

# The kubelet's waiting reasons for a container that will not start (or keeps stopping) until
# someone changes something: the image, the pod's configuration, the program.
STUCK_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)
# A termination message or log tail kept per pod, at most (the kubelet keeps 4096 bytes).
MESSAGE_LIMIT = 300


def _short(text: Any) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= MESSAGE_LIMIT else flat[: MESSAGE_LIMIT - 3] + "..."


def _exit(terminated: Dict) -> str:
    """`exited with code 1 (Error): <termination message>`, from a terminated state."""
    code = terminated.get("exitCode")
    said = f"exited with code {code}" if code is not None else "terminated"
    if terminated.get("reason"):
        said += f" ({terminated['reason']})"
    message = _short(terminated.get("message"))
    return f"{said}: {message}" if message else said


def pod_problem(pod_status: Dict) -> Dict | None:
    """What is wrong with a pod, from its status, or None: a container the kubelet cannot
    start (`stuck`: the reason is one of STUCK_REASONS), else a container that exited non-zero,
    else the pod's own reason for failing (e.g. Evicted)."""
    statuses = [
        *(pod_status.get("initContainerStatuses") or []),
        *(pod_status.get("containerStatuses") or []),
    ]
    for cs in statuses:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK_REASONS:
            message = _short(waiting.get("message"))
            last = (cs.get("lastState") or {}).get("terminated")
            if last:  # CrashLoopBackOff: why it stopped the last time
                message = f"{message}; last run {_exit(last)}" if message else f"last {_exit(last)}"
            return {
                "stuck": True,
                "container": cs.get("name", ""),
                "reason": waiting["reason"],
                "message": message,
            }
    for cs in statuses:
        terminated = (cs.get("state") or {}).get("terminated") or {}
        if terminated and terminated.get("exitCode", 0) != 0:
            return {
                "stuck": False,
                "container": cs.get("name", ""),
                "reason": terminated.get("reason") or "Error",
                "message": _exit(terminated),
                "finishedAt": terminated.get("finishedAt") or "",
            }
    if pod_status.get("phase") == "Failed" and pod_status.get("reason"):
        return {
            "stuck": False,
            "container": "",
            "reason": pod_status["reason"],
            "message": _short(pod_status.get("message")),
        }
    return None


# What the worker controller reads of a pod template's spec besides what its pods ask
# (`pod_asks`): where they may run (a Job's placement, builders.job_patch) and their priority
# class (the Workload's priority, jobframework_io.extract_priority).
TEMPLATE_FIELDS = (*SCHEDULING_FIELDS, "priorityClassName")


def template_digest(template: object) -> Dict:
    """A pod template as the worker controller keeps it: its metadata whole (labels and
    annotations say a Job's attempt and pod group), of its spec what the pods ask for and
    where they may run (TEMPLATE_FIELDS). The image, command, environment and volumes, most of
    a template's size, nothing here reads."""
    if not isinstance(template, dict):
        return {}
    spec = template.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    kept: Dict = {"spec": {**pod_asks(spec), **{f: spec[f] for f in TEMPLATE_FIELDS if f in spec}}}
    if "metadata" in template:
        kept["metadata"] = template["metadata"]
    return kept


def job_digest(job: Dict) -> Dict:
    """What the worker controller keeps of a Job a TrainJob controls: the Job whole but its
    pods' spec (`template_digest`). Its size, suspension, placement, attempt and status are
    what the passes read (JobView, builders.job_patch)."""
    spec = job.get("spec")
    if isinstance(spec, dict) and "template" in spec:
        job["spec"] = {**spec, "template": template_digest(spec["template"])}
    return job


def workload_digest(workload: Dict) -> Dict:
    """What the worker controller keeps of a Workload: the Workload whole but its PodSets'
    pod specs (`template_digest`), of which the Kueue integration reads what the pods ask (is
    it still the TrainJob's? workload.pod_sets_match) and their priority class."""
    spec = workload.get("spec")
    pod_sets = spec.get("podSets") if isinstance(spec, dict) else None
    if isinstance(spec, dict) and isinstance(pod_sets, list):
        workload["spec"] = {
            **spec,
            "podSets": [
                {**ps, "template": template_digest(ps["template"])}
                if isinstance(ps, dict) and "template" in ps
                else ps
                for ps in pod_sets
            ],
        }
    return workload


def pod_digest(pod: Dict) -> Dict:
    """What the worker controller keeps of one of its pods: whose it is, its phase, and what
    is wrong with it, if anything (`pod_problem`)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    pod_status = pod.get("status") or {}
    digest: Dict = {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "resourceVersion": meta.get("resourceVersion"),
            "labels": {
                k: labels[k]
                for k in (c.TRAINJOB_NAME_LABEL, c.REPLICATED_JOB_NAME_LABEL)
                if k in labels
            },
        },
        "status": {"phase": pod_status.get("phase") or "Pending"},
    }
    problem = pod_problem(pod_status)
    if problem is not None:
        digest["status"]["problem"] = problem
    return digest


def pod_owner(pod: Dict) -> tuple[str, str]:
    """The TrainJob a pod of ours belongs to, as a work-queue key."""
    meta = pod["metadata"]
    return meta["namespace"], meta["labels"].get(c.TRAINJOB_NAME_LABEL, "")


def event_digest(event: Dict) -> Dict:
    """What the worker controller keeps of a Job controller's FailedCreate Event."""
    meta = event.get("metadata") or {}
    involved = event.get("involvedObject") or {}
    series = event.get("series") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "job": {"name": involved.get("name", ""), "uid": involved.get("uid", "")},
        "message": _short(event.get("message")),
        "last": event.get("lastTimestamp")
        or series.get("lastObservedTime")
        or event.get("eventTime")
        or meta.get("creationTimestamp")
        or "",
    }


def event_job(event: Dict) -> tuple[str, str]:
    """(namespace, Job name) of an Event digest: the group its Job's reconcile looks in."""
    return event["metadata"]["namespace"], event["job"]["name"]
