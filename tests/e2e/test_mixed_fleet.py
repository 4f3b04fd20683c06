"""A fleet of both kinds of worker (clusters.config.mixed_bed_config): worker1 runs our worker
controller, worker2 Kubeflow Trainer v2.3 and JobSet as their releases run them, with Kueue's
own TrainJob integration and only the manager's identity of ours (deploy/worker-identity).
Trainer runs on the manager too, beside the dispatcher.

The same TrainJobs go to each kind and come back with the same ending; the story reads
JobSet's pods as it reads ours; a TrainJob on a lost Trainer worker moves to ours and runs
there once; Trainer on the manager leaves MultiKueue TrainJobs to the dispatcher. The bed is
this module's own, up beside the kwok bed for as long as the module runs."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.config import mixed_bed_config
from clusters.helpers.tenant import Tenant, story_path
from clusters.helpers.waiting import wait_for
from clusters.install import DEPLOY, DISPATCHER
from clusters.kube import Applier, render
from kubectl_trainjob.__main__ import main as kubectl_trainjob
from tests.support.multikueue import (
    KUEUE,
    LOST_TIMEOUT,
    MULTIKUEUE,
    URGENT,
    MultiKueue,
    dispatched_to,
    dispatcher_down,
    events_of,
    manager_events,
    orchestrated,
    preempted,
    the_leader,
    workloads_seen,
)

pytestmark = [pytest.mark.bed]
Dict = dict[str, Any]
JOBSET = ("jobset.x-k8s.io", "v1alpha2")


@pytest.fixture(scope="module")
def mixed_fleet() -> Iterator[tuple[Bed, list[setup.Controller]]]:
    """The mixed bed with the product installed as deploy/ installs it on each kind of cluster,
    or the running one $TJ_MIXED_BED_STATE_DIR names (kept up afterwards); and its
    controllers."""
    bed = Bed(mixed_bed_config())
    reuse = bool(os.environ.get("TJ_MIXED_BED_STATE_DIR")) and bed.is_up()
    if not reuse:
        bed.up()
    try:
        # Trainer runs the manager's own TrainJobs (no queue, or none of MultiKueue's), as
        # docs/operators/operations.md tells a platform with Trainer on the manager to set.
        ctrls = setup.start_controllers(
            bed, worker_lost_timeout=LOST_TIMEOUT, manager_flags=("--manager-runs-trainjobs",)
        )
        try:
            yield bed, ctrls
        finally:
            setup.stop_controllers(bed, ctrls)
    finally:
        if not reuse and not os.environ.get("TJ_BED_KEEP"):
            bed.down()


@pytest.fixture(scope="module")
def mixed(mixed_fleet: tuple[Bed, list[setup.Controller]]) -> Bed:
    return mixed_fleet[0]


def only_on(mixed: Bed, worker: str) -> MultiKueue:
    """A test namespace whose queue has room on `worker` only."""
    others = {w.name: "0" for w in mixed.config.workers if w.name != worker}
    return MultiKueue(mixed, cpu_by_worker=others)


def conditions(trainjob: Dict | None) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason", ""))
        for c in ((trainjob or {}).get("status") or {}).get("conditions") or []
    }


def jobsets(mk: MultiKueue, cluster: str) -> list[Dict]:
    items: list[Dict] = mk.custom(cluster).list_namespaced_custom_object(*JOBSET, mk.ns, "jobsets")[
        "items"
    ]
    return items


# How the two kinds of worker differ in what comes back, as docs/operators/operations.md's
# table of the two says: each key's value on ours, then on Trainer v2.3 + JobSet. Anything else
# must come back the same from both.
KNOWN_DIFFERENCES: dict[str, tuple[Any, Any]] = {
    # the conditions: both end in JobSet's reasons; Trainer's copy also keeps Suspended as
    # False/Resumed (it was suspended until its worker's Kueue admitted it)
    "ok": (
        {"Complete": ("True", "AllJobsCompleted")},
        {"Suspended": ("False", "Resumed"), "Complete": ("True", "AllJobsCompleted")},
    ),
    "broken": (
        {"Failed": ("True", "FailedJobs")},
        {"Suspended": ("False", "Resumed"), "Failed": ("True", "FailedJobs")},
    ),
    # status.podsStatus: Trainer's CRD has no such field
    "status fields": (
        ["clusterName", "conditions", "jobsStatus", "podsStatus"],
        ["clusterName", "conditions", "jobsStatus"],
    ),
    # Trainer's worker records Suspended and Resumed Events on the copy
    "story events": (
        ["Scheduled", "Started", "SuccessfulCreate"],
        ["Resumed", "Scheduled", "Started", "SuccessfulCreate", "Suspended"],
    ),
}


def _ends_on(mixed: Bed, worker: str, tmp_path: Path) -> dict[str, Any]:
    """The same two TrainJobs (one that completes, one whose pod exits 3) on `worker` alone;
    what came back of them."""
    tmp_path.mkdir(exist_ok=True)
    mk = only_on(mixed, worker)
    runtime = mk.fail_fast_runtime()
    mk.submit("ok", nodes=2, run="6s")
    mk.submit("broken", runtime=runtime, exit_code=3, run="1s")
    alice = Tenant(mixed, mk.ns, "alice", "edit", tmp_path)

    last: list[Dict] = []

    def two_running_pods() -> Dict | None:
        code, story = alice.get(story_path(mk.ns, "ok"))
        assert code == 200, story
        last[:] = [story]
        running = [p for p in story["pods"] if p["phase"] == "Running"]
        return story if len(running) == 2 else None

    try:
        story = wait_for(two_running_pods, 60, what=f"the story's two running pods on {worker}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the story said {last}") from None
    assert story["worker"] == worker and story["workerProblem"] is None, story
    assert sorted(p["index"] for p in story["pods"]) == ["0", "1"], story["pods"]
    reasons = {(e["source"], e["reason"]) for e in story["events"]}
    assert (worker, "Scheduled") in reasons, reasons

    done = mk.wait_until("ok", "Complete", timeout=120)
    failed = mk.wait_until("broken", "Failed", timeout=120)
    ok = mk.get("ok") or {}
    assert ok["status"].get("clusterName") == worker
    assert dispatched_to(mk, "ok") == [worker], dispatched_to(mk, "ok")
    assert dispatched_to(mk, "broken") == [worker], dispatched_to(mk, "broken")
    jobs = {j["name"]: j for j in ok["status"].get("jobsStatus") or []}
    # JobSet's counts are of Jobs: the replicated job `node` is one Job of two pods
    assert set(jobs) == {"node"} and jobs["node"].get("succeeded") == 1, jobs
    # the copy's ending came back, and what the manager's Kueue made of it
    assert (mk.manager_workload("ok") or {}).get("status", {}).get("conditions")
    # the failed pod's Job is named, whichever kind says it
    assert "broken-node-0" in failed["message"], failed
    return {
        "ok": conditions(ok),
        "broken": conditions(mk.get("broken")),
        "Complete": (done["reason"], done["message"]),
        # JobSet's words naming the first failed Job (ours then go on with what its pod said)
        "Failed": (failed["reason"], failed["message"].split(";")[0]),
        "status fields": sorted(ok["status"]),
        # (a retry of the scheduler's under load is neither kind's doing)
        "story events": sorted({r for s, r in reasons if s == worker} - {"FailedScheduling"}),
    }


def test_the_same_trainjobs_end_alike_on_either_kind_of_worker_but_for_the_named_differences(
    mixed: Bed, tmp_path: Path
) -> None:
    """worker1 runs ours, worker2 Trainer v2.3 + JobSet: both complete the one and fail the
    other, and what comes back differs only as KNOWN_DIFFERENCES (the operators' table) says."""
    ours = _ends_on(mixed, "worker1", tmp_path / "ours")
    theirs = _ends_on(mixed, "worker2", tmp_path / "theirs")
    differ = {k for k in ours if ours[k] != theirs[k]}
    for key in sorted(differ | set(KNOWN_DIFFERENCES)):
        print(f"[figure]   {key}: ours {ours[key]} / Trainer {theirs[key]}")
    assert differ == set(KNOWN_DIFFERENCES), (
        f"differences not named, or named and gone: {differ ^ set(KNOWN_DIFFERENCES)}"
    )
    for key, (on_ours, on_trainer) in KNOWN_DIFFERENCES.items():
        assert (ours[key], theirs[key]) == (on_ours, on_trainer), key


def test_progress_trainer_writes_on_its_worker_reaches_the_manager(
    mixed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trainer v2.3's status server (its alpha TrainJobStatus gate) writes what a pod reports
    as a server-side apply of status.trainerStatus, field manager `trainer-status`. The server
    cannot run on this bed (it reads the issuer from the in-pod token path and asks it for
    OIDC discovery), so the test makes that write on the copy itself; the manager TrainJob
    and `kubectl trainjob progress` then read it, as they read our worker controller's."""
    mk = only_on(mixed, "worker2")
    mk.submit("reporting", run="20s")
    worker = mk.started_on("reporting")
    reported = {
        "progressPercentage": 45,
        "estimatedRemainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.25"}],
        "lastUpdatedTime": "2026-11-28T12:00:00Z",
    }
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "reporting", "namespace": mk.ns},
        "status": {"trainerStatus": reported},
    }
    api = mixed.api(worker)
    api.call_api(
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{mk.ns}/trainjobs/reporting/status",
        "PATCH",
        query_params=[("fieldManager", "trainer-status"), ("force", "true")],
        header_params={"Content-Type": "application/apply-patch+yaml"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    wait_for(
        lambda: ((mk.get("reporting") or {}).get("status") or {}).get("trainerStatus") == reported,
        30,
        what="the copy's trainerStatus on the manager TrainJob",
    )
    plugin = ["--kubeconfig", str(mixed.kubeconfig(mk.manager)), "-n", mk.ns]
    assert kubectl_trainjob([*plugin, "progress", "reporting"]) == 0
    shown = capsys.readouterr().out
    assert "]  45%  about 2m00s left" in shown and "loss=0.25" in shown, shown
    mk.wait_until("reporting", "Complete", timeout=120)


def test_trainer_on_the_manager_leaves_multikueue_trainjobs_to_the_dispatcher(
    mixed: Bed,
) -> None:
    mk = only_on(mixed, "worker2")
    mk.submit("sent", run="2s")
    # Trainer runs there and does its own work: a TrainJob it manages (no queue) gets a JobSet.
    local = mk.submit("trainers-own", queue=None)
    local_name = local["metadata"]["name"]
    wait_for(
        lambda: [j for j in jobsets(mk, mk.manager) if j["metadata"]["name"] == local_name],
        60,
        what="Trainer's JobSet for its own TrainJob on the manager",
    )
    mk.wait_until("sent", "Complete", timeout=120)
    sent = mk.get("sent") or {}
    assert sent["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    # ... and none for the one the dispatcher sent, whose copy ran on the Trainer worker.
    assert [j["metadata"]["name"] for j in jobsets(mk, mk.manager)] == [local_name]
    assert dispatched_to(mk, "sent") == ["worker2"]
    assert not [e for e in events_of(mk, "sent") if "JobSet" in e], events_of(mk, "sent")


def test_a_trainer_worker_preempts_for_a_gated_copy_only_once_the_dispatcher_lets_it(
    mixed_fleet: tuple[Bed, list[setup.Controller]],
) -> None:
    """Kueue's orchestrated preemption on a stock Trainer worker: the Workload copy made there
    with MultiKueue's gate, its Kueue (Trainer's TrainJob integration) blocked on it while a
    TrainJob of its own fills the queue, the gate opened by the dispatcher, the worker's own
    job preempted and the high-priority one run there."""
    mixed, controllers = mixed_fleet
    mk = MultiKueue(mixed, cpu_by_worker={"worker1": "0", "worker2": "1"})
    mk.preempting_for(URGENT)
    with (
        orchestrated(mixed, controllers, "--single-cluster-preemption-timeout", "600"),
        workloads_seen(mk, "worker2") as seen,
        mk.filled("worker2", cpu="1"),
    ):
        mk.submit("urgent", metadata={"labels": {"kueue.x-k8s.io/priority-class": URGENT}})
        mk.wait_until("urgent", "Complete", timeout=240)
    assert (mk.get("urgent") or {})["status"]["clusterName"] == "worker2"
    copies = [
        wl
        for wl in list(seen)
        if (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/multikueue-origin")
    ]
    assert copies and all(
        wl["spec"].get("preemptionGates") == [{"name": "kueue.x-k8s.io/multikueue"}]
        for wl in copies
    ), "the copy made with MultiKueue's gate"
    assert any(
        cd["type"] == "BlockedOnPreemptionGates" and cd["status"] == "True"
        for wl in copies
        for cd in (wl.get("status") or {}).get("conditions") or []
    ), "Trainer's worker's Kueue waited on the gate"
    assert preempted(seen, "local"), "the worker's own job preempted"
    assert "PreemptionAllowed" in events_of(mk, "urgent")
    # and only once let: the eviction no earlier than the Event (both in whole seconds)
    (allowed,) = [
        e.metadata.creation_timestamp
        for e in manager_events(mk, "urgent")
        if e.reason == "PreemptionAllowed"
    ]
    evicted = [
        dt.datetime.fromisoformat(cd["lastTransitionTime"].replace("Z", "+00:00"))
        for wl in list(seen)
        if (wl["metadata"].get("ownerReferences") or [{}])[0].get("name") == "local"
        for cd in (wl.get("status") or {}).get("conditions") or []
        if cd["type"] == "Evicted" and cd["status"] == "True"
    ]
    assert evicted and min(evicted) >= allowed.replace(microsecond=0), (evicted, allowed)


def test_a_trainjob_on_a_lost_trainer_worker_moves_to_ours_and_runs_once(mixed: Bed) -> None:
    mk = only_on(mixed, "worker2")
    mk.submit("mover", run="25s")
    lost = mk.started_on("mover")
    assert lost == "worker2"
    mk.set_quota("worker1", "16")
    mixed.stop_component(lost, "kube-apiserver")
    try:

        def inactive() -> bool:
            obj = mk.custom().get_cluster_custom_object(*KUEUE, "multikueueclusters", lost)
            return any(
                c["type"] == "Active" and c["status"] == "False"
                for c in (obj.get("status") or {}).get("conditions") or []
            )

        wait_for(inactive, 60, what=f"MultiKueueCluster {lost} to turn inactive")
        wait_for(
            lambda: (mk.get("mover") or {}).get("status", {}).get("clusterName") == "worker1",
            LOST_TIMEOUT + 90,
            what="the TrainJob to move to worker1",
        )
        mk.wait_until("mover", "Complete", timeout=120)
    finally:
        # What follows needs its API server and garbage collector only, not new pods.
        mixed.restore_api_server(lost, wait_runs_jobs=False)
    assert dispatched_to(mk, "mover") == ["worker2", "worker1"], dispatched_to(mk, "mover")
    # Once the Trainer worker is back, the stale copy there goes, and its JobSet with it.
    wait_for(lambda: mk.get("mover", lost) is None, 90, what=f"the stale copy on {lost} gone")
    wait_for(lambda: not jobsets(mk, lost), 60, what=f"the stale JobSet on {lost} gone")


# What Kueue's own MultiKueue needs of a worker's identity beyond what the dispatcher does.
KUEUES_RULES = "coexist/worker"
ORIGIN_UID = "kueue.x-k8s.io/multikueue-origin-uid"


@contextlib.contextmanager
def kueues_multikueue(bed: Bed, ctrls: list[setup.Controller]) -> Iterator[None]:
    """The manager as it was before the product: Kueue's own TrainJob integration and its
    MultiKueue dispatch TrainJobs; the dispatcher's replicas are stopped and its webhooks out,
    as before it was installed. Leaving the block is the switch docs/operators/operations.md
    gives: Kueue's configuration for the dispatcher (its MultiKueue gate and TrainJob
    integration off), the webhooks back, the replicas started; whatever fails on the way."""
    manager = bed.config.managers[0].name
    admission = client.AdmissionregistrationV1Api(bed.api(manager))
    kinds = ("mutating_webhook_configuration", "validating_webhook_configuration")
    kept = [
        client.ApiClient().sanitize_for_serialization(
            getattr(admission, f"read_{kind}")(DISPATCHER)
        )
        for kind in kinds
    ]
    with dispatcher_down(ctrls):
        try:
            for kind in kinds:
                _unless(404, getattr(admission, f"delete_{kind}"), DISPATCHER)
            bed.set_multikueue_mode("kueue")
            yield
        finally:
            try:
                bed.set_multikueue_mode("replace")
            finally:
                for kind, body in zip(kinds, kept, strict=True):
                    body["metadata"] = {
                        k: body["metadata"][k] for k in ("name", "labels") if k in body["metadata"]
                    }
                    _unless(409, getattr(admission, f"create_{kind}"), body)
    the_leader(ctrls)


def _unless(status: int, call: Any, *args: Any) -> None:
    """`call(*args)`, an answer of `status` taken as done."""
    try:
        call(*args)
    except client.ApiException as exc:
        if exc.status != status:
            raise


def _remote_workload(mk: MultiKueue, name: str, worker: str) -> Dict:
    """The Workload on `worker` of the TrainJob `name` (named as the manager's)."""
    workload = (mk.manager_workload(name) or {})["metadata"]["name"]
    return next(w for w in mk.remote_workloads(worker) if w["metadata"]["name"] == workload)


def _condition(obj: Dict, ctype: str) -> bool:
    return any(
        c["type"] == ctype and c["status"] == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _made_for(mk: MultiKueue, name: str, worker: str) -> set[tuple[str, str]]:
    """What runs the TrainJob `name` on `worker`, as (kind, UID): its copy, its Workload there
    (named as the manager's) and its pods (running or ended)."""
    copy = mk.get(name, worker)
    made = {("TrainJob", copy["metadata"]["uid"])} if copy else set()
    workload = (mk.manager_workload(name) or {}).get("metadata", {}).get("name")
    made |= {
        ("Workload", w["metadata"]["uid"])
        for w in mk.remote_workloads(worker)
        if w["metadata"]["name"] == workload
    }
    pods = client.CoreV1Api(mk.bed.api(worker)).list_namespaced_pod(
        mk.ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"
    )
    return made | {("Pod", p.metadata.uid) for p in pods.items}


# Its own waits bound it (up to 2 x 120 s before the switch, 240 s after it; `inflight` runs
# 120 s, `waiting` 30 s after it): the suite's 300 s would cut them short on a loaded machine.
@pytest.mark.timeout(900)
def test_a_manager_switched_from_kueues_multikueue_takes_its_jobs_over_where_they_run(
    mixed_fleet: tuple[Bed, list[setup.Controller]],
) -> None:
    """TrainJobs Kueue's own MultiKueue dispatched to each kind of worker when the manager
    switches to the dispatcher: one running goes on where it runs and ends there, its copy,
    its remote Workload and its pods the ones Kueue's MultiKueue made (none run again); one
    sent but waiting for quota there is admitted on the Workload Kueue's MultiKueue sent; the
    manager Workloads of both are kept."""
    bed, ctrls = mixed_fleet
    on = {worker: only_on(bed, worker) for worker in ("worker1", "worker2")}
    rules = [
        doc
        for doc in render(DEPLOY / KUEUES_RULES)
        if doc not in render(DEPLOY / "worker") and doc["kind"].startswith("ClusterRole")
    ]
    try:
        for worker in on:
            Applier(bed.api(worker)).apply_all(rules)
        with kueues_multikueue(bed, ctrls):
            for mk in on.values():
                mk.submit("inflight", run="120s", managed_by=MULTIKUEUE, suspend=True)
            for worker, mk in on.items():
                wait_for(partial(mk.pods, worker, "inflight"), 90, what=f"inflight on {worker}")
                # no room there beside it: admitted there once `inflight` ends
                mk.set_quota(worker, "1")
                # Its copy and pods live from its admission to its end and go at once (no
                # retention): 30 s of them, so that the polls below, each some thirty reads of
                # a loaded bed, see them (3 s were missed once on worker1, at 9674f80).
                mk.submit("waiting", run="30s", managed_by=MULTIKUEUE, suspend=True)
                wait_for(
                    partial(_made_for, mk, "waiting", worker),
                    30,
                    what=f"the Workload of waiting sent to {worker}",
                )
            before = {
                (worker, name): _made_for(mk, name, worker)
                for worker, mk in on.items()
                for name in ("inflight", "waiting")
            }
            workloads = {
                (worker, name): (mk.manager_workload(name) or {})["metadata"]["uid"]
                for worker, mk in on.items()
                for name in ("inflight", "waiting")
            }
            for worker, mk in on.items():
                # made by Kueue's MultiKueue, which names no origin UID (the dispatcher does)
                copies = [mk.get("inflight", worker) or {}, *mk.remote_workloads(worker)]
                assert not [o for o in copies if ORIGIN_UID in o["metadata"].get("annotations", {})]
                waiting = _remote_workload(mk, "waiting", worker)
                assert not _condition(waiting, "QuotaReserved"), waiting  # still waiting there
        for worker, mk in on.items():  # switched while its pods run, not yet complete
            assert mk.pods(worker, "inflight") and not mk.condition("inflight", "Complete")
            kinds = {kind for kind, _ in before[worker, "inflight"]}
            assert kinds == {"TrainJob", "Workload", "Pod"}, before
            assert {kind for kind, _ in before[worker, "waiting"]} == {"Workload"}, before
        seen = {key: set(made) for key, made in before.items()}
        evicted: list[tuple[str, str]] = []

        def all_ended() -> bool:
            for (worker, name), kept in seen.items():
                kept.update(_made_for(on[worker], name, worker))
                if _condition(on[worker].manager_workload(name) or {}, "Evicted"):
                    evicted.append((worker, name))
            return all(on[w].condition(name, "Complete") for w, name in seen)

        wait_for(all_ended, 240, what="every TrainJob to complete on the manager")
        assert not evicted, evicted  # its PodsReady kept: Kueue's waitForPodsReady never fired
        for (worker, name), made in before.items():
            mk = on[worker]
            if name == "inflight":  # the copy Kueue's MultiKueue made, its Workload and pods
                assert seen[worker, name] == made, (worker, seen[worker, name] - made)
            else:  # the Workload sent before the switch, the copy and pods after it
                new = sorted(kind for kind, _ in seen[worker, name] - made)
                assert seen[worker, name] >= made and new == ["Pod", "TrainJob"], (worker, new)
            tj = mk.get(name) or {}
            assert tj["status"].get("clusterName") == worker, tj["status"]
            workload = mk.manager_workload(name) or {}
            assert workload["metadata"]["uid"] == workloads[worker, name]
            assert "DeletedWorkload" not in events_of(mk, name), events_of(mk, name)
    finally:
        for worker in on:
            Applier(bed.api(worker)).delete_all(rules)
