"""metav1.Condition helpers: find, set (keeping lastTransitionTime when unchanged), remove."""

from __future__ import annotations

import datetime as dt
from typing import Any

from trainjob import constants as c

Dict = dict[str, Any]


def now_rfc3339(now: dt.datetime) -> str:
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def find(conditions: list[Dict], ctype: str) -> Dict | None:
    return next((cond for cond in conditions if cond.get("type") == ctype), None)


def is_true(conditions: list[Dict], ctype: str) -> bool:
    cond = find(conditions, ctype)
    return cond is not None and cond.get("status") == "True"


def set_condition(
    conditions: list[Dict],
    ctype: str,
    status: bool,
    reason: str,
    message: str,
    now: dt.datetime,
    generation: int | None = None,
) -> list[Dict]:
    """A new list with `ctype` set; lastTransitionTime moves only when the status flips."""
    new_status = "True" if status else "False"
    old = find(conditions, ctype)
    cond: Dict = {
        "type": ctype,
        "status": new_status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now_rfc3339(now),
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    if old is not None and old.get("status") == new_status:
        cond["lastTransitionTime"] = old.get("lastTransitionTime", cond["lastTransitionTime"])
    out = [dict(x) for x in conditions if x.get("type") != ctype]
    out.append(cond)
    return out


def remove_condition(conditions: list[Dict], ctype: str) -> list[Dict]:
    return [dict(x) for x in conditions if x.get("type") != ctype]


def trainjob_finished(conditions: list[Dict]) -> bool:
    """Complete, or Failed for a reason that is final (not a missing or invalid runtime)."""
    if is_true(conditions, c.COND_COMPLETE):
        return True
    failed = find(conditions, c.COND_FAILED)
    return bool(
        failed
        and failed.get("status") == "True"
        and failed.get("reason") not in c.RECOVERABLE_FAILURE_REASONS
    )


def final_outcome(conditions: list[Dict]) -> tuple[bool, str, str] | None:
    """(succeeded, reason, message) of a finished TrainJob, else None."""
    if not trainjob_finished(conditions):
        return None
    done = find(conditions, c.COND_COMPLETE)
    if done and done.get("status") == "True":
        return True, str(done.get("reason")), str(done.get("message", ""))
    failed = find(conditions, c.COND_FAILED) or {}
    return False, str(failed.get("reason")), str(failed.get("message", ""))
