"""Status back: the manager TrainJob shows the status of its copy on the worker that runs
it, plus `clusterName` (as Kueue's MultiKueue does for the jobs it dispatches). Pure; the
dispatch decision asks for it (dispatch.py, step 3) and execute.py writes it, guarded by the
manager TrainJob's resourceVersion (what may wait is `trainjob.status_writes.can_wait`). From
this status the manager's Kueue integration derives the manager Workload's PodsReady and, once
the copy finishes, Finished."""

from __future__ import annotations

from typing import Any

Dict = dict[str, Any]


def status_back(manager_trainjob: Dict, remote_trainjob: Dict, cluster: str) -> Dict | None:
    """The merge patch that makes the manager TrainJob's status the remote one's (fields the
    remote no longer has are removed with None); None when they already agree."""
    want = {**(remote_trainjob.get("status") or {}), "clusterName": cluster}
    have = dict(manager_trainjob.get("status") or {})
    if have == want:
        return None
    return {**{k: None for k in have if k not in want}, **want}
