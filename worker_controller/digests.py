"""What the worker controller's caches keep of its pods and of the Job controller's
FailedCreate Events (the informers' transforms, worker_controller/watches.py): small digests,
read back through views (plugin/trainjob_api/views.py: PodView, FailedCreateView). Pure."""

from __future__ import annotations

from typing import Any

from kubebase.objects import Dict
from trainjob_api import constants as c

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
