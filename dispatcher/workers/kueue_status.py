"""The conditions the dispatcher writes on Kueue's objects (AdmissionChecks'
`Active`, MultiKueueClusters' `Active` and `RuntimesInSync`), and what it reads back from
them: one guarded status write, only when a condition changed, only by the leader."""

from __future__ import annotations

import datetime as dt

from kubebase.objects import Dict
from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster
from trainjob_api import conditions as cond
from trainjob_api import constants as c


def _guard(obj: Dict) -> Dict:
    """The resourceVersion precondition of a write planned from `obj` (the conditions list is
    replaced whole: a write planned from an old version must not undo a newer one)."""
    version = obj["metadata"].get("resourceVersion")
    return {"resourceVersion": version} if version else {}


def set_active_condition(
    manager: Cluster, obj: Dict, active: bool, reason: str, message: str
) -> None:
    """Write the `Active` condition of a Kueue object only when it changed (and only as the
    leader: a standby's view is the leader's to write)."""
    set_conditions(manager, obj, [("Active", active, reason, message)])


def set_conditions(manager: Cluster, obj: Dict, updates: list[tuple[str, bool, str, str]]) -> None:
    """Write conditions (type, status, reason, message) of a Kueue object in one write, only
    when one changed (and only as the leader)."""
    if not manager.writable():
        return
    conditions = cond.Conditions(
        list((obj.get("status") or {}).get("conditions") or []),
        dt.datetime.now(dt.UTC),
        obj["metadata"].get("generation"),
    )
    for ctype, status, reason, message in updates:
        conditions.set(ctype, status, reason, message)
    if not conditions.changed:
        return
    try:
        manager.patch(
            c.KINDS[obj["kind"]],
            obj["metadata"]["name"],
            None,
            {"metadata": _guard(obj), "status": {"conditions": conditions.list}},
            subresource="status",
        )
    except ApiException as exc:
        if exc.status not in (404, 409):
            raise
