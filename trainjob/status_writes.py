"""Which TrainJob status changes may wait (pure): both controllers write a TrainJob's status
as its Jobs and pods change, and pod counts of a job starting up change several times a
second. A change nothing acts on waits a moment after our last write of that TrainJob and
goes with whatever follows; everything else is written at once."""

from __future__ import annotations

from typing import Any

Dict = dict[str, Any]


def can_wait(have: Dict, patch: Dict) -> bool:
    """Whether `patch` (a merge patch of the status `have`, or the whole new status) may wait:
    it changes neither the conditions nor `clusterName`, nor any replicatedJob's ready,
    succeeded or failed count (what Kueue's integration derives PodsReady, reclaimablePods
    and the outcome from); only counts such as active and suspended, `podsStatus`, or other
    fields."""
    for key in ("conditions", "clusterName"):
        if key in patch and (patch[key] or None) != (have.get(key) or None):
            return False
    if "jobsStatus" not in patch:
        return True
    return _outcome_counts(patch["jobsStatus"]) == _outcome_counts(have.get("jobsStatus"))


def _outcome_counts(jobs_status: Any) -> dict[str, tuple[int, ...]]:
    """ready, succeeded, failed per replicatedJob; a job with none of them counts as absent."""
    out = {}
    for js in jobs_status or []:
        if isinstance(js, dict):
            counts = tuple(int(js.get(k) or 0) for k in ("ready", "succeeded", "failed"))
            if any(counts):
                out[str(js.get("name"))] = counts
    return out
