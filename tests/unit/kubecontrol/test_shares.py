"""Per-caller shares of a pool, and which connection makes room for a new one."""

from __future__ import annotations

import pytest

from kubecontrol.shares import Held, Rates, Shares, make_room, turned_away


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


def held(name: str, source: str, since: float, idle: bool = False) -> Held[str]:
    return Held(name, source, idle, since)


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
