"""A TrainJob's record of its runs (dispatcher/decisions/placements.py), its pure parts."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from dispatcher.controller import placements_io, resync
from dispatcher.decisions import placements
from dispatcher.decisions.placements import Ended
from dispatcher.settings import DispatcherSettings
from dispatcher.workers import log_tails
from trainjob_api.story import Run
from trainjob_api.views import ConfigMapView, TrainJobView


def ended(worker: str, started: str | None, reason: str = "RemoteEvicted") -> Ended:
    return Ended(worker, started, "2026-11-26T12:00:00Z", reason, "m")


def test_one_run_is_told_once_and_the_record_is_bounded() -> None:
    entries = placements.with_entry([], ended("w1", "t1"))
    assert entries is not None and entries[0]["worker"] == "w1"
    assert placements.with_entry(entries, ended("w1", "t1", "Preempted")) is None
    many: list[dict[str, object]] = []
    for i in range(placements.MAX_ENTRIES + 5):
        grown = placements.with_entry(many, ended("w1", f"t{i}"))
        assert grown is not None
        many = grown
    assert len(many) == placements.MAX_ENTRIES and many[-1]["started"] == "t54"


def test_a_record_that_is_not_ours_to_read_is_empty() -> None:
    assert placements.entries_of(None) == []
    assert placements.entries_of(ConfigMapView({"data": {placements.KEY: "not json"}})) == []
    assert placements.entries_of(ConfigMapView({"data": {placements.KEY: '{"a": 1}'}})) == []
    assert placements.entries_of(ConfigMapView({"data": {placements.KEY: 7}})) == []
    assert placements.entries_of(ConfigMapView({"data": None})) == []
    kept = {"data": {placements.KEY: orjson.dumps([{"worker": "w1"}, 3]).decode()}}
    assert placements.entries_of(ConfigMapView(kept)) == [{"worker": "w1"}]


def test_the_start_is_what_the_worker_said_when_the_status_is_that_workers() -> None:
    tj = TrainJobView(
        {
            "metadata": {"name": "tj", "namespace": "ns"},
            "status": {
                "clusterName": "w2",
                "conditions": [
                    {"type": "Suspended", "status": "False", "lastTransitionTime": "t0"}
                ],
            },
        }
    )
    assert placements.started_on(tj, "w2") == "t0"
    assert placements.started_on(tj, "w1") is None
    assert placements.started_on(None, "w1") is None


def test_the_story_adds_the_current_run_unless_it_is_the_last_recorded() -> None:
    ended_w1 = {"worker": "w1", "started": "t1", "ended": "t2"}
    tj = TrainJobView(
        {
            "metadata": {"name": "tj", "namespace": "ns", "uid": "u"},
            "status": {
                "clusterName": "w1",
                "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "t9"}],
            },
        }
    )
    recorded: list[dict[str, Any]] = [ended_w1, {"worker": ["not", "a", "name"]}]
    was = Run(worker="w1", started="t1", ended="t2")  # the odd entry is left out
    assert placements.runs(recorded, tj, None) == [was]  # waiting: runs nowhere
    assert placements.runs(recorded, tj, "t1") == [was]  # sent back, not evicted yet
    runs = placements.runs(recorded, tj, "t5")  # admitted on w1 again, and completed there
    assert runs[0] == was and runs[1].current and runs[1].reason == "Complete"
    assert (runs[1].started, runs[1].ended) == ("t5", "t9")


def test_a_namespace_keeps_its_newest_records_of_runs_only() -> None:
    """The resync's bound on the records of runs, per namespace (their own annotation names
    it): one namespace's many sent-back TrainJobs never cost another's records."""

    def record(uid: str, namespace: str, created: str) -> dict[str, Any]:
        return {
            "metadata": {
                "name": f"placements-{uid}",
                "labels": {placements.LABEL: uid},
                "annotations": {placements.TRAINJOB_ANNOTATION: f"{namespace}/tj-{uid}"},
                "creationTimestamp": created,
            }
        }

    items = [
        record("a1", "flood", "2026-12-01T10:00:00Z"),
        record("b1", "quiet", "2026-12-01T09:00:00Z"),
        record("a2", "flood", "2026-12-01T11:00:00Z"),
        record("a3", "flood", "2026-12-01T12:00:00Z"),
    ]
    alive = {"a1", "a2", "a3", "b1"}
    bounds = log_tails.Bounds(1_000_000, per_namespace=2)
    going = log_tails.doomed(items, alive, bounds, placements_io.RECORDS)
    assert [i["metadata"]["labels"][placements.LABEL] for i in going] == ["a1"]
    settings = DispatcherSettings()
    assert settings.placements_per_namespace == 1000


def test_the_resync_sweeps_the_records_of_runs_by_their_own_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tails by their settings, then the records of runs by placements_per_namespace,
    read by their own label and annotation."""
    swept: list[tuple[log_tails.Bounds, log_tails.Records]] = []

    def sweep(
        _manager: Any, _caches: Any, bounds: log_tails.Bounds, records: Any = log_tails.TAILS
    ) -> int:
        swept.append((bounds, records))
        return 0

    monkeypatch.setattr(log_tails, "sweep", sweep)
    settings = DispatcherSettings(placements_per_namespace=7, log_tails_per_namespace=3)
    resync.sweep_records(SimpleNamespace(manager=None, settings=settings), None)  # type: ignore[arg-type]
    (tails, tails_records), (runs, runs_records) = swept
    assert (tails.per_namespace, tails_records) == (3, log_tails.TAILS)
    assert runs_records == log_tails.Records(placements.LABEL, placements.TRAINJOB_ANNOTATION)
    assert runs.per_namespace == 7
    with pytest.raises(ValueError):
        DispatcherSettings(placements_per_namespace=0)


class _Records:
    """The manager's ConfigMaps in the dispatcher's namespace, as `sweep` lists (by label)
    and deletes them."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items, self.deleted = items, []

    def list_metadata(self, _kind: Any, _namespace: str, label_selector: str) -> list[Any]:
        return [i for i in self.items if label_selector in i["metadata"]["labels"]]

    def delete(self, _kind: Any, name: str, _namespace: str, uid: str | None = None) -> None:
        self.deleted.append(name)


def test_the_records_of_runs_are_swept_by_their_own_label_never_the_tails() -> None:
    """The sweep of the records of runs lists them by their own label: a live TrainJob's
    tails (another label) are never among them, and a gone TrainJob's run record goes."""

    def configmap(name: str, label: str, uid: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": "trainjob-system", "uid": f"cm-{name}"}
        return {"metadata": {**meta, "labels": {label: uid}, "annotations": {}}}

    manager = _Records(
        [
            configmap("tails-live", log_tails.LABEL, "live"),
            configmap("run-live", placements.LABEL, "live"),
            configmap("run-gone", placements.LABEL, "gone"),
        ]
    )
    live = TrainJobView({"metadata": {"name": "tj", "namespace": "ns", "uid": "live"}})
    caches = SimpleNamespace(trainjob_keys=lambda: [("ns", "tj")], trainjob=lambda *_k: live)
    bounds = log_tails.Bounds(1_000_000, per_namespace=1000)
    swept = log_tails.sweep(manager, caches, bounds, placements_io.RECORDS)  # type: ignore[arg-type]
    assert (swept, manager.deleted) == (1, ["run-gone"])
    manager.deleted.clear()
    assert log_tails.sweep(manager, caches, bounds) == 0  # type: ignore[arg-type]
    assert manager.deleted == []  # the live TrainJob's tails stay
