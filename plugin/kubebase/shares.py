"""Capacity shared per caller: slots of a pool no single caller may fill, handed out in turns
to those who wait for one, and which connection to close when a server's connections are all
taken.

A caller is whoever the server can name: the authenticated user the API server passes for an
aggregated API or the web view, or a connection's source address on a port anyone may reach.
One caller that holds everything it can never keeps another out: it meets its own share first,
a freed slot goes to whoever has been served least recently, and when a new connection needs
room, the caller holding the most connections gives one up (or, where each connection costs a
thread, that caller's own newcomer is closed as it comes).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Hashable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


def _check_share(total: int, each: int, each_group: int | None) -> None:
    """A caller's share and a group's each within the pool; a caller's may be larger than a
    group's (a viewer reading several namespaces)."""
    if not (0 < each <= total and 0 < (each_group or total) <= total):
        raise ValueError(f"a share ({each}, {each_group}) must be within the pool (1..{total})")


def _never() -> bool:
    return False


class Shares:
    """`total` slots, of which one caller holds at most `each` at once, and, when callers
    come in groups (a namespace's users), one group at most `each_group`. A caller may take
    slots in several groups (a viewer reading several namespaces), so its share may be larger
    than a group's. Non-blocking and thread-safe: `take` says why not rather than waiting."""

    def __init__(self, total: int, each: int, what: str, each_group: int | None = None) -> None:
        _check_share(total, each, each_group)
        self.total, self.each, self.each_group, self._what = total, each, each_group, what
        self._held: Counter[Hashable] = Counter()
        self._groups: Counter[Hashable] = Counter()
        self._lock = threading.Lock()

    def take(
        self, who: Hashable, group: Hashable = None, group_share: int | None = None
    ) -> str | None:
        """Take a slot for `who` (of `group`, whose share is `group_share` when given, else
        `each_group`): None when taken, else the reason it is not (for a 429)."""
        cap = group_share if group_share is not None else self.each_group
        with self._lock:
            if self._held[who] >= self.each:
                return f"you hold {self.each} {self._what} on this replica, your share; try again"
            if cap is not None and self._groups[group] >= cap:
                return (
                    f"{cap} {self._what} of {group} are under way on this replica, "
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

    def held_by(self, group: Hashable) -> int:
        with self._lock:
            return self._groups[group]

    def taken(self) -> int:
        with self._lock:
            return sum(self._held.values())

    @contextmanager
    def slot(
        self, who: Hashable, group: Hashable = None, group_share: int | None = None
    ) -> Iterator[str | None]:
        """`take` for a `with` block: yields None while a slot is held (given back at the
        end), else the reason none is."""
        refused = self.take(who, group, group_share)
        try:
            yield refused
        finally:
            if refused is None:
                self.give_back(who, group)


@dataclass
class _Caller:
    """A caller's place in a group: slots held there, when it was last served (0: never),
    its waiting takes in the order they came."""

    held: int = 0
    served: int = 0
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)


@dataclass
class _Group:
    """A group's: slots held, when it was last served (0: never), its callers that hold or
    wait, in the order they came."""

    held: int = 0
    served: int = 0
    callers: dict[Hashable, _Caller] = field(default_factory=dict)


class FairQueue:
    """`total` slots shared as `Shares` shares them (a caller holds at most `each`, a group
    at most `each_group`), but a caller that finds no slot it may take waits for one, as the
    API server's Priority and Fairness queues a flow's requests rather than refusing them.
    Each freed slot goes to the group served least recently that has a waiting caller it may
    serve, and within that group to the caller served least recently; one never served comes
    first. So a caller asking once is served at the next freed slot however many others loop,
    and a tenant's many users take turns as one group.

    Bounded: at most `queued_each` waiting per caller, `queued_group` per group and
    `queued_total` in all; a caller past those, or still waiting after `wait` seconds, or
    whose `gone()` turns true (checked every `check_every` seconds), is refused and leaves the
    queue. Memory is kept only for callers that hold or wait. Not thread-safe: `take` and
    `give_back` on one event loop."""

    def __init__(
        self,
        total: int,
        each: int,
        what: str,
        each_group: int | None = None,
        *,
        queued_each: int,
        queued_group: int | None = None,
        queued_total: int,
        check_every: float = 1.0,
    ) -> None:
        _check_share(total, each, each_group)
        _check_share(queued_total, queued_each, queued_group)
        self.total, self.each, self.each_group, self._what = total, each, each_group, what
        self.queued_each, self.queued_group = queued_each, queued_group
        self.queued_total = queued_total
        self._check_every = check_every
        self._in_use = 0
        self._queued = 0
        self._served = 0  # grants so far: the clock of "served least recently"
        self._held: Counter[Hashable] = Counter()  # by caller, over every group
        self._groups: dict[Hashable, _Group] = {}  # those holding or waiting, as they came

    def held(self, who: Hashable) -> int:
        return self._held[who]

    def queued(self, who: Hashable, group: Hashable = None) -> int:
        place = self._groups.get(group)
        caller = place.callers.get(who) if place is not None else None
        return len(caller.waiting) if caller is not None else 0

    async def take(
        self,
        who: Hashable,
        group: Hashable = None,
        *,
        wait: float,
        gone: Callable[[], bool] = _never,
    ) -> str | None:
        """A slot for `who` (of `group`), now or within `wait` seconds: None once it is held,
        else the reason it is not (for a 429)."""
        if self._in_use < self.total and self._may_serve(who, group):
            self._grant(who, group)
            return None
        full = self._full(who, group)
        if full is not None:
            return full
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._place(who, group).waiting.append(turn)
        self._queued += 1
        try:
            await self._until(turn, wait, gone)
        except BaseException:  # cancelled: its place, or the slot just handed to it, goes
            if turn.done():
                self.give_back(who, group)
            else:
                self._leave(who, group, turn)
            raise
        if turn.done():
            return None
        self._leave(who, group, turn)
        if gone():
            return f"the client went away while its {self._what} waited"
        return (
            f"no slot within {wait:g}s: this replica's {self.total} {self._what} are under way; "
            "try again"
        )

    def give_back(self, who: Hashable, group: Hashable = None) -> None:
        """End a slot `take` gave; the next caller in turn takes it."""
        self._in_use -= 1
        self._held[who] -= 1
        if self._held[who] <= 0:
            del self._held[who]
        self._groups[group].held -= 1
        self._groups[group].callers[who].held -= 1
        self._forget(who, group)
        self._serve()

    @asynccontextmanager
    async def slot(
        self,
        who: Hashable,
        group: Hashable = None,
        *,
        wait: float,
        gone: Callable[[], bool] = _never,
    ) -> AsyncIterator[str | None]:
        """`take` for an `async with` block: yields None while a slot is held (given back at
        the end, also when the block is cancelled), else the reason none is."""
        refused = await self.take(who, group, wait=wait, gone=gone)
        try:
            yield refused
        finally:
            if refused is None:
                self.give_back(who, group)

    def _may_serve(self, who: Hashable, group: Hashable) -> bool:
        place = self._groups.get(group)
        if self.each_group is not None and place is not None and place.held >= self.each_group:
            return False
        return self._held[who] < self.each

    def _full(self, who: Hashable, group: Hashable) -> str | None:
        place = self._groups.get(group, _Group())
        mine = place.callers.get(who, _Caller())
        if len(mine.waiting) >= self.queued_each:
            return (
                f"you have {self.queued_each} {self._what} waiting on this replica, your share; "
                "try again"
            )
        ours = sum(len(caller.waiting) for caller in place.callers.values())
        if self.queued_group is not None and ours >= self.queued_group:
            return (
                f"{self.queued_group} {self._what} of {group} are waiting on this replica, its "
                "share; try again"
            )
        if self._queued >= self.queued_total:
            return f"{self.queued_total} {self._what} are waiting on this replica; try again"
        return None

    def _place(self, who: Hashable, group: Hashable) -> _Caller:
        return self._groups.setdefault(group, _Group()).callers.setdefault(who, _Caller())

    async def _until(
        self, turn: asyncio.Future[None], wait: float, gone: Callable[[], bool]
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while not turn.done() and not gone():
            left = deadline - loop.time()
            if left <= 0:
                return
            await asyncio.wait((turn,), timeout=min(self._check_every, left))

    def _leave(self, who: Hashable, group: Hashable, turn: asyncio.Future[None]) -> None:
        self._groups[group].callers[who].waiting.remove(turn)
        self._queued -= 1
        self._forget(who, group)

    def _grant(self, who: Hashable, group: Hashable) -> None:
        self._served += 1
        self._in_use += 1
        self._held[who] += 1
        caller = self._place(who, group)
        place = self._groups[group]
        caller.held, caller.served = caller.held + 1, self._served
        place.held, place.served = place.held + 1, self._served

    def _forget(self, who: Hashable, group: Hashable) -> None:
        place = self._groups[group]
        caller = place.callers[who]
        if not caller.held and not caller.waiting:
            del place.callers[who]
        if not place.callers:
            del self._groups[group]

    def _serve(self) -> None:
        while self._in_use < self.total:
            turn = self._next()
            if turn is None:
                return
            who, group = turn
            future = self._groups[group].callers[who].waiting.popleft()
            self._queued -= 1
            self._grant(who, group)
            future.set_result(None)

    def _next(self) -> tuple[Hashable, Hashable] | None:
        """The caller to serve: of the group served least recently with one it may serve,
        the one served least recently (ties: the one that came first)."""
        groups = sorted(self._groups.items(), key=lambda item: item[1].served)
        for group, place in groups:
            if self.each_group is not None and place.held >= self.each_group:
                continue
            ready = [
                (caller.served, who)
                for who, caller in place.callers.items()
                if caller.waiting and self._held[who] < self.each
            ]
            if ready:
                return min(ready, key=lambda served_who: served_who[0])[1], group
        return None


class Rates:
    """A token bucket per caller: `per_second` on average, `burst` at once; at most
    `callers` buckets are kept (the least recently used go, and one that comes back starts
    full). Thread-safe."""

    def __init__(
        self,
        per_second: float,
        burst: int,
        callers: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate, self._burst, self._callers = per_second, float(burst), callers
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()

    def has(self, who: Hashable, now: float | None = None) -> bool:
        """Whether `who`'s bucket holds one now (nothing taken, no bucket made)."""
        now = self._clock() if now is None else now
        with self._lock:
            left, refilled = self._buckets.get(who, (self._burst, now))
            return min(self._burst, left + (now - refilled) * self._rate) >= 1

    def take(self, who: Hashable, now: float | None = None) -> bool:
        """Take one from `who`'s bucket: whether there was one."""
        now = self._clock() if now is None else now
        with self._lock:
            left, refilled = self._buckets.pop(who, (self._burst, now))
            left = min(self._burst, left + (now - refilled) * self._rate)
            allowed = left >= 1
            self._buckets[who] = (left - 1 if allowed else left, now)
            while len(self._buckets) > self._callers:
                self._buckets.popitem(last=False)
            return allowed


_TAKING = threading.Lock()


def take_each(*buckets: tuple[Rates, Hashable]) -> bool:
    """Take one from each (rates, who) when every one of them holds one, else none: a caller
    refused by one allowance spends nothing of the others (nor makes a bucket there). One
    caller at a time, so that two never both see the last one and both take."""
    with _TAKING:
        if not all(rates.has(who) for rates, who in buckets):
            return False
        return all([rates.take(who) for rates, who in buckets])


@dataclass(frozen=True)
class Held(Generic[T]):
    """A connection a server holds: `ref` (the server's own handle), whose it is (`source`),
    whether it waits for a request (`idle`), since when it does what it does now, and whether
    it is never closed to make room (`kept`: a request whose answer is being worked out, of
    which a server has few at once)."""

    ref: T
    source: Hashable
    idle: bool
    since: float
    kept: bool = False


def make_room(live: Sequence[Held[T]], limit: int) -> T | None:
    """The connection to close so that a new one fits under `limit`, or None when there is
    room (or nothing may be closed): one of the caller holding the most that is not `kept`,
    its longest idle one if it has any, else its oldest. A caller with fewer connections than
    another loses none to a newcomer, so a flood from one address (or a few) never closes the
    API server's or the kubelet's; and a request being answered is never cut, so a review
    under judgment is answered however many addresses hold connections."""
    if len(live) < limit or not live:
        return None
    counts = Counter(h.source for h in live)
    open_ = [h for h in live if not h.kept]
    if not open_:
        return None
    most = max(counts[h.source] for h in open_)
    candidates = [h for h in open_ if counts[h.source] == most]
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


class Remembered(Generic[T]):
    """Keys remembered with when they were noted, at most `total` of them, kept per group (a
    namespace). When full, keys noted longer ago than the caller still asks about go first;
    then the group holding the most forgets its oldest (the group noting, on a tie). So one
    group that notes many keys pushes another's out only down to as many as it holds itself:
    each keeps an equal share of `total` however many another notes. Thread-safe."""

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        if total < 1:
            raise ValueError(f"a memory holds at least one key, not {total}")
        self.total, self._clock = total, clock
        self._lock = threading.Lock()
        self._groups: dict[Hashable, OrderedDict[T, float]] = {}
        self._count = 0

    def __len__(self) -> int:
        with self._lock:
            return self._count

    def holds(self, group: Hashable, key: T, within: float) -> bool:
        """Whether `key` of `group` was noted less than `within` seconds ago."""
        with self._lock:
            kept = self._groups.get(group)
            when = None if kept is None else kept.get(key)
            return when is not None and self._clock() - when < within

    def note(self, group: Hashable, key: T, within: float | None = None) -> None:
        """Remember `key` of `group` as noted now (its latest key). `within`: how long a key
        is asked about (`holds`); when full, those noted longer ago are forgotten first."""
        with self._lock:
            now = self._clock()
            kept = self._groups.setdefault(group, OrderedDict())
            self._count += key not in kept
            kept[key] = now
            kept.move_to_end(key)
            if self._count > self.total and within is not None:
                for name in list(self._groups):
                    self._forget_while(name, lambda when: now - when >= within)
            while self._count > self.total:
                most = max(self._groups, key=lambda g: (len(self._groups[g]), g == group))
                self._forget_while(most, lambda _: True, at_most=1)

    def _forget_while(
        self, group: Hashable, old: Callable[[float], bool], at_most: int | None = None
    ) -> None:
        """Forget `group`'s oldest keys while `old(when)` holds (`at_most` of them)."""
        kept, gone = self._groups[group], 0
        while kept and (at_most is None or gone < at_most) and old(next(iter(kept.values()))):
            kept.popitem(last=False)
            gone += 1
        self._count -= gone
        if not kept:
            del self._groups[group]
