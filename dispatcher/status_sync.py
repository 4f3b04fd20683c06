"""Status back: the manager TrainJob shows the status of its copy on the worker that runs
it, plus `clusterName` (as Kueue's MultiKueue does for the jobs it dispatches). Pure; the
dispatch decision asks for it (dispatch.py, step 3) and execute.py writes it, guarded by the
manager TrainJob's resourceVersion. From this status the manager's Kueue integration derives
the manager Workload's PodsReady and, once the copy finishes, Finished."""

from __future__ import annotations

from typing import Any

Dict = dict[str, Any]


def can_wait(manager_trainjob: Dict, patch: Dict) -> bool:
    """Whether a status-back patch may wait to be coalesced with later ones: it changes
    neither the conditions nor `clusterName`, nor any replicatedJob's ready, succeeded or
    failed count (what the manager's Kueue integration derives PodsReady, reclaimablePods and
    the outcome from); only counts such as active and suspended, or other fields."""
    have = manager_trainjob.get("status") or {}
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


def status_back(manager_trainjob: Dict, remote_trainjob: Dict, cluster: str) -> Dict | None:
    """The merge patch that makes the manager TrainJob's status the remote one's (fields the
    remote no longer has are removed with None); None when they already agree."""
    want = {**(remote_trainjob.get("status") or {}), "clusterName": cluster}
    have = dict(manager_trainjob.get("status") or {})
    if have == want:
        return None
    return {**{k: None for k in have if k not in want}, **want}
