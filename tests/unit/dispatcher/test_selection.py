"""A TrainJob's own choice of clusters (dispatcher/decisions/selection.py)."""

from __future__ import annotations

import time

import pytest

from clusters.helpers.waiting import sooner_than
from dispatcher.decisions import selection
from dispatcher.decisions.selection import (
    CLUSTER_NAMES_ANNOTATION,
    CLUSTER_SELECTOR_ANNOTATION,
    SelectionError,
    parse_selector,
    selection_of,
)

LABELS = {"region": "eu", "tier": "gold", "gpu": "a100"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("region=eu", True),
        ("region==eu", True),
        ("region=us", False),
        ("region!=us", True),
        ("zone!=a", True),  # a missing key is "not equal"
        ("tier in (gold, silver)", True),
        ("tier notin (gold,silver)", False),
        ("gpu", True),
        ("!gpu", False),
        ("!spot", True),
        ("region=eu,tier in (gold),!spot", True),
        ("region=eu, tier in (silver)", False),
        ("example.com/pool", False),
        # spaces wherever kubectl's parser takes them
        ("region = eu", True),
        ("region != us", True),
        ("region == eu", True),
        ("tier in(gold)", True),
        ("tier notin(gold)", False),
        ("! gpu", False),
        ("!  spot", True),
        ("tier in ( gold , silver )", True),
    ],
)
def test_kubectl_selector_syntax(selector: str, matches: bool) -> None:
    assert all(r.matches(LABELS) for r in parse_selector(selector)) is matches


@pytest.mark.parametrize(
    ("selector", "said"),
    [
        ("", "empty selector"),
        ("tier in (gold", "cannot read 'tier in (gold'"),
        ("!tier in (gold)", "'!' goes with a key alone"),
        ("Bad Key=x", "cannot read 'Bad Key=x'"),
        ("-bad=x", "'-bad' is not a label key"),
        ("k=v v", "cannot read 'k=v v'"),
        ("k in (-x)", "'-x' is not a label value"),
    ],
)
def test_a_bad_selector_is_refused_naming_the_annotation(selector: str, said: str) -> None:
    with pytest.raises(SelectionError) as err:
        selection_of({CLUSTER_SELECTOR_ANNOTATION: selector})
    assert str(err.value).startswith(f"metadata.annotations[{CLUSTER_SELECTOR_ANNOTATION}]: ")
    assert said in str(err.value)


@pytest.mark.parametrize("names", ["", " , ", "Worker1", "w1,,w2", "w_1"])
def test_bad_cluster_names_are_refused_naming_the_annotation(names: str) -> None:
    with pytest.raises(SelectionError, match=rf"annotations\[{CLUSTER_NAMES_ANNOTATION}\]"):
        selection_of({CLUSTER_NAMES_ANNOTATION: names})


def test_names_and_selector_must_both_allow_a_cluster() -> None:
    choice = selection_of(
        {CLUSTER_NAMES_ANNOTATION: "w1, w2", CLUSTER_SELECTOR_ANNOTATION: "region=eu"}
    )
    assert choice is not None
    assert choice.allows("w1", {"region": "eu"})
    assert not choice.allows("w1", {"region": "us"})
    assert not choice.allows("w3", {"region": "eu"})
    assert choice.text == (
        "kueue.x-k8s.io/multikueue-cluster-names='w1, w2', "
        "trainjob.dev/cluster-selector='region=eu'"
    )


def test_no_annotation_is_no_choice() -> None:
    assert selection_of({"other": "x"}) is None
    assert selection_of(None) is None


def test_a_selector_longer_than_a_selector_is_refused_before_it_is_matched() -> None:
    """A tenant's annotation of "a", 250,000 spaces and "b" made the selector's patterns
    backtrack for minutes with the interpreter held (4.5 s at 32,000 spaces), in the
    webhook and on every pass. Refused before any pattern runs."""
    with pytest.raises(SelectionError, match="250002 characters, over the 4096"):
        selection_of({CLUSTER_SELECTOR_ANNOTATION: "a" + " " * 250_000 + "b"})
    long_but_fine = ",".join(f"k{i}=v" for i in range(500))  # 3,389 characters
    assert len(selection_of({CLUSTER_SELECTOR_ANNOTATION: long_but_fine}).selector or []) == 500


@pytest.mark.parametrize(
    "text",
    [
        "a" + " " * 128_000 + "x",  # a key, spaces, then neither an operator nor `in`
        "!" + " " * 128_000 + "x" + " " * 128_000 + "y",
        "a" + " " * 128_000 + "in" + " " * 128_000 + "x",
        "k" + " " * 128_000 + "=" + " " * 128_000 + "v w",
    ],
    ids=["key-spaces-letter", "not-spaces", "in-without-parentheses", "equals-two-values"],
)
def test_a_requirement_is_matched_in_time_linear_in_its_length(text: str) -> None:
    """Under the length cap, an annotation is still read on every pass of its TrainJob (it may
    be edited after admission): with `\\s*` on both sides of an optional part, a key, 4,000
    spaces and a letter cost 0.1 s a pass. The patterns themselves, past the cap: each of
    these 128-256 KiB requirements is read (or refused) in time linear in its length."""
    started = time.monotonic()
    for pattern in (selection._EQUALS, selection._SET):
        pattern.match(text.strip())
    sooner_than(
        time.monotonic() - started,
        4.5,
        "the patterns that backtracked (4.5-4.8 s over 32,000 spaces, quadratic: over a minute "
        "over 128,000)",
    )
