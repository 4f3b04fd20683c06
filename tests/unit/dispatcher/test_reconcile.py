"""The dispatcher's whole pass (`reconcile.sync`) over a manager and two workers in memory,
as Kueue's `workload_test.go` runs its MultiKueue reconciler over fake clients: every
cluster's objects before, the passes, every cluster's objects, Events and requeue after.
Kueue itself is not running: a test does what it would (reserve quota, admit) by writing the
Workloads' status. What only the API servers and Kueue decide is the bed's (tests/e2e)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dispatcher.decisions import checkpoints, placements
from dispatcher.decisions.selection import CLUSTER_NAMES_ANNOTATION
from dispatcher.workers import log_tails
from kubebase.kinds import CONFIG_MAP, EVENT, Kind
from kubecontrol.client import ApiException
from kubecontrol.controller import own_namespace
from tests.support import tables
from tests.support.builders import (
    TrainJobBuilder,
    container,
    edit,
    make_runtime,
    replicated_job,
)
from tests.support.memory_api import Fault
from tests.support.tables import Row, Step, still_clock  # noqa: F401 (a fixture)
from tests.support.whole_pass import (
    Pass,
    World,
    a_condition,
    both_caches,  # noqa: F401 (the fixture the cases that run passes use)
    condition,
    event_tuples,
    fleet,
    names,
    reserve,
)
from trainjob import jobframework
from trainjob.workload import workload_name
from trainjob_api import constants as c

Dict = dict[str, Any]
KEY = ("ns", "tj")
RUNTIME = make_runtime()
SUBMITTED = TrainJobBuilder().queue("q").multikueue()
WORKERS = ("worker1", "worker2")


@pytest.fixture
def world() -> Iterator[World]:
    made, _ctx = fleet([RUNTIME, SUBMITTED.obj()], {w: [RUNTIME] for w in WORKERS})
    yield made
    made.close()
    # Whatever the case, a pass writes the manager TrainJob's status at most once (plan.py).
    status = c.TRAINJOB.path("ns", "tj", "status")
    assert made.passes
    assert [p.writes["manager"].count(("PATCH", status)) for p in made.passes if p.wrote()] == [
        min(1, p.writes["manager"].count(("PATCH", status))) for p in made.passes if p.wrote()
    ]


def trainjob(world: World, cluster: str = "manager") -> Dict | None:
    return world.get(cluster, c.TRAINJOB, "tj")


def workload(world: World, cluster: str = "manager") -> Dict | None:
    tj = trainjob(world)
    assert tj is not None
    return world.get(cluster, c.WORKLOAD, workload_name("tj", tj["metadata"]["uid"]))


def kueue_reserves(world: World, cluster: str = "manager", admitted: bool = False) -> None:
    reserve(world, cluster, admitted=admitted)


def ends_on(world: World, worker: str, ended: Dict) -> None:
    """The copy on `worker` ends with the condition `ended` (what its controller writes),
    and the dispatcher takes it in."""
    remote = trainjob(world, worker)
    assert remote is not None
    edit(remote).status({"conditions": [ended]})
    world.apis[worker].put(remote)
    world.settle(KEY)


def check_state(world: World) -> str | None:
    wl = workload(world)
    checks = ((wl or {}).get("status") or {}).get("admissionChecks") or []
    return next((a["state"] for a in checks if a["name"] == "mk"), None)


def copies(world: World, worker: str) -> tuple[list[str], list[str]]:
    """(TrainJobs, Workloads) of ours on a worker, by name."""
    api = world.apis[worker]
    return names(api.objects(c.TRAINJOB, "ns")), names(api.objects(c.WORKLOAD, "ns"))


def dispatched(world: World) -> None:
    """Submitted, Workload made, quota reserved on the manager, copies on both workers."""
    world.settle(KEY)
    kueue_reserves(world)
    world.settle(KEY)


# ---- the whole pass as table rows (tests/support/tables.py) ----------------------------------


def settle(world: World) -> list[Pass]:
    return world.settle(KEY)


def kueue_on(cluster: str, admitted: bool = False) -> Step:
    """Kueue reserves quota for the TrainJob's Workload on `cluster` (admits it on a worker)."""
    return lambda world: kueue_reserves(world, cluster, admitted)


def copy_ends(worker: str, ctype: str, reason: str) -> Step:
    """The copy on `worker` ends (what its controller writes)."""

    def step(world: World) -> None:
        remote = trainjob(world, worker)
        assert remote is not None
        edit(remote).status({"conditions": [a_condition(ctype, reason, "ended")]})
        world.apis[worker].put(remote)

    return step


def lost(worker: str, down: bool = True) -> Step:
    return lambda world: world.apis[worker].unreachable(down)


def deleted(world: World) -> None:
    world.apis["manager"].request("DELETE", c.TRAINJOB.path("ns", "tj"))


def collector_behind(world: World) -> None:
    """The manager's garbage collector takes its time (as kube-controller-manager's does): an
    owned object outlives its owner until `collector_runs`."""
    world.apis["manager"].collect_at_once = False


def collector_runs(world: World) -> None:
    world.apis["manager"].collect()


def theirs_on(worker: str, origin: str | None = None) -> Step:
    """A TrainJob of the job's name on `worker` that is no copy of ours: a team's own, or with
    `origin`, another manager's copy (its origin label that manager's)."""

    def step(world: World) -> None:
        theirs = edit(TrainJobBuilder().obj()).labels({"team": "theirs"})
        if origin is not None:
            theirs.label(c.KUEUE_MULTIKUEUE_ORIGIN_LABEL, origin)
        world.apis[worker].put(theirs.obj())

    return step


def their_workload_on(worker: str) -> Step:
    """A Workload on `worker` of the name the job's copy would have, that is not ours."""

    def step(world: World) -> None:
        tj = trainjob(world)
        assert tj is not None
        name = workload_name("tj", tj["metadata"]["uid"])
        world.apis[worker].put(
            {
                "apiVersion": f"{c.KUEUE_GROUP}/{c.KUEUE_VERSION}",
                "kind": "Workload",
                "metadata": {"name": name, "namespace": "ns", "labels": {"team": "theirs"}},
                "spec": {"queueName": "theirs", "podSets": []},
            }
        )

    return step


def workload_deleted(world: World) -> None:
    """The manager's Workload deleted before its TrainJob (a foreground deletion's order)."""
    wl = workload(world)
    assert wl is not None
    world.apis["manager"].request("DELETE", c.WORKLOAD.path("ns", wl["metadata"]["name"]))


def evicted_on(cluster: str, reason: str = "Preempted") -> Step:
    """Kueue on `cluster` evicts the job's Workload there (`reason`): Evicted, its quota kept
    until the job stops, as Kueue writes it."""

    def step(world: World) -> None:
        wl = workload(world, cluster)
        assert wl is not None
        edit(wl).more_conditions(a_condition("Evicted", reason, "evicted"))
        world.apis[cluster].put(wl)

    return step


MK = "kueue.x-k8s.io/multikueue"
OURS = {"finalizers": [c.DISPATCHER_FINALIZER], "managedBy": MK, "suspend": True}
RESERVED = {"QuotaReserved": "QuotaReserved"}
# A copy on a worker: our origin label, the manager object's UID and spec (tables.py).
COPY = {"origin": "multikueue", "originUID": "manager's", "spec": "manager's"}
TRAINJOB_COPY = {**COPY, "suspend": True, "prebuilt": {"label": "wl", "annotation": "wl"}}
# A team's own TrainJob of the job's name on a worker (`theirs_on`): no origin, not made from
# the manager's TrainJob, its spec the same as the manager's (the same builder's).
THEIRS = {"originUID": None, "spec": "manager's", "labels": {"team": "theirs"}}
OTHER_MANAGERS = {
    "origin": "other-manager",
    "labels": {"team": "theirs", c.KUEUE_MULTIKUEUE_ORIGIN_LABEL: "other-manager"},
}
SUBMITTED_STATE = {"manager": {"TrainJob": {"tj": OURS}, "Workload": {"wl": {}}}}
DISPATCHED = [settle, kueue_on("manager"), settle]
ADMITTED_ON_2 = [*DISPATCHED, kueue_on("worker2", admitted=True), settle]


def on_workers(worker1: Dict | None = None, worker2: Dict | None = None) -> Dict:
    return {"worker1": worker1 or {}, "worker2": worker2 or {}}


def the_job(**status: Any) -> Dict:
    return {"TrainJob": {"tj": {**OURS, **status}}}


def ended_on_2(ctype: str, reason: str, finished: str) -> Dict:
    """The run on worker2 ended (`ctype` for `reason`): said on the manager, its Workload
    Finished, nothing left on a worker."""
    return {
        "manager": {
            **the_job(clusterName="worker2", conditions={ctype: reason}),
            "Workload": {
                "wl": {
                    "check": "Ready",
                    "clusterName": "worker2",
                    "conditions": {**RESERVED, "Finished": finished},
                }
            },
        },
        **on_workers(),
    }


ROWS = [
    Row(
        "a submitted TrainJob gets its Workload and our finalizer, and no copy yet",
        (settle,),
        {**SUBMITTED_STATE, **on_workers()},
        (("Normal", "CreatedWorkload"),),
    ),
    Row(
        "reserved quota sends a Workload copy to every worker, labelled with its origin, and "
        "nominates them (the TrainJob follows only to the worker that admits it)",
        tuple(DISPATCHED),
        {
            "manager": {
                **the_job(),
                "Workload": {
                    "wl": {"check": "Pending", "conditions": RESERVED, "nominated": list(WORKERS)}
                },
            },
            **on_workers({"Workload": {"wl": COPY}}, {"Workload": {"wl": COPY}}),
        },
    ),
    Row(
        "the first worker to admit wins: our check Ready, the TrainJob copied there without "
        "managedBy, the other worker's copies gone",
        tuple(ADMITTED_ON_2),
        {
            "manager": {
                **the_job(),
                "Workload": {
                    "wl": {"check": "Ready", "clusterName": "worker2", "conditions": RESERVED}
                },
            },
            **on_workers(
                worker2={
                    "TrainJob": {"tj": TRAINJOB_COPY},
                    "Workload": {
                        "wl": {**COPY, "conditions": {**RESERVED, "Admitted": "Admitted"}}
                    },
                }
            ),
        },
        # the first status from the winner (its clusterName) waits for a count that matters,
        # at most 30 s (status_coalesce_seconds)
        requeue=30,
    ),
    Row(
        "the winner's end comes back to the manager's TrainJob, its Workload finishes, the "
        "copies go",
        (*ADMITTED_ON_2, copy_ends("worker2", "Complete", "AllJobsCompleted"), settle),
        ended_on_2("Complete", "AllJobsCompleted", "Succeeded"),
        (("Normal", "FinishedWorkload"),),
    ),
    Row(
        "the winner's failure comes back as the manager TrainJob's, with its reason",
        (*ADMITTED_ON_2, copy_ends("worker2", "Failed", "FailedJobs"), settle),
        ended_on_2("Failed", "FailedJobs", "Failed"),
        (("Normal", "FinishedWorkload"),),
    ),
    Row(
        "a deleted TrainJob takes its copies with it before our finalizer lets it go",
        (*DISPATCHED, deleted, settle),
        {"manager": {}, **on_workers()},
    ),
    Row(
        "a deleted TrainJob's Workload, not yet collected, sends nothing anywhere: the copies "
        "are gone, the Workload waits for the garbage collector",
        (collector_behind, *DISPATCHED, deleted, settle),
        {
            "manager": {
                "Workload": {
                    "wl": {"check": "Pending", "conditions": RESERVED, "nominated": list(WORKERS)}
                }
            },
            **on_workers(),
        },
    ),
    Row(
        "... and once collected, nothing is left anywhere",
        (collector_behind, *DISPATCHED, deleted, settle, collector_runs, settle),
        {"manager": {}, **on_workers()},
    ),
    Row(
        "an unreachable worker gets nothing and is not nominated; the others get their copy",
        (lost("worker1"), *DISPATCHED),
        {
            "manager": {
                **the_job(),
                "Workload": {
                    "wl": {"check": "Pending", "conditions": RESERVED, "nominated": ["worker2"]}
                },
            },
            **on_workers(worker2={"Workload": {"wl": COPY}}),
        },
    ),
    Row(
        "a worker back from an outage gets its copy, once",
        (lost("worker1"), *DISPATCHED, lost("worker1", down=False), settle),
        {
            "manager": {
                **the_job(),
                "Workload": {
                    "wl": {"check": "Pending", "conditions": RESERVED, "nominated": list(WORKERS)}
                },
            },
            **on_workers({"Workload": {"wl": COPY}}, {"Workload": {"wl": COPY}}),
        },
    ),
    Row(
        "a worker that admits the job where a TrainJob of its name is not ours: that one is "
        "left as it is, every copy goes and our check asks Kueue to try again",
        (theirs_on("worker1"), *DISPATCHED, kueue_on("worker1", admitted=True), settle),
        {
            "manager": {
                **the_job(),
                "Workload": {"wl": {"check": "Retry", "conditions": RESERVED}},
            },
            **on_workers({"TrainJob": {"tj": THEIRS}}),
        },
        (("Warning", "RemoteNameTaken"),),
    ),
    Row(
        "... and once Kueue reserves quota again, copies go only where the name is free",
        (
            theirs_on("worker1"),
            *DISPATCHED,
            kueue_on("worker1", admitted=True),
            settle,
            kueue_on("manager"),
            settle,
        ),
        {
            "manager": {
                **the_job(),
                "Workload": {
                    "wl": {"check": "Pending", "conditions": RESERVED, "nominated": ["worker2"]}
                },
            },
            **on_workers({"TrainJob": {"tj": THEIRS}}, {"Workload": {"wl": COPY}}),
        },
    ),
    Row(
        "a deleted TrainJob takes its copies and leaves a TrainJob of its name that is not ours",
        (theirs_on("worker1"), *DISPATCHED, deleted, settle),
        {
            "manager": {},
            **on_workers({"TrainJob": {"tj": {"originUID": None, "labels": {"team": "theirs"}}}}),
        },
    ),
    Row(
        "a TrainJob whose Workload was deleted first (a foreground deletion) still takes its "
        "copies: the Workload of Kueue's name for it is its own",
        (*DISPATCHED, workload_deleted, deleted, settle),
        {"manager": {}, **on_workers()},
    ),
    Row(
        "the winner's Kueue evicts the copy: every copy goes, our check asks Kueue to try again",
        (*ADMITTED_ON_2, evicted_on("worker2"), settle),
        {
            "manager": {
                **the_job(),
                "Workload": {"wl": {"check": "Retry", "conditions": RESERVED}},
            },
            **on_workers(),
        },
        (("Warning", "RemoteEvicted"),),
    ),
    Row(
        "the manager's Kueue evicts the Workload: the copies go, its quota is given back and "
        "it waits in the queue again (Requeued, for the eviction's reason)",
        (*ADMITTED_ON_2, evicted_on("manager"), settle),
        {
            "manager": {
                **the_job(),
                "Workload": {
                    "wl": {
                        "check": "Ready",
                        "conditions": {"Evicted": "Preempted", "Requeued": "Preempted"},
                    }
                },
            },
            **on_workers(),
        },
        (("Normal", "RemoteRemoved"),),
    ),
    Row(
        "... for a reason Kueue does not requeue at once (its pods not ready in time): Requeued "
        "is not said, the Workload waits for its backoff",
        (*ADMITTED_ON_2, evicted_on("manager", "PodsReadyTimeout"), settle),
        {
            "manager": {
                **the_job(),
                "Workload": {
                    "wl": {"check": "Ready", "conditions": {"Evicted": "PodsReadyTimeout"}}
                },
            },
            **on_workers(),
        },
        (("Normal", "RemoteRemoved"),),
    ),
    Row(
        "... and for one it does (a node failed): Requeued, with that reason",
        (*ADMITTED_ON_2, evicted_on("manager", "NodeFailures"), settle),
        {
            "manager": {
                **the_job(),
                "Workload": {
                    "wl": {
                        "check": "Ready",
                        "conditions": {"Evicted": "NodeFailures", "Requeued": "NodeFailures"},
                    }
                },
            },
            **on_workers(),
        },
        (("Normal", "RemoteRemoved"),),
    ),
    Row(
        "a deleted TrainJob running on a worker takes its running copy and that copy's "
        "Workload with it",
        (*ADMITTED_ON_2, deleted, settle),
        {"manager": {}, **on_workers()},
    ),
    Row(
        "another manager's copy of the job's name on a worker (its origin label not ours) is "
        "not ours: never written, its name noted taken",
        (
            theirs_on("worker1", origin="other-manager"),
            *DISPATCHED,
            kueue_on("worker1", admitted=True),
            settle,
        ),
        {
            "manager": {
                **the_job(),
                "Workload": {"wl": {"check": "Retry", "conditions": RESERVED}},
            },
            **on_workers({"TrainJob": {"tj": {**THEIRS, **OTHER_MANAGERS}}}),
        },
        (("Warning", "RemoteNameTaken"),),
    ),
    Row(
        "... nor taken by a deletion",
        (theirs_on("worker1", origin="other-manager"), *DISPATCHED, deleted, settle),
        {
            "manager": {},
            **on_workers({"TrainJob": {"tj": {"originUID": None, **OTHER_MANAGERS}}}),
        },
    ),
    Row(
        "a worker holding a Workload of the copy's name that is not ours is not nominated, and "
        "its Workload is left as it is",
        (their_workload_on("worker1"), *DISPATCHED),
        {
            "manager": {
                **the_job(),
                "Workload": {
                    "wl": {"check": "Pending", "conditions": RESERVED, "nominated": ["worker2"]}
                },
            },
            **on_workers(
                {
                    "Workload": {
                        "wl": {
                            "originUID": None,
                            "spec": {"podSets": [], "queueName": "theirs"},
                            "labels": {"team": "theirs"},
                        }
                    }
                },
                {"Workload": {"wl": COPY}},
            ),
        },
    ),
]


@pytest.mark.usefixtures("both_caches", "still_clock")
@pytest.mark.parametrize("row", ROWS, ids=str)
def test_the_whole_pass(world: World, row: Row) -> None:
    passes = tables.take_steps(world, row)
    assert tables.outcome(world, passes) == row.outcome


@pytest.mark.usefixtures("both_caches")
@pytest.mark.parametrize("how", ["unreachable", "refuses"])
def test_a_deletion_goes_on_past_a_worker_it_cannot_clean_and_a_warning_names_that_worker(
    world: World, how: str
) -> None:
    dispatched(world)
    held = copies(world, "worker1")
    if how == "unreachable":
        world.apis["worker1"].unreachable()
        world.relist()
    else:  # every delete there answered 500
        world.apis["worker1"].fail(Fault(500, method="DELETE", times=None))
    world.apis["manager"].request("DELETE", c.TRAINJOB.path("ns", "tj"))
    asked = len(world.apis["worker1"].requests)
    passes = world.settle(KEY)
    assert trainjob(world) is None  # not held up
    assert copies(world, "worker2") == ([], [])
    if how == "unreachable":  # nothing sent there
        assert world.apis["worker1"].requests[asked:] == []
    world.apis["worker1"].unreachable(False)
    world.apis["worker1"].heal()
    assert copies(world, "worker1") == held  # left to the garbage collector
    warnings = [e for p in passes for e in p.events if e[1] == "RemoteCleanupDeferred"]
    assert [(kind, name) for kind, _, name in warnings] == [("Warning", "tj")]
    (said,) = [
        e["message"]
        for e in world.apis["manager"].objects(EVENT, "ns")
        if e["reason"] == "RemoteCleanupDeferred"
    ]
    assert "worker1" in said and "worker2" not in said, said
    assert ("unreachable" in said) == (how == "unreachable"), said


@pytest.mark.usefixtures("both_caches")
def test_a_deleted_trainjob_leaves_copies_of_its_names_made_for_other_manager_objects(
    world: World,
) -> None:
    # Copies named as the TrainJob and its Workload but made for another manager object of
    # those names (their origin-uid): an orphan is the garbage collector's to judge, never a
    # deletion's to take by name.
    dispatched(world)
    kueue_reserves(world, "worker1", admitted=True)
    world.settle(KEY)
    api = world.apis["worker1"]
    for kind in (c.TRAINJOB, c.WORKLOAD):
        (copy,) = api.objects(kind, "ns")
        edit(copy).annotation(c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION, "another")
        api.put(copy)
    held = copies(world, "worker1")
    assert held == (["tj"], [workload_name("tj", trainjob(world)["metadata"]["uid"])])
    world.apis["manager"].request("DELETE", c.TRAINJOB.path("ns", "tj"))
    world.settle(KEY)
    assert trainjob(world) is None
    assert copies(world, "worker1") == held and copies(world, "worker2") == ([], [])


@pytest.mark.parametrize(
    ("kept", "opted_out", "read"), [(10, False, True), (0, False, False), (10, True, False)]
)
def test_a_copys_pods_tails_are_read_before_it_goes_unless_kept_none_or_opted_out(
    monkeypatch: pytest.MonkeyPatch, kept: int, opted_out: bool, read: bool
) -> None:
    readers: list[tuple[str, str]] = []

    def keep(_manager: Any, _remote: Any, copy: Dict, _bounds: Any) -> None:
        meta = copy["metadata"]
        made_for = meta["annotations"][c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION]
        readers.append((meta["uid"], made_for))

    monkeypatch.setattr(log_tails, "keep", keep)
    submitted = SUBMITTED.obj()
    if opted_out:
        edit(submitted).annotation(c.LOG_TAILS_ANNOTATION, "off")
    world, _ctx = fleet(
        [RUNTIME, submitted],
        {w: [RUNTIME] for w in WORKERS},
        log_tails_kept=kept,
        retention_seconds=0,
    )
    try:
        dispatched(world)
        kueue_reserves(world, "worker1", admitted=True)
        world.settle(KEY)
        copy, manager = trainjob(world, "worker1"), trainjob(world)
        assert copy is not None and manager is not None
        ends_on(world, "worker1", a_condition("Complete", "AllJobsCompleted", "done"))
        for _ in range(20):  # the copy's delete waits for its capture, on a thread of its own
            world.settle(KEY)
            if copies(world, "worker1") == ([], []):
                break
            time.sleep(0.05)
        assert copies(world, "worker1") == ([], [])  # the finished copy gone
        # read by the copy the plan saw, made for the manager TrainJob
        expected = [(copy["metadata"]["uid"], manager["metadata"]["uid"])] if read else []
        assert readers == expected
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
def test_a_copy_resumes_from_the_last_checkpoint_its_record_holds_read_only_to_send_it() -> None:
    """Its status names no checkpoint (the run since reported none): the record of its ended
    runs says where to resume, read in the passes that may send a copy and in no other."""
    submitted = SUBMITTED.obj()
    edit(submitted).annotations({checkpoints.ANNOTATION: "/ckpt/tj"})
    world, _ctx = fleet([RUNTIME, submitted], {w: [RUNTIME] for w in WORKERS})
    try:
        uid = trainjob(world)["metadata"]["uid"]  # type: ignore[index]
        ended = [
            {"worker": "worker2", "started": "2026-01-01T00:00:00Z", "checkpoint": "step-20.pt",
             "checkpoint_step": 20},
            {"worker": "worker1", "started": "2026-01-01T01:00:00Z"},  # it reported none
        ]  # fmt: skip
        record = CONFIG_MAP.path(own_namespace(), placements.name_of(uid))
        world.apis["manager"].put(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": placements.name_of(uid), "namespace": own_namespace()},
                "data": {placements.KEY: json.dumps(ended)},
            }
        )
        dispatched(world)
        waiting = world.requests_of_a_pass(KEY)  # copies wait on both: none admitted yet
        assert ("GET", record) not in waiting["manager"], waiting["manager"]
        kueue_reserves(world, "worker1", admitted=True)
        admitted = world.requests_of_a_pass(KEY)  # worker1 admitted its copy: sent there
        assert ("GET", record) in admitted["manager"], admitted["manager"]
        passes = world.settle(KEY)
        copy = trainjob(world, "worker1")
        assert copy is not None
        env = {e["name"]: e["value"] for e in copy["spec"]["trainer"]["env"]}
        assert env[checkpoints.ENV_RESUME_FROM] == "/ckpt/tj/step-20.pt"
        assert env[checkpoints.ENV_RESUME_STEP] == "20"
        assert passes and ("Normal", "ResumedFromCheckpoint", "tj") in event_tuples(
            world.apis["manager"]
        )
        sent = world.requests_of_a_pass(KEY)  # it runs there: no copy to send, nothing read
        assert ("GET", record) not in sent["manager"], sent["manager"]
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
def test_a_trainjob_of_its_name_on_a_worker_that_is_not_ours_is_never_written(
    world: World,
) -> None:
    theirs = edit(TrainJobBuilder().obj()).labels({"team": "theirs"}).obj()
    world.apis["worker1"].put(theirs)
    dispatched(world)
    kueue_reserves(world, "worker1", admitted=True)
    passes = world.settle(KEY)
    found = trainjob(world, "worker1")
    assert found is not None and found["metadata"]["labels"] == {"team": "theirs"}
    assert ("Warning", "RemoteNameTaken", "tj") in [e for p in passes for e in p.events]
    assert check_state(world) == "Retry"  # Kueue requeues it, as after an eviction
    assert copies(world, "worker1") == (["tj"], []) and copies(world, "worker2") == ([], [])
    kueue_reserves(world)  # reserved again: sent only where the name is free
    world.settle(KEY)
    assert copies(world, "worker1")[1] == [] and copies(world, "worker2")[1] != []
    wl = workload(world)
    assert wl is not None and "worker1" in wl["status"]["admissionChecks"][0]["message"]


@pytest.mark.usefixtures("both_caches")
def test_a_pass_that_clears_one_condition_and_sets_another_writes_the_status_once(
    world: World,
) -> None:
    """The intake drops a Failed that no longer holds (its queue was fixed) while the check
    says the clusters it chose are none of its queue's: both in one status write."""
    dispatched(world)
    tj = trainjob(world)
    assert tj is not None
    edit(tj).annotations({CLUSTER_NAMES_ANNOTATION: "worker9"}).status(
        {"conditions": [a_condition("Failed", c.REASON_NO_QUEUE, "no queue")]}
    )
    world.apis["manager"].put(tj)
    first = world.run(KEY)
    status = c.TRAINJOB.path("ns", "tj", "status")
    assert first.writes["manager"].count(("PATCH", status)) == 1
    after = trainjob(world)
    assert condition(after, "Failed") is None
    assert condition(after, "ClustersSelected") == ("False", "NoClusterSelected")


def admitted_on(world: World, worker: str) -> None:
    """Dispatched, and `worker` admitted its copy: the TrainJob runs there."""
    dispatched(world)
    kueue_reserves(world, worker, admitted=True)
    world.settle(KEY)
    assert copies(world, worker)[0] == ["tj"]


@pytest.mark.usefixtures("both_caches")
def test_a_copy_evicted_on_its_worker_is_sent_again_and_the_run_recorded(world: World) -> None:
    admitted_on(world, "worker1")
    wl = workload(world, "worker1")
    assert wl is not None
    preempted = "preempted by a higher priority Workload"
    edit(wl).more_conditions(a_condition("Evicted", "Preempted", preempted))
    world.apis["worker1"].put(wl)
    passes = world.settle(KEY)
    assert check_state(world) == "Retry"
    assert ("Warning", "RemoteEvicted", "tj") in [e for p in passes for e in p.events]
    assert copies(world, "worker1") == ([], [])  # its copies go; Kueue dispatches it again
    records = world.apis["manager"].objects(CONFIG_MAP)
    (record,) = [r for r in records if r["metadata"]["name"].startswith("placements-")]
    assert '"worker":"worker1"' in record["data"]["placements.json"]
    assert "RemoteEvicted" in record["data"]["placements.json"]


@pytest.mark.usefixtures("both_caches")
def test_a_trainjob_no_worker_could_ever_hold_is_given_up_naming_why() -> None:
    big = TrainJobBuilder().queue("q").multikueue().obj()
    runtime = make_runtime(
        replicated_jobs=[
            {
                "name": "node",
                "template": {
                    "metadata": {
                        "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                    },
                    "spec": {
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "node",
                                        "image": "t",
                                        "resources": {"requests": {"cpu": "64"}},
                                    }
                                ]
                            }
                        }
                    },
                },
            }
        ]
    )
    world, _ctx = fleet([runtime, big], {w: [runtime] for w in WORKERS})
    try:
        dispatched(world)
        tj = trainjob(world)
        failed = condition(tj, "Failed")
        assert failed is not None and failed[1] == "NoClusterFits", tj
        assert copies(world, "worker1") == ([], []) and copies(world, "worker2") == ([], [])
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
def test_a_worker_lost_longer_than_the_timeout_loses_its_run_and_the_job_is_sent_again() -> None:
    world, _ctx = fleet(
        [RUNTIME, SUBMITTED.obj()], {w: [RUNTIME] for w in WORKERS}, worker_lost_timeout=0.05
    )
    try:
        admitted_on(world, "worker1")
        world.apis["worker1"].unreachable()
        first = world.run(KEY)  # lost just now: it waits for the timeout
        assert check_state(world) == "Ready"
        assert first.requeue_after is not None and 0 < first.requeue_after <= 0.05
        time.sleep(0.06)
        passes = world.settle(KEY)
        assert check_state(world) == "Retry"
        assert ("Warning", "ClusterLost", "tj") in [e for p in passes for e in p.events]
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
def test_with_an_external_dispatcher_copies_wait_for_its_nomination_and_go_there_only() -> None:
    world, _ctx = fleet(
        [RUNTIME, SUBMITTED.obj()], {w: [RUNTIME] for w in WORKERS}, strategy="External"
    )
    try:
        dispatched(world)
        wl = workload(world)
        assert wl is not None
        assert (
            "an external dispatcher nominates them" in wl["status"]["admissionChecks"][0]["message"]
        )
        assert copies(world, "worker1") == ([], []) and copies(world, "worker2") == ([], [])
        edit(wl).status(nominatedClusterNames=["worker2"])  # what the external one writes
        world.apis["manager"].put(wl)
        world.settle(KEY)
        assert copies(world, "worker1") == ([], [])
        assert copies(world, "worker2")[1] == [wl["metadata"]["name"]]
    finally:
        world.close()


# ---- a conflict on each guarded write (kubecontrol.cluster.guarded_write) -----------------


def _conflicted(world: World, kind: Kind, name: str, path: str, cluster: str = "manager") -> Pass:
    """One pass planned from caches that miss someone else's write of `name` on `cluster`:
    its guarded write `path` meets the conflict (and nothing else is refused), and a pass on
    the same caches does not send it again; the first pass is returned."""
    done, again = world.run_raced(KEY, cluster, kind, name)
    assert done.refused[cluster] == [("PATCH", path, 409)]
    # the version it met the conflict from is remembered: not sent from it again
    assert not [r for r in again.refused[cluster] if r[1] == path], again.refused
    assert ("PATCH", path) not in again.writes[cluster]
    return done


def test_a_conflict_on_the_workloads_check_sends_nothing_to_a_worker_until_the_next_pass() -> None:
    world, _ctx = fleet([RUNTIME, SUBMITTED.obj()], {w: [RUNTIME] for w in WORKERS}, behind=False)
    try:
        world.settle(KEY)
        kueue_reserves(world)
        wl = workload(world)["metadata"]["name"]  # type: ignore[index]
        done = _conflicted(world, c.WORKLOAD, wl, c.WORKLOAD.path("ns", wl, "status"))
        assert not done.wrote() and done.events == []
        world.settle(KEY)
        for worker in WORKERS:
            assert copies(world, worker)[1] != []
    finally:
        world.close()


def test_a_new_trainjobs_first_pass_writes_each_change_from_the_version_before_it() -> None:
    """Our finalizer, then the suspend, in one pass: the suspend is sent from the version the
    finalizer's write made (from the listed one, it met a conflict every time)."""
    world, _ctx = fleet([RUNTIME, SUBMITTED.obj()], {w: [RUNTIME] for w in WORKERS}, behind=False)
    try:
        first = world.run(KEY)
        path = c.TRAINJOB.path("ns", "tj")
        assert (
            first.writes["manager"].count(("PATCH", path)) == 2 and first.refused["manager"] == []
        )
        tj = trainjob(world)
        assert tj is not None and tj["spec"]["suspend"] is True
        assert tj["metadata"]["finalizers"] == [c.DISPATCHER_FINALIZER]
    finally:
        world.close()


def test_a_race_on_a_new_trainjob_keeps_the_others_finalizer_and_sends_nothing_stale_again() -> (
    None
):
    """Someone adds a finalizer as our first pass runs: our finalizer and the suspend meet the
    conflict, a pass on the same caches sends neither again, and the next pass keeps both
    finalizers."""
    world, _ctx = fleet([RUNTIME, SUBMITTED.obj()], {w: [RUNTIME] for w in WORKERS}, behind=False)
    try:

        def theirs(tj: Dict) -> None:
            edit(tj).finalizers("example.com/keep")

        raced, again = world.run_raced(KEY, "manager", c.TRAINJOB, "tj", change=theirs)
        path = c.TRAINJOB.path("ns", "tj")
        assert raced.refused["manager"] == [("PATCH", path, 409), ("PATCH", path, 409)]
        assert ("Normal", "Stopped", "tj") not in raced.events
        assert [r for r in again.refused["manager"] if r[1] == path] == [("PATCH", path, 409)]
        world.settle(KEY)
        tj = trainjob(world)
        assert tj is not None and tj["spec"]["suspend"] is True
        assert tj["metadata"]["finalizers"] == ["example.com/keep", c.DISPATCHER_FINALIZER]
    finally:
        world.close()


def test_a_conflict_on_the_trainjobs_status_is_written_again_from_the_new_version() -> None:
    world, _ctx = fleet([RUNTIME, SUBMITTED.obj()], {w: [RUNTIME] for w in WORKERS}, behind=False)
    try:
        dispatched(world)
        kueue_reserves(world, "worker2", admitted=True)
        world.settle(KEY)
        remote = trainjob(world, "worker2")
        assert remote is not None
        edit(remote).status({"conditions": [a_condition("Complete", "AllJobsCompleted")]})
        world.apis["worker2"].put(remote)
        status = c.TRAINJOB.path("ns", "tj", "status")
        raced, _again = world.run_raced(KEY, "manager", c.TRAINJOB, "tj")
        assert ("PATCH", status, 409) in raced.refused["manager"]
        assert ("PATCH", status) not in raced.writes["manager"]
        world.settle(KEY)
        assert condition(trainjob(world), "Complete") == ("True", "AllJobsCompleted")
    finally:
        world.close()


def test_a_guarded_write_the_api_refuses_for_another_reason_fails_the_pass() -> None:
    """Only a conflict or a thing gone is taken as "planned from an old version"; a refusal
    (422 here, a webhook's 403, a 500 after the retries) fails the pass, for the queue to
    retry it with backoff and the log to say why."""
    world, _ctx = fleet([RUNTIME, SUBMITTED.obj()], {w: [RUNTIME] for w in WORKERS}, behind=False)
    try:
        world.settle(KEY)
        kueue_reserves(world)
        world.apis["manager"].fail(Fault(422, "PATCH", "workloads", "status"))
        with pytest.raises(ApiException) as refused:
            world.run(KEY)
        assert refused.value.status == 422
        world.settle(KEY)  # once the API takes it, the pass goes on
        assert check_state(world) == "Pending"
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
def test_a_worker_missing_the_jobs_cluster_runtime_gets_no_copy() -> None:
    # A ClusterTrainingRuntime does not follow its job (only a namespace's own one does).
    world, _ctx = fleet([RUNTIME, SUBMITTED.obj()], {"worker1": [], "worker2": [RUNTIME]})
    try:
        dispatched(world)
        assert copies(world, "worker1") == ([], [])
        assert copies(world, "worker2")[1] != []
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
def test_a_configured_worker_with_no_connection_the_job_does_not_choose_is_not_waited_for() -> None:
    # Too big for its one chosen worker: given up, whatever a worker it did not choose might
    # hold once connected (worker3: in the config, no MultiKueueCluster, never connected).
    big = make_runtime(
        replicated_jobs=[
            replicated_job("node", "trainer", [container(resources={"requests": {"cpu": "64"}})])
        ]
    )
    submitted = SUBMITTED.obj()
    edit(submitted).annotations({CLUSTER_NAMES_ANNOTATION: "worker1"})
    world, _ctx = fleet([big, submitted], {w: [big] for w in WORKERS})
    try:
        config = world.get("manager", c.MULTIKUEUE_CONFIG, "multikueue", namespace=None)
        assert config is not None
        edit(config).spec(clusters=[*WORKERS, "worker3"])
        world.apis["manager"].put(config)
        dispatched(world)
        failed = condition(trainjob(world), "Failed")
        assert failed is not None and failed[1] == "NoClusterFits"
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
@pytest.mark.parametrize("neighbours", ["controlled", "gone", "uncontrolled"])
def test_a_trainjob_naming_anothers_workload_as_prebuilt_takes_none_of_its_copies_when_deleted(
    world: World, neighbours: str
) -> None:
    # A tenant's TrainJob names its neighbour's Workload in the prebuilt annotation, which
    # anyone who may edit TrainJobs can write; deleting it must not delete the neighbour's
    # Workload copies on the workers: neither while the neighbour's Workload is on the manager
    # (another controls it, or no one: its owner reference gone) nor once it is gone from
    # there (the copies are the garbage collector's, which judges each by the Workload it was
    # made for).
    dispatched(world)
    theirs = workload(world)
    assert theirs is not None and copies(world, "worker1")[1] != []
    held = {w: copies(world, w) for w in WORKERS}
    if neighbours == "gone":
        world.apis["manager"].request("DELETE", c.WORKLOAD.path("ns", theirs["metadata"]["name"]))
        assert workload(world) is None
    elif neighbours == "uncontrolled":
        edit(theirs).unowned()
        world.apis["manager"].put(theirs)
    other = TrainJobBuilder("other").multikueue().obj()
    edit(other).annotations({c.KUEUE_PREBUILT_WORKLOAD_ANNOTATION: theirs["metadata"]["name"]})
    world.apis["manager"].put(other)
    world.settle(("ns", "other"))
    world.apis["manager"].request("DELETE", c.TRAINJOB.path("ns", "other"))
    world.settle(("ns", "other"))
    assert world.get("manager", c.TRAINJOB, "other") is None
    assert {w: copies(world, w) for w in WORKERS} == held


def test_a_missing_class_waits_without_a_workload_and_asks_again_after_the_ttl() -> None:
    """The dispatcher makes no manager Workload for a TrainJob whose WorkloadPriorityClass does
    not exist (Kueue makes none), says so once, and asks for another pass once the class's
    read has run its TTL (the pass's own answer, not only the resync's)."""
    tj = TrainJobBuilder().queue("q").multikueue().obj()
    edit(tj).label(c.KUEUE_PRIORITY_CLASS_LABEL, "gold")
    world, _ = fleet([make_runtime(), tj], {"worker1": [make_runtime()]}, behind=False)
    try:
        passes = world.settle(("ns", "tj"))
        world.settle(("ns", "tj"))
        assert world.apis["manager"].objects(c.WORKLOAD, "ns") == []
        assert passes[-1].requeue_after == jobframework.CLASS_TTL
        warned = [e for e in world.apis["manager"].objects(EVENT, "ns") if e["type"] == "Warning"]
        assert [e["reason"] for e in warned] == ["ErrWorkloadCompose"]
    finally:
        world.close()


def test_a_trainjob_that_does_not_parse_gets_our_finalizer_and_a_warning_naming_the_field() -> None:
    """Parsed once at the pass's boundary: one a CRD older or looser than the models let
    through (made before the webhook was installed) is said, nothing else is done for it."""
    tj = edit(SUBMITTED.obj()).spec(runtimeRef={"name": 5}).obj()
    world, _ctx = fleet([RUNTIME, tj], {w: [RUNTIME] for w in WORKERS}, behind=False)
    done = world.run(KEY)
    assert done.events == [("Warning", "InvalidTrainJob", "tj")]
    assert done.requeue_after is None  # its next pass is its next change
    (event,) = world.apis["manager"].objects(EVENT, "ns")
    assert event["message"] == (
        "invalid TrainJob: spec.runtimeRef.name: Input should be a valid string"
    )
    now = trainjob(world)
    assert now is not None and c.DISPATCHER_FINALIZER in now["metadata"]["finalizers"]
    assert world.get("manager", c.WORKLOAD, workload_name("tj", now["metadata"]["uid"])) is None
    world.close()
