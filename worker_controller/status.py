"""Pure status maths: per-PodSet Job and pod counts, dependency readiness, success and
failure, and what keeps a pod from running."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubecontrol.objects import Dict
from trainjob import constants as c
from trainjob.conditions import parse_time
from trainjob.naming import job_name
from trainjob.runtime import PodSet, RuntimeInfo
from trainjob.views import JobView


def job_complete(job: JobView) -> bool:
    return job.complete


def job_failed(job: JobView) -> Dict | None:
    return job.failure


def job_ready(job: JobView) -> bool:
    return job.ready


def job_active(job: JobView) -> bool:
    return job.active


def job_finished(job: JobView) -> bool:
    return job.finished


def podset_jobs(ps: PodSet, jobs: dict[str, JobView], trainjob: str) -> list[JobView]:
    return [
        jobs[n] for n in (job_name(trainjob, ps.name, i) for i in range(ps.replicas)) if n in jobs
    ]


def podset_complete(ps: PodSet, jobs: dict[str, JobView], trainjob: str) -> bool:
    mine = podset_jobs(ps, jobs, trainjob)
    return len(mine) == ps.replicas and all(job_complete(j) for j in mine)


def podset_ready(ps: PodSet, jobs: dict[str, JobView], trainjob: str) -> bool:
    mine = podset_jobs(ps, jobs, trainjob)
    return len(mine) == ps.replicas and all(job_ready(j) for j in mine)


def dependencies_met(ps: PodSet, info: RuntimeInfo, jobs: dict[str, JobView]) -> bool:
    for dep in ps.depends_on:
        other = info.pod_set(dep.name)
        done = (
            podset_complete(other, jobs, info.trainjob)
            if dep.status == "Complete"
            else podset_ready(other, jobs, info.trainjob)
        )
        if not done:
            return False
    return True


def compute_jobs_status(info: RuntimeInfo, jobs: dict[str, JobView]) -> list[Dict]:
    """Trainer's jobsStatus: per replicatedJob, how many of its child Jobs are in each state."""
    out = []
    for ps in info.pod_sets:
        mine = podset_jobs(ps, jobs, info.trainjob)
        out.append(
            {
                "name": ps.name,
                "ready": sum(1 for j in mine if job_ready(j) and not job_finished(j)),
                "succeeded": sum(1 for j in mine if job_complete(j)),
                "failed": sum(1 for j in mine if job_failed(j)),
                "active": sum(1 for j in mine if job_active(j)),
                "suspended": sum(1 for j in mine if j.suspended),
            }
        )
    return out


POD_PHASES = ("Pending", "Running", "Succeeded", "Failed")

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


def compute_pods_status(info: RuntimeInfo, pods: list[Dict]) -> list[Dict]:
    """An extension of Trainer's status (`podsStatus`): per PodSet, how many of its pods are
    in each phase (`unknown` only when some are), in the runtime's order."""
    counts: dict[str, dict[str, int]] = {
        ps.name: dict.fromkeys(POD_PHASES, 0) for ps in info.pod_sets
    }
    for pod in pods:
        mine = counts.get(pod["metadata"]["labels"].get(c.REPLICATED_JOB_NAME_LABEL, ""))
        if mine is not None:
            phase = pod["status"]["phase"]
            mine[phase] = mine.get(phase, 0) + 1
    return [
        {"name": name, **{phase.lower(): n for phase, n in by_phase.items()}}
        for name, by_phase in counts.items()
    ]


def _pod_says(pod: Dict) -> str:
    problem = pod["status"]["problem"]
    where = f"pod {pod['metadata']['name']}"
    if problem["container"]:
        where += f" container {problem['container']}"
    if problem["stuck"] or not problem["container"]:
        return f"{where}: {problem['reason']}: {problem['message']}".rstrip(": ")
    return f"{where} {problem['message']}"


def _failed_first(podset: str, pods: list[Dict]) -> list[Dict]:
    """The PodSet's pods that went wrong (not stuck), the first to stop first: the others
    are often only stopped because of it (the Job controller kills them, exit code 137)."""
    gone = [
        p
        for p in pods
        if p["metadata"]["labels"].get(c.REPLICATED_JOB_NAME_LABEL) == podset
        and p["status"].get("problem")
        and not p["status"]["problem"]["stuck"]
    ]

    def order(p: Dict) -> tuple[str, str]:
        return p["status"]["problem"].get("finishedAt") or "~", str(p["metadata"]["name"])

    return sorted(gone, key=order)


def first_failure(
    info: RuntimeInfo, jobs: dict[str, JobView], pods: list[Dict] | None = None
) -> str | None:
    """A message naming the first failed PodSet, why its Job failed and, when its pods are
    watched, what the first of its pods that went wrong said (exit code, termination message
    or log tail), or None."""
    for ps in info.pod_sets:
        for job in podset_jobs(ps, jobs, info.trainjob):
            cond = job_failed(job)
            if cond is not None:
                why = ": ".join(x for x in (cond.get("reason"), cond.get("message")) if x)
                message = f"PodSet {ps.name!r} failed: Job {job.name} {why}".strip()
                culprit = next(iter(_failed_first(ps.name, pods or [])), None)
                return f"{message}; {_pod_says(culprit)}" if culprit else message
    return None


def jobs_short_of_pods(jobs: dict[str, JobView]) -> list[str]:
    """Our running Jobs that have fewer pods running or done than they want (`parallelism`):
    where the Job controller may be failing to create them."""
    out = []
    for name, job in sorted(jobs.items()):
        if job.suspended or job.finished:
            continue
        if job.count("active") + job.count("succeeded") < job.parallelism:
            out.append(name)
    return out


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


def create_failure(job: JobView, events: list[Dict]) -> str | None:
    """The message of the last FailedCreate Event about this very Job (its UID) since it was
    created or last resumed, or None."""
    since = _time(job.status.get("startTime") or job.created)
    uid = job.uid
    mine = [
        e
        for e in events
        if e["job"]["uid"] in ("", uid) and (since is None or (_time(e["last"]) or since) >= since)
    ]
    if not mine:
        return None
    return str(max(mine, key=lambda e: str(e["last"]))["message"])


def _time(value: Any) -> dt.datetime | None:
    return parse_time(str(value)) if value else None


def stuck_pods(pods: list[Dict] | None) -> tuple[str, str] | None:
    """(reason, message) when some of a TrainJob's unfinished pods cannot start: the first
    one's kubelet reason, and a message naming it and how many more there are."""
    stuck = sorted(
        (p for p in pods or [] if (p["status"].get("problem") or {}).get("stuck")),
        key=lambda p: str(p["metadata"]["name"]),
    )
    if not stuck:
        return None
    message = _pod_says(stuck[0])
    if len(stuck) > 1:
        message += f" (and {len(stuck) - 1} more pods)"
    return stuck[0]["status"]["problem"]["reason"], message


def succeeded(info: RuntimeInfo, jobs: dict[str, JobView]) -> bool:
    targets = info.policy.success_targets or [ps.name for ps in info.pod_sets]
    done = [podset_complete(info.pod_set(t), jobs, info.trainjob) for t in targets]
    return any(done) if info.policy.success_operator == "Any" else all(done)
