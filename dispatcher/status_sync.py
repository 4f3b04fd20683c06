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


# The remote conditions that are also announced on the manager TrainJob as a Warning Event
# when they turn True (`kubectl describe` there shows why a job failed or does not start).
ANNOUNCED = ("Failed", "PodsStuck")


def warnings_back(have: Dict, patch: Dict, cluster: str) -> list[tuple[str, str]]:
    """(reason, message) of each ANNOUNCED condition that `patch` (from `status_back`) turns
    True, or True with another reason, on the manager TrainJob whose status is `have`."""
    before = {
        cond.get("type"): cond
        for cond in have.get("conditions") or []
        if isinstance(cond, dict) and cond.get("status") == "True"
    }
    out = []
    for cond in patch.get("conditions") or []:
        ctype = cond.get("type")
        if ctype not in ANNOUNCED or cond.get("status") != "True":
            continue
        old = before.get(ctype)
        if old is None or old.get("reason") != cond.get("reason"):
            out.append(
                (str(cond.get("reason") or ctype), f"on {cluster}: {cond.get('message', '')}")
            )
    return out
