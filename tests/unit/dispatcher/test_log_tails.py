"""Which kept log tails go, what is kept of a pod, and how much a tenant's pods can put in
the manager's etcd."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from dispatcher.controller import execute
from dispatcher.decisions.decide import DispatchPlan, Guard, RemoteAction
from dispatcher.workers import copy_pods, log_tails
from dispatcher.workers.copy_pods import pick_pod
from dispatcher.workers.log_tails import (
    BYTES_ANNOTATION,
    LABEL,
    MAX_RECORD_BYTES,
    TRAINJOB_ANNOTATION,
    Bounds,
    _entry,
    beyond,
    doomed,
)
from tests.support.builders import edit
from trainjob_api import constants as c
from trainjob_api.views import ObjectView


def tail(uid: str, created: str, namespace: str = "team-a", size: int | None = 1000) -> Any:
    annotations = {TRAINJOB_ANNOTATION: f"{namespace}/tj-{uid}"}
    if size is not None:
        annotations[BYTES_ANNOTATION] = str(size)
    return {
        "metadata": {
            "name": f"log-tail-{uid}",
            "labels": {LABEL: uid},
            "annotations": annotations,
            "creationTimestamp": created,
        }
    }


def uids(items: list[Any]) -> list[str]:
    return [i["metadata"]["labels"][LABEL] for i in items]


def test_the_tails_of_gone_trainjobs_go_then_the_oldest_beyond_the_bound() -> None:
    items = [
        tail("a", "2026-11-26T10:00:00Z"),
        tail("b", "2026-11-26T09:00:00Z"),
        tail("gone", "2026-11-26T11:00:00Z"),
        tail("c", "2026-11-26T12:00:00Z"),
    ]
    assert uids(doomed(items, {"a", "b", "c"}, Bounds(kept=2))) == ["gone", "b"]
    assert doomed(items, {"a", "b", "c", "gone"}, Bounds(kept=10)) == []
    assert len(doomed(items, {"a", "b", "c", "gone"}, Bounds(kept=0))) == 4


def at(minute: int) -> str:
    return f"2026-11-26T10:{minute:02d}:00Z"


def test_a_namespace_keeps_its_newest_records_only() -> None:
    items = [tail(f"a{i}", at(i)) for i in range(5)] + [tail("b0", at(0), "team-b")]
    assert uids(beyond(items, Bounds(kept=100, per_namespace=2))) == ["a2", "a1", "a0"]


def test_a_tenant_filling_the_store_evicts_its_own_records_not_anothers() -> None:
    """Before: the bound was global, oldest first: a flood from one namespace deleted every
    other namespace's tails."""
    others = [tail("b0", at(0), "team-b", 5_000), tail("c0", at(1), "team-c", 5_000)]
    flood = [tail(f"m{i}", at(10 + i), "mallory", 100_000) for i in range(10)]
    going = beyond(others + flood, Bounds(kept=1000, total_bytes=500_000, per_namespace=100))
    assert uids(going) == ["m0", "m1", "m2", "m3", "m4", "m5"]  # 410 KB left, under 500 KB
    # the same by count: the namespace holding the most goes first, oldest first
    going = beyond(others + flood, Bounds(kept=4))
    assert uids(going) == [f"m{i}" for i in range(8)]


def test_a_record_without_its_size_counts_as_a_whole_configmap() -> None:
    """Records kept by 0.3.0 say nothing of their size (up to ~900 KiB each)."""
    items = [tail("old", at(0), size=None), tail("new", at(1), size=1000)]
    assert uids(beyond(items, Bounds(kept=10, total_bytes=1024 * 1024))) == ["old"]


def pod(name: str, containers: int, phase: str = "Succeeded") -> Any:
    names = [f"c{i}-{'x' * 58}"[:63] for i in range(containers)]
    return {
        "metadata": {
            "name": name,
            "labels": {c.REPLICATED_JOB_NAME_LABEL: "node", c.JOB_COMPLETION_INDEX: "0"},
            "creationTimestamp": "2026-11-26T10:00:00Z",
        },
        "spec": {"containers": [{"name": n} for n in names], "nodeName": "n" * 253},
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": n, "restartCount": 7} for n in names],
        },
    }


def test_failed_pods_are_kept_first_and_containers_are_counted_across_pods() -> None:
    pods = [pod("a", 40), pod("b", 40), pod("z-failed", 2, "Failed")]
    chosen = log_tails.choose(pods)
    assert [(p["metadata"]["name"], len(kept)) for p, kept in chosen] == [
        ("z-failed", 2),
        ("a", 40),
        ("b", 22),
    ]


@pytest.mark.parametrize(
    ("pods", "containers"),
    [(1, 96), (32, 3), (32, 40), (32, 2000)],
    ids=["1x96", "32x3", "32x40", "32x2000"],
)
def test_a_tenant_whose_pods_print_the_worst_bytes_fills_one_small_record(
    monkeypatch: pytest.MonkeyPatch, pods: int, containers: int
) -> None:
    """Every container prints 64 KiB of 0xFF (each becomes U+FFFD, 3 bytes), names are as
    long as allowed. Before: 776 KiB for one pod of 96 containers, 6.9 MiB for 32 x 2000."""
    name = "p" * 250
    listed = [pod(f"{name}-{i:02d}", containers) for i in range(pods)]
    monkeypatch.setattr(copy_pods, "read", lambda *_, **__: ([], listed))
    worker = SimpleNamespace(
        name="worker-1",
        cluster=SimpleNamespace(
            api=SimpleNamespace(request=lambda *_, **__: b"\xff" * log_tails.READ_BYTES)
        ),
    )
    copy = {
        "metadata": {
            "name": "t" * 63,
            "namespace": "mallory",
            "uid": "copy-uid",
            "annotations": {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: "manager-uid"},
        }
    }
    record = log_tails.capture(worker, copy)  # type: ignore[arg-type]
    assert record is not None
    stored = len(orjson.dumps(record))
    assert stored <= MAX_RECORD_BYTES, stored
    said = int(record["metadata"]["annotations"][BYTES_ANNOTATION])
    assert said <= stored <= said + 4096  # the size written on it is the data's
    kept = orjson.loads(record["data"][log_tails.PODS_KEY])
    assert sum(len(p["spec"]["containers"]) for p in kept) == min(pods * containers, 64)
    assert all(len(p["status"]["containerStatuses"]) <= 64 for p in kept)


def test_a_copy_naming_no_trainjob_it_was_made_for_has_nothing_read() -> None:
    """(Whether its TrainJob opted out is the plan's to say: decide.py reads the manager's.)"""

    def read(*_: object, **__: object) -> None:
        raise AssertionError("a pod list read for a copy made for no TrainJob")

    remote = SimpleNamespace()
    copy = {"metadata": {"name": "tj", "namespace": "team-a", "uid": "copy-uid"}}
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(copy_pods, "read", read)
        assert log_tails.capture(remote, copy) is None  # type: ignore[arg-type]


def test_a_kept_pod_can_be_picked_again_by_role_and_index() -> None:
    pod = {
        "metadata": {
            "name": "tj-node-0-1-x",
            "labels": {c.REPLICATED_JOB_NAME_LABEL: "node", c.JOB_COMPLETION_INDEX: "1", "x": "y"},
        },
        "spec": {"containers": [{"name": "node", "image": "big"}], "nodeName": "n1"},
        "status": {"phase": "Failed", "containerStatuses": [{"restartCount": 3, "ready": False}]},
    }
    kept = _entry(pod, "worker1")
    assert kept["worker"] == "worker1" and kept["status"]["phase"] == "Failed"
    assert "x" not in kept["metadata"]["labels"] and kept["spec"]["containers"] == [
        {"name": "node"}
    ]
    assert pick_pod([kept], {"node": "1"}) is kept


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Blocking:
    """Captures that note they started, then read until released (10 s at most)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.release = threading.Event()
        self.clock = Clock()

    def parts(
        self,
    ) -> tuple[Clock, list[str], threading.Event, Callable[[str], Callable[[], None]]]:
        return self.clock, self.started, self.release, self.capture

    def capture(self, uid: str) -> Callable[[], None]:
        def read() -> None:
            self.started.append(uid)
            self.release.wait(10)

        return read

    @contextlib.contextmanager
    def running(self, **settings: Any) -> Iterator[log_tails.Captures]:
        """Captures with `settings` (45 s to give up), released and closed after the case."""
        captures = log_tails.Captures(give_up=45.0, clock=self.clock, **settings)
        try:
            yield captures
        finally:
            self.release.set()
            captures.close()


def test_a_capture_runs_on_a_thread_of_its_own_once_and_is_over_when_it_ends() -> None:
    clock, release = Clock(), threading.Event()
    ran: list[str] = []

    def capture() -> None:
        ran.append(threading.current_thread().name)
        release.wait(10)

    captures = log_tails.Captures(at_once=1, waiting=0, give_up=45.0, clock=clock)
    try:
        assert captures.over("copy-1", "ns", capture) is False
        assert captures.over("copy-1", "ns", capture) is False  # still reading: not again
        release.set()
        wait_until(lambda: captures.over("copy-1", "ns", capture))
        assert len(ran) == 1 and ran[0].startswith("log-tails"), ran
        clock.now += 600  # a delete that failed and is tried again: no second capture
        assert captures.over("copy-1", "ns", capture) is True and len(ran) == 1
        clock.now += log_tails.REMEMBER_SECONDS  # long since over: forgotten
        assert captures.over("copy-1", "ns", capture) is False
        wait_until(lambda: len(ran) == 2)
    finally:
        release.set()
        captures.close()


def test_a_capture_past_its_time_or_without_room_lets_its_copy_go() -> None:
    blocking = Blocking()
    clock, started, release, capture = blocking.parts()
    with blocking.running(at_once=1, waiting=1, each=2) as captures:
        assert captures.over("a", "ns", capture("a")) is False
        wait_until(lambda: started == ["a"])
        assert captures.over("b", "ns", capture("b")) is False  # queued behind a
        assert captures.over("c", "ns", capture("c")) is True  # no room: goes without tails
        clock.now += 46
        assert captures.over("a", "ns", capture("a")) is True  # ran past its time
        assert captures.over("b", "ns", capture("b")) is True  # and b, queued, never runs
        release.set()
        assert captures.over("d", "ns", capture("d")) is False  # room again
        wait_until(lambda: "d" in started)
        assert started == ["a", "d"]


def test_one_namespace_holds_at_most_its_share_and_its_other_copies_wait_their_turn() -> None:
    """A tenant deleting many copies at once never takes another tenant's captures: its
    copies beyond its share wait (their deletes asked again) and go without tails only once
    they waited past their time; another namespace's capture finds a thread at once."""
    blocking = Blocking()
    clock, started, release, capture = blocking.parts()
    assert log_tails.CAPTURES_PER_NAMESPACE < log_tails.CAPTURES_AT_ONCE  # as shipped
    # 3 of a namespace may wait
    with blocking.running(at_once=2, waiting=24, each=1) as captures:
        flood = [captures.over(f"m{i}", "mallory", capture(f"m{i}")) for i in range(4)]
        assert flood == [False] * 4  # one reads, three wait
        assert captures.over("v1", "victim", capture("v1")) is False
        wait_until(lambda: sorted(started) == ["m0", "v1"])
        release.set()
        wait_until(lambda: captures.over("m0", "mallory", capture("m0")))
        assert captures.over("m1", "mallory", capture("m1")) is False  # its turn: it reads
        wait_until(lambda: "m1" in started)
        clock.now += 46  # m2 and m3 waited past their time: they go without tails
        assert captures.over("m2", "mallory", capture("m2")) is True
        assert captures.over("m3", "mallory", capture("m3")) is True
        assert "m2" not in started and "m3" not in started


def test_one_namespace_never_fills_the_waiting_room_and_a_copy_asked_again_keeps_its_place() -> (
    None
):
    blocking = Blocking()
    clock, started, _, capture = blocking.parts()
    with blocking.running(at_once=2, waiting=16, each=1) as captures:
        flood = [captures.over(f"m{i}", "mallory", capture(f"m{i}")) for i in range(5)]
        assert flood == [False, False, False, True, True]  # one reads, two wait (16 // 8)
        clock.now += 30
        assert captures.over("m1", "mallory", capture("m1")) is False  # asked again: waits on
        assert captures.over("v1", "victim", capture("v1")) is False
        wait_until(lambda: "v1" in started)
        clock.now += 16  # m1 waits since it was first asked: past its time now
        assert captures.over("m1", "mallory", capture("m1")) is True


def test_a_capture_past_its_time_still_counts_against_its_namespace_until_its_thread_ends() -> None:
    blocking = Blocking()
    clock, started, release, capture = blocking.parts()
    with blocking.running(at_once=2, waiting=10, each=1) as captures:
        assert captures.over("a", "ns", capture("a")) is False
        wait_until(lambda: started == ["a"])
        clock.now += 46
        assert captures.over("a", "ns", capture("a")) is True  # its copy goes
        assert captures.over("b", "ns", capture("b")) is False  # a's thread still reads
        assert captures.over("c", "other", capture("c")) is False
        wait_until(lambda: "c" in started)
        assert "b" not in started
        release.set()
        wait_until(lambda: captures.over("c", "other", capture("c")))
        wait_until(lambda: captures.over("b", "ns", capture("b")) or "b" in started)
        wait_until(lambda: "b" in started)


def wait_until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not done():
        assert time.monotonic() < deadline, "not within 10 s"
        time.sleep(0.01)


def test_a_copys_delete_waits_for_its_tails_read_off_the_calling_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reconcile thread that deletes a finished copy never reads its tails: the delete
    is tried again (the pass fails, to come back) until the capture, on a thread of its own,
    is over. Its Workload's delete on that worker is not held for it (held, the copies were
    judged again in the next pass and a remote eviction told twice)."""
    release = threading.Event()
    readers: list[str] = []
    read: list[Any] = []

    def keep(_manager: Any, _remote: Any, seen: Any, _bounds: Any) -> None:
        readers.append(threading.current_thread().name)
        read.append(seen)
        release.wait(10)

    monkeypatch.setattr(log_tails, "keep", keep)
    copy = {"kind": "TrainJob", "metadata": {"name": "tj", "namespace": "ns", "uid": "u1"}}
    workload = {"kind": "Workload", "metadata": {"name": "wl", "namespace": "ns", "uid": "u2"}}
    deleted: list[str] = []
    forgotten: list[tuple[str, ...]] = []
    remote = SimpleNamespace(
        cluster=SimpleNamespace(delete=lambda _kind, name, *_, **__: deleted.append(name)),
    )
    workers = SimpleNamespace(
        get=lambda _name: remote,
        first_time=lambda _key: True,
        forget_write=forgotten.append,
        settings=SimpleNamespace(log_tails_kept=10, log_tails_bytes=1, log_tails_per_namespace=1),
        manager=None,
        captures=log_tails.Captures(),
    )
    plan = DispatchPlan(
        remote=[
            RemoteAction(
                "worker1", "delete", copy, capture_tails=True, guard=Guard.of(ObjectView(copy))
            ),  # as decided
            RemoteAction("worker1", "delete", workload, guard=Guard.of(ObjectView(workload))),
        ]
    )
    wl = SimpleNamespace(key=("ns", "wl"), resource_version="1", cluster_queue="cq")
    dispatch = SimpleNamespace(workload=wl, check=None, plan=plan)

    def writes() -> bool:
        done = execute._dispatch_writes(None, workers, None, None, dispatch)  # type: ignore[arg-type]
        assert done is not None
        return done[0]  # whether a write failed and the pass should come back

    try:
        # (read on this thread, the capture would wait for `release` and the deletes follow)
        assert writes() is True
        assert deleted == ["wl"] and not release.is_set()
        assert ("worker1", "delete", "TrainJob", "ns", "tj") in forgotten  # tried again soon
        wait_until(lambda: bool(readers))
        assert writes() is True
        assert deleted == ["wl", "wl"] and readers[0].startswith("log-tails"), readers
        release.set()
        wait_until(lambda: writes() is False)
        assert deleted[-2:] == ["tj", "wl"] and len(readers) == 1
        assert len(read) == 1 and read[0] is copy  # the copy as the plan saw it
        # a copy made again under its name, another UID: its own tails read before it goes
        edit(copy).uid("u3")
        assert writes() is True
        wait_until(lambda: writes() is False)
        assert len(readers) == 2
    finally:
        release.set()
        workers.captures.close()


def test_a_capture_reads_the_copys_pods_by_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: dict[str, Any] = {}
    monkeypatch.setattr(log_tails.time, "monotonic", lambda: 500.0)

    def read(*_: Any, until: float | None = None, **__: Any) -> tuple[list[Any], list[Any]]:
        asked["until"] = until
        return [], []

    monkeypatch.setattr(copy_pods, "read", read)
    origin = {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: "manager-uid"}
    copy = {"metadata": {"name": "tj", "namespace": "ns", "uid": "u", "annotations": origin}}
    assert log_tails.capture(object(), copy) is None  # type: ignore[arg-type]
    assert asked["until"] == 500.0 + log_tails.CAPTURE_SECONDS
