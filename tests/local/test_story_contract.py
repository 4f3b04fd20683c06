"""The job story from its producer to both its readers, against one golden answer.

The dispatcher answers a TrainJob's story over a manager and a worker in memory
(dispatcher/readapi/job_story.py); the answer must be `tests/golden/story.json`, must be of the
TypeScript types the web view's scripts are checked against (plugin/kubectl_trainjob/ui/story.d.ts,
written from plugin/trainjob_api/story.py), and `kubectl trainjob describe` must print
`tests/golden/story-describe.txt` from it. A field added, renamed or retyped in
plugin/trainjob_api/story.py shows here three times: in the golden answer, in `tsc`, in the text.

    TJ_GOLDEN=write python -m pytest tests/local/test_story_contract.py   # write them again
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from clusters import builds
from dispatcher.controller.context import Context
from dispatcher.readapi import job_story
from kubectl_trainjob.view import WorkerView
from tests.support.builders import TrainJobBuilder, edit, make_runtime
from tests.support.whole_pass import (
    World,
    fleet,
    kueue_status,
)
from trainjob.workload import workload_name
from trainjob_api import constants as c
from trainjob_api.story import TrainJobStory

Dict = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
UI = REPO / "plugin" / "kubectl_trainjob" / "ui"
NOW = dt.datetime(2026, 1, 1, 0, 5, tzinfo=dt.UTC)
WRITE = os.environ.get("TJ_GOLDEN") == "write"


def kueue_admits(world: World, cluster: str, name: str, admitted: bool) -> None:
    """What Kueue does on `cluster`: quota reserved, and admitted when `admitted` (on the
    manager, with our check's state as the dispatcher left it, Pending until then)."""
    wl = world.get(cluster, c.WORKLOAD, name)
    assert wl is not None, f"no Workload on {cluster}"
    status = wl.get("status") or {}
    checks = status.get("admissionChecks") or [
        {"name": "mk", "state": "Pending", "message": "", "lastTransitionTime": "t"}
    ]
    edit(wl).status({**status, **kueue_status(wl, admitted=admitted)})
    if cluster == "manager":
        edit(wl).status(admissionChecks=checks)
    world.apis[cluster].put(wl)


@pytest.fixture(scope="module")
def running() -> Iterator[tuple[World, Context]]:
    """TrainJob ns/tj admitted on worker1, where the worker controller made its Job and two
    pods (one running, one pending); an Event about it on each side, and one about its
    Workload on the manager."""
    runtime = make_runtime()
    world, ctx = fleet(
        [runtime, TrainJobBuilder().queue("q").multikueue().obj()],
        {"worker1": [runtime], "worker2": [runtime]},
    )
    key = ("ns", "tj")
    world.settle(key)
    uid = world.get("manager", c.TRAINJOB, "tj")["metadata"]["uid"]  # type: ignore[index]
    wl_name = workload_name("tj", uid)
    kueue_admits(world, "manager", wl_name, False)  # quota reserved, our check Pending
    world.settle(key)
    kueue_admits(world, "worker1", wl_name, True)
    world.settle(key)
    kueue_admits(world, "manager", wl_name, True)  # our check Ready: Kueue admits it
    world.settle(key)
    copy = world.get("worker1", c.TRAINJOB, "tj")
    assert copy is not None, "not dispatched to worker1"
    edit(copy).status(
        {
            "conditions": [
                {
                    "type": "Suspended",
                    "status": "False",
                    "reason": "Resumed",
                    "message": "admitted by Kueue",
                    "lastTransitionTime": "2026-01-01T00:01:00Z",
                }
            ],
            "jobsStatus": [{"name": "node", "active": 1, "ready": 0, "succeeded": 0, "failed": 0}],
        }
    )
    worker = world.apis["worker1"]
    copy = worker.put(copy)
    job = worker.put(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "tj-node-0",
                "namespace": "ns",
                "labels": {c.JOBSET_NAME_LABEL: "tj"},
                "ownerReferences": [
                    {
                        "kind": "TrainJob",
                        "name": "tj",
                        "uid": copy["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
        }
    )
    for index, phase in ((0, "Running"), (1, "Pending")):
        worker.put(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"tj-node-0-{index}-abcde",
                    "namespace": "ns",
                    "creationTimestamp": "2026-01-01T00:02:00Z",
                    "labels": {
                        c.JOBSET_NAME_LABEL: "tj",
                        c.REPLICATED_JOB_NAME_LABEL: "node",
                        c.JOB_COMPLETION_INDEX: str(index),
                    },
                    "ownerReferences": [
                        {
                            "kind": "Job",
                            "name": "tj-node-0",
                            "uid": job["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "nodeName": "node-a" if phase == "Running" else None,
                    "containers": [{"name": "node"}],
                },
                "status": {
                    "phase": phase,
                    "containerStatuses": [
                        {"name": "node", "ready": phase == "Running", "restartCount": index}
                    ],
                },
            }
        )
    wl_uid = world.get("manager", c.WORKLOAD, wl_name)["metadata"]["uid"]  # type: ignore[index]
    for api, about, reason in (
        (world.apis["manager"], ("TrainJob", "tj", uid), "Dispatched"),
        (world.apis["manager"], ("Workload", wl_name, wl_uid), "QuotaReserved"),
        (worker, ("Pod", "tj-node-0-1-abcde", None), "FailedScheduling"),
    ):
        kind, name, object_uid = about
        if object_uid is None:
            object_uid = worker.get_json(f"/api/v1/namespaces/ns/pods/{name}")["metadata"]["uid"]
        api.put(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{name}.{reason.lower()}", "namespace": "ns"},
                "involvedObject": {
                    "kind": kind,
                    "name": name,
                    "uid": object_uid,
                    "namespace": "ns",
                },
                "type": "Warning" if reason == "FailedScheduling" else "Normal",
                "reason": reason,
                "message": f"{reason} of {name}",
                "count": 1,
                "firstTimestamp": "2026-01-01T00:03:00Z",
                "lastTimestamp": "2026-01-01T00:03:00Z",
            }
        )
    world.relist()
    world.settle(key)  # the copy's status comes back to the manager
    yield world, ctx
    world.close()


def normalised(answer: Dict, world: World) -> Dict:
    """The answer with what each run makes anew said by name: UIDs, the Workload's name
    (made from the UID), and the times of the Events the dispatcher posted itself."""
    made = {
        str(o["metadata"][field]): f"<{o['kind']} {field}{f' on {cluster}' * (field == 'uid')}>"
        for cluster, api in world.apis.items()
        for kind in (c.TRAINJOB, c.WORKLOAD)
        for o in api.objects(kind, "ns")
        for field in ("uid", "name")
        if field == "uid" or kind == c.WORKLOAD
    }
    text = orjson.dumps(answer).decode()
    text = re.sub("|".join(map(re.escape, made)), lambda m: made[m[0]], text)
    text = re.sub(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ", _fixed_or_now, text)
    found: Dict = json.loads(text)
    return found


def _fixed_or_now(time: re.Match[str]) -> str:
    return time[0] if time[0].startswith("2026-01-01T") else "<now>"


def golden(name: str, text: str) -> str:
    """The golden file `name` (written from `text` first under TJ_GOLDEN=write, never in CI:
    there a golden is only read, so a change to it is a reviewed commit)."""
    path = GOLDEN / name
    if WRITE:
        assert not os.environ.get("CI"), "TJ_GOLDEN=write under CI: goldens are only read there"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    return path.read_text()


def test_the_dispatcher_answers_the_golden_story(running: tuple[World, Context]) -> None:
    world, ctx = running
    answer = normalised(job_story.story(ctx, "ns", "tj").to_json(), world)
    text = json.dumps(answer, indent=2, sort_keys=True) + "\n"
    assert text == golden("story.json", text)
    assert answer["worker"] == "worker1" and [p["phase"] for p in answer["pods"]] == [
        "Running",
        "Pending",
    ]
    assert {(e["source"], e["object"], e["reason"]) for e in answer["events"]} >= {
        ("manager", "TrainJob/tj", "Dispatched"),
        ("manager", "Workload/<Workload name>", "QuotaReserved"),  # its Workload's, too
        ("worker1", "Pod/tj-node-0-1-abcde", "FailedScheduling"),
    }


def tsc(*files: Path, strict: bool) -> subprocess.CompletedProcess[str]:
    options = ["--target", "es2022", "--module", "es2022", "--moduleResolution", "bundler"]
    options += ["--lib", "es2022,dom,dom.iterable", "--noEmit", "--allowJs", "--checkJs"]
    return subprocess.run(
        [str(builds.typescript()), *options, *(["--strict"] if strict else []), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_page_reads_only_what_the_types_have() -> None:
    """`tsc` over the page's scripts, which name the story's types where they read a story
    or a worker: a field read that the types lack fails (its other code is not held to
    strict null checks)."""
    done = tsc(*sorted(UI.glob("*.js")), strict=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_golden_story_is_of_the_types(tmp_path: Path) -> None:
    """The golden answer typed as a TrainJobStory under `tsc --strict`: a null where the
    types say there is always a value fails, and so does a field they do not have."""
    checked = tmp_path / "golden.ts"
    checked.write_text(
        f'import type {{ TrainJobStory }} from "{UI / "story"}";\n'
        f"export const golden: TrainJobStory = {(GOLDEN / 'story.json').read_text()};\n"
    )
    done = tsc(checked, strict=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_kubectl_trainjob_prints_the_golden_story() -> None:
    story = TrainJobStory.model_validate_json((GOLDEN / "story.json").read_text())
    assert story.copy_on_worker is not None
    mine = [e for e in story.events if e.source == "worker1"]
    text = WorkerView("worker1", story.copy_on_worker, story.pods, mine).render(NOW) + "\n"
    assert text == golden("story-describe.txt", text)
    # What the describe must say whatever the golden holds: the worker, each pod's phase and
    # node, the Job's counts, the worker's Events with their objects.
    lines = text.splitlines()
    assert lines[0] == "On worker worker1:"
    pods = [line.split() for line in lines if line.strip().startswith("tj-node-0-")]
    assert [(p[1], p[2]) for p in pods] == [("Running", "node-a"), ("Pending", "-")]
    assert ["node", "1", "0", "0", "0"] in [line.split() for line in lines]
    warning = next(line.split() for line in lines if "FailedScheduling" in line)
    assert warning[:2] == ["Warning", "FailedScheduling"] and warning[3] == pods[1][0]
    assert next(line.split()[:3] for line in lines if line.strip().startswith("Suspended")) == [
        "Suspended",
        "False",
        "Resumed",
    ]
