"""Pure status maths: per-PodSet Job and pod counts, dependency readiness, success and
failure."""

from __future__ import annotations

from typing import Any

from trainjob import constants as c
from trainjob.naming import job_name
from trainjob.runtime import PodSet, RuntimeInfo

Dict = dict[str, Any]


def _job_condition(job: Dict, ctype: str) -> Dict | None:
    for cond in job.get("status", {}).get("conditions") or []:
        if cond.get("type") == ctype and cond.get("status") == "True":
            return dict(cond)
    return None


def job_complete(job: Dict) -> bool:
    return _job_condition(job, "Complete") is not None


def job_failed(job: Dict) -> Dict | None:
    return _job_condition(job, "Failed")


def job_ready(job: Dict) -> bool:
    status = job.get("status", {})
    want = int(job.get("spec", {}).get("parallelism") or 0)
    return (
        job_complete(job)
        or (int(status.get("ready") or 0) + int(status.get("succeeded") or 0)) >= want > 0
    )


def job_active(job: Dict) -> bool:
    return int(job.get("status", {}).get("active") or 0) > 0 and not job_finished(job)


def job_finished(job: Dict) -> bool:
    return job_complete(job) or job_failed(job) is not None


def podset_jobs(ps: PodSet, jobs: dict[str, Dict], trainjob: str) -> list[Dict]:
    return [
        jobs[n] for n in (job_name(trainjob, ps.name, i) for i in range(ps.replicas)) if n in jobs
    ]


def podset_complete(ps: PodSet, jobs: dict[str, Dict], trainjob: str) -> bool:
    mine = podset_jobs(ps, jobs, trainjob)
    return len(mine) == ps.replicas and all(job_complete(j) for j in mine)


def podset_ready(ps: PodSet, jobs: dict[str, Dict], trainjob: str) -> bool:
    mine = podset_jobs(ps, jobs, trainjob)
    return len(mine) == ps.replicas and all(job_ready(j) for j in mine)


def dependencies_met(ps: PodSet, info: RuntimeInfo, jobs: dict[str, Dict]) -> bool:
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


def compute_jobs_status(info: RuntimeInfo, jobs: dict[str, Dict]) -> list[Dict]:
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
                "suspended": sum(1 for j in mine if j.get("spec", {}).get("suspend")),
            }
        )
    return out


POD_PHASES = ("Pending", "Running", "Succeeded", "Failed")


def pod_digest(pod: Dict) -> Dict:
    """What the worker controller keeps of one of its pods: whose it is, and its phase."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return {
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
        "status": {"phase": (pod.get("status") or {}).get("phase") or "Pending"},
    }


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


def first_failure(info: RuntimeInfo, jobs: dict[str, Dict]) -> str | None:
    """A message naming the first failed PodSet and why its Job failed, or None."""
    for ps in info.pod_sets:
        for job in podset_jobs(ps, jobs, info.trainjob):
            cond = job_failed(job)
            if cond is not None:
                why = ": ".join(x for x in (cond.get("reason"), cond.get("message")) if x)
                return f"PodSet {ps.name!r} failed: Job {job['metadata']['name']} {why}".strip()
    return None


def succeeded(info: RuntimeInfo, jobs: dict[str, Dict]) -> bool:
    targets = info.policy.success_targets or [ps.name for ps in info.pod_sets]
    done = [podset_complete(info.pod_set(t), jobs, info.trainjob) for t in targets]
    return any(done) if info.policy.success_operator == "Any" else all(done)
