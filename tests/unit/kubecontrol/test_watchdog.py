"""The watch-cache watchdog's decision (pure): frozen only when wrong for a whole period."""

from __future__ import annotations

from kubecontrol.watchdog import stale_keys

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
