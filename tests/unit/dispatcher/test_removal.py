"""What a deleted TrainJob's pass deletes (dispatcher/decisions/removal.py), as a table: the
workers as the manager's watches show them -> the deletes, and the Warning after them."""

from __future__ import annotations

import pytest

from dispatcher.decisions.removal import Held, removal


def copy(kind: str, name: str, uid: str) -> dict:
    return {"kind": kind, "metadata": {"namespace": "ns", "name": name, "uid": uid}}


TJ, WL = copy("TrainJob", "tj", "u-tj"), copy("Workload", "trainjob-tj-1", "u-wl")


@pytest.mark.parametrize(
    ("held", "holders", "failed", "deletes", "warning"),
    [
        pytest.param(
            [Held("w1", True, (TJ, WL)), Held("w2", True, (WL,))],
            {"w1", "w2"},
            [],
            [("w1", "TrainJob", "u-tj"), ("w1", "Workload", "u-wl"), ("w2", "Workload", "u-wl")],
            None,
            id="every-copy-each-by-the-uid-seen-its-trainjob-first",
        ),
        pytest.param(
            [Held("w1", True, ()), Held("w2", True, ())], {"w1"}, [], [], None, id="none-seen"
        ),
        pytest.param(
            [Held("w1", False, (TJ,)), Held("w2", True, (WL,))],
            {"w1", "w2"},
            [],
            [("w2", "Workload", "u-wl")],
            "workers w1 unreachable",
            id="nothing-sent-where-unreachable",
        ),
        pytest.param(
            [Held("w1", False, (TJ,)), Held("w2", True, (WL,))],
            {"w2"},
            [],
            [("w2", "Workload", "u-wl")],
            None,
            id="an-unreachable-worker-never-sent-to-is-not-named",
        ),
        pytest.param(
            [Held("w1", False, (TJ,))],
            {"w1"},
            ["w1"],
            [],
            "workers w1 unreachable",
            id="an-unreachable-holder-is-said-unreachable-only",
        ),
        pytest.param(
            [Held("w1", True, (TJ,)), Held("w2", True, (WL,)), Held("w3", False, ())],
            {"w1", "w3"},
            ["w1", "w2"],
            [("w1", "TrainJob", "u-tj"), ("w2", "Workload", "u-wl")],
            "workers w3 unreachable and the deletes failed on workers w1",
            id="a-holder-whose-delete-failed-is-named-beside-the-unreachable",
        ),
    ],
)
def test_removal(
    held: list[Held],
    holders: set[str],
    failed: list[str],
    deletes: list[tuple[str, str, str]],
    warning: str | None,
) -> None:
    plan = removal(held, holders, 60)
    assert [(a.cluster, a.obj["kind"], a.obj["metadata"]["uid"]) for a in plan.deletes] == deletes
    assert {a.verb for a in plan.deletes} <= {"delete"}
    assert not any(a.capture_tails for a in plan.deletes)
    said = plan.deferred(failed)
    if warning is None:
        assert said is None
    else:
        assert said is not None and said.startswith(warning + ":"), said
        assert ("failed" in said) == ("failed" in warning), said
        assert said.endswith("once the worker is back (every 60 s)")


def test_with_the_garbage_collector_off_the_warning_says_nothing_removes_them() -> None:
    plan = removal([Held("w1", False, (TJ,))], {"w1"}, 0)
    assert plan.deferred([]) == (
        "workers w1 unreachable: its copies there stay; nothing removes them (the garbage "
        "collector is off: gcInterval 0)"
    )
