"""Kueue's orchestrated preemption across the fleet, end to end (issue: Kueue v0.19's
MultiKueueOrchestratedPreemption, KEP-8303): every Kueue of the bed with the gate on, the
dispatcher making its copies gated; a high-priority TrainJob sent to two workers, each full of
training of lower priority, evicts training on one of them only."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from tests.support.multikueue import (
    KUEUE,
    TRAINER,
    MultiKueue,
    dispatcher_with,
    events_of,
    manager_events,
    workloads_seen,
)

Dict = dict[str, Any]
GATE = "MultiKueueOrchestratedPreemption"
URGENT = "tj-urgent"


@contextlib.contextmanager
def orchestrated(bed: Bed, controllers: list[setup.Controller], *flags: str) -> Iterator[None]:
    """Every cluster's Kueue with the gate on and the dispatcher gating its copies, for the
    block; then both as before."""
    bed.set_kueue_feature_gates({GATE: True})
    try:
        with dispatcher_with(controllers, "--orchestrated-preemption", "true", *flags):
            yield
    finally:
        bed.set_kueue_feature_gates({})


def _ranked(mk: MultiKueue) -> None:
    """URGENT above the default on every cluster, the workers' queues preempting for it."""
    mk.preempting_for(URGENT)


def _urgent_runs(mk: MultiKueue) -> str:
    """A TrainJob of URGENT's priority to the manager, run to its end; the worker it ran on
    (what each worker did with it, in the error, when it does not end)."""
    urgent = {"labels": {"kueue.x-k8s.io/priority-class": URGENT}}
    mk.submit("urgent", metadata=urgent, run="3s")
    try:
        mk.wait_until("urgent", "Complete", timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {_where_it_waits(mk)}") from None
    return str((mk.get("urgent") or {})["status"]["clusterName"])


def _where_it_waits(mk: MultiKueue) -> str:
    """Each worker's Workloads of the namespace (conditions, gates), and the job's Events."""
    said = []
    for worker in mk.workers:
        for wl in mk.custom(worker).list_namespaced_custom_object(*KUEUE, mk.ns, "workloads")[
            "items"
        ]:
            conditions = [
                f"{cd['type']}={cd['status']}({cd.get('reason')}: {cd.get('message', '')[:80]})"
                for cd in (wl.get("status") or {}).get("conditions") or []
            ]
            said.append(
                f"{worker} {wl['metadata']['name']}: {conditions} "
                f"gates {wl['spec'].get('preemptionGates')} "
                f"{(wl.get('status') or {}).get('preemptionGates')}"
            )
    return "; ".join(said) + f"; events {events_of(mk, 'urgent')}"


def _preempted(seen: list[Dict], name: str) -> bool:
    """Whether any version of the Workload of the worker's own TrainJob `name` was evicted by
    a preemption."""
    return any(
        cd.get("type") == "Evicted"
        and cd.get("status") == "True"
        and cd.get("reason") == "Preempted"
        for wl in list(seen)
        if (wl["metadata"].get("ownerReferences") or [{}])[0].get("name") == name
        for cd in (wl.get("status") or {}).get("conditions") or []
    )


def test_a_high_priority_job_over_full_workers_evicts_training_on_one_worker_only(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    mk = MultiKueue(bed, worker_cpu="1")
    first, second = mk.workers
    _ranked(mk)
    # A timeout no admission here takes: a second worker is never let preempt.
    with (
        orchestrated(bed, controllers, "--single-cluster-preemption-timeout", "600"),
        workloads_seen(mk, first) as on_first,
        workloads_seen(mk, second) as on_second,
        mk.filled(first, second, cpu="1"),  # training of priority 0 on each
    ):
        where = _urgent_runs(mk)
    evicted = {
        w for w, seen in ((first, on_first), (second, on_second)) if _preempted(seen, "local")
    }
    assert evicted == {where}, f"training evicted on {sorted(evicted)}; the job ran on {where}"
    gated = [
        wl
        for seen in (on_first, on_second)
        for wl in seen
        if (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/multikueue-origin")
    ]
    assert gated and all(
        wl["spec"].get("preemptionGates") == [{"name": "kueue.x-k8s.io/multikueue"}] for wl in gated
    ), "every copy made with MultiKueue's gate"
    assert "PreemptionAllowed" in events_of(mk, "urgent")


def test_with_the_gate_off_every_full_worker_preempts(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    """The cost the gate saves, as Kueue's KEP tells it: without it, the job's copy on each
    worker preempts there, and all but one of those evictions are for nothing."""
    mk = MultiKueue(bed, worker_cpu="1")
    first, second = mk.workers
    _ranked(mk)
    with (
        workloads_seen(mk, first) as on_first,
        workloads_seen(mk, second) as on_second,
        mk.filled(first, second, cpu="1"),
    ):
        _urgent_runs(mk)

        def both() -> bool:
            return _preempted(on_first, "local") and _preempted(on_second, "local")

        wait_for(both, 30, what="training evicted on both workers")


def test_by_cost_the_worker_that_would_evict_fewer_jobs_preempts(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    """Two full workers: the first holds two jobs of half a CPU, the second one of a whole
    CPU, all admitted within the same minute. Letting the first preempt evicts two jobs,
    the second one: the dispatcher lets the second (its cost order, the default), whichever
    Kueue says first that it is blocked, and says why in the Event."""
    mk = MultiKueue(bed, worker_cpu="1")
    first, second = mk.workers
    _ranked(mk)
    locals_ = {first: ["local-a", "local-b"], second: ["local"]}
    try:
        with (
            orchestrated(bed, controllers, "--single-cluster-preemption-timeout", "600"),
            workloads_seen(mk, first) as on_first,
            workloads_seen(mk, second) as on_second,
        ):
            for worker, names in locals_.items():
                for name in names:
                    cpu = "500m" if len(names) == 2 else "1"
                    mk.submit(name, cluster=worker, cpu=cpu, run="600s")
            for worker in mk.workers:
                mk.wait_full(worker, "1", 60)
            where = _urgent_runs(mk)
            said = [(e.reason, e.message or "") for e in manager_events(mk, "urgent")]
    finally:
        for worker, names in locals_.items():
            for name in names:
                with contextlib.suppress(client.ApiException):
                    mk.custom(worker).delete_namespaced_custom_object(
                        *TRAINER, mk.ns, "trainjobs", name
                    )
    assert where == second
    evicted = [
        name
        for seen, names in ((on_first, locals_[first]), (on_second, locals_[second]))
        for name in names
        if _preempted(seen, name)
    ]
    assert evicted == ["local"], f"evicted: {evicted}"
    allowed = [m for reason, m in said if reason == "PreemptionAllowed"]
    assert len(allowed) == 1 and allowed[0].startswith(
        f"{second} may preempt to admit it: there it preempts 1 job, "
    ), allowed
    assert f"(instead of {first}: preempts 2 jobs, " in allowed[0], allowed
