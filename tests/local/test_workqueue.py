"""The keyed work queue and the write memory (pure: threads, no Kubernetes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from clusters.helpers.waiting import sooner_than
from kubecontrol import workqueue
from kubecontrol.workqueue import WorkQueue, WriteMemory, soonest


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """True once `predicate` holds; the test fails when it has not within `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout:g}s: {predicate}")
        time.sleep(0.005)
    return True


def blocked_queue(seen: list[str]) -> tuple[WorkQueue[str], threading.Event]:
    """A queue whose one worker is busy with key "block" until the returned gate is set."""
    gate = threading.Event()

    def handle(key: str) -> None:
        if key == "block":
            gate.wait(5)
        seen.append(key)

    queue: WorkQueue[str] = WorkQueue(handle, workers=1)
    queue.start()
    queue.add("block")
    assert wait_for(lambda: queue.pending() == 1 and not queue._queue)  # "block" taken
    return queue, gate


def test_events_for_a_waiting_key_coalesce_into_one_pass() -> None:
    seen: list[str] = []
    queue, gate = blocked_queue(seen)
    for _ in range(50):
        queue.add("a")
    gate.set()
    assert wait_for(lambda: queue.pending() == 0)
    queue.stop()
    assert seen == ["block", "a"]
    stats = queue.stats()
    assert stats.passes == 2 and stats.pending == 0 and stats.wait_max > 0
    logged = stats.fields()  # the queue's log line
    assert (logged["passes"], logged["pending"]) == (2, 0)
    assert logged["waitMaxSeconds"] == round(stats.wait_max, 2)
    assert logged["msPerPass"] == round(stats.busy / 2 * 1000)
    assert queue.stats().passes == 0  # reset by reading


def test_a_key_is_never_handled_twice_at_once_and_an_event_during_a_pass_runs_it_again() -> None:
    running: set[str] = set()
    overlaps: list[str] = []
    passes: list[str] = []
    release = threading.Event()
    lock = threading.Lock()

    def handle(key: str) -> None:
        with lock:
            if key in running:
                overlaps.append(key)
            running.add(key)
        if not passes:
            release.wait(5)
        passes.append(key)
        with lock:
            running.discard(key)

    queue: WorkQueue[str] = WorkQueue(handle, workers=4)
    queue.start()
    queue.add("k")
    assert wait_for(lambda: "k" in running)
    queue.add("k")  # arrives during the pass: must wait for it, then run once more
    queue.add("k")
    time.sleep(0.05)
    assert overlaps == []
    release.set()
    assert wait_for(lambda: len(passes) == 2 and queue.pending() == 0)
    time.sleep(0.05)
    queue.stop()
    assert passes == ["k", "k"] and overlaps == []


def test_timers_bring_keys_back_and_the_earliest_timer_wins() -> None:
    seen: list[tuple[str, float]] = []
    queue: WorkQueue[str] = WorkQueue(lambda k: seen.append((k, time.monotonic())), workers=2)
    queue.start()
    start = time.monotonic()
    queue.add("late", after=5)
    queue.add("late", after=0.2)  # earlier: replaces the later timer
    queue.add("late", after=3)  # later than a pending one: ignored
    queue.add("now")
    assert wait_for(lambda: len(seen) == 2, timeout=2.9)
    time.sleep(0.3)
    queue.stop()
    assert [k for k, _ in seen] == ["now", "late"]
    # not before its 0.2 s, and before the 3 s timer it replaced could have fired
    assert seen[1][1] - start >= 0.15
    sooner_than(seen[1][1] - start, 3, "the 3 s timer it replaced")


def test_a_timer_past_any_clock_or_no_number_leaves_the_other_timers_running() -> None:
    """A requeue computed from a time an object holds ("9999-12-31", or NaN) once ended the
    timer thread (time_t overflow) and with it every key's timer: it is cut to MAX_AFTER."""
    seen: list[str] = []
    queue: WorkQueue[str] = WorkQueue(seen.append, workers=1)
    queue.start()
    queue.add("far", after=2.5e11)  # the earliest timer for a moment: the thread waits on it
    queue.add("nan", after=float("nan"))
    queue.add("soon", after=0.05)
    assert wait_for(lambda: seen == ["soon"], timeout=2)
    queue.add("again", after=0.05)  # after "far" was the earliest once more
    assert wait_for(lambda: seen == ["soon", "again"], timeout=2)
    queue.stop()


def test_a_timer_wakes_one_worker_not_every_idle_one() -> None:
    """Idle workers wait without a timeout: a due timer wakes the one that takes its key (at
    most, now and then, a second that finds the key taken), not all eight."""
    seen: list[str] = []
    queue: WorkQueue[str] = WorkQueue(seen.append, workers=8)
    queue.start()
    assert wait_for(lambda: all(t.is_alive() for t in queue._threads))
    time.sleep(0.05)  # every worker waiting
    queue.stats()
    for i in range(20):
        queue.add(f"k{i}", after=0.05 * (i + 1))
    assert wait_for(lambda: len(seen) == 20, timeout=5)
    time.sleep(0.05)
    stats = queue.stats()
    queue.stop()
    assert sorted(seen) == sorted(f"k{i}" for i in range(20))
    assert stats.passes == 20
    # a count, not a time: waking every idle worker for each timer made 148
    assert stats.idle_wakeups < 40, stats


def test_a_handler_asking_for_another_pass_gets_one() -> None:
    calls: list[str] = []

    def handle(key: str) -> float | None:
        calls.append(key)
        return 0.05 if len(calls) < 3 else None

    queue: WorkQueue[str] = WorkQueue(handle, workers=1)
    queue.start()
    queue.add("k")
    assert wait_for(lambda: len(calls) == 3)
    time.sleep(0.2)
    queue.stop()
    assert calls == ["k", "k", "k"]


def test_a_failing_handler_is_retried_with_backoff_and_other_keys_go_on() -> None:
    calls: list[str] = []

    def handle(key: str) -> None:
        calls.append(key)
        if key == "bad" and calls.count("bad") < 2:
            raise RuntimeError("boom")

    queue: WorkQueue[str] = WorkQueue(handle, workers=1)
    queue.start()
    queue.add("bad")
    queue.add("good")
    assert wait_for(lambda: calls.count("bad") == 2, timeout=5)
    queue.stop()
    assert calls.index("good") < len(calls) - 1  # "good" ran while "bad" waited to retry


def test_write_memory_tells_stale_plans_apart() -> None:
    memory = WriteMemory()
    assert not memory.stale("wl", "10")
    memory.wrote("wl", "10")
    assert memory.stale("wl", "10") and not memory.stale("wl", "11")
    memory.forget("wl")
    assert not memory.stale("wl", "10")


def test_a_hold_is_timed_from_its_first_pass_and_ends_with_a_pass_that_holds_nothing() -> None:
    memory = WriteMemory()
    assert memory.held_for("k") is None
    memory.note_held("k", True)
    time.sleep(0.05)
    memory.note_held("k", True)  # still held: the clock runs on from the first pass
    held = memory.held_for("k")
    assert held is not None and held >= 0.05
    memory.note_held("k", False)
    assert memory.held_for("k") is None


def test_an_urgent_key_overtakes_the_waiting_ones_and_still_runs_once() -> None:
    seen: list[str] = []
    queue, gate = blocked_queue(seen)
    for key in ("a", "b", "c"):
        queue.add(key)
    queue.add("c", urgent=True)  # waiting already: moves to the front
    queue.add("d", urgent=True)
    gate.set()
    assert wait_for(lambda: queue.pending() == 0)
    time.sleep(0.05)
    queue.stop()
    assert seen == ["block", "c", "d", "a", "b"]


def test_the_fast_lane_has_threads_of_its_own_that_take_nothing_else() -> None:
    gate = threading.Event()
    seen: list[tuple[str, str]] = []

    def handle(key: str) -> None:
        if key.startswith("slow"):
            gate.wait(5)
        seen.append((key, threading.current_thread().name))

    queue: WorkQueue[str] = WorkQueue(handle, workers=1, urgent_workers=1, name="q")
    queue.start()
    queue.add("slow-1")
    assert wait_for(lambda: not queue._queue and queue.pending() == 1)  # the worker is busy
    queue.add("slow-2")  # waits for the worker: the fast lane's thread leaves it alone
    time.sleep(0.05)
    assert queue.pending() == 2 and seen == []
    queue.add("end", urgent=True)  # taken at once, while the worker is still busy
    assert wait_for(lambda: seen == [("end", "q-urgent-0")])
    gate.set()
    assert wait_for(lambda: queue.pending() == 0)
    queue.stop()
    assert seen[1:] == [("slow-1", "q-0"), ("slow-2", "q-0")]


def test_a_second_urgent_key_goes_to_whichever_thread_is_free() -> None:
    gate = threading.Event()
    seen: list[str] = []

    def handle(key: str) -> None:
        if key == "urgent-slow":
            gate.wait(5)
        seen.append(key)

    queue: WorkQueue[str] = WorkQueue(handle, workers=1, urgent_workers=1, name="q")
    queue.start()
    queue.add("urgent-slow", urgent=True)
    assert wait_for(lambda: queue.pending() == 1 and not queue._urgent)
    queue.add("urgent-2", urgent=True)
    assert wait_for(lambda: seen == ["urgent-2"])  # the other thread took it at once
    gate.set()
    assert wait_for(lambda: queue.pending() == 0)
    queue.stop()
    assert seen == ["urgent-2", "urgent-slow"]


def test_what_an_urgent_pass_leaves_to_the_next_is_urgent_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    queue, gate = blocked_queue(seen)
    queue.add("end", urgent=True)
    queue.add("other")
    gate.set()
    assert wait_for(lambda: queue.pending() == 0)
    gate.clear()
    queue.add("block")  # busy again
    assert wait_for(lambda: queue.pending() == 1 and not queue._queue)
    queue.add("other")
    queue.add("end")  # its follow-up (say, the watch event of its write): ahead of "other"
    monkeypatch.setattr(workqueue, "URGENT_FOLLOW_UP", 0.0)
    gate.set()
    assert wait_for(lambda: queue.pending() == 0)
    gate.clear()
    queue.add("block")
    assert wait_for(lambda: queue.pending() == 1 and not queue._queue)
    queue.add("other")
    queue.add("end")  # taken urgent last time, but that follow-up was long ago
    gate.set()
    assert wait_for(lambda: queue.pending() == 0)
    time.sleep(0.05)
    queue.stop()
    assert seen == ["block", "end", "other", "block", "end", "other", "block", "other", "end"]


def test_soonest_is_the_least_asked_zero_included() -> None:
    """What a pass returns of the passes its parts ask for: the first due, a 0 ("now")
    included; None when none asks."""
    assert soonest() is None and soonest(None, None) is None
    assert soonest(None, 30.0) == 30.0
    assert soonest(30.0, 5.0) == 5.0 and soonest(5.0, 30.0) == 5.0
    assert soonest(0.0, 30.0) == 0.0 and soonest(0.0, None) == 0.0
