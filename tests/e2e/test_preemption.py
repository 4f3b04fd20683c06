"""Kueue's orchestrated preemption across the fleet, end to end (issue: Kueue v0.19's
MultiKueueOrchestratedPreemption, KEP-8303): every Kueue of the bed with the gate on, the
dispatcher making its copies gated; a high-priority TrainJob sent to two workers, each full of
training of lower priority, evicts training on one of them only."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from tests.support.multikueue import (
    KUEUE,
    LOST_TIMEOUT,
    TRAINER,
    URGENT,
    MultiKueue,
    dispatcher_down,
    events_of,
    manager_events,
    orchestrated,
    preempted,
    workloads_seen,
)

Dict = dict[str, Any]


def _ranked(mk: MultiKueue) -> None:
    """URGENT above the default on every cluster, the workers' queues preempting for it."""
    mk.preempting_for(URGENT)


def _urgent_runs(mk: MultiKueue) -> str:
    """A TrainJob of URGENT's priority to the manager, run to its end; the worker it ran on
    (what each worker did with it, in the error, when it does not end)."""
    urgent = {"labels": {"kueue.x-k8s.io/priority-class": URGENT}}
    mk.submit("urgent", metadata=urgent, run="3s")
    return _ran(mk)


def _ran(mk: MultiKueue, timeout: float = 180) -> str:
    """The worker the TrainJob "urgent" ran to its end on (what each worker did with it, in
    the error, when it does not end within `timeout` seconds)."""
    try:
        mk.wait_until("urgent", "Complete", timeout=timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {_where_it_waits(mk)}") from None
    return str((mk.get("urgent") or {})["status"]["clusterName"])


def _copy_on(mk: MultiKueue, worker: str) -> Dict | None:
    """The dispatcher's copy of a manager Workload on `worker` (the only one there made by
    MultiKueue), or None."""
    return next(
        (
            wl
            for wl in mk.remote_workloads(worker)
            if (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/multikueue-origin")
        ),
        None,
    )


def _said(wl: Dict | None, ctype: str) -> Dict:
    """The Workload's condition of type `ctype` ({} when it has none)."""
    conditions = ((wl or {}).get("status") or {}).get("conditions") or []
    return next((cd for cd in conditions if cd.get("type") == ctype), {})


GATED = "Workload requires preemption, but it's gated"  # Kueue v0.19's scheduler


def _preempting(mk: MultiKueue, worker: str, policy: str) -> None:
    """The test namespace's ClusterQueue on `worker` preempting within itself by `policy`."""
    mk.custom(worker).patch_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        f"cq-{mk.ns}",
        {"spec": {"preemption": {"withinClusterQueue": policy}}},
    )


def _urgent_judged_by_none(mk: MultiKueue) -> None:
    """A TrainJob of URGENT's priority over both workers, each full and its queue preempting
    nothing: its copies pending, blocked on no gate, until their queues may preempt."""
    for worker in mk.workers:
        _preempting(mk, worker, "Never")
    urgent = {"labels": {"kueue.x-k8s.io/priority-class": URGENT}}
    mk.submit("urgent", metadata=urgent, run="3s")
    wait_for(lambda: all(_copy_on(mk, w) is not None for w in mk.workers), 60, what="both copies")


def _blocked(mk: MultiKueue, worker: str) -> None:
    """`worker`'s queue let preempt lower priorities, until its Kueue says the copy of
    "urgent" is blocked on the gate."""
    _preempting(mk, worker, "LowerPriority")
    wait_for(
        lambda: _said(_copy_on(mk, worker), "BlockedOnPreemptionGates").get("status") == "True",
        60,
        what=f"the copy on {worker} blocked on its gate",
    )


def _opened_where_it_cannot_admit(mk: MultiKueue, controllers: list[setup.Controller]) -> None:
    """ "urgent" over both workers (`_urgent_judged_by_none`); the first worker's queue let
    preempt until its Kueue says the copy is blocked, and let preempt nothing again before
    the dispatcher sees it (every replica down meanwhile): Kueue keeps the copy blocked (the
    condition is reset only by an admission or an eviction), the dispatcher lets the first
    worker preempt, and its Kueue cannot. Returns once the Event says the first worker may
    preempt."""
    first, _ = mk.workers
    _urgent_judged_by_none(mk)
    with dispatcher_down(controllers):
        _blocked(mk, first)
        _preempting(mk, first, "Never")
        wait_for(
            lambda: _said(_copy_on(mk, first), "QuotaReserved").get("message") not in (None, GATED),
            60,
            what=f"{first}'s Kueue to find it may preempt nothing",
        )
    assert _said(_copy_on(mk, first), "BlockedOnPreemptionGates").get("status") == "True"

    def allowed() -> list[str]:
        return [
            e.message or "" for e in manager_events(mk, "urgent") if e.reason == "PreemptionAllowed"
        ]

    wait_for(
        lambda: any(m.startswith(f"{first} may preempt") for m in allowed()),
        60,
        what=f"the dispatcher to let {first} preempt",
    )


def test_a_worker_that_does_not_admit_in_time_hands_preemption_to_the_next(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    """Kueue's single-cluster preemption timeout: the first worker let preempt has not
    admitted the job within it (its queue may preempt no more), so the second, blocked
    meanwhile, may preempt, and not before; no training is evicted where it was for nothing."""
    timeout = 20
    mk = MultiKueue(bed, worker_cpu="1")
    first, second = mk.workers
    _ranked(mk)
    with (
        orchestrated(bed, controllers, "--single-cluster-preemption-timeout", str(timeout)),
        workloads_seen(mk, first) as on_first,
        workloads_seen(mk, second) as on_second,
        mk.filled(first, second, cpu="1"),
    ):
        _opened_where_it_cannot_admit(mk, controllers)
        _preempting(mk, second, "LowerPriority")
        where = _ran(mk, 120)
        opened = [
            (e.metadata.creation_timestamp, e.message or "")
            for e in manager_events(mk, "urgent")
            if e.reason == "PreemptionAllowed"
        ]
    assert where == second
    assert [m.split()[0] for _, m in opened] == [first, second], opened
    waited = (opened[1][0] - opened[0][0]).total_seconds()
    # Event times are whole seconds
    assert waited >= timeout - 1, f"{second} let preempt {waited:g}s after {first}"
    # (the first worker's queue may preempt nothing by then: the timing above is the claim)
    assert not preempted(on_first, "local") and preempted(on_second, "local")


@pytest.mark.disruptive
def test_a_lost_worker_holding_the_gate_lets_the_next_preempt(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    """The worker let preempt is lost before it admits the job: once the dispatcher counts it
    lost (the bed's worker-lost timeout), it holds the gate no more and the other worker, blocked
    meanwhile, may preempt, long before Kueue's single-cluster timeout."""
    mk = MultiKueue(bed, worker_cpu="1")
    first, second = mk.workers
    _ranked(mk)
    with (
        orchestrated(bed, controllers, "--single-cluster-preemption-timeout", "600"),
        workloads_seen(mk, second) as on_second,
        mk.filled(first, second, cpu="1"),
    ):
        _opened_where_it_cannot_admit(mk, controllers)
        bed.stop_component(first, "kube-apiserver")
        try:
            _preempting(mk, second, "LowerPriority")
            try:
                mk.wait_until("urgent", "Complete", timeout=LOST_TIMEOUT + 120)
            except AssertionError as exc:
                raise AssertionError(f"{exc}; events {events_of(mk, 'urgent')}") from None
        finally:
            bed.restore_api_server(first)
        where = (mk.get("urgent") or {})["status"]["clusterName"]
        allowed = [
            (e.message or "").split()[0]
            for e in manager_events(mk, "urgent")
            if e.reason == "PreemptionAllowed"
        ]
        # Once the worker is back, the copy it held is removed: never run twice.
        wait_for(lambda: _copy_on(mk, first) is None, 90, what=f"the copy on {first} removed")
    assert where == second and allowed == [first, second], (where, allowed)
    assert preempted(on_second, "local")


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
        w for w, seen in ((first, on_first), (second, on_second)) if preempted(seen, "local")
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
            return preempted(on_first, "local") and preempted(on_second, "local")

        wait_for(both, 30, what="training evicted on both workers")


def test_by_cost_the_worker_that_would_evict_fewer_jobs_preempts(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    """Two full workers: the first holds two jobs of half a CPU, the second one of a whole
    CPU, all admitted within the same minute. Letting the first preempt evicts two jobs,
    the second one. The first's Kueue says first that it is blocked (the second's after it,
    the dispatcher's replicas down meanwhile): the dispatcher lets the second (its cost
    order, the default; Kueue's order would let the first), and says why in the Event."""
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
            _urgent_judged_by_none(mk)
            with dispatcher_down(controllers):
                _blocked(mk, first)
                _blocked(mk, second)
            where = _ran(mk)
            said = [(e.reason, e.message or "") for e in manager_events(mk, "urgent")]
    finally:
        for worker, names in locals_.items():
            for name in names:
                with contextlib.suppress(client.ApiException):
                    mk.custom(worker).delete_namespaced_custom_object(
                        *TRAINER, mk.ns, "trainjobs", name
                    )
    assert where == second, said
    evicted = [
        name
        for seen, names in ((on_first, locals_[first]), (on_second, locals_[second]))
        for name in names
        if preempted(seen, name)
    ]
    assert evicted == ["local"], f"evicted: {evicted}"
    allowed = [m for reason, m in said if reason == "PreemptionAllowed"]
    assert len(allowed) == 1 and allowed[0].startswith(
        f"{second} may preempt to admit it: there it preempts 1 job, "
    ), allowed
    assert f"(instead of {first}: preempts 2 jobs, " in allowed[0], allowed
