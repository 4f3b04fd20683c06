"""The sweep of copies whose manager object is gone (dispatcher/controller/copies_io.py): it
deletes what its watch cache saw, and only that very object; a copy made since under the same
name, or one whose manager object is there, is left alone."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest

from dispatcher.controller.copies_io import collect_garbage
from kubebase.kinds import Kind
from kubebase.objects import Dict
from kubecontrol import cluster as kube
from tests.support.memory_api import MemoryApi
from trainjob_api import constants as c
from trainjob_api.views import ObjectView

TRAINJOB, WORKLOAD = c.KINDS["TrainJob"], c.KINDS["Workload"]


def copy(name: str, made_for: str, kind: Kind = TRAINJOB) -> Dict:
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {c.KUEUE_MULTIKUEUE_ORIGIN_LABEL: "multikueue"},
            "annotations": {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: made_for},
        },
        "spec": {},
    }


@dataclass
class Worker:
    """A connected worker whose cache holds `cached` (what its watch last saw)."""

    cluster: kube.Cluster
    cached: list[Dict] = field(default_factory=list)
    connected: bool = True

    def items(self, kind: str) -> list[Dict]:
        return [o for o in self.cached if o["kind"] == kind]


@dataclass
class Manager:
    """The manager's caches: the TrainJobs and the Workloads there by name, as their uid."""

    uids: dict[str, str]
    workload_uids: dict[str, str] = field(default_factory=dict)

    def trainjob(self, namespace: str, name: str) -> ObjectView | None:
        return _named(name, self.uids.get(name))

    def workload(self, namespace: str, name: str) -> ObjectView | None:
        return _named(name, self.workload_uids.get(name))


def _named(name: str, uid: str | None) -> ObjectView | None:
    return None if uid is None else ObjectView({"metadata": {"name": name, "uid": uid}})


def worker(
    api: MemoryApi, *names: str, uids: dict[str, str] | None = None, kind: Kind = TRAINJOB
) -> Worker:
    """A worker over `api` whose cache saw the objects `names` of `kind` as the server holds
    them, each with the uid `uids` gives it instead, if any (what a watch saw before a
    recreation)."""
    cached = []
    for name in names:
        seen = api.object(kind, name, "ns")
        assert seen is not None
        uid = (uids or {}).get(name, seen["metadata"]["uid"])
        cached.append({**seen, "metadata": {**seen["metadata"], "uid": uid}})
    return Worker(kube.Cluster("w", api, "test"), cached)  # type: ignore[arg-type]


def sweep(
    worker: Worker, on_manager: dict[str, str], workloads: dict[str, str] | None = None
) -> None:
    collect_garbage({"w": worker}, Manager(on_manager, workloads or {}))  # type: ignore[arg-type]


def test_a_copy_whose_manager_object_is_gone_is_deleted() -> None:
    api = MemoryApi("w", [copy("gone", "m1")])
    sweep(worker(api, "gone"), on_manager={})
    assert api.object(TRAINJOB, "gone", "ns") is None


def test_a_workload_copy_whose_manager_workload_is_gone_is_deleted() -> None:
    api = MemoryApi("w", [copy("wl", "m1", WORKLOAD)])
    sweep(worker(api, "wl", kind=WORKLOAD), on_manager={})
    assert api.object(WORKLOAD, "wl", "ns") is None


def test_a_copy_made_since_under_the_same_name_is_not_the_one_swept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The cache saw an orphan; the server now holds another object of its name (made for a
    new TrainJob since): the delete names the uid it saw, and the new one stays, as expected
    (the 409 is the answer wanted, not a failure to report)."""
    api = MemoryApi("w", [copy("tj", "m2")])
    sweep(worker(api, "tj", uids={"tj": "the-old-copy"}), on_manager={})
    assert api.object(TRAINJOB, "tj", "ns") is not None
    # the server refused the one delete on its precondition: not the uid it holds
    assert api.refused == [("DELETE", TRAINJOB.object_path("ns", "tj"), 409)]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_copy_of_a_manager_object_still_there_is_kept() -> None:
    api = MemoryApi("w", [copy("tj", "m1"), copy("replaced", "m-old")])
    sweep(worker(api, "tj", "replaced"), on_manager={"tj": "m1", "replaced": "m-new"})
    assert api.object(TRAINJOB, "tj", "ns") is not None
    assert api.object(TRAINJOB, "replaced", "ns") is None  # made for the TrainJob replaced


def test_a_workload_copy_is_judged_by_the_manager_workload_it_was_made_for() -> None:
    api = MemoryApi("w", [copy("wl", "w1", WORKLOAD), copy("wl-old", "w-old", WORKLOAD)])
    sweep(
        worker(api, "wl", "wl-old", kind=WORKLOAD),
        on_manager={},  # no TrainJob of either name: a Workload is not looked for among them
        workloads={"wl": "w1", "wl-old": "w-new"},
    )
    assert api.object(WORKLOAD, "wl", "ns") is not None
    assert api.object(WORKLOAD, "wl-old", "ns") is None  # made for the Workload replaced


def test_a_worker_not_connected_is_not_swept() -> None:
    api = MemoryApi("w", [copy("gone", "m1")])
    away = worker(api, "gone")
    away.connected = False
    sweep(away, on_manager={})
    assert api.object(TRAINJOB, "gone", "ns") is not None and api.requests == []
