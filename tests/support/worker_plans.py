"""The worker controller's decision, observed and planned without a cluster: the helpers its
unit tests share (tests/unit/worker_controller)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from trainjob.progress import Wiring
from trainjob.views import JobView, PodView
from worker_controller.decide import Blocked, Observed, Plan, decide

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
) -> Plan:
    return decide(
        Observed(
            trainjob=tj,
            runtime=runtime,
            jobs={j["metadata"]["name"]: JobView(j) for j in jobs or []},
            services=services or [],
            service_named=named,
            now=now,
            pods=None if pods is None else [PodView(p) for p in pods],
            status_coalesce=coalesce,
            status_held_for=held_for,
            blocked=blocked,
            progress=wiring,
            pod_group_apis=pod_group_apis,
        )
    )


def conditions(plan: Plan) -> dict[str, tuple[str, str]]:
    assert plan.status is not None
    return {c["type"]: (c["status"], c["reason"]) for c in plan.status["conditions"]}


def kinds(plan: Plan) -> list[tuple[str, str]]:
    """What the plan writes: the objects it makes, then those it applies."""
    return [(o["kind"], o["metadata"]["name"]) for o in [*plan.create, *plan.apply]]


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
        "spec": {"suspend": suspend, "parallelism": parallelism, "template": {"spec": {}}},
        "status": {"conditions": conds, "active": active, "ready": ready},
    }


OUR_SERVICE = {"metadata": {"name": "tj", "labels": {"trainjob.dev/trainjob-name": "tj"}}}
