"""Which TrainJob status changes may wait, and for how long (pure): both controllers write a
TrainJob's status as its Jobs and pods change, and pod counts change several times a second
while a job starts and ends. A change nothing acts on is held a moment from when it is first
seen and goes with whatever follows (the Job's ready count, the Complete condition); everything
else is written at once."""

from __future__ import annotations

from typing import Any

from kubebase.objects import Dict
from trainjob_api.views import replicated_job_statuses


def can_wait(have: Dict, patch: Dict) -> bool:
    """Whether `patch` (a merge patch of the status `have`, or the whole new status) may wait:
    it changes neither the conditions nor any replicatedJob's ready, succeeded or failed count
    (what Kueue's integration derives PodsReady, reclaimablePods and the outcome from); only
    counts such as active and suspended, `podsStatus`, or other fields. A `clusterName` that
    appears for the first time may wait too (the manager Workload and the Started Event name
    the worker already, and PodsReady reads no count without it, so it travels with the first
    count that matters: `hold`); one that changes, a job sent to another worker, goes at
    once. So do a restart (`restarts`: the Jobs' attempt) and a new `trainerStatus` (its
    reports are already written at most once per interval where they arrive, the worker
    controller, and people watch it move)."""
    if "trainerStatus" in patch and patch["trainerStatus"] != have.get("trainerStatus"):
        return False
    if "restarts" in patch and patch["restarts"] != have.get("restarts"):
        return False  # a restart: its Jobs are made again once it is written
    if "conditions" in patch and (patch["conditions"] or None) != (have.get("conditions") or None):
        return False
    cluster = have.get("clusterName")
    if cluster and "clusterName" in patch and patch["clusterName"] != cluster:
        return False
    jobs = patch["jobsStatus"] if "jobsStatus" in patch else have.get("jobsStatus")
    if not cluster and patch.get("clusterName") and _outcome_counts(jobs):
        # PodsReady reads counts only beside a clusterName: a first one brings the counts
        # already there into play (a status Kueue's own MultiKueue brought back before the
        # manager switched to the dispatcher names no cluster, and its Workload's
        # waitForPodsReady runs on)
        return False
    if "jobsStatus" not in patch:
        return True
    return _outcome_counts(patch["jobsStatus"]) == _outcome_counts(have.get("jobsStatus"))


def held_key(namespace: str, name: str) -> tuple[str, str, str]:
    """The WriteMemory key under which a TrainJob's held status change is timed."""
    return ("StatusHeld", namespace, name)


# How long the first status brought back from a worker (its `clusterName`, with pod counts
# that move nothing) may wait for the first count that matters. A burst keeps pods from being
# ready for longer than `coalesce`, and each first status written alone would be a manager
# request of its own; a job whose pods never get ready still shows where it runs after this
# long.
FIRST_STATUS_HOLD_SECONDS = 30.0


def hold(have: Dict, patch: Dict, coalesce: float, held_for: float | None) -> float | None:
    """Seconds to hold `patch` back, or None to write it now: a change that `can_wait` is held
    `coalesce` seconds from when a change was first held (`held_for` ago; None: nothing is
    held yet), then written with whatever has changed by then. The first `clusterName` (the
    first status from a worker) is held up to FIRST_STATUS_HOLD_SECONDS instead. Nothing is
    held when `coalesce` is 0."""
    if coalesce <= 0 or not can_wait(have, patch):
        return None
    first = "clusterName" in patch and not have.get("clusterName")
    limit = max(coalesce, FIRST_STATUS_HOLD_SECONDS) if first else coalesce
    left = limit - (held_for or 0.0)
    return left if left > 0 else None


def _outcome_counts(jobs_status: Any) -> dict[str, tuple[int, ...]]:
    """ready, succeeded, failed per replicatedJob; a job with none of them counts as absent."""
    out = {}
    for js in replicated_job_statuses(jobs_status):
        counts = tuple(js.count(k) for k in ("ready", "succeeded", "failed"))
        if any(counts):
            out[js.name] = counts
    return out
