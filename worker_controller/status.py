"""Pure status maths: per-PodSet Job and pod counts, dependency readiness, success and
failure, and what keeps a pod from running (read from the pods' digests: digests.py)."""

from __future__ import annotations

import datetime as dt

from kubebase.objects import Dict
from trainjob.naming import job_name
from trainjob.runtime import PodSet, RuntimeInfo
from trainjob_api.conditions import parse_time
from trainjob_api.views import ConditionView, FailedCreateView, JobView, PodProblem, PodView


def job_complete(job: JobView) -> bool:
    return job.complete


def job_failed(job: JobView) -> ConditionView | None:
    return job.failure


def job_ready(job: JobView) -> bool:
    return job.ready


def job_active(job: JobView) -> bool:
    return job.active


def job_finished(job: JobView) -> bool:
    return job.finished


def podset_names(ps: PodSet, trainjob: str) -> list[str]:
    """The names of the PodSet's Jobs."""
    return [job_name(trainjob, ps.name, i) for i in range(ps.replicas)]


def podset_jobs(ps: PodSet, jobs: dict[str, JobView], trainjob: str) -> list[JobView]:
    return [jobs[n] for n in podset_names(ps, trainjob) if n in jobs]


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


def compute_pods_status(info: RuntimeInfo, pods: list[PodView]) -> list[Dict]:
    """An extension of Trainer's status (`podsStatus`): per PodSet, how many of its pods are
    in each phase (`unknown` only when some are), in the runtime's order."""
    counts: dict[str, dict[str, int]] = {
        ps.name: dict.fromkeys(POD_PHASES, 0) for ps in info.pod_sets
    }
    for pod in pods:
        mine = counts.get(pod.replicated_job)
        if mine is not None:
            mine[pod.phase] = mine.get(pod.phase, 0) + 1
    return [
        {"name": name, **{phase.lower(): n for phase, n in by_phase.items()}}
        for name, by_phase in counts.items()
    ]


def _pod_says(pod: PodView, problem: PodProblem) -> str:
    where = f"pod {pod.name}"
    if problem.container:
        where += f" container {problem.container}"
    if problem.stuck or not problem.container:
        return f"{where}: {problem.reason}: {problem.message}".rstrip(": ")
    return f"{where} {problem.message}"


def _failed_first(podset: str, pods: list[PodView]) -> list[tuple[PodView, PodProblem]]:
    """The PodSet's pods that went wrong (not stuck), the first to stop first: the others
    are often only stopped because of it (the Job controller kills them, exit code 137)."""
    gone = [
        (p, problem)
        for p in pods
        if p.replicated_job == podset and (problem := p.problem) is not None and not problem.stuck
    ]
    return sorted(gone, key=lambda found: (found[1].finished_at or "~", found[0].name))


def any_failed(info: RuntimeInfo, jobs: dict[str, JobView]) -> bool:
    """Whether a Job of one of the runtime's PodSets, of this attempt, failed."""
    return any(
        job_failed(job) is not None
        for ps in info.pod_sets
        for job in podset_jobs(ps, jobs, info.trainjob)
    )


def pod_words(podset: str, pods: list[PodView]) -> str | None:
    """What the first of a PodSet's pods that went wrong said (exit code, termination message
    or log tail), or None when none is watched or none did."""
    culprit = next(iter(_failed_first(podset, pods)), None)
    return _pod_says(*culprit) if culprit else None


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


def create_failure(job: JobView, events: list[FailedCreateView]) -> str | None:
    """The message of the last FailedCreate Event about this very Job (its UID) since it was
    created or last resumed, or None."""
    since = _time(job.status.get("startTime") or job.created)
    mine = [
        e
        for e in events
        if e.job_uid in ("", job.uid) and (since is None or (_time(e.last) or since) >= since)
    ]
    if not mine:
        return None
    return max(mine, key=lambda e: e.last).message


def _time(value: str | None) -> dt.datetime | None:
    return parse_time(value) if value else None


def stuck_pods(pods: list[PodView] | None) -> tuple[str, str] | None:
    """(reason, message) when some of a TrainJob's unfinished pods cannot start: the first
    one's kubelet reason, and a message naming it and how many more there are."""
    stuck = sorted(
        ((p, problem) for p in pods or [] if (problem := p.problem) is not None and problem.stuck),
        key=lambda found: found[0].name,
    )
    if not stuck:
        return None
    message = _pod_says(*stuck[0])
    if len(stuck) > 1:
        message += f" (and {len(stuck) - 1} more pods)"
    return stuck[0][1].reason, message


def succeeded(info: RuntimeInfo, jobs: dict[str, JobView]) -> bool:
    targets = info.policy.success_targets or [ps.name for ps in info.pod_sets]
    done = [podset_complete(info.pod_set(t), jobs, info.trainjob) for t in targets]
    return any(done) if info.policy.success_operator == "Any" else all(done)
