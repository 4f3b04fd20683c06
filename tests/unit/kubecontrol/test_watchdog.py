"""The watch-cache watchdog's decision (pure): frozen only when wrong for a whole period."""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Mapping
from typing import Any

import pytest

from kubebase.kinds import Kind
from kubecontrol import controller
from kubecontrol.client import TransportError
from kubecontrol.cluster import Cluster
from kubecontrol.informer import Informer
from kubecontrol.settings import ControllerSettings
from kubecontrol.watchdog import SKIPS_TOLD, Versions, WatchDog, stale_keys
from tests.support.memory_api import MemoryApi
from trainjob_api.constants import TRAINJOB, WORKLOAD

A, B, C = ("ns", "a"), ("ns", "b"), ("ns", "c")


def test_a_cache_that_catches_up_within_a_period_is_never_stale() -> None:
    stale, suspects = stale_keys({A: "1"}, {A: "2", B: "5"}, {})
    assert stale == set() and suspects == {A: "2", B: "5"}
    stale, suspects = stale_keys({A: "2", B: "5"}, {A: "2", B: "5"}, suspects)
    assert stale == set() and suspects == {}


def test_an_object_the_api_kept_unchanged_and_the_cache_never_saw_is_stale() -> None:
    _, suspects = stale_keys({A: "1"}, {A: "1", B: "5"}, {})
    stale, _ = stale_keys({A: "1"}, {A: "1", B: "5"}, suspects)
    assert stale == {B}


def test_an_object_that_keeps_changing_is_not_blamed_on_the_cache() -> None:
    _, suspects = stale_keys({A: "1"}, {A: "2"}, {})
    stale, _ = stale_keys({A: "2"}, {A: "3"}, suspects)  # the cache moved; the API moved on
    assert stale == set()


def test_a_deletion_the_cache_never_heard_of_is_stale_after_a_period() -> None:
    _, suspects = stale_keys({C: "7"}, {}, {})
    stale, _ = stale_keys({C: "7"}, {}, suspects)
    assert stale == {C}


class _Listing:
    """A cluster whose versions of one kind cannot be listed; those of the others can."""

    name = "c"

    def __init__(self, broken: str, listed: dict[str, Versions]) -> None:
        self.broken, self.listed = broken, listed
        self.pages: list[tuple[str, int]] = []  # each list's kind and page

    def versions(self, kind: Kind, page: int) -> Versions:
        self.pages.append((kind.kind, page))
        if kind.kind == self.broken:
            raise TransportError(7, "no answer")  # libcurl's E_COULDNT_CONNECT
        return self.listed[kind.kind]


def test_a_kind_that_cannot_be_listed_does_not_keep_the_others_from_being_checked() -> None:
    """TrainJobs unlistable (a page that fails to decode, a timeout): the Workloads' frozen
    cache is still found after a whole period, and its informer lists again."""
    relisted: list[str] = []
    checks = [
        (TRAINJOB, lambda: [(A, "1")], lambda: relisted.append("TrainJob")),
        (WORKLOAD, lambda: [(A, "1")], lambda: relisted.append("Workload")),
    ]
    cluster = _Listing("TrainJob", {"Workload": {A: "1", B: "5"}})
    dog = WatchDog(cluster, checks, period=60)  # type: ignore[arg-type]
    dog.check()
    assert relisted == []
    dog.check()
    assert relisted == ["Workload"]


def test_a_cache_that_cannot_be_read_does_not_keep_the_others_from_being_checked() -> None:
    relisted: list[str] = []

    def unreadable() -> list[tuple[Hashable, str]]:
        raise KeyError("resourceVersion")

    checks = [
        (TRAINJOB, unreadable, lambda: relisted.append("TrainJob")),
        (WORKLOAD, lambda: [(A, "1")], lambda: relisted.append("Workload")),
    ]
    listed = {"TrainJob": {A: "1"}, "Workload": {A: "1", B: "5"}}
    dog = WatchDog(_Listing("none", listed), checks, period=60)  # type: ignore[arg-type]
    dog.check()
    dog.check()
    assert relisted == ["Workload"]


def test_a_kind_skipped_period_after_period_is_said_once_as_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its frozen cache could not be found meanwhile: said once it has been skipped
    SKIPS_TOLD periods in a row, and again only after it was compared in between."""
    cluster = _Listing("TrainJob", {"Workload": {A: "1"}})
    checks = [(TRAINJOB, lambda: [(A, "1")], lambda: None)]
    dog = WatchDog(cluster, checks, period=60)  # type: ignore[arg-type]

    def warnings() -> int:
        return sum(r.levelno == logging.WARNING for r in caplog.records)

    with caplog.at_level(logging.DEBUG, logger="kubecontrol.watchdog"):
        for _ in range(SKIPS_TOLD - 1):
            dog.check()
        assert warnings() == 0
        dog.check()
        assert warnings() == 1
        for _ in range(SKIPS_TOLD):
            dog.check()
        assert warnings() == 1  # once, not at every skip after
        cluster.broken, cluster.listed["TrainJob"] = "none", {A: "1"}
        dog.check()  # compared: the count starts again
        cluster.broken = "TrainJob"
        for _ in range(SKIPS_TOLD):
            dog.check()
        assert warnings() == 2


def test_each_kind_is_listed_in_pages_of_its_informers_size() -> None:
    """A kind a tenant sizes in pages of 50, as its informer lists it (a page's bytes are held
    whole); the others in pages of 500."""
    checks = [(TRAINJOB, lambda: [], lambda: None), (WORKLOAD, lambda: [], lambda: None)]
    cluster = _Listing("none", {"TrainJob": {}, "Workload": {}})
    WatchDog(cluster, checks, period=60, pages={"TrainJob": 50}).check()  # type: ignore[arg-type]
    assert cluster.pages == [("TrainJob", 50), ("Workload", 500)]


def test_a_controllers_watchdog_lists_each_kind_in_its_informers_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """start_watchdog hands the watchdog each checked informer's page size."""
    made: list[Mapping[str, int] | None] = []

    class Recorded(WatchDog):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self._pages)

        def start(self, stop: threading.Event, ready: threading.Event) -> None:
            pass

    monkeypatch.setattr(controller, "WatchDog", Recorded)
    ctx = controller.ControllerContext(settings=ControllerSettings())
    api = MemoryApi("c")
    for index, kind, page in (("tj", TRAINJOB, 50), ("wl", WORKLOAD, 500)):
        ctx.informers[index] = Informer(api, kind, page=page)  # type: ignore[arg-type]
        ctx.indexes[index] = ctx.informers[index].view
    cluster = Cluster("c", api, "test")  # type: ignore[arg-type]
    controller.start_watchdog(ctx, cluster, {"tj": TRAINJOB, "wl": WORKLOAD})
    assert made == [{"TrainJob": 50, "Workload": 500}]


def test_a_kind_skipped_beside_a_healthy_one_is_still_told_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    checks = [(TRAINJOB, lambda: [], lambda: None), (WORKLOAD, lambda: [], lambda: None)]
    dog = WatchDog(_Listing("TrainJob", {"Workload": {}}), checks, period=60)  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="kubecontrol.watchdog"):
        for _ in range(SKIPS_TOLD):
            dog.check()
    told = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [getattr(r, "kind", None) for r in told] == ["TrainJob"]


def test_a_frozen_cache_listed_again_is_not_blamed_again_the_next_period() -> None:
    """Once its informer lists again, the kind's suspects start over: the same key is stale
    again only after a whole period more."""
    relisted: list[str] = []
    checks = [(WORKLOAD, lambda: [(A, "1")], lambda: relisted.append("Workload"))]
    dog = WatchDog(_Listing("none", {"Workload": {A: "2"}}), checks, period=60)  # type: ignore[arg-type]
    for _ in range(3):
        dog.check()
    assert relisted == ["Workload"]  # suspect, stale (listed again), suspect again
    dog.check()
    assert relisted == ["Workload", "Workload"]


def test_versions_ask_for_pages_of_500_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    limits: list[int] = []
    cluster = Cluster("c", MemoryApi("c"), "test")  # type: ignore[arg-type]
    send = cluster.send

    def recorded(method: str, path: str, **options: Any) -> Any:
        limits.append(options["query"]["limit"])
        return send(method, path, **options)

    monkeypatch.setattr(cluster, "send", recorded)
    cluster.versions(TRAINJOB)
    cluster.versions(TRAINJOB, page=50)
    assert limits == [500, 50]
