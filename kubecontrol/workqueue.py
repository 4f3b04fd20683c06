"""A keyed work queue for controllers, in the manner of client-go's workqueue.

Watch events only name a key (say, a TrainJob's namespace and name) and return at once; a few
worker threads take keys off the queue and reconcile them from the caches. This gives:

- coalescing: a key is queued at most once, however many events arrive while it waits, so a
  burst of changes to one object costs one pass, not one pass per event;
- exclusivity: a key is handled by one worker at a time; events that arrive meanwhile queue
  it once more, to run after the current pass;
- timers: `add(key, after=s)` brings a key back later (lost-worker timeouts, retention), and
  a handler may return the seconds after which it wants its key again. One thread of its own
  waits for the earliest timer and queues its key, waking one worker; the workers themselves
  wait without a timeout (were they all to wait for the earliest timer, every idle worker would
  wake at each timer, one to take the key and the others to go back to sleep);
- retries: a handler that raises gets its key back after an exponential backoff;
- a fast lane: `add(key, urgent=True)` puts a key ahead of the others (say, a job that just
  finished elsewhere, whose completion frees quota), without running it twice; `urgent_workers`
  threads take only such keys, so one never waits for the passes of other keys to end. A key
  stays in the fast lane for `URGENT_FOLLOW_UP` seconds after it was taken from it: what its
  urgent pass leaves to the next (say, a write planned from a version the cache has not caught
  up with, which the watch event of that write brings back) is urgent too.

`WriteMemory` complements it: caches lag behind our own writes, so a pass may plan from a
version of an object it has written from before; such a plan is stale and is dropped.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kubecontrol import metrics

K = TypeVar("K", bound=Hashable)
log = logging.getLogger(__name__)

URGENT_FOLLOW_UP = 10.0  # seconds a key taken from the fast lane goes on being urgent


# The longest a key's timer may be (a day): a requeue further off is no timer's to keep, and
# one past the platform's time_t would end the timer thread, with every other key's timer.
MAX_AFTER = 86400.0


def soonest(*delays: float | None) -> float | None:
    """The first of the passes asked for (None: none asked), as a reconcile returns it."""
    asked = [d for d in delays if d is not None]
    return min(asked) if asked else None


class WorkQueue(Generic[K]):
    def __init__(
        self,
        handle: Callable[[K], float | None],
        *,
        workers: int = 4,
        urgent_workers: int = 0,
        name: str = "work",
        max_backoff: float = 60.0,
    ) -> None:
        self._handle = handle
        self._name = name
        self._workers = workers
        self._urgent_workers = urgent_workers
        self._max_backoff = max_backoff
        # One lock, three conditions: the workers wait on `_cond` (any key), the fast lane's
        # own threads on `_fast` (urgent keys only), the timer thread on `_tick` (the earliest
        # timer, or a new one earlier still).
        lock = threading.RLock()
        self._cond = threading.Condition(lock)
        self._fast = threading.Condition(lock)
        self._tick = threading.Condition(lock)
        self._queue: deque[K] = deque()
        self._urgent: deque[K] = deque()  # the fast lane; a key may sit in both deques
        self._urgent_keys: set[K] = set()
        self._urgent_until: dict[K, float] = {}  # taken from the fast lane: urgent until then
        self._dirty: set[K] = set()  # queued and not yet taken
        self._processing: set[K] = set()
        self._due: dict[K, float] = {}  # earliest pending timer per key
        self._timers: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._failures: dict[K, int] = {}
        self._stopped = False
        self._threads: list[threading.Thread] = []
        self._queued_at: dict[K, float] = {}
        self._stats = QueueStats()
        self._paused = False
        self._depth = metrics.WORKQUEUE_DEPTH.labels(name)
        self._adds = metrics.WORKQUEUE_ADDS.labels(name)
        self._retries = metrics.WORKQUEUE_RETRIES.labels(name)
        self._queue_duration = metrics.WORKQUEUE_QUEUE_DURATION.labels(name)
        self._work_duration = metrics.WORKQUEUE_WORK_DURATION.labels(name)

    # ---- producers ---------------------------------------------------------------------------

    def add(self, key: K, after: float = 0.0, *, urgent: bool = False) -> None:
        """Queue `key` now, or in `after` seconds (at most MAX_AFTER: a time read from an
        object, however far off or unreadable, never stops the timers)."""
        with self._cond:
            if after <= 0:
                self._enqueue(key, urgent)
                return
            if not after < MAX_AFTER:  # NaN too
                after = MAX_AFTER
            due = time.monotonic() + after
            if self._due.get(key, float("inf")) <= due:
                return  # an earlier timer already brings it back
            self._due[key] = due
            heapq.heappush(self._timers, (due, next(self._seq), key))
            if self._timers[0][0] == due:
                self._tick.notify()  # the earliest now: the timer thread waits for it instead

    def resync(self, key: K) -> None:
        """Queue a key for the periodic resync, unless it is backing off after failures: its
        retry timer brings it back, and a resync must not turn the backoff into a busy loop.
        (A watch event still queues it at once with `add`: the object changed.)"""
        with self._cond:
            if key in self._failures:
                return
            self._enqueue(key)

    def _enqueue(self, key: K, urgent: bool = False) -> None:
        until = self._urgent_until.get(key)
        if until is not None and not urgent:
            urgent = until > time.monotonic()
            if not urgent:
                del self._urgent_until[key]
        if urgent and key not in self._urgent_keys:
            self._urgent_keys.add(key)
            if key in self._dirty and key not in self._processing:
                self._urgent.append(key)  # already waiting in the slow lane: overtake
                self._wake(urgent=True)
        if key in self._dirty:
            return
        self._dirty.add(key)
        self._adds.inc()
        self._depth.set(len(self._dirty))
        self._queued_at.setdefault(key, time.monotonic())
        if key not in self._processing:
            self._requeue(key)

    def _requeue(self, key: K) -> None:
        """Put a waiting key in its lane and wake a thread that takes it."""
        urgent = key in self._urgent_keys
        (self._urgent if urgent else self._queue).append(key)
        self._wake(urgent)

    def _wake(self, urgent: bool) -> None:
        if urgent and self._urgent_workers:
            self._fast.notify()
        self._cond.notify()  # the fast lane's threads may all be busy: any worker takes it

    def _follow_up(self, key: K, now: float) -> None:
        if len(self._urgent_until) >= 4096:  # forget the ones whose time is up
            self._urgent_until = {k: t for k, t in self._urgent_until.items() if t > now}
        self._urgent_until[key] = now + URGENT_FOLLOW_UP

    def pending(self) -> int:
        """Keys waiting or being worked on (the figure `stats` reports)."""
        with self._cond:  # re-entrant: `stats` calls it holding the lock
            return len(self._dirty) + len(self._processing)

    # ---- consumers ---------------------------------------------------------------------------

    def start(self) -> None:
        threads = [(f"{self._name}-{i}", False) for i in range(self._workers)]
        threads += [(f"{self._name}-urgent-{i}", True) for i in range(self._urgent_workers)]
        for name, urgent_only in threads:
            thread = threading.Thread(
                target=self._work, args=(urgent_only,), name=name, daemon=True
            )
            thread.start()
            self._threads.append(thread)
        timers = threading.Thread(target=self._run_timers, name=f"{self._name}-timers", daemon=True)
        timers.start()
        self._threads.append(timers)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            self._fast.notify_all()
            self._tick.notify_all()

    def pause(self) -> None:
        """Hand out no more keys (a replica that stopped leading); keys keep jobframework."""
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()
            self._fast.notify_all()

    def _get(self, urgent_only: bool = False) -> K | None:
        """The next key to work on (None once stopped); `urgent_only`: from the fast lane
        only."""
        waiting = self._fast if urgent_only else self._cond
        woken = False
        with self._cond:
            while not self._stopped:
                if self._paused:
                    waiting.wait()
                    continue
                now = time.monotonic()
                for lane in (self._urgent,) if urgent_only else (self._urgent, self._queue):
                    while lane:
                        key = lane.popleft()
                        if key not in self._dirty or key in self._processing:
                            continue  # taken from the other lane already
                        self._dirty.discard(key)
                        if key in self._urgent_keys:
                            self._urgent_keys.discard(key)
                            self._follow_up(key, now)
                        self._processing.add(key)
                        self._depth.set(len(self._dirty))
                        waited = time.monotonic() - self._queued_at.pop(key, now)
                        self._stats.waited(waited)
                        self._queue_duration.observe(waited)
                        return key
                if woken:  # woken, and another thread took the key (or there was none)
                    self._stats.idle_wakeups += 1
                waiting.wait()
                woken = True
            return None

    def _run_timers(self) -> None:
        """Queue each key whose timer is due (a timer replaced by an earlier one for the same
        key is skipped), then wait for the next one."""
        with self._tick:
            while not self._stopped:
                now = time.monotonic()
                while self._timers and self._timers[0][0] <= now:
                    due, _, key = heapq.heappop(self._timers)
                    if self._due.get(key) == due:
                        del self._due[key]
                        self._enqueue(key)
                self._tick.wait(self._timers[0][0] - now if self._timers else None)

    def _done(self, key: K, took: float) -> None:
        with self._cond:
            self._stats.passes += 1
            self._stats.busy += took
            self._work_duration.observe(took)
            self._processing.discard(key)
            if key in self._dirty:
                self._requeue(key)

    def stats(self) -> QueueStats:
        """Figures since the last call (then reset): for logs and benchmarks."""
        with self._cond:
            stats, self._stats = self._stats, QueueStats()
            stats.pending = self.pending()
            return stats

    def log_stats(self, cluster: str) -> None:
        """Log the figures since the last call, when there was anything to see."""
        stats = self.stats()
        if stats.passes or stats.pending:
            log.info("queue", extra={"cluster": cluster, "queue": self._name, **stats.fields()})

    def _work(self, urgent_only: bool = False) -> None:
        while (key := self._get(urgent_only)) is not None:
            started = time.monotonic()
            try:
                again = self._handle(key)
                self._failures.pop(key, None)
            except Exception:  # one bad key must not stop the worker
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                self._retries.inc()
                again = min(self._max_backoff, 0.5 * 2**failures)
                log.exception(
                    "pass failed",
                    extra={
                        "queue": self._name,
                        "key": str(key),
                        "failuresInARow": failures,
                        "againSeconds": round(again, 1),
                    },
                )
            finally:
                self._done(key, time.monotonic() - started)
            if again is not None:
                self.add(key, after=again)


@dataclass
class QueueStats:
    passes: int = 0
    busy: float = 0.0  # seconds spent in handlers, summed over workers
    wait_total: float = 0.0  # seconds keys waited between being queued and taken
    wait_max: float = 0.0
    pending: int = 0
    idle_wakeups: int = 0  # a worker woke and found nothing to take

    def waited(self, seconds: float) -> None:
        self.wait_total += seconds
        self.wait_max = max(self.wait_max, seconds)

    def fields(self) -> dict[str, object]:
        """The figures as a log line's fields."""
        return {
            "passes": self.passes,
            "msPerPass": round(self.busy / self.passes * 1000) if self.passes else 0,
            "waitMeanSeconds": round(self.wait_total / self.passes, 2) if self.passes else 0.0,
            "waitMaxSeconds": round(self.wait_max, 2),
            "pending": self.pending,
            "idleWakeups": self.idle_wakeups,
        }


class WriteMemory:
    """Which version of an object each of our writes was planned from.

    After a write the cache still holds the old version until the watch delivers the new one;
    a pass in between would plan the same write again from the same version. `stale` tells
    such passes apart, so they can be dropped: the watch event of the write brings the key
    back with the new version.
    """

    def __init__(self, limit: int = 100_000) -> None:
        self._seen: dict[Hashable, Hashable] = {}
        self._when: dict[Hashable, float] = {}  # monotonic time of the last write
        self._lock = threading.Lock()
        self._limit = limit

    def stale(self, key: Hashable, version: Hashable) -> bool:
        with self._lock:
            return self._seen.get(key) == version

    def wrote(self, key: Hashable, version: Hashable) -> None:
        with self._lock:
            if len(self._seen) >= self._limit:
                self._seen.clear()  # only an optimisation: forgetting costs a repeated write
                self._when.clear()
            self._seen[key] = version
            self._when[key] = time.monotonic()

    def written_ago(self, key: Hashable) -> float | None:
        """Seconds since the last write of `key` we made, or had refused as a conflict (None:
        none remembered)."""
        with self._lock:
            when = self._when.get(key)
        return None if when is None else time.monotonic() - when

    def note_held(self, key: Hashable, held: bool) -> None:
        """Since when something under `key` is held back (a write its caller coalesces): the
        first pass that holds it starts the clock, a pass that holds nothing stops it."""
        with self._lock:
            if not held:
                self._when.pop(key, None)
            elif key not in self._when:
                self._when[key] = time.monotonic()

    def held_for(self, key: Hashable) -> float | None:
        """Seconds since `note_held` started holding `key` (None: nothing is held)."""
        return self.written_ago(key)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._seen.pop(key, None)
            self._when.pop(key, None)
