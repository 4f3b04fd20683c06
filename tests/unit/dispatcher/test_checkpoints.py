"""Checkpoint-aware moves (dispatcher/decisions/checkpoints.py): its pure parts, then the whole pass
over a manager and two workers in memory: a job that keeps checkpoints, moved after its
worker evicted it, resumes on the other from the checkpoint its run reported (from the
manager's status, or from the record of runs when the status no longer names one)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from dispatcher.decisions import checkpoints, placements
from dispatcher.decisions.checkpoints import Checkpoint, CheckpointsError
from kubebase.kinds import CONFIG_MAP
from tests.support.builders import TrainJobBuilder, container, edit, make_runtime, replicated_job
from tests.support.whole_pass import (
    World,
    a_condition,
    both_caches,  # noqa: F401 (the fixture the cases that run passes use)
    fleet,
    reserve,
)
from trainjob import admission as rules
from trainjob.workload import workload_name
from trainjob_api import constants as c
from trainjob_api.views import RuntimeView, TrainerStatusView, TrainJobView

Dict = dict[str, Any]
KEY = ("ns", "tj")
RUNTIME = make_runtime()
WORKERS = ("worker1", "worker2")
PLACE = "s3://team-a/ckpt/tj"

# ---- pure ----------------------------------------------------------------------------------


def test_the_place_is_the_jobs_own_or_under_its_runtimes_root() -> None:
    mine = {checkpoints.ANNOTATION: "/ckpt/run-7/"}
    root = {checkpoints.ANNOTATION: "s3://bucket/team"}
    assert checkpoints.place_of(mine, root, "ns", "tj") == "/ckpt/run-7"
    assert checkpoints.place_of({}, root, "ns", "tj") == "s3://bucket/team/ns/tj"
    assert checkpoints.place_of({}, {}, "ns", "tj") is None
    for bad in ("", "/", "has space", "a\nb", "x" * 600):
        with pytest.raises(CheckpointsError, match=r"metadata.annotations\[trainjob.dev"):
            checkpoints.place_of({checkpoints.ANNOTATION: bad}, {}, "ns", "tj")
    with pytest.raises(CheckpointsError, match="the runtime"):
        checkpoints.place_of({}, {checkpoints.ANNOTATION: "a b"}, "ns", "tj")


def metrics(**named: str) -> Dict:
    return {"metrics": [{"name": k, "value": v} for k, v in named.items()]}


def status_of(**named: str) -> TrainerStatusView:
    return TrainerStatusView(metrics(**named))


def test_a_report_names_a_checkpoint_of_a_checkpoints_shape_only() -> None:
    assert checkpoints.reported(
        status_of(loss="0.1", checkpoint="step-40.pt", checkpoint_step="40")
    )
    got = checkpoints.reported(status_of(checkpoint="epoch-2/step-40", checkpoint_step="40"))
    assert got == Checkpoint("epoch-2/step-40", 40)
    assert checkpoints.reported(status_of(checkpoint="step-40")) == Checkpoint("step-40", None)
    assert checkpoints.reported(status_of(checkpoint="s", checkpoint_step="-1")) == Checkpoint("s")
    # a digit that is not ASCII is no step (int() of it would raise in every pass)
    assert checkpoints.reported(status_of(checkpoint="s", checkpoint_step="²")) == Checkpoint("s")
    for bad in ("../other-job/step-9", "/etc/passwd", "a/../../b", "a b", ".hidden", "a//b"):
        assert checkpoints.reported(status_of(checkpoint=bad)) is None, bad
    assert checkpoints.reported(None) is None
    assert checkpoints.reported(TrainerStatusView({"metrics": "nope"})) is None
    twice = metrics(checkpoint="step-1", checkpoint_step="1")
    twice["metrics"] += metrics(checkpoint="step-2", checkpoint_step="2")["metrics"]
    assert checkpoints.reported(TrainerStatusView(twice)) == Checkpoint("step-2", 2)  # the last
    odd = [{"name": "checkpoint", "value": 7}, "x", {"name": ["checkpoint"], "value": "s"}]
    assert checkpoints.reported(TrainerStatusView({"metrics": odd})) is None
    assert checkpoints.reported(status_of(loss="0.1")) is None


def test_the_copy_gets_the_place_and_the_resume_point_in_its_trainers_env() -> None:
    mine = [{"name": "LR", "value": "0.1"}, {"name": "TRAINJOB_RESUME_FROM", "value": "mine"}]
    body = {"spec": {"trainer": {"env": mine}}}
    checkpoints.with_environment(body, PLACE, Checkpoint("step-40.pt", 40))
    assert body["spec"]["trainer"]["env"] == [
        {"name": "LR", "value": "0.1"},
        {"name": "TRAINJOB_CHECKPOINTS", "value": PLACE},
        {"name": "TRAINJOB_RESUME_FROM", "value": f"{PLACE}/step-40.pt"},
        {"name": "TRAINJOB_RESUME_STEP", "value": "40"},
    ]
    assert checkpoints.resume_of(TrainJobView(body)) == Checkpoint("step-40.pt", 40)
    fresh: Dict = {"spec": {}}
    checkpoints.with_environment(fresh, PLACE, None)
    assert fresh["spec"]["trainer"] == {"env": [{"name": "TRAINJOB_CHECKPOINTS", "value": PLACE}]}
    assert checkpoints.resume_of(TrainJobView(fresh)) is None
    # what the dispatcher did not write reads as no resume point, and never raises
    odd = [
        "x",
        {"name": "TRAINJOB_RESUME_FROM", "value": "step-40.pt"},
        {"name": "TRAINJOB_RESUME_STEP", "value": "40"},
    ]
    assert checkpoints.resume_of(TrainJobView({"spec": {"trainer": {"env": odd}}})) is None
    odd.insert(0, {"name": "TRAINJOB_CHECKPOINTS", "value": PLACE})
    odd[2] = {"name": "TRAINJOB_RESUME_FROM", "value": f"{PLACE}/step-40.pt"}
    assert checkpoints.resume_of(TrainJobView({"spec": {"trainer": {"env": odd}}})) == (
        Checkpoint("step-40.pt", 40)
    )


def test_admission_judges_the_job_as_its_copies_go_with_the_variables() -> None:
    """A job that keeps checkpoints whose runtime's trainer has no `node` container: its
    copies' spec.trainer.env could not be placed, so the manager refuses it up front."""
    runtime = make_runtime(
        ml_policy={"numNodes": 1},  # a plain runtime: nothing else wants a `node` container
        replicated_jobs=[replicated_job("trainer", "trainer", [container("main")])],
    )
    job = TrainJobBuilder().queue("q").multikueue().obj()
    edit(job).spec(trainer=None).annotations({checkpoints.ANNOTATION: PLACE})
    place = checkpoints.place_for(TrainJobView(job), RuntimeView(runtime))
    assert place == PLACE
    assert rules.runtime_refusal(rules.Admitted({"object": job}), RuntimeView(runtime)) is None
    copied = rules.Admitted({"object": checkpoints.as_copied(TrainJobView(job), place)})
    assert "no container named 'node'" in (
        rules.runtime_refusal(copied, RuntimeView(runtime)) or ""
    )
    assert "trainer" not in job["spec"]  # the job itself is left as it is


def test_the_last_recorded_checkpoint_skips_runs_that_reported_none() -> None:
    entries = [
        {"worker": "w1", "checkpoint": "step-20", "checkpoint_step": 20},
        {"worker": "w2", "checkpoint": "../escape", "checkpoint_step": 90},
        {"worker": "w1"},
    ]
    assert checkpoints.last_recorded(entries) == Checkpoint("step-20", 20)
    assert checkpoints.last_recorded([]) is None


def test_each_run_in_the_story_starts_where_the_runs_before_it_saved_last() -> None:
    entries = [
        {
            "worker": "w1",
            "started": "t1",
            "ended": "t2",
            "checkpoint": "s-20",
            "checkpoint_step": 20,
        },
        {"worker": "w2", "started": "t3", "ended": "t4"},  # lost before it saved one
    ]
    tj = TrainJobView(
        {
            "metadata": {
                "name": "tj",
                "namespace": "ns",
                "annotations": {checkpoints.ANNOTATION: PLACE},
            },
            "status": {
                "clusterName": "w1",
                "trainerStatus": metrics(checkpoint="s-50", checkpoint_step="50"),
                "restarts": 2,  # its failurePolicy restarted its Jobs twice there
            },
        }
    )
    runs = placements.runs(entries, tj, "t5")
    assert [(r.worker, r.start_step, r.resumed_from, r.checkpoint) for r in runs] == [
        ("w1", 0, None, "s-20"),
        ("w2", 20, "s-20", None),
        ("w1", 20, "s-20", "s-50"),
    ]
    assert runs[-1].current and runs[-1].checkpoint_step == 50
    assert [r.restarts for r in runs] == [None, None, 2]


def test_a_run_that_ends_records_the_checkpoint_its_worker_reported() -> None:
    tj = TrainJobView(
        {
            "metadata": {"name": "tj", "namespace": "ns"},
            "status": {
                "clusterName": "w1",
                "trainerStatus": metrics(checkpoint="s-9", checkpoint_step="9"),
            },
        }
    )
    now = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
    there = placements.ended(tj, "w1", "ClusterLost", "lost", now)
    assert (there.checkpoint, there.checkpoint_step) == ("s-9", 9)
    elsewhere = placements.ended(tj, "w2", "ClusterLost", "lost", now)  # the status is w1's
    assert (elsewhere.checkpoint, elsewhere.checkpoint_step) == (None, None)


# ---- the whole pass ------------------------------------------------------------------------


@pytest.fixture
def world() -> Iterator[World]:
    job = TrainJobBuilder().queue("q").multikueue().obj()
    edit(job).annotations({checkpoints.ANNOTATION: PLACE})
    made, _ctx = fleet([RUNTIME, job], {w: [RUNTIME] for w in WORKERS})
    yield made
    made.close()


def env_of(world: World, worker: str) -> dict[str, str]:
    copy = world.get(worker, c.TRAINJOB, "tj")
    assert copy is not None, f"no copy on {worker}"
    return {e["name"]: e["value"] for e in copy["spec"]["trainer"].get("env") or []}


def runs_on(world: World, worker: str) -> None:
    """Quota on the manager, copies out, `worker` admits: the TrainJob goes there."""
    world.settle(KEY)
    reserve(world, "manager")
    world.settle(KEY)
    reserve(world, worker, admitted=True)
    world.settle(KEY)


def reports(world: World, worker: str, **named: str) -> None:
    """The copy's progress report on `worker` (what its controller writes), brought back."""
    copy = world.get(worker, c.TRAINJOB, "tj")
    assert copy is not None
    edit(copy).status(
        {"trainerStatus": {**metrics(**named), "lastUpdatedTime": "2026-11-29T10:00:00Z"}}
    )
    world.apis[worker].put(copy)
    world.settle(KEY)


def evicted_there(world: World, worker: str) -> None:
    tj = world.get("manager", c.TRAINJOB, "tj")
    assert tj is not None
    wl = world.get(worker, c.WORKLOAD, workload_name("tj", tj["metadata"]["uid"]))
    assert wl is not None
    edit(wl).more_conditions(a_condition("Evicted", "Preempted", "preempted"))
    world.apis[worker].put(wl)
    world.settle(KEY)


@pytest.mark.usefixtures("both_caches")
def test_a_moved_job_resumes_from_the_checkpoint_its_status_names(world: World) -> None:
    runs_on(world, "worker1")
    assert env_of(world, "worker1") == {"TRAINJOB_CHECKPOINTS": PLACE}  # a fresh start
    reports(world, "worker1", loss="0.3", checkpoint="step-000040.pt", checkpoint_step="40")
    manager_tj = world.get("manager", c.TRAINJOB, "tj")
    assert manager_tj is not None and manager_tj["status"]["trainerStatus"]["metrics"]
    evicted_there(world, "worker1")
    (record,) = [
        r
        for r in world.apis["manager"].objects(CONFIG_MAP)
        if r["metadata"]["name"].startswith("placements-")
    ]
    assert '"checkpoint":"step-000040.pt","checkpoint_step":40' in record["data"]["placements.json"]
    # The status is read first: without the record, the same resume point.
    meta = record["metadata"]
    world.apis["manager"].request("DELETE", CONFIG_MAP.path(meta["namespace"], meta["name"]))
    # Kueue on the manager evicts it and reserves quota again: worker2 admits this time.
    runs_on(world, "worker2")
    assert env_of(world, "worker2") == {
        "TRAINJOB_CHECKPOINTS": PLACE,
        "TRAINJOB_RESUME_FROM": f"{PLACE}/step-000040.pt",
        "TRAINJOB_RESUME_STEP": "40",
    }
    events = [e for p in world.passes for e in p.events]
    assert ("Normal", "ResumedFromCheckpoint", "tj") in events


@pytest.mark.usefixtures("both_caches")
def test_without_a_checkpoint_in_the_status_the_record_of_runs_says_where(world: World) -> None:
    runs_on(world, "worker1")
    reports(world, "worker1", checkpoint="step-000040.pt", checkpoint_step="40")
    evicted_there(world, "worker1")
    # A run since, lost before its first report, leaves the status without one.
    tj = world.get("manager", c.TRAINJOB, "tj")
    assert tj is not None
    edit(tj).status(trainerStatus=None)
    world.apis["manager"].put(tj)
    runs_on(world, "worker2")
    assert env_of(world, "worker2")["TRAINJOB_RESUME_FROM"] == f"{PLACE}/step-000040.pt"


@pytest.mark.usefixtures("both_caches")
def test_a_job_that_does_not_keep_checkpoints_is_sent_as_it_is() -> None:
    job = TrainJobBuilder().queue("q").multikueue().obj()
    world, _ctx = fleet([RUNTIME, job], {w: [RUNTIME] for w in WORKERS})
    try:
        runs_on(world, "worker1")
        copy = world.get("worker1", c.TRAINJOB, "tj")
        assert copy is not None
        assert "env" not in (copy["spec"].get("trainer") or {}), copy["spec"]
    finally:
        world.close()


def test_a_job_that_names_no_place_keeps_its_checkpoints_under_its_runtimes_root() -> None:
    runtime = edit(make_runtime()).annotations({checkpoints.ANNOTATION: "s3://bucket/team"}).obj()
    job = TrainJobBuilder("tj").obj()
    place = checkpoints.place_for(TrainJobView(job), RuntimeView(runtime))
    assert place == "s3://bucket/team/ns/tj"
    assert checkpoints.place_for(TrainJobView(job), None) is None
