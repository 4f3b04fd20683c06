"""The worker controller's decision, observed and planned without a cluster: the helpers its
unit tests share (tests/unit/worker_controller)."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from trainjob.models import parse_trainjob
from trainjob.progress import Wiring
from trainjob_api.views import JobView, PodView, RuntimeView
from worker_controller.decide import Blocked, Observed, Plan, decide
from worker_controller.digests import job_digest

Dict = dict[str, Any]
NOW = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.UTC)


def observe(
    tj: Dict,
    runtime: Dict | None = None,
    jobs: list[Dict] | None = None,
    services: list[Dict] | None = None,
    named: Dict | None = None,
    now: dt.datetime = NOW,
    pods: list[Dict] | None = None,
    held_for: float | None = None,
    coalesce: float = 0.0,
    blocked: Blocked | None = None,
    wiring: Wiring | None = None,
    pod_group_apis: frozenset[str] = frozenset(),
    pod_create_failures: dict[str, str] | None = None,
) -> Plan:
    return decide(
        Observed(
            trainjob=parse_trainjob(tj),
            runtime=None if runtime is None else RuntimeView(runtime),
            # as the worker's cache keeps them (digests.job_digest)
            jobs={j["metadata"]["name"]: JobView(job_digest(copy.deepcopy(j))) for j in jobs or []},
            services=services or [],
            service_named=named,
            now=now,
            pods=None if pods is None else [PodView(p) for p in pods],
            status_coalesce=coalesce,
            status_held_for=held_for,
            blocked=blocked,
            progress=wiring,
            pod_group_apis=pod_group_apis,
            pod_create_failures=pod_create_failures or {},
        )
    )


def conditions(plan: Plan) -> dict[str, tuple[str, str]]:
    assert plan.status is not None
    return {c["type"]: (c["status"], c["reason"]) for c in plan.status["conditions"]}


def kinds(plan: Plan) -> list[tuple[str, str]]:
    """What the plan writes: the objects it makes, then those it applies."""
    return [(o["kind"], o["metadata"]["name"]) for o in [*plan.create, *plan.patch]]


def job(
    name: str,
    *,
    complete: bool = False,
    failed: str | None = None,
    active: int = 0,
    suspend: bool = False,
    parallelism: int = 1,
    ready: int = 0,
    created: str = "2026-11-22T11:59:00Z",
) -> Dict:
    conds = []
    if complete:
        conds.append({"type": "Complete", "status": "True"})
    if failed:
        conds.append(
            {
                "type": "Failed",
                "status": "True",
                "reason": failed,
                "message": "Job has reached the specified backoff limit",
            }
        )
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {
            "suspend": suspend,
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {"spec": {}},
        },
        "status": {"conditions": conds, "active": active, "ready": ready},
    }


OUR_SERVICE = {"metadata": {"name": "tj", "labels": {"trainjob.dev/trainjob-name": "tj"}}}


def as_made(tj: Dict, runtime: Dict, pod_group_apis: frozenset[str] = frozenset()) -> list[Dict]:
    """The Jobs a first pass makes for this TrainJob, unsuspended (its status says which
    restart it is on)."""
    fresh = copy.deepcopy(tj)
    fresh["spec"].pop("suspend", None)
    fresh["status"] = {k: v for k, v in (tj.get("status") or {}).items() if k != "conditions"}
    plan = observe(fresh, runtime, services=[OUR_SERVICE], pod_group_apis=pod_group_apis)
    return [o for o in plan.create if o["kind"] == "Job"]


def _uid(made: Dict) -> str:
    return f"uid-{made['metadata']['name']}"


def reported(made: Dict, state: str, **failure: str) -> Dict:
    """A Job as made, with what the Job controller reports of it: running, complete or failed
    (`failure`: its Failed condition's reason, message and lastTransitionTime, if any)."""
    out = copy.deepcopy(made)
    out["metadata"]["creationTimestamp"] = "2026-11-22T11:59:00Z"
    out["metadata"]["uid"] = _uid(made)
    conds = {
        "running": [],
        "complete": [{"type": "Complete", "status": "True"}],
        "failed": [
            {"type": "Failed", "status": "True", **(failure or {"reason": "BackoffLimitExceeded"})}
        ],
    }[state]
    out["status"] = {"conditions": conds, "active": 1 if state == "running" else 0}
    return out


def suspended(made: Dict) -> Dict:
    """The suspend applied to the Job as made and `reported`: that Job alone (its UID named),
    suspended (its pods deleted)."""
    out = copy.deepcopy(made)
    out["metadata"]["uid"] = _uid(made)
    out["spec"]["suspend"] = True
    return out


def suspend_patch(made: Dict) -> Dict:
    """The write that suspends the Job as made and `reported`: `spec.suspend` alone, on that
    Job only (its UID named)."""
    meta = made["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": _uid(made)},
        "spec": {"suspend": True},
    }


# A container's states: it exited 1 saying why; it was killed after (the Job controller's doing)
EXIT_1 = {
    "terminated": {
        "exitCode": 1,
        "reason": "Error",
        "message": "bad input file\n",
        "finishedAt": "2026-11-22T11:59:40Z",
    }
}
KILLED = {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": "2026-11-22T11:59:41Z"}}
