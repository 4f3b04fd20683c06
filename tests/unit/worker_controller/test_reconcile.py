"""The worker controller's whole pass (`reconcile.sync_trainjob`) over a cluster in memory:
the objects before, the passes until nothing changes, the objects, Events and requeue after.
What only an API server decides (admission, RBAC, real Jobs and pods) is the bed's
(tests/worker); these cases run in milliseconds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubebase.kinds import EVENT, Kind
from kubecontrol.client import ApiException
from tests.support import tables
from tests.support.builders import (
    OWNER,
    TrainJobBuilder,
    container,
    edit,
    initializer_runtime,
    make_runtime,
    replicated_job,
)
from tests.support.memory_api import Fault, MemoryApi
from tests.support.tables import Row, Step, still_clock  # noqa: F401 (a fixture)
from tests.support.whole_pass import (
    MemoryCluster,
    Pass,
    World,
    a_condition,
    behind_by_default,
    both_caches,  # noqa: F401 (the fixture the cases that run passes use)
    condition,
    event_tuples,
    kueue_status,
    names,
    worker_guarded,
)
from tests.support.worker_plans import as_made, reported
from trainjob import jobframework_io
from trainjob.ownership import controller_uid
from trainjob.workload import workload_name
from trainjob_api import constants as c
from worker_controller.context import Context
from worker_controller.reconcile import sync_trainjob
from worker_controller.settings import WorkerSettings
from worker_controller.watches import watches

Dict = dict[str, Any]
KEY = ("ns", "tj")
RUNTIME = make_runtime()
QUEUED = TrainJobBuilder().queue("q")


def worker(*objects: Dict, behind: bool | None = None, **settings: Any) -> World:
    api = MemoryApi("worker", [RUNTIME, *objects])
    cluster = MemoryCluster(api, c.WORKER_FIELD_MANAGER)
    ctx = Context(settings=WorkerSettings(**settings), cluster=cluster)
    world = World(
        {"worker": api},
        lambda key: sync_trainjob(ctx, key),  # type: ignore[arg-type]
        behind=worker_guarded if behind_by_default(behind) else None,
    )
    ctx.queue = world.queue  # type: ignore[assignment]
    world.watch(ctx, cluster, watches(ctx))
    world.relist()
    ctx.synced.set()
    return world


def the_workload(world: World, trainjob: Dict | None = None) -> Dict | None:
    tj = trainjob or world.get("worker", c.TRAINJOB, "tj")
    assert tj is not None
    return world.get("worker", c.WORKLOAD, workload_name("tj", tj["metadata"]["uid"]))


def admit(world: World, flavor: str = "default") -> None:
    """What Kueue does when it admits the Workload: quota reserved and admitted."""
    wl = the_workload(world)
    assert wl is not None, "no Workload to admit"
    edit(wl).status(kueue_status(wl, admitted=True, flavor=flavor))
    world.apis["worker"].put(wl)


def started() -> World:
    """A queued TrainJob, its Workload made, admitted by Kueue, and started."""
    world = worker(QUEUED.obj(), FLAVOR)
    world.settle(KEY)
    admit(world)
    world.settle(KEY)
    return world


def objects(world: World, kind: Kind) -> list[Dict]:
    return world.apis["worker"].objects(kind, "ns")


FLAVOR = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": {"name": "default"},
    "spec": {},
}


# ---- the pass as a table: the objects before, what others do, every object after ---------


def settle(world: World) -> list[Pass]:
    return world.settle(KEY)


def _job_reports(**status: Any) -> Step:
    """What the Job controller writes of the one Job's pods (of the one named, if given)."""

    def report(world: World) -> None:
        (job,) = objects(world, c.JOB)
        edit(job).status(status)
        world.apis["worker"].put(job)

    return report


def _initializer_done(world: World) -> None:
    """The Job controller: the dataset initializer's Job complete."""
    (dataset,) = [j for j in objects(world, c.JOB) if "dataset" in j["metadata"]["name"]]
    edit(dataset).status({"succeeded": 1, "conditions": COMPLETE})
    world.apis["worker"].put(dataset)


def _evicted(world: World) -> None:
    """What Kueue does when it preempts the Workload: admission lost, quota kept until the
    pods are gone."""
    wl = the_workload(world)
    assert wl is not None
    edit(wl).conditions(
        a_condition("QuotaReserved"),
        a_condition("Admitted", "Evicted", status="False"),
        a_condition("Evicted", "Preempted", "by a bigger job"),
    )
    world.apis["worker"].put(wl)


def _deleted(kind: Kind, name: str) -> Step:
    """Someone deletes one of the TrainJob's objects."""

    def delete(world: World) -> None:
        world.apis["worker"].request("DELETE", kind.path("ns", name))

    return delete


def _made_again(world: World) -> None:
    """Someone deletes the TrainJob (what it owns goes with it) and makes another of its name:
    a TrainJob of its own, under another UID."""
    api = world.apis["worker"]
    api.request("DELETE", c.TRAINJOB.path("ns", "tj"))
    again = edit(TrainJobBuilder().obj()).uid("uid-tj-again").obj()
    api.put(again)


def _edited(change: Callable[[Dict], None]) -> Step:
    """Someone changes the TrainJob's spec (`change` edits it in place)."""

    def edit(world: World) -> None:
        tj = world.get("worker", c.TRAINJOB, "tj")
        assert tj is not None
        change(tj)
        world.apis["worker"].put(tj)

    return edit


def _suspended(tj: Dict) -> None:
    edit(tj).suspend()


def _deadline(seconds: int) -> Callable[[Dict], None]:
    def change(tj: Dict) -> None:
        edit(tj).spec(activeDeadlineSeconds=seconds)

    return change


def _refuses(status: int, method: str, plural: str) -> Step:
    """The API server refuses every such write until `_heals`."""
    return lambda world: world.apis["worker"].fail(Fault(status, method, plural, times=None))


def _heals(world: World) -> None:
    world.apis["worker"].heal()


def _serves_coscheduling(world: World) -> None:
    """Discovery lists the coscheduling plugin's PodGroup API (its CRD installed)."""
    world.apis["worker"].discovery["scheduling.x-k8s.io/v1alpha1"] = ["podgroups"]


def _service(name: str, labels: dict[str, str]) -> Dict:
    """A Service someone made."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"clusterIP": "None", "selector": {"app": "theirs"}},
    }


def _stranger_job() -> Dict:
    """A Job of the TrainJob's first Job's name, labelled for it, owned by someone else."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "tj-node-0",
            "namespace": "ns",
            "labels": {c.TRAINJOB_NAME_LABEL: "tj"},
            "ownerReferences": [{**OWNER, "uid": "someone-else"}],
        },
        "spec": {"template": {"spec": {"containers": []}}},
    }


def _past_deadline() -> Dict:
    """Running (resumed), and its deadline of 1 s long past."""
    tj = TrainJobBuilder().obj()
    resumed = {"conditions": [a_condition("Suspended", "Resumed", status="False")]}
    return edit(tj).spec(activeDeadlineSeconds=1).status(resumed).obj()


def _finished_with_a_job_running() -> tuple[Dict, ...]:
    """Complete, and its Job still running (its pods slow to go)."""
    tj = TrainJobBuilder().obj()
    running = reported(as_made(tj, RUNTIME)[0], "running")
    edit(tj).status({"conditions": [a_condition("Complete", "AllJobsCompleted")]})
    return tj, running


def _restarts_lost() -> tuple[Dict, ...]:
    """Its Jobs run for restart 2, and its status says no restart (lost, or rewritten)."""
    tj = TrainJobBuilder().obj()
    made = as_made({**tj, "status": {"restarts": 2, "restartsCountTowardsMax": 2}}, RUNTIME)
    return tj, *(reported(j, "running") for j in made)


GANG = make_runtime(podGroupPolicy={"coscheduling": {}})
FOREIGN_POD_GROUP = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"name": "tj", "namespace": "ns"},
    "spec": {"minMember": 7},
}
COMPLETE = [
    {"type": "SuccessCriteriaMet", "status": "True"},
    {"type": "Complete", "status": "True"},
]
UNQUEUED = TrainJobBuilder().obj()
QUEUED_ON_FLAVOR = (QUEUED.obj(), FLAVOR)
ADMITTED_STEPS = (settle, admit, settle)
OURS = {"owner": "tj"}
SERVICE = {"tj": {**OURS, "selector": {c.JOBSET_NAME_LABEL: "tj"}}}
ONE_POD = {**OURS, "pods": 1}
JOB = {"tj-node-0": ONE_POD}
SUSPENDED_JOB = {"tj-node-0": {**ONE_POD, "suspend": True}}
IDLE = {"node": {}}  # the TrainJob's jobsStatus: its one replicatedJob, no count above 0
RUN = {"node": {"active": 1, "ready": 1}}
WAITING = {"conditions": {"Suspended": "Suspended"}, "suspend": True, "jobs": IDLE}
RUNNING = {"false": {"Suspended": "Resumed"}, "suspend": False, "jobs": IDLE}
ADMITTED = {"Admitted": "Admitted", "QuotaReserved": "QuotaReserved"}
HELD = 2  # a status change nothing acts on waits this long (status_coalesce_seconds)
IGNORED = "PodGroupPolicyIgnored"
RETRY = 10  # a blocked TrainJob tries again after this (execute.BLOCKED_RETRY_SECONDS)


def on_worker(**kinds: dict[str, Dict]) -> tables.State:
    return {"worker": kinds}


ROWS = [
    Row("queued: a Workload, suspended until admitted",
        (settle,),
        on_worker(TrainJob={"tj": WAITING}, Service=SERVICE,
                  Workload={"wl": {**OURS, "false": {"PodsReady": "WaitForStart"}}}),
        (("Normal", "CreatedWorkload"), ("Normal", "Suspended")),
        before=(QUEUED.obj(),)),
    Row("admitted: resumed, its Job made",
        ADMITTED_STEPS,
        on_worker(TrainJob={"tj": RUNNING}, Job=JOB, Service=SERVICE,
                  Workload={"wl": {**OURS, "conditions": ADMITTED}}),
        (("Normal", "Started"), ("Normal", "Resumed")),
        before=QUEUED_ON_FLAVOR),
    Row("its pods ready: PodsReady beside Kueue's conditions, the Job running on",
        (*ADMITTED_STEPS, _job_reports(active=1, ready=1), settle),
        on_worker(TrainJob={"tj": {**RUNNING, "jobs": RUN}}, Job=JOB, Service=SERVICE,
                  Workload={"wl": {**OURS, "conditions": {**ADMITTED, "PodsReady": "Started"}}}),
        before=QUEUED_ON_FLAVOR),
    Row("its Job complete: the TrainJob complete, its Workload finished",
        (*ADMITTED_STEPS, _job_reports(succeeded=1, conditions=COMPLETE), settle),
        on_worker(TrainJob={"tj": {**RUNNING, "conditions": {"Complete": "AllJobsCompleted"},
                                   "jobs": {"node": {"succeeded": 1}}}},
                  Job=JOB, Service=SERVICE,
                  Workload={"wl": {**OURS, "conditions": {**ADMITTED, "Finished": "Succeeded"}}}),
        (("Normal", "AllJobsCompleted"), ("Normal", "FinishedWorkload")),
        before=QUEUED_ON_FLAVOR),
    Row("evicted while its pods run: stopped, its Job suspended, the quota kept meanwhile",
        (*ADMITTED_STEPS, _job_reports(active=1, ready=1), settle, _evicted, settle),
        on_worker(TrainJob={"tj": {**WAITING, "jobs": RUN}}, Job=SUSPENDED_JOB, Service=SERVICE,
                  Workload={"wl": {**OURS, "false": {"Admitted": "Evicted"},
                                   "conditions": {"Evicted": "Preempted",
                                                  "QuotaReserved": "QuotaReserved"}}}),
        (("Normal", "Stopped"), ("Normal", "Suspended")),
        HELD,
        before=QUEUED_ON_FLAVOR),
    Row("evicted with no pod running: the quota given back, requeued as Kueue does",
        (*ADMITTED_STEPS, _evicted, settle),
        on_worker(TrainJob={"tj": WAITING}, Job=SUSPENDED_JOB, Service=SERVICE,
                  Workload={"wl": {**OURS,
                                   "conditions": {"Evicted": "Preempted", "Requeued": "Preempted"},
                                   "false": {"Admitted": "NoReservation",
                                             "PodsReady": "WaitForStart",
                                             "QuotaReserved": "Pending"}}}),
        (("Normal", "Stopped"), ("Normal", "Suspended")),
        HELD,
        before=QUEUED_ON_FLAVOR),
    Row("its Service and Job deleted while it runs: both made again",
        (*ADMITTED_STEPS, _deleted(c.SERVICE, "tj"), _deleted(c.JOB, "tj-node-0"), settle),
        on_worker(TrainJob={"tj": RUNNING}, Job=JOB, Service=SERVICE,
                  Workload={"wl": {**OURS, "conditions": ADMITTED}}),
        before=QUEUED_ON_FLAVOR),
    Row("a finished initializer's pods are reclaimable, beside Kueue's conditions",
        (*ADMITTED_STEPS, _initializer_done, settle),
        on_worker(TrainJob={"tj": {**RUNNING, "jobs": {"dataset-initializer": {"succeeded": 1},
                                                         "model-initializer": {}, "node": {}}}},
                  Service=SERVICE,
                  Job={"tj-dataset-initializer-0": ONE_POD, "tj-model-initializer-0": ONE_POD},
                  Workload={"wl": {**OURS, "conditions": ADMITTED,
                                   "false": {"PodsReady": "WaitForStart"},
                                   "reclaimable": {"dataset-initializer": 1}}}),
        before=(TrainJobBuilder().runtime("torch-with-init").queue("q").obj(), FLAVOR,
                initializer_runtime())),
    Row("no queue: runs at once, no Workload",
        (settle,),
        on_worker(TrainJob={"tj": {}}, Job=JOB, Service=SERVICE),
        requeue=HELD,
        before=(UNQUEUED,)),
    Row("its runtime missing: failed naming the reason, nothing made",
        (settle,),
        on_worker(TrainJob={"tj": {"conditions": {"Failed": "RuntimeNotFound"}}}),
        (("Warning", "RuntimeNotFound"),),
        before=(TrainJobBuilder().runtime("nowhere").obj(),)),
    Row("a Service of its name that is not ours: said, never written, no Job made",
        (settle,),
        on_worker(TrainJob={"tj": {"conditions": {"ServiceConflict": "ServiceNameTaken"},
                                   "jobs": IDLE}},
                  Service={"tj": {"selector": {"app": "theirs"}}}),
        (("Warning", "ServiceNameTaken"),),
        before=(UNQUEUED, _service("tj", {"app": "theirs"}))),
    Row("a Service labelled for it under another name changes nothing and is never written",
        (settle,),
        on_worker(TrainJob={"tj": {}}, Job=JOB,
                  Service={**SERVICE, "decoy": {"selector": {"app": "theirs"}}}),
        requeue=HELD,
        before=(UNQUEUED, _service("decoy", {c.TRAINJOB_NAME_LABEL: "tj"}))),
    Row("a Service labelled for it under its name is not its own: the name is taken",
        (settle,),
        on_worker(TrainJob={"tj": {"conditions": {"ServiceConflict": "ServiceNameTaken"},
                                   "jobs": IDLE}},
                  Service={"tj": {"selector": {"app": "theirs"}}}),
        (("Warning", "ServiceNameTaken"),),
        before=(UNQUEUED, _service("tj", {c.TRAINJOB_NAME_LABEL: "tj"}))),
    Row("a Job of its name owned by another UID is never adopted; it looks again soon",
        (settle,),
        on_worker(TrainJob={"tj": {"conditions": {"ObjectsBlocked": "NameTaken"}, "jobs": IDLE}},
                  Job={"tj-node-0": {"owner": "someone-else"}}, Service=SERVICE),
        (("Warning", "NameTaken"),),
        RETRY,
        before=(UNQUEUED, _stranger_job())),
    Row("a Job the API finds invalid: a condition, and it comes back soon",
        (_refuses(422, "POST", "jobs"), settle),
        on_worker(TrainJob={"tj": {"conditions": {"ObjectsBlocked": "RefusedByAPI"}, "jobs": IDLE}},
                  Service=SERVICE),
        (("Warning", "RefusedByAPI"),),
        RETRY,
        before=(UNQUEUED,)),
    Row("... and once the API takes it, the Job is made and the condition cleared",
        (_refuses(422, "POST", "jobs"), settle, _heals, settle),
        on_worker(TrainJob={"tj": {"false": {"ObjectsBlocked": "ObjectsCreated"}, "jobs": IDLE}},
                  Job=JOB,
                  Service=SERVICE),
        (("Normal", "ObjectsCreated"),),
        before=(UNQUEUED,)),
    Row("a Job's suspend the API refuses: a condition, and it comes back soon",
        (settle, _edited(_suspended), _refuses(400, "PATCH", "jobs"), settle),
        on_worker(TrainJob={"tj": {**WAITING, "conditions": {"Suspended": "Suspended",
                                                              "ObjectsBlocked": "RefusedByAPI"}}},
                  Job=JOB, Service=SERVICE),
        (("Normal", "Suspended"), ("Warning", "RefusedByAPI")),
        RETRY,
        before=(UNQUEUED,)),
    Row("past its deadline: failed naming it, no Job made",
        (settle,),
        on_worker(TrainJob={"tj": {"conditions": {"Failed": "DeadlineExceeded"},
                                   "false": {"Suspended": "Resumed"}, "jobs": IDLE}},
                  Service=SERVICE),
        (("Warning", "DeadlineExceeded"),),
        before=(_past_deadline(),)),
    Row("never suspended: its deadline counts from its first Job's creation (the stand-in "
        "makes every object at 2026-01-01T00:00:00Z), and its Job is suspended",
        (settle, _edited(_deadline(60)), settle),
        on_worker(TrainJob={"tj": {"conditions": {"Failed": "DeadlineExceeded"}, "jobs": IDLE}},
                  Job=SUSPENDED_JOB, Service=SERVICE),
        (("Warning", "DeadlineExceeded"),),
        before=(UNQUEUED,)),
    Row("a gang runtime gets its PodGroup where discovery lists the API, its pods in it",
        (_serves_coscheduling, settle),
        on_worker(TrainJob={"tj": {}}, Job={"tj-node-0": {**ONE_POD, "podGroup": "tj"}},
                  PodGroup={"tj": {**OURS, "minMember": 1}}, Service=SERVICE),
        requeue=HELD,
        before=(GANG, UNQUEUED)),
    Row("a gang TrainJob deleted and made again under its name: a PodGroup of its own again "
        "(what was made is remembered by UID, never by name)",
        (_serves_coscheduling, settle, _made_again, settle),
        on_worker(TrainJob={"tj": {}}, Job={"tj-node-0": {**ONE_POD, "podGroup": "tj"}},
                  PodGroup={"tj": {**OURS, "minMember": 1}}, Service=SERVICE),
        requeue=HELD,
        before=(GANG, UNQUEUED)),
    Row("a gang runtime without the API: its pods run ungrouped and the TrainJob says so",
        (settle,),
        on_worker(TrainJob={"tj": {"conditions": {IGNORED: IGNORED}, "jobs": IDLE}}, Job=JOB,
                  Service=SERVICE),
        (("Warning", IGNORED),),
        before=(GANG, UNQUEUED)),
    Row("a PodGroup of its name that is not ours holds the Jobs and is never written",
        (_serves_coscheduling, settle),
        on_worker(TrainJob={"tj": {"conditions": {"ObjectsBlocked": "NameTaken"}, "jobs": IDLE}},
                  PodGroup={"tj": {"minMember": 7}}, Service=SERVICE),
        (("Warning", "NameTaken"),),
        RETRY,
        before=(GANG, UNQUEUED, FOREIGN_POD_GROUP)),
    Row("finished: a Job of it still running is suspended, nothing made again",
        (settle,),
        on_worker(TrainJob={"tj": {"conditions": {"Complete": "AllJobsCompleted"}}},
                  Job=SUSPENDED_JOB),
        before=_finished_with_a_job_running()),
    Row("its Jobs run for a restart its status does not say: failed (RestartsLost), each Job "
        "suspended as it was made",
        (settle,),
        on_worker(TrainJob={"tj": {"conditions": {"Failed": "RestartsLost"},
                                   "jobs": {"node": {"active": 1}}}},
                  Job={"tj-node-0": {**SUSPENDED_JOB["tj-node-0"], "attempt": "2"}},
                  Service=SERVICE),
        (("Warning", "RestartsLost"),),
        before=_restarts_lost()),
]  # fmt: skip


@pytest.mark.usefixtures("both_caches", "still_clock")
@pytest.mark.parametrize("row", ROWS, ids=str)
def test_the_whole_pass(row: Row) -> None:
    world = worker(*row.before)
    theirs = _not_ours(world)
    passes = tables.take_steps(world, row)
    assert tables.outcome(world, passes, tables.WORKER) == row.outcome
    # what it did not make is never written (adopted, changed or deleted)
    assert _not_ours(world) == theirs


@pytest.mark.parametrize(
    ("before", "ctype", "named"),
    [
        ((UNQUEUED, _service("tj", {"app": "theirs"})), "ServiceConflict", "Service 'tj'"),
        ((UNQUEUED, _stranger_job()), "ObjectsBlocked", "Job 'tj-node-0'"),
    ],
    ids=["Service", "Job"],
)
def test_a_name_taken_is_said_naming_the_object_that_holds_it(
    before: tuple[Dict, ...], ctype: str, named: str
) -> None:
    """What the rows leave out (messages): the condition names the kind and the name."""
    world = worker(*before)
    world.settle(KEY)
    tj = world.get("worker", c.TRAINJOB, "tj")
    assert tj is not None
    (said,) = [x["message"] for x in tj["status"]["conditions"] if x["type"] == ctype]
    assert named in said, said


def _not_ours(world: World) -> dict[tuple[str, str], str]:
    """(kind, name) -> resourceVersion of every object of the kinds it writes, besides
    TrainJobs, that none of the cluster's TrainJobs controls (a controller reference to a
    TrainJob of another UID is no claim)."""
    uids = {tj["metadata"]["uid"] for tj in objects(world, c.TRAINJOB)}
    return {
        (kind.kind, o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for kind in tables.WORKER.normalisers
        if kind != c.TRAINJOB
        for o in objects(world, kind)
        if controller_uid(o) not in uids
    }


@pytest.mark.usefixtures("both_caches")
def test_a_running_trainjob_with_no_queue_where_kueue_manages_all_is_held_and_told_once() -> None:
    """Kueue's manageJobsWithoutQueueName: the pass that suspends it writes that alone and
    says why; the next suspends its Jobs; no later pass says it again."""
    world = worker(TrainJobBuilder().obj())
    world.settle(KEY)  # made before the setting was on: it runs
    assert [bool(j["spec"].get("suspend")) for j in objects(world, c.JOB)] == [False]
    held = worker(*world.apis["worker"].objects(c.TRAINJOB, "ns"), *objects(world, c.JOB),
                  manage_jobs_without_queue_name=True)  # fmt: skip
    first = held.run(KEY)
    assert [w for w in first.writes["worker"] if "/events" not in w[1]] == [
        ("PATCH", c.TRAINJOB.path("ns", "tj"))
    ], first.writes
    assert first.events == [("Warning", c.REASON_NO_QUEUE, "tj")]
    passes = held.settle(KEY)
    tj = held.get("worker", c.TRAINJOB, "tj")
    assert tj is not None and tj["spec"]["suspend"] is True
    assert [bool(j["spec"].get("suspend")) for j in objects(held, c.JOB)] == [True]
    told = [e for e in event_tuples(held.apis["worker"]) if e[1] == c.REASON_NO_QUEUE]
    assert len(told) == 1 and passes
    assert not held.run(KEY).wrote()


def _held_and_told(*objects: Dict) -> World:
    world = worker(*objects, manage_jobs_without_queue_name=True)
    world.settle(KEY)
    return world


def _told(world: World) -> list[Dict]:
    return [e for e in world.apis["worker"].objects(c.EVENT) if e["reason"] == c.REASON_NO_QUEUE]


def test_the_warning_of_a_held_trainjob_is_told_once_across_a_restart() -> None:
    """The Warning's Event is named for the TrainJob's UID: a replica that starts anew, with
    no memory of having said it, writes the same name, which the API server keeps once."""
    first = _held_and_told(TrainJobBuilder().obj())
    [event] = _told(first)
    uid = first.get("worker", c.TRAINJOB, "tj")["metadata"]["uid"]  # type: ignore[index]
    assert event["metadata"]["name"] == f"tj.{uid[:8]}.noqueuename"
    restarted = _held_and_told(
        *first.apis["worker"].objects(c.TRAINJOB, "ns"), *first.apis["worker"].objects(c.EVENT)
    )
    assert [e["metadata"]["name"] for e in _told(restarted)] == [event["metadata"]["name"]]


def test_a_held_trainjob_made_again_under_its_name_is_told_again() -> None:
    """Another TrainJob of the same name (another UID) is another job: its own Warning, beside
    the one its namesake had."""
    first = _held_and_told(TrainJobBuilder().obj())
    again = edit(TrainJobBuilder().obj()).uid("0therjob-of-the-same-name").obj()
    second = _held_and_told(again, *first.apis["worker"].objects(c.EVENT))
    names = sorted(e["metadata"]["name"] for e in _told(second))
    assert len(names) == 2 and "tj.0therjob.noqueuename" in names, names


def _report(world: World, job: Dict, **counts: int) -> None:
    """What the Job controller writes of a Job's pods (`ready`, `succeeded`...)."""
    edit(job).status({**(job.get("status") or {}), **counts})
    world.apis["worker"].put(job)


@pytest.mark.usefixtures("both_caches")
def test_pods_ready_is_applied_beside_kueues_conditions_and_the_job_keeps_running() -> None:
    """Our apply of PodsReady owns one entry of the Workload's conditions: Kueue's
    QuotaReserved and Admitted stay (the API server merges the list by type), so the next
    passes take the Workload as admitted and nothing is suspended."""
    world = started()
    wl = the_workload(world)
    assert (
        condition(wl, "PodsReady") == ("False", "WaitForStart")
        or condition(wl, "PodsReady") is None
    )
    (job,) = objects(world, c.JOB)
    _report(world, job, active=1, ready=1)
    world.settle(KEY)
    wl = the_workload(world)
    assert wl is not None
    assert [x["type"] for x in wl["status"]["conditions"]][:2] == ["QuotaReserved", "Admitted"]
    assert condition(wl, "Admitted") == ("True", "Admitted")
    assert condition(wl, "PodsReady") == ("True", "Started")
    tj = world.get("worker", c.TRAINJOB, "tj")
    assert tj is not None and tj["spec"]["suspend"] is False
    (job,) = objects(world, c.JOB)
    assert not job["spec"].get("suspend")
    assert not world.run(KEY).wrote()


@pytest.mark.usefixtures("both_caches")
def test_a_job_the_api_forbids_fails_the_pass_for_the_queue_to_retry_and_is_made_later() -> None:
    world = worker(TrainJobBuilder().obj())
    world.apis["worker"].fail(Fault(403, "POST", "jobs", times=None))
    with pytest.raises(ApiException) as refused:
        world.run(KEY)  # the work queue retries a key whose pass raised, with backoff
    assert refused.value.status == 403
    assert objects(world, c.JOB) == []
    world.apis["worker"].heal()
    world.settle(KEY)
    assert names(objects(world, c.JOB)) == ["tj-node-0"]


@pytest.mark.parametrize("status", [400, 422])
def test_a_job_write_the_api_refuses_is_a_condition_naming_the_job(status: int) -> None:
    world = worker(TrainJobBuilder().obj())
    world.settle(KEY)
    api = world.apis["worker"]
    tj = world.get("worker", c.TRAINJOB, "tj")
    assert tj is not None
    edit(tj).suspend()
    api.put(tj)
    api.fail(Fault(status, "PATCH", "jobs", times=None))
    world.relist()
    passes = world.settle(KEY)
    assert condition(world.get("worker", c.TRAINJOB, "tj"), "ObjectsBlocked") == (
        "True",
        c.REASON_REFUSED_BY_API,
    )
    said = world.get("worker", c.TRAINJOB, "tj")["status"]["conditions"]  # type: ignore[index]
    assert any("tj-node-0" in x.get("message", "") for x in said if x["type"] == "ObjectsBlocked")
    assert passes[-1].requeue_after is not None and passes[-1].requeue_after <= 10
    api.heal()
    world.settle(KEY)
    (job,) = objects(world, c.JOB)
    assert job["spec"]["suspend"] is True


@pytest.mark.usefixtures("both_caches")
def test_a_deleted_trainjob_leaves_nothing_to_do() -> None:
    world = worker()
    assert world.run(KEY) == world.run(KEY)
    assert not world.run(KEY).wrote()


def _settle_with_no_job_refused(world: World) -> None:
    """Passes until nothing is written; the API server refused no write to a Job."""
    refused = [r for p in world.settle(KEY) for r in p.refused.get("worker", [])]
    assert [r for r in refused if "/jobs/" in r[1]] == []


def _suspended_as_made(world: World, jobs: list[Dict]) -> None:
    """Each of `jobs` suspended, with the pod template it was made with."""
    for j in jobs:
        now = world.get("worker", c.JOB, j["metadata"]["name"])
        assert now is not None and now["spec"]["suspend"] is True
        assert now["spec"]["template"] == j["spec"]["template"]


@pytest.mark.usefixtures("both_caches")
def test_jobs_of_a_restart_the_status_lost_are_suspended_as_they_were_made() -> None:
    """Its Jobs run for restart 2 and the status says no restart: the TrainJob fails
    (RestartsLost) and each Job is suspended with its own restart attempt, since the API
    server refuses a change to the pod template of a Job that has run."""
    tj = TrainJobBuilder().obj()
    made = as_made({**tj, "status": {"restarts": 2, "restartsCountTowardsMax": 2}}, RUNTIME)
    running = [reported(j, "running") for j in made]
    assert {j["metadata"]["labels"][c.RESTART_ATTEMPT_LABEL] for j in running} == {"2"}
    world = worker(tj, *running)
    _settle_with_no_job_refused(world)
    after = world.get("worker", c.TRAINJOB, "tj")
    assert condition(after, "Failed") == ("True", c.REASON_RESTARTS_LOST)
    _suspended_as_made(world, running)


@pytest.mark.usefixtures("both_caches")
def test_a_suspended_trainjob_suspends_jobs_of_another_restart_as_they_were_made() -> None:
    """Suspended (spec.suspend) while its Jobs run for a restart its status does not say:
    each Job is suspended with its own pod template, never refused for a changed one."""
    tj = TrainJobBuilder().obj()
    made = as_made({**tj, "status": {"restarts": 2, "restartsCountTowardsMax": 2}}, RUNTIME)
    running = [reported(j, "running") for j in made]
    edit(tj).suspend()
    world = worker(tj, *running)
    _settle_with_no_job_refused(world)
    _suspended_as_made(world, running)


@pytest.mark.usefixtures("both_caches")
def test_a_job_relabelled_for_another_restart_is_still_suspended_as_it_was_made() -> None:
    """Anyone who may edit Jobs can change a running Job's restart-attempt label (not its pod
    template, which cannot change once it ran): when the TrainJob passes its deadline, the
    Job is suspended with the template it was made with, not refused for a changed one."""
    tj = TrainJobBuilder().obj()
    resumed = {"conditions": [a_condition("Suspended", "Resumed", status="False")]}
    edit(tj).spec(activeDeadlineSeconds=1).status(resumed)
    made = reported(as_made(tj, RUNTIME)[0], "running")
    edit(made).label(c.RESTART_ATTEMPT_LABEL, "3")
    world = worker(tj, made)
    _settle_with_no_job_refused(world)
    after = world.get("worker", c.TRAINJOB, "tj")
    assert condition(after, "Failed") == ("True", c.REASON_DEADLINE_EXCEEDED)
    _suspended_as_made(world, [made])


def _suspended_by_spec(tj: Dict) -> None:
    edit(tj).suspend()  # its Jobs suspended by `_apply_jobs`


def _past_its_deadline(tj: Dict) -> None:
    resumed = {"conditions": [a_condition("Suspended", "Resumed", status="False")]}
    # its Jobs suspended by `_suspend_active`
    edit(tj).spec(activeDeadlineSeconds=1).status(resumed)


@pytest.mark.parametrize("stop", [_suspended_by_spec, _past_its_deadline])
def test_a_job_deleted_before_its_suspend_is_applied_is_not_made_again(
    stop: Callable[[Dict], None],
) -> None:
    """The caches still hold a running Job that someone deleted: the suspend the pass writes
    is a patch naming the Job's UID, which the API server refuses (404) rather than make the
    Job again; no condition says the API refused anything, and no Job is made while the
    TrainJob is stopped."""
    tj = TrainJobBuilder().obj()
    stop(tj)
    made = reported(as_made(tj, RUNTIME)[0], "running")
    world = worker(tj, made, behind=False)
    raced, again = world.run_raced(KEY, "worker", c.JOB, made["metadata"]["name"], delete=True)
    job_path = c.JOB.path("ns", made["metadata"]["name"])
    for done in (raced, again):
        assert [r for r in done.refused["worker"] if "/jobs/" in r[1]] == [("PATCH", job_path, 404)]
    assert objects(world, c.JOB) == []
    world.settle(KEY)
    assert objects(world, c.JOB) == []
    after = world.get("worker", c.TRAINJOB, "tj")
    assert condition(after, "ObjectsBlocked") is None


def test_a_running_job_whose_label_is_taken_off_is_still_suspended_with_its_trainjob() -> None:
    """Whoever may edit Jobs can take our label off a running Job: it stays in the cache, kept
    by its controller owner, and is suspended when its TrainJob is (filtered by the label, it
    left the cache and ran on, its quota given back)."""
    world = worker(TrainJobBuilder().obj())
    world.settle(KEY)
    (made,) = objects(world, c.JOB)
    api = world.apis["worker"]
    edit(made).label(c.TRAINJOB_NAME_LABEL, None)
    api.put(made)
    tj = world.get("worker", c.TRAINJOB, "tj")
    assert tj is not None
    edit(tj).suspend()
    api.put(tj)
    world.relist()
    world.settle(KEY)
    (job,) = objects(world, c.JOB)
    assert job["metadata"]["uid"] == made["metadata"]["uid"] and job["spec"]["suspend"] is True


def test_a_job_is_suspended_and_resumed_whatever_its_runtime_says_now() -> None:
    """The runtime has a new image since the Jobs were made (their pods ask the same): a Job's
    pod template cannot change, and the suspension still lands, then the resume, each a write
    the API server takes. The whole Job written was refused (422) and its pods ran on."""
    world = worker(TrainJobBuilder().obj())
    world.settle(KEY)
    (made,) = objects(world, c.JOB)
    api = world.apis["worker"]
    api.put(
        make_runtime(replicated_jobs=[replicated_job("node", "trainer", [container(image="v2")])])
    )
    for suspend in (True, False):
        tj = world.get("worker", c.TRAINJOB, "tj")
        assert tj is not None
        edit(tj).suspend(suspend)
        api.put(tj)
        world.relist()
        done = world.settle(KEY)
        assert not any(p.refused["worker"] for p in done)
        (job,) = objects(world, c.JOB)
        assert job["metadata"]["uid"] == made["metadata"]["uid"]
        assert job["spec"]["suspend"] is suspend
        assert job["spec"]["template"] == made["spec"]["template"]


COSCHEDULING_API = "/apis/scheduling.x-k8s.io/v1alpha1"


@pytest.mark.usefixtures("both_caches")
def test_a_gang_runtime_gets_its_pod_group_where_discovery_lists_it_and_asks_once() -> None:
    world = worker(GANG, TrainJobBuilder().obj())
    api = world.apis["worker"]
    api.discovery["scheduling.x-k8s.io/v1alpha1"] = ["podgroups"]
    world.settle(KEY)
    (group,) = objects(world, c.COSCHEDULING_POD_GROUP)
    tj = world.get("worker", c.TRAINJOB, "tj")
    assert tj is not None
    assert group["metadata"]["ownerReferences"][0]["uid"] == tj["metadata"]["uid"]
    assert group["spec"]["minMember"] == 1 and group["spec"]["scheduleTimeoutSeconds"] == 60
    (job,) = objects(world, c.JOB)
    assert job["spec"]["template"]["metadata"]["labels"][c.COSCHEDULING_POD_GROUP_LABEL] == "tj"
    assert condition(tj, "PodGroupPolicyIgnored") is None
    world.run(KEY)
    asked = [p for m, p in api.requests if p == COSCHEDULING_API]
    assert len(asked) == 1  # the answer is kept
    assert objects(world, c.VOLCANO_POD_GROUP) == []


@pytest.mark.usefixtures("both_caches")
def test_a_pod_group_of_its_name_that_is_not_ours_holds_the_jobs_and_is_never_written() -> None:
    foreign = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "tj", "namespace": "ns"},
        "spec": {"minMember": 7},
    }
    world = worker(GANG, TrainJobBuilder().obj(), foreign)
    world.apis["worker"].discovery["scheduling.x-k8s.io/v1alpha1"] = ["podgroups"]
    world.settle(KEY)
    (group,) = objects(world, c.COSCHEDULING_POD_GROUP)
    assert group["spec"] == {"minMember": 7} and "ownerReferences" not in group["metadata"]
    assert objects(world, c.JOB) == []
    tj = world.get("worker", c.TRAINJOB, "tj")
    assert condition(tj, "ObjectsBlocked") == ("True", "NameTaken")
    said = [x["message"] for x in tj["status"]["conditions"] if x["type"] == "ObjectsBlocked"]
    assert "PodGroup 'tj'" in said[0]


def test_a_pod_group_api_gone_since_discovery_blocks_the_jobs_and_is_asked_for_again() -> None:
    world = worker(GANG, TrainJobBuilder().obj(), behind=False)  # one pass meets the fault
    api = world.apis["worker"]
    api.discovery["scheduling.x-k8s.io/v1alpha1"] = ["podgroups"]
    api.fail(Fault(404, "POST", "podgroups", times=1))  # its CRD deleted in between
    world.run(KEY)
    assert objects(world, c.JOB) == []
    del api.discovery["scheduling.x-k8s.io/v1alpha1"]
    world.settle(KEY)
    (job,) = objects(world, c.JOB)  # asked again: not served, so ungrouped
    assert c.COSCHEDULING_POD_GROUP_LABEL not in job["spec"]["template"]["metadata"]["labels"]
    tj = world.get("worker", c.TRAINJOB, "tj")
    assert condition(tj, "PodGroupPolicyIgnored") == ("True", "PodGroupPolicyIgnored")
    assert [p for m, p in api.requests if p == COSCHEDULING_API] == [COSCHEDULING_API]


# ---- a conflict on each guarded write (kubecontrol.cluster.guarded_write) -----------------


def test_a_conflict_on_the_trainjobs_suspend_holds_its_event_until_it_is_written() -> None:
    world = worker(QUEUED.obj(), FLAVOR, behind=False)
    raced, again = world.run_raced(KEY, "worker", c.TRAINJOB, "tj")  # makes the Workload, suspends
    assert raced.refused["worker"] == [("PATCH", c.TRAINJOB.path("ns", "tj"), 409)]
    assert again.refused["worker"] == []  # not sent again from the version it met
    assert [reason for _t, reason, _n in raced.events] == ["CreatedWorkload"]
    passes = world.settle(KEY)
    assert ("Normal", "Stopped", "tj") in [e for p in passes for e in p.events]


@pytest.mark.usefixtures("both_caches")
def test_a_conflict_on_finishing_the_workload_holds_its_event_until_it_is_written() -> None:
    world = started()
    (job,) = objects(world, c.JOB)
    edit(job).status({"succeeded": 1, "conditions": COMPLETE})
    world.apis["worker"].put(job)
    world.settle(KEY)  # the TrainJob completes; its Workload is finished in the pass after
    wl = the_workload(world)
    assert wl is not None
    edit(wl).conditions(*(x for x in wl["status"]["conditions"] if x["type"] != "Finished"))
    world.apis["worker"].put(wl)
    raced, again = world.run_raced(KEY, "worker", c.WORKLOAD, wl["metadata"]["name"])
    path = c.WORKLOAD.path("ns", wl["metadata"]["name"], "status")
    assert raced.refused["worker"] == [("PATCH", path, 409)]
    assert again.refused["worker"] == []  # not sent again from the version it met
    assert "FinishedWorkload" not in [reason for _t, reason, _n in raced.events]
    world.settle(KEY)
    assert condition(the_workload(world), "Finished") == ("True", "Succeeded")


def _finished(tj: Dict) -> Dict:
    done = {"type": "Complete", "status": "True", "reason": "JobsCompleted", "message": "done"}
    done["lastTransitionTime"] = "2026-11-22T11:00:00Z"
    return {**tj, "status": {"conditions": [done]}}


def _prebuilt(tj: Dict) -> Dict:
    return edit(tj).label(c.KUEUE_PREBUILT_WORKLOAD_LABEL, "the-managers-copy").obj()


@pytest.mark.parametrize(
    "made",
    [_prebuilt, _finished],
    ids=["a copy waiting for its prebuilt Workload", "a TrainJob finished, its Workload gone"],
)
def test_a_trainjob_that_makes_no_workload_asks_for_no_priority_class(
    made: Callable[[Dict], Dict],
) -> None:
    """A TrainJob copy names a prebuilt Workload (made by the manager's dispatcher, with the
    manager's priority); a finished TrainJob whose Workload was deleted (Kueue's retention
    policy) makes none again: their passes ask for no class, and one the worker's API server
    fails to read fails none of them."""
    tj = TrainJobBuilder().queue("q").obj()
    edit(tj).label(c.KUEUE_PRIORITY_CLASS_LABEL, "gold")
    world = worker(made(tj))
    api = world.apis["worker"]
    api.fail(Fault(503, plural="workloadpriorityclasses", times=None))
    api.fail(Fault(503, plural="priorityclasses", times=None))
    settle(world)
    asked = [p for _, p in api.requests] + [p for _, p, _ in api.refused]
    assert [p for p in asked if "priorityclasses" in p] == []
    assert the_workload(world) is None


def _deleting(tj: Dict) -> Dict:
    return edit(tj).deleting("2026-11-22T11:00:00Z").finalizers("example.com/hold").obj()


@pytest.mark.parametrize(
    "made", [_prebuilt, _finished, _deleting], ids=["prebuilt", "finished", "deleting"]
)
def test_a_trainjob_that_makes_no_workload_sends_no_priority_class_request(
    made: Callable[[Dict], Dict],
) -> None:
    """No faults: a request for a class would be served or refused (404), so recorded."""
    tj = TrainJobBuilder().queue("q").obj()
    edit(tj).label(c.KUEUE_PRIORITY_CLASS_LABEL, "gold")
    world = worker(made(tj))
    api = world.apis["worker"]
    settle(world)
    asked = [p for _, p in api.requests] + [p for _, p, _ in api.refused]
    assert [p for p in asked if "priorityclasses" in p] == []
    assert the_workload(world) is None


def test_a_trainjob_naming_a_missing_class_waits_for_it_without_a_workload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kueue makes no Workload for a job whose WorkloadPriorityClass does not exist: nor does
    the worker controller (one made at priority 0 would queue above a negative default's). The
    TrainJob is suspended, a Warning names the class and the label, and the pass asks for
    another after the TTL a missing class is kept; once the class exists, the Workload is made
    with its priority."""
    tj = TrainJobBuilder().queue("q").obj()
    edit(tj).label(c.KUEUE_PRIORITY_CLASS_LABEL, "gold")
    world = worker(tj, FLAVOR)
    passes = settle(world)
    assert the_workload(world) is None
    assert world.get("worker", c.TRAINJOB, "tj")["spec"]["suspend"] is True  # type: ignore[index]
    settle(world)  # passes while it waits say it once (an Event of one name)
    (event,) = [e for e in world.apis["worker"].objects(EVENT, "ns") if e["type"] == "Warning"]
    assert event["reason"] == "ErrWorkloadCompose"
    assert "WorkloadPriorityClass 'gold'" in event["message"]
    assert c.KUEUE_PRIORITY_CLASS_LABEL in event["message"]
    assert passes[-1].requeue_after == jobframework_io.CLASS_TTL
    gold = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass"}
    world.apis["worker"].put({**gold, "metadata": {"name": "gold"}, "value": 100})
    settle(world)
    assert the_workload(world) is None  # the class found missing is kept for the TTL
    monkeypatch.setattr(jobframework_io, "CLASS_TTL", 0.0)
    settle(world)
    wl = the_workload(world)
    assert wl is not None and wl["spec"]["priority"] == 100
    assert wl["spec"]["priorityClassRef"]["name"] == "gold"


@pytest.mark.parametrize("queued", [True, False])
def test_a_trainjob_that_does_not_parse_gets_one_warning_naming_the_field_and_nothing_else(
    queued: bool,
) -> None:
    """Parsed once at the pass's boundary (decide.parse), queued or not: a TrainJob a CRD
    older or looser than the models let through is said, never a pass that raises."""
    tj = edit((QUEUED if queued else TrainJobBuilder()).obj()).spec(runtimeRef={"name": 5}).obj()
    world = worker(tj, behind=False)
    done = world.run(KEY)
    assert done.writes == {"worker": [("POST", "/api/v1/namespaces/ns/events")]}
    assert done.events == [("Warning", "InvalidTrainJob", "tj")]
    assert done.requeue_after is None
    (event,) = world.apis["worker"].objects(EVENT, "ns")
    assert event["message"] == (
        "invalid TrainJob: spec.runtimeRef.name: Input should be a valid string"
    )


def test_a_running_trainjob_that_does_not_parse_is_still_held_where_kueue_manages_all() -> None:
    """Its hold needs no parse: the pass that suspends it writes that alone and says why; the
    next says that it does not parse."""
    tj = edit(TrainJobBuilder().obj()).spec(runtimeRef={"name": 5}).obj()
    world = worker(tj, behind=False, manage_jobs_without_queue_name=True)
    first = world.run(KEY)
    assert [w for w in first.writes["worker"] if "/events" not in w[1]] == [
        ("PATCH", c.TRAINJOB.path("ns", "tj"))
    ]
    assert first.events == [("Warning", c.REASON_NO_QUEUE, "tj")]
    held = world.get("worker", c.TRAINJOB, "tj")
    assert held is not None and held["spec"]["suspend"] is True
    assert world.run(KEY).events == [("Warning", c.EVENT_INVALID_TRAINJOB, "tj")]
