"""The small LRU map (trainjob/lru.py) results of object versions are kept in."""

from __future__ import annotations

from trainjob.lru import LRU


def test_the_lru_keeps_its_size_and_drops_the_oldest() -> None:
    lru: LRU[int, str] = LRU(2)
    for n in range(3):
        assert lru.get_or_make(n, lambda n=n: str(n)) == str(n)  # type: ignore[misc]
    assert lru.get_or_make(2, lambda: "made again") == "2"
    assert len(lru) == 2 and lru.get_or_make(0, lambda: "again") == "again"


def test_a_read_or_a_write_makes_an_entry_the_newest() -> None:
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # now "b" is the oldest
    lru.put("c", 3)
    assert lru.get("b") is None and lru.get("a") == 1 and lru.get("c") == 3
    lru.put("a", 10)  # written again: newest, with its new value
    lru.put("d", 4)
    assert (lru.get("c"), lru.get("a"), lru.get("d")) == (None, 10, 4)
    assert len(lru) == 2


def test_a_value_made_is_kept_only_once_asked_for_again() -> None:
    made: list[str] = []

    def make(key: str) -> str:
        made.append(key)
        return key.upper()

    lru: LRU[str, str] = LRU(1)
    assert lru.get_or_make("x", lambda: make("x")) == "X"
    assert lru.get_or_make("x", lambda: make("x")) == "X"
    assert made == ["x"]


def test_a_value_asked_for_again_is_the_newest() -> None:
    lru: LRU[str, str] = LRU(2)
    lru.get_or_make("a", lambda: "A")
    lru.get_or_make("b", lambda: "B")
    lru.get_or_make("a", lambda: "made again")  # a hit: "b" is now the oldest
    lru.get_or_make("c", lambda: "C")
    assert lru.get("a") == "A" and lru.get("b") is None
