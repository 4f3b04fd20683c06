"""Per-caller shares of a pool, and which connection makes room for a new one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kubebase.shares import (
    FairQueue,
    Held,
    Rates,
    Remembered,
    Shares,
    make_room,
    take_each,
    turned_away,
)


def test_one_caller_meets_its_share_before_the_pool_is_full() -> None:
    shares = Shares(total=4, each=2, what="reads")
    assert shares.take("mallory") is None
    assert shares.take("mallory") is None
    assert shares.take("mallory") == "you hold 2 reads on this replica, your share; try again"
    assert shares.take("alice") is None  # the others' room is left
    assert shares.take("bob") is None
    assert shares.take("carol") == "4 reads are under way on this replica; try again"
    shares.give_back("mallory")
    assert shares.held("mallory") == 1
    assert shares.take("carol") is None


def test_a_slot_is_given_back_at_the_end_of_its_block_and_only_when_taken() -> None:
    shares = Shares(total=1, each=1, what="streams")
    with shares.slot("alice") as refused:
        assert refused is None
        with shares.slot("alice") as again:
            assert again is not None  # not taken: nothing to give back
        assert shares.held("alice") == 1
    assert shares.held("alice") == 0
    with pytest.raises(RuntimeError), shares.slot("bob"):
        raise RuntimeError("the block failed")
    assert shares.held("bob") == 0


@pytest.mark.parametrize("each", [3, 0])
def test_a_share_larger_than_the_pool_or_of_nothing_is_refused(each: int) -> None:
    with pytest.raises(ValueError, match="within the pool"):
        Shares(total=2, each=each, what="reads")


def test_a_caller_reading_in_several_groups_meets_each_groups_share() -> None:
    """A web view's viewer reads several namespaces: its own share is larger than one
    namespace's, and each namespace it reads holds it to that namespace's share."""
    shares = Shares(total=6, each=4, what="reads", each_group=2)
    assert [shares.take("alice", "team-a") for _ in range(2)] == [None, None]
    assert shares.take("alice", "team-a") == (
        "2 reads of team-a are under way on this replica, its share; try again"
    )
    assert shares.take("bot", "team-a") is not None  # another user of team-a: none left
    assert shares.take("alice", "team-b") is None  # her reads of another namespace
    assert shares.held_by("team-a") == 2 and shares.taken() == 3


def test_a_callers_rate_refills_and_the_least_recently_seen_caller_is_forgotten() -> None:
    rates = Rates(per_second=1.0, burst=1, callers=2)
    assert rates.take("a", now=0.0) and not rates.take("a", now=0.0)
    assert rates.take("a", now=1.0)  # refilled at its rate
    assert rates.take("b", now=1.0)
    assert rates.take("c", now=1.0)  # a third caller: "a", seen least recently, is forgotten
    assert not rates.take("c", now=1.0)  # "c" is kept: its bucket is the one just spent
    assert not rates.take("b", now=1.0)
    assert rates.take("a", now=1.0)  # forgotten, it starts full again
    # seen least recently, not first: "b" is touched after "a" came, so "a" goes
    lru = Rates(per_second=1.0, burst=1, callers=2)
    assert lru.take("a", now=0.0) and lru.take("b", now=0.0)
    assert not lru.take("a", now=0.0)  # "a" seen again: "b" is now the least recent
    assert lru.take("c", now=0.0)  # "b" forgotten
    assert not lru.take("a", now=0.0)  # "a" kept, still spent
    assert lru.take("b", now=0.0)  # "b" starts full again


def held(name: str, source: str, since: float, idle: bool = False, kept: bool = False) -> Held[str]:
    return Held(name, source, idle, since, kept)


@pytest.mark.parametrize(
    ("live", "limit", "closed"),
    [
        pytest.param([held("a", "10.0.0.1", 1)], 2, None, id="room-left"),
        pytest.param([], 0, None, id="nothing-to-close"),
        pytest.param(
            [
                held("apiserver", "10.0.0.1", 0),
                held("pod-1", "10.1.0.7", 1),
                held("pod-2", "10.1.0.7", 2),
            ],
            3,
            "pod-1",
            id="the-heaviest-caller-gives-up-its-oldest-though-another-is-older",
        ),
        pytest.param(
            [
                held("apiserver", "10.0.0.1", 5, idle=True),
                held("pod-1", "10.1.0.7", 1),
                held("pod-2", "10.1.0.7", 2, idle=True),
            ],
            3,
            "pod-2",
            id="its-idle-one-before-its-busy-one",
        ),
        pytest.param(
            [
                held("apiserver", "10.0.0.1", 3),
                held("pod", "10.1.0.7", 4),
                held("other-pod", "10.1.0.8", 2),
            ],
            3,
            "other-pod",
            id="a-tie-closes-the-oldest-of-the-tied",
        ),
        pytest.param(
            [
                held("judged", "10.0.0.1", 0, kept=True),
                held("apiserver", "10.0.0.1", 1),
                held("pod", "10.1.0.7", 2),
            ],
            3,
            "apiserver",
            id="a-kept-one-never-though-the-oldest-of-the-heaviest",
        ),
        pytest.param(
            [
                held("judged-1", "10.0.0.1", 0, kept=True),
                held("judged-2", "10.0.0.1", 1, kept=True),
                held("pod", "10.1.0.7", 2),
            ],
            3,
            "pod",
            id="the-heaviest-all-kept-the-next-gives-one-up",
        ),
        pytest.param(
            [held("judged", "10.0.0.1", 0, kept=True)], 1, None, id="all-kept-none-closed"
        ),
    ],
)
def test_make_room(live: list[Held[str]], limit: int, closed: str | None) -> None:
    assert make_room(live, limit) == closed


POD, OTHER_POD, KUBELET = "10.1.0.7", "10.1.0.8", "10.0.0.1"
FULL = [held("pod-1", POD, 1), held("pod-2", POD, 2), held("other", OTHER_POD, 3)]


@pytest.mark.parametrize(
    ("live", "limit", "source", "away"),
    [
        pytest.param(FULL, 3, POD, True, id="the-address-holding-the-most"),
        pytest.param(FULL, 3, OTHER_POD, False, id="an-address-holding-fewer"),
        pytest.param(FULL, 3, KUBELET, False, id="an-address-holding-none"),
        pytest.param(FULL, 4, POD, False, id="room-left"),
        pytest.param(FULL[1:], 2, OTHER_POD, True, id="a-tie"),
        pytest.param([], 0, KUBELET, False, id="nothing-held"),
    ],
)
def test_turned_away(live: list[Held[str]], limit: int, source: str, away: bool) -> None:
    assert turned_away(live, limit, source) is away


def test_a_group_of_callers_meets_its_share_too() -> None:
    """A tenant that makes ServiceAccounts is many users of one namespace."""
    shares = Shares(total=8, each=2, what="streams", each_group=3)
    assert [shares.take(f"sa-{i}", "evil") for i in range(3)] == [None] * 3
    assert shares.take("sa-9", "evil") == (
        "3 streams of evil are under way on this replica, its share; try again"
    )
    assert shares.take("alice", "team-a") is None
    shares.give_back("sa-0", "evil")
    assert shares.take("sa-9", "evil") is None


def test_a_flood_of_callers_keeps_the_buckets_of_4096_by_default() -> None:
    """A caller that names a new key each time (a token, a namespace) costs a bounded memory:
    past 4096 callers, the one seen least recently is forgotten and starts full again."""
    rates = Rates(per_second=0.0, burst=1)  # no refill: a spent bucket stays spent
    assert all(rates.take(caller, now=0.0) for caller in range(4096))
    assert not rates.take(0, now=0.0)  # all 4096 remembered, each spent (0 now seen again)
    assert rates.take(4096, now=0.0)  # one more: caller 1, seen least recently, goes
    assert rates.take(1, now=0.0)  # forgotten: full again
    assert not rates.take(0, now=0.0)  # seen again since: remembered
    assert not rates.take(4096, now=0.0)


# ---- FairQueue: slots handed out in turns ---------------------------------------------------


class Readers:
    """Callers of a FairQueue that take a slot, say so in `served` and hold it until the
    oldest holder is let go (`free_one`)."""

    def __init__(self, queue: FairQueue, wait: float = 30.0) -> None:
        self.queue, self.wait = queue, wait
        self.served: list[str] = []
        self.answers: dict[int, str | None] = {}
        self.holding: list[asyncio.Event] = []
        self.tasks: list[asyncio.Task[None]] = []

    def ask(
        self,
        who: str,
        group: str | None = None,
        gone: Callable[[], bool] = lambda: False,
        wait: float | None = None,
    ) -> int:
        number = len(self.tasks)
        read = self._read(number, who, group, gone, self.wait if wait is None else wait)
        self.tasks.append(asyncio.create_task(read))
        return number

    async def _read(
        self, number: int, who: str, group: str | None, gone: Callable[[], bool], wait: float
    ) -> None:
        refused = await self.queue.take(who, group, wait=wait, gone=gone)
        self.answers[number] = refused
        if refused is not None:
            return
        self.served.append(who)
        done = asyncio.Event()
        self.holding.append(done)
        await done.wait()
        self.queue.give_back(who, group)

    async def free_one(self) -> None:
        self.holding.pop(0).set()
        await settle()

    async def free_all(self) -> None:
        while self.holding:
            await self.free_one()
        await asyncio.gather(*self.tasks)


async def settle() -> None:
    """Let every task that can run, run."""
    for _ in range(20):
        await asyncio.sleep(0)


def fair(total: int, each: int, **kwargs: Any) -> FairQueue:
    return FairQueue(total, each, "reads", queued_each=4, queued_total=16, **kwargs)


def test_a_caller_asking_once_is_served_at_the_next_freed_slot_however_many_others_loop() -> None:
    """Two callers each holding a slot with three more waiting, then one asking once: the
    next freed slot is the newcomer's, and the others then take turns, not first come."""

    async def scenario() -> list[str]:
        readers = Readers(fair(total=2, each=1))
        for who in ("alice", "bob"):
            for _ in range(4):
                readers.ask(who)
        await settle()
        readers.ask("carol")
        await settle()
        assert readers.served == ["alice", "bob"]  # the rest wait
        await readers.free_all()
        return readers.served

    assert asyncio.run(scenario()) == ["alice", "bob", "carol", *["alice", "bob"] * 3]


def test_a_groups_many_callers_take_one_turn_between_the_others() -> None:
    """A tenant whose ServiceAccounts are many users waits as one namespace: a freed slot goes
    to the namespace served least recently, then to its user served least recently."""

    async def scenario() -> list[str]:
        readers = Readers(fair(total=1, each=1, each_group=1, queued_group=8))
        readers.ask("alice", "team-a")
        await settle()
        for i in range(3):
            readers.ask(f"sa-{i}", "evil")
        readers.ask("alice", "team-a")
        readers.ask("alice", "team-a")
        await settle()
        await readers.free_all()
        return readers.served

    assert asyncio.run(scenario()) == ["alice", "sa-0", "alice", "sa-1", "alice", "sa-2"]


def test_a_caller_waits_within_its_share_and_for_no_slot_past_it() -> None:
    """One caller at its share waits while a slot it may not take is free; another takes it."""

    async def scenario() -> tuple[list[str], int]:
        readers = Readers(fair(total=3, each=1))
        readers.ask("alice")
        readers.ask("alice")
        await settle()
        readers.ask("bob")
        await settle()
        served, alice_waiting = list(readers.served), readers.queue.queued("alice")
        await readers.free_all()
        return served, alice_waiting

    assert asyncio.run(scenario()) == (["alice", "bob"], 1)


def test_full_queues_refuse_at_once_and_say_whose() -> None:
    async def scenario() -> dict[int, str | None]:
        queue = FairQueue(
            1, 1, "reads", 1, queued_each=2, queued_group=3, queued_total=4, check_every=0.01
        )
        readers = Readers(queue)
        readers.ask("holder", "team-h")
        for who, group in [("sa-0", "evil"), ("sa-0", "evil"), ("sa-0", "evil")]:
            readers.ask(who, group)
        readers.ask("sa-1", "evil")
        readers.ask("sa-2", "evil")
        readers.ask("alice", "team-a")
        readers.ask("bob", "team-b")
        await settle()
        answers = dict(readers.answers)
        await readers.free_all()
        return answers

    answers = asyncio.run(scenario())
    assert answers == {
        0: None,
        3: "you have 2 reads waiting on this replica, your share; try again",
        5: "3 reads of evil are waiting on this replica, its share; try again",
        7: "4 reads are waiting on this replica; try again",
    }


def test_a_wait_ends_at_its_deadline_or_when_its_client_leaves_and_frees_its_place() -> None:
    async def scenario() -> tuple[dict[int, str | None], list[str], int]:
        readers = Readers(fair(total=1, each=1, check_every=0.01))
        left = False
        readers.ask("holder")
        await settle()
        late = readers.ask("late", wait=0.05)
        gone = readers.ask("gone", gone=lambda: left)
        await readers.tasks[late]  # its wait is over, the slot still held
        left = True
        await readers.tasks[gone]
        queued = readers.queue.queued("gone") + readers.queue.queued("late")
        readers.ask("next")
        await readers.free_all()
        return readers.answers, readers.served, queued

    answers, served, queued = asyncio.run(scenario())
    assert answers[1] == "no slot within 0.05s: this replica's 1 reads are under way; try again"
    assert answers[2] == "the client went away while its reads waited"
    assert queued == 0
    assert served == ["holder", "next"]


def test_a_cancelled_wait_leaves_the_queue_and_gives_back_a_slot_handed_to_it() -> None:
    async def scenario() -> tuple[int, int, str | None]:
        queue = fair(total=1, each=1)
        assert await queue.take("holder", wait=30) is None
        waiter = asyncio.create_task(queue.take("waiter", wait=30))
        handed = asyncio.create_task(queue.take("handed", wait=30))
        await settle()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        queued = queue.queued("waiter")
        queue.give_back("holder")  # the slot is handed over before "handed" runs again
        handed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await handed
        return queued, queue.held("handed"), await queue.take("last", wait=0)

    assert asyncio.run(scenario()) == (0, 0, None)


def test_a_served_wait_frees_its_place_in_the_queues_bound() -> None:
    """More waits served one after another than the whole queue holds at once: each still
    waits its turn rather than being refused as if every served wait were still queued."""

    async def scenario() -> tuple[list[int], list[str]]:
        queue = FairQueue(1, 1, "reads", queued_each=1, queued_total=2)
        readers = Readers(queue)
        readers.ask("holder")
        await settle()
        waiting = []
        for i in range(2 * queue.queued_total + 1):
            readers.ask(f"waiter-{i}")
            await settle()
            waiting.append(queue.queued(f"waiter-{i}"))
            await readers.free_one()  # the slot goes to the one waiting
        await readers.free_all()
        return waiting, readers.served

    waiting, served = asyncio.run(scenario())
    assert waiting == [1] * 5
    assert served == ["holder"] + [f"waiter-{i}" for i in range(5)]


async def waiting(queue: FairQueue, who: str, group: str) -> asyncio.Task[str | None]:
    """`who` (of `group`) asking for a slot of a full `queue`, once it waits in the queue."""
    task = asyncio.create_task(queue.take(who, group, wait=30))
    await settle()
    assert queue.queued(who, group) == 1
    return task


def test_a_freed_slot_skips_a_waiter_whose_group_holds_its_share() -> None:
    """Team-a, served least recently, holds its share with a read waiting: a slot freed by
    team-b goes to team-b's waiting read, the next freed one stays free, and team-a's read is
    served only once team-a gives one back."""

    async def scenario() -> None:
        queue = FairQueue(4, 2, "reads", 2, queued_each=4, queued_total=16)
        holding = [("a-0", "team-a"), ("a-1", "team-a"), ("b", "team-b"), ("b", "team-b")]
        for who, group in holding:  # team-a, then b, each at its share: the pool is full
            assert await queue.take(who, group, wait=0) is None
        a_2 = await waiting(queue, "a-2", "team-a")
        b_2 = await waiting(queue, "b-2", "team-b")
        queue.give_back("b", "team-b")
        await settle()
        assert b_2.done() and await b_2 is None
        assert (queue.held("a-2"), queue.queued("a-2", "team-a")) == (0, 1)
        queue.give_back("b", "team-b")
        await settle()
        assert (queue.held("a-2"), queue.queued("a-2", "team-a")) == (0, 1)  # stays free
        queue.give_back("a-0", "team-a")
        await settle()
        assert a_2.done() and await a_2 is None
        assert (queue.held("a-2"), queue.held("b-2")) == (1, 1)

    asyncio.run(scenario())


def test_a_freed_slot_skips_a_waiter_who_holds_its_share_elsewhere() -> None:
    """Carol holds her share in team-b and waits in team-c, a namespace never served: a freed
    slot goes to the next waiting read that may take it, the next freed one stays free, and
    carol's read in team-c is served once she gives back the one in team-b."""

    async def scenario() -> None:
        queue = FairQueue(2, 1, "reads", 2, queued_each=4, queued_total=16)
        assert await queue.take("alice", "team-a", wait=0) is None
        assert await queue.take("carol", "team-b", wait=0) is None
        carols = await waiting(queue, "carol", "team-c")
        bobs = await waiting(queue, "bob", "team-b")
        queue.give_back("alice", "team-a")
        await settle()
        assert bobs.done() and await bobs is None
        assert (queue.held("carol"), queue.queued("carol", "team-c")) == (1, 1)
        queue.give_back("bob", "team-b")
        await settle()
        assert (queue.held("carol"), queue.queued("carol", "team-c")) == (1, 1)  # stays free
        queue.give_back("carol", "team-b")
        await settle()
        assert carols.done() and await carols is None
        assert (queue.held("carol"), queue.held("bob")) == (1, 0)

    asyncio.run(scenario())


def test_take_each_takes_from_every_allowance_or_from_none() -> None:
    still = lambda: 0.0  # noqa: E731
    namespace, source = Rates(1.0, 1, clock=still), Rates(1.0, 3, clock=still)
    assert take_each((namespace, "a"), (source, "pod"))
    # refused by the namespace's: the source's keeps what it had
    assert not take_each((namespace, "a"), (source, "pod"))
    assert take_each((namespace, "b"), (source, "pod"))
    assert take_each((namespace, "c"), (source, "pod"))
    # refused by the source's: no bucket made, nothing taken, for the namespace it named
    assert not take_each((namespace, "d"), (source, "pod"))
    assert namespace.has("d") and "d" not in namespace._buckets


def test_an_allowance_spent_comes_back_with_time() -> None:
    now = [0.0]
    rates = Rates(2.0, 2, clock=lambda: now[0])
    assert take_each((rates, "a"), (rates, "b"))
    assert take_each((rates, "a"), (rates, "b"))
    assert not rates.has("a") and not take_each((rates, "a"), (rates, "b"))
    now[0] = 0.5  # one back for each at 2 a second
    assert rates.has("a") and take_each((rates, "a"), (rates, "b"))
    assert not rates.has("a")


def test_a_memory_full_forgets_the_oldest_of_the_group_holding_the_most() -> None:
    now = [0.0]
    memory: Remembered[str] = Remembered(4, clock=lambda: now[0])
    memory.note("quiet", "q")
    for i in range(10):
        now[0] += 1
        memory.note("noisy", f"n{i}")
    assert len(memory) == 4 and memory.holds("quiet", "q", 100)
    assert [memory.holds("noisy", f"n{i}", 100) for i in range(10)] == [False] * 7 + [True] * 3
    memory.note("noisy", "n9")  # noted again: still one key
    memory.note("other", "o")  # the group holding the most gives one up
    assert len(memory) == 4 and not memory.holds("noisy", "n7", 100)
    assert memory.holds("quiet", "q", 100) and memory.holds("other", "o", 100)
    assert not memory.holds("quiet", "q", 10)  # noted 10 s ago: not within 10 s
    assert not memory.holds("absent", "q", 100) and not memory.holds("quiet", "x", 100)
    with pytest.raises(ValueError):
        Remembered(0)


def test_a_memory_noted_again_keeps_a_key_longest() -> None:
    now = [0.0]
    memory: Remembered[str] = Remembered(2, clock=lambda: now[0])
    memory.note("g", "a")
    memory.note("g", "b")
    memory.note("g", "a")  # now the latest
    memory.note("g", "c")
    assert memory.holds("g", "a", 1) and not memory.holds("g", "b", 1) and len(memory) == 2


def test_a_memory_full_takes_a_group_down_no_further_than_the_one_noting() -> None:
    """On a tie the group noting forgets its own: one that notes many keeps another at as
    many as it holds itself, never fewer."""
    memory: Remembered[str] = Remembered(3)
    memory.note("victim", "v1")
    memory.note("victim", "v2")
    for i in range(50):  # at two each, a tie: the noisy forgets its own
        memory.note("noisy", f"n{i}")
    assert memory.holds("victim", "v1", 100) and memory.holds("victim", "v2", 100)
    assert [memory.holds("noisy", f"n{i}", 100) for i in (48, 49)] == [False, True]


def test_a_memory_full_forgets_keys_no_longer_asked_about_first() -> None:
    now = [0.0]
    memory: Remembered[str] = Remembered(3, clock=lambda: now[0])
    memory.note("a", "old", within=10)
    now[0] = 5
    memory.note("b", "b1", within=10)
    memory.note("b", "b2", within=10)
    now[0] = 11  # "old" is past the window: it goes, not b1, the oldest of the largest
    memory.note("c", "c1", within=10)
    assert len(memory) == 3 and not memory.holds("a", "old", 100)
    assert memory.holds("b", "b1", 10) and memory.holds("b", "b2", 10)


def test_a_key_noted_again_is_held_from_then() -> None:
    now = [0.0]
    memory: Remembered[str] = Remembered(4, clock=lambda: now[0])
    memory.note("g", "a")
    now[0] = 20
    memory.note("g", "a")
    now[0] = 25
    assert memory.holds("g", "a", 10)
