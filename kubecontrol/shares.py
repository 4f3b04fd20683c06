"""Capacity shared per caller: slots of a pool no single caller may fill, and which
connection to close when a server's connections are all taken.

A caller is whoever the server can name: the authenticated user the API server passes for an
aggregated API, or a connection's source address on a port anyone may reach. One caller that
holds everything it can never keeps another out: it meets its own share first, and when a
new connection needs room, the caller holding the most connections gives one up (or, where
each connection costs a thread, that caller's own newcomer is closed as it comes).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


class Shares:
    """`total` slots, of which one caller holds at most `each` at once, and, when callers
    come in groups (a namespace's users), one group at most `each_group`. Non-blocking and
    thread-safe: `take` says why not rather than waiting."""

    def __init__(self, total: int, each: int, what: str, each_group: int | None = None) -> None:
        if not 0 < each <= (each_group or total) <= total:
            raise ValueError(f"a caller's share ({each}) must be within the pool (1..{total})")
        self.total, self.each, self.each_group, self._what = total, each, each_group, what
        self._held: Counter[Hashable] = Counter()
        self._groups: Counter[Hashable] = Counter()
        self._lock = threading.Lock()

    def take(self, who: Hashable, group: Hashable = None) -> str | None:
        """Take a slot for `who` (of `group`): None when taken, else the reason it is not
        (for a 429)."""
        with self._lock:
            if self._held[who] >= self.each:
                return f"you hold {self.each} {self._what} on this replica, your share; try again"
            if self.each_group is not None and self._groups[group] >= self.each_group:
                return (
                    f"{self.each_group} {self._what} of {group} are under way on this replica, "
                    "its share; try again"
                )
            if sum(self._held.values()) >= self.total:
                return f"{self.total} {self._what} are under way on this replica; try again"
            self._held[who] += 1
            self._groups[group] += 1
            return None

    def give_back(self, who: Hashable, group: Hashable = None) -> None:
        with self._lock:
            for counts, key in ((self._held, who), (self._groups, group)):
                counts[key] -= 1
                if counts[key] <= 0:
                    del counts[key]

    def held(self, who: Hashable) -> int:
        with self._lock:
            return self._held[who]

    @contextmanager
    def slot(self, who: Hashable, group: Hashable = None) -> Iterator[str | None]:
        """`take` for a `with` block: yields None while a slot is held (given back at the
        end), else the reason none is."""
        refused = self.take(who, group)
        try:
            yield refused
        finally:
            if refused is None:
                self.give_back(who, group)


class Rates:
    """A token bucket per caller: `per_second` on average, `burst` at once; at most
    `callers` buckets are kept (the least recently used go, and one that comes back starts
    full). Thread-safe."""

    def __init__(self, per_second: float, burst: int, callers: int = 4096) -> None:
        self._rate, self._burst, self._callers = per_second, float(burst), callers
        self._lock = threading.Lock()
        self._buckets: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()

    def take(self, who: Hashable, now: float | None = None) -> bool:
        """Take one from `who`'s bucket: whether there was one."""
        now = time.monotonic() if now is None else now
        with self._lock:
            left, refilled = self._buckets.pop(who, (self._burst, now))
            left = min(self._burst, left + (now - refilled) * self._rate)
            allowed = left >= 1
            self._buckets[who] = (left - 1 if allowed else left, now)
            while len(self._buckets) > self._callers:
                self._buckets.popitem(last=False)
            return allowed


@dataclass(frozen=True)
class Held(Generic[T]):
    """A connection a server holds: `ref` (the server's own handle), whose it is (`source`),
    whether it waits for a request (`idle`) and since when it does what it does now."""

    ref: T
    source: Hashable
    idle: bool
    since: float


def make_room(live: Sequence[Held[T]], limit: int) -> T | None:
    """The connection to close so that a new one fits under `limit`, or None when there is
    room: one of the caller holding the most, its longest idle one if it has any, else its
    oldest. A caller with fewer connections than another loses none to a newcomer, so a flood
    from one address (or a few) never closes the API server's or the kubelet's."""
    if len(live) < limit or not live:
        return None
    counts, most = _counted(live)
    candidates = [h for h in live if counts[h.source] == most]
    idle = [h for h in candidates if h.idle]
    pick = min(idle or candidates, key=lambda h: h.since)
    return pick.ref


def turned_away(live: Sequence[Held[T]], limit: int, source: Hashable) -> bool:
    """Whether a new connection from `source` is closed as it comes, `make_room`'s rule seen
    from the newcomer: every slot is taken and `source` already holds as many as any caller,
    so it would only close one of its own (or of a caller it ties with, which would then do
    the same to it). A caller holding fewer gets in, by `make_room`."""
    if len(live) < limit or not live:
        return False
    counts, most = _counted(live)
    return counts[source] == most


def _counted(live: Sequence[Held[T]]) -> tuple[Counter[Hashable], int]:
    """Connections per caller, and the most any caller holds (`live` is not empty)."""
    counts = Counter(h.source for h in live)
    return counts, max(counts.values())
