"""Builders of the dispatch decision's inputs (dispatcher/decisions/decide.py): a manager Workload,
a worker as the manager sees it, and one decision over them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from dispatcher.decisions.decide import DispatchObserved, RemoteView, decide
from tests.support.builders import TrainJobBuilder, WorkloadBuilder
from trainjob_api.views import TrainJobView, WorkloadView

Dict = dict[str, Any]


NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


def manager_workload(
    *conds: str,
    cluster: str | None = None,
    nominated: list[str] | None = None,
    check: str = "Pending",
) -> Dict:
    """`WorkloadBuilder` in one call: its conditions, clusterName, nominated clusters and the
    state of our check."""
    built = WorkloadBuilder().conditions(*conds).check(check)
    if cluster:
        built.cluster(cluster)
    if nominated:
        built.nominated(*nominated)
    return built.obj()


def remote(
    name: str,
    *,
    connected: bool = True,
    lost: float = 0.0,
    admitted_at: str | None = None,
    workload: bool = True,
    trainjob: bool = False,
    running: bool = False,
) -> RemoteView:
    """A worker as the dispatcher sees it (its copies have UIDs, as every object an API server
    serves); its TrainJob copy (`trainjob`) is Complete, or still running with `running`."""
    wl = None
    if workload:
        conds = (
            [{"type": "Admitted", "status": "True", "lastTransitionTime": admitted_at}]
            if admitted_at
            else []
        )
        wl = {
            "kind": "Workload",
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "metadata": {"name": "trainjob-tj-abcde", "namespace": "ns", "uid": f"uid-{name}-wl"},
            "status": {"conditions": conds},
        }
    tj = (
        {
            "kind": "TrainJob",
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "metadata": {"name": "tj", "namespace": "ns", "uid": f"uid-{name}-tj"},
            "status": {
                "conditions": [
                    {"type": "Suspended", "status": "False"}
                    if running
                    else {"type": "Complete", "status": "True"}
                ]
            },
        }
        if trainjob
        else None
    )
    return RemoteView(
        name,
        connected,
        lost,
        None if wl is None else WorkloadView(wl),
        None if tj is None else TrainJobView(tj),
    )


MULTIKUEUE_GATE = "kueue.x-k8s.io/multikueue"
GATED_WORKLOAD_UID = "uid-wl"  # the manager Workload `gated` copies are made for


def gated(
    name: str,
    *,
    blocked_since: str | None = None,
    opened_at: str | None = None,
    connected: bool = True,
    lost: float = 0.0,
    gate: bool = True,
    made_for: str = GATED_WORKLOAD_UID,
) -> RemoteView:
    """A worker holding a copy made with MultiKueue's preemption gate (`gate`; False: a copy
    made without it) for the manager Workload of UID `made_for`, its Kueue blocked on the gate
    since `blocked_since` (None: not), the gate opened at `opened_at` (None: closed)."""
    made = remote(name, connected=connected, lost=lost)
    assert made.workload is not None
    raw = made.workload.raw
    raw["metadata"].update(uid=f"uid-{name}", resourceVersion="7")
    raw["metadata"]["annotations"] = {"kueue.x-k8s.io/multikueue-origin-uid": made_for}
    raw["spec"] = {"preemptionGates": [{"name": MULTIKUEUE_GATE}]} if gate else {}
    if blocked_since is not None:
        raw["status"]["conditions"].append(
            {
                "type": "BlockedOnPreemptionGates",
                "status": "True",
                "reason": "PreemptionGated",
                "lastTransitionTime": blocked_since,
            }
        )
    if opened_at is not None:
        state = {"name": MULTIKUEUE_GATE, "position": "Open", "lastTransitionTime": opened_at}
        raw["status"]["preemptionGates"] = [state]
    return made


def observed(wl: Dict, tj: Dict | None, remotes: list[RemoteView], **kw: Any) -> DispatchObserved:
    """The decision's input over these objects (views of them, as the dispatcher passes)."""
    return DispatchObserved(
        workload=WorkloadView(wl),
        trainjob=None if tj is None else TrainJobView(tj),
        check="mk",
        remotes=remotes,
        origin="multikueue",
        worker_lost_timeout=60,
        now=NOW,
        **kw,
    )


def decide_for(wl: Dict, remotes: list[RemoteView], **kw: Any) -> Any:
    """One decision over these objects (`trainjob`: the manager TrainJob, a MultiKueue one by
    default; `strategy`: the dispatch strategy)."""
    tj = kw.pop("trainjob", None) or TrainJobBuilder().multikueue().obj()
    return decide(observed(wl, tj, remotes), **kw)
