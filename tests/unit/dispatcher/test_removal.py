"""Which copies are deleted (dispatcher/decisions/removal.py), as tables: for a deleted
TrainJob, the workers as the manager's watches show them -> the deletes, and the Warning after
them; for the garbage collector's sweep, those workers and the manager's objects -> the deletes
of the orphans."""

from __future__ import annotations

import pytest

from dispatcher.decisions.decide import Guard
from dispatcher.decisions.removal import SWEEP_DELETES_PER_WORKER, Held, _in_turn, orphans, removal
from tests.support.builders import edit
from trainjob_api import constants as c
from trainjob_api.views import ObjectView


def copy(
    kind: str, name: str, uid: str, made_for: str | None = None, namespace: str = "ns"
) -> dict:
    """A copy as a remote watch keeps it; `made_for`: the manager object's UID it names."""
    meta: dict = {"namespace": namespace, "name": name, "uid": uid, "resourceVersion": "5"}
    if made_for is not None:
        meta["annotations"] = {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: made_for}
    return {"kind": kind, "metadata": meta}


TJ, WL = copy("TrainJob", "tj", "u-tj"), copy("Workload", "trainjob-tj-1", "u-wl")


def guarded(deletes: list[tuple[str, str, str]]) -> list[tuple[str, str, Guard]]:
    return [(cluster, kind, Guard(uid)) for cluster, kind, uid in deletes]


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
    # each guarded by the UID seen alone (a version moved since deletes it all the same)
    assert [(a.cluster, a.obj["kind"], a.guard) for a in plan.deletes] == guarded(deletes)
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


def being_deleted(name: str, uid: str) -> dict:
    """A TrainJob copy whose delete a finalizer holds."""
    return edit(copy("TrainJob", name, uid, "m1")).deleting("2026-12-05T10:00:00Z").obj()


class Manager:
    """The manager's caches: TrainJobs and Workloads by name, as their UID, all in namespace
    "ns" (a name in another namespace is another object)."""

    def __init__(self, trainjobs: dict[str, str], workloads: dict[str, str]) -> None:
        self.trainjobs, self.workloads = trainjobs, workloads

    def trainjob(self, namespace: str, name: str) -> ObjectView | None:
        return _named(namespace, name, self.trainjobs.get(name) if namespace == "ns" else None)

    def workload(self, namespace: str, name: str) -> ObjectView | None:
        return _named(namespace, name, self.workloads.get(name) if namespace == "ns" else None)


def _named(namespace: str, name: str, uid: str | None) -> ObjectView | None:
    meta = {"namespace": namespace, "name": name, "uid": uid}
    return None if uid is None else ObjectView({"metadata": meta})


@pytest.mark.parametrize(
    ("held", "trainjobs", "workloads", "deletes"),
    [
        pytest.param(
            [Held("w1", True, (copy("TrainJob", "gone", "u1", "m1"),))],
            {},
            {},
            [("w1", "TrainJob", "u1")],
            id="a-copy-whose-manager-object-is-gone-by-the-uid-seen",
        ),
        pytest.param(
            [Held("w1", True, (copy("Workload", "wl", "u1", "m1"),))],
            {},
            {},
            [("w1", "Workload", "u1")],
            id="a-workload-copy-whose-manager-workload-is-gone",
        ),
        pytest.param(
            [
                Held(
                    "w1",
                    True,
                    (copy("TrainJob", "tj", "u1", "m1"), copy("TrainJob", "new", "u2", "m-old")),
                )
            ],
            {"tj": "m1", "new": "m-new"},
            {},
            [("w1", "TrainJob", "u2")],
            id="kept-while-its-object-is-there-deleted-once-replaced",
        ),
        pytest.param(
            [
                Held(
                    "w1",
                    True,
                    (copy("Workload", "wl", "u1", "w1"), copy("Workload", "old", "u2", "w-old")),
                )
            ],
            {"wl": "w1", "old": "w-old"},  # TrainJobs of those names: not what a Workload's is
            {"wl": "w1", "old": "w-new"},
            [("w1", "Workload", "u2")],
            id="a-workload-copy-is-judged-by-the-manager-workload",
        ),
        pytest.param(
            [Held("w1", True, (copy("TrainJob", "tj", "u1"),))],
            {"tj": "m1"},
            {},
            [],
            id="a-copy-naming-no-origin-uid-is-kept-while-a-namesake-is-there",
        ),
        pytest.param(
            [
                Held(
                    "w1",
                    True,
                    (
                        copy("TrainJob", "a", "u1", "m1"),
                        copy("TrainJob", "kept", "u2", "m2"),
                        copy("Workload", "b", "u3", "m3"),
                    ),
                ),
                Held("w2", True, (copy("Workload", "c", "u4", "m4"),)),
            ],
            {"kept": "m2"},
            {},
            [("w1", "TrainJob", "u1"), ("w1", "Workload", "u3"), ("w2", "Workload", "u4")],
            id="every-orphan-in-the-order-held",
        ),
        pytest.param(
            [Held("w1", True, (copy("TrainJob", "tj", "u1", "m1", namespace="other"),))],
            {"tj": "m1"},  # in "ns": not the object the copy in "other" was made for
            {},
            [("w1", "TrainJob", "u1")],
            id="looked-for-in-its-own-namespace",
        ),
        pytest.param(
            [Held("w1", True, (being_deleted("gone", "u1"), copy("Workload", "wl", "u2", "m")))],
            {},
            {},
            [("w1", "Workload", "u2")],
            id="a-copy-already-being-deleted-is-not-deleted-again",
        ),
        pytest.param(
            [
                Held("w1", False, (copy("TrainJob", "gone", "u1", "m1"),)),
                Held("w2", True, (copy("TrainJob", "gone", "u2", "m1"),)),
            ],
            {},
            {},
            [("w2", "TrainJob", "u2")],
            id="nothing-planned-on-a-worker-not-connected",
        ),
    ],
)
def test_orphans(
    held: list[Held],
    trainjobs: dict[str, str],
    workloads: dict[str, str],
    deletes: list[tuple[str, str, str]],
) -> None:
    planned = orphans(held, Manager(trainjobs, workloads))
    assert [(a.cluster, a.obj["kind"], a.guard) for a in planned] == guarded(deletes)
    assert {a.verb for a in planned} <= {"delete"}
    assert not any(a.capture_tails for a in planned)


def test_a_sweep_sends_a_worker_at_most_its_bound_of_deletes_the_rest_next_time() -> None:
    over = SWEEP_DELETES_PER_WORKER + 3

    def copies(kind: str, prefix: str, count: int) -> tuple[dict, ...]:
        return tuple(copy(kind, f"{prefix}{i}", f"{prefix}-u{i}", "m") for i in range(count))

    held = [
        Held("w1", True, copies("TrainJob", "a", over)),
        Held("w2", True, copies("Workload", "b", over)),
        Held("w3", True, copies("Workload", "c", 3)),
    ]
    planned = orphans(held, Manager({}, {}))
    on = [a.cluster for a in planned]
    # each worker its own bound
    assert (on.count("w1"), on.count("w2"), on.count("w3")) == (SWEEP_DELETES_PER_WORKER,) * 2 + (
        3,
    )
    assert [a.obj["metadata"]["uid"] for a in planned][:2] == ["a-u0", "a-u1"]  # the watch's order


def test_over_the_bound_each_namespace_takes_its_turn() -> None:
    """A namespace of thousands of orphans does not hold back another's: over the bound the
    deletes are taken from each namespace in turn."""
    flood = tuple(
        copy("TrainJob", f"f{i}", f"f-u{i}", "m", namespace="flood")
        for i in range(SWEEP_DELETES_PER_WORKER + 100)
    )
    victim = copy("Workload", "wl", "v-u", "m", namespace="victim")
    planned = orphans([Held("w1", True, (*flood, victim))], Manager({}, {}))
    uids = [a.obj["metadata"]["uid"] for a in planned]
    assert len(uids) == SWEEP_DELETES_PER_WORKER and "v-u" in uids
    assert uids[:3] == ["f-u0", "v-u", "f-u1"]  # in turn, each namespace in its own order


def test_in_turn_takes_each_namespace_a_round_whatever_the_kind_and_stops_at_the_bound() -> None:
    def copy(kind: str, namespace: str, name: str) -> dict[str, object]:
        return {"kind": kind, "metadata": {"namespace": namespace, "name": name}}

    a = [copy("TrainJob", "a", "a1"), copy("Workload", "a", "a2"), copy("TrainJob", "a", "a3")]
    b = [copy("Workload", "b", "b1"), copy("Workload", "b", "b2"), copy("TrainJob", "b", "b3")]
    c_ = [copy("Workload", "c", "c1")]
    chosen = _in_turn([*a, *b, *c_], 4)  # a bound that ends mid-round
    assert [x["metadata"]["name"] for x in chosen] == ["a1", "b1", "c1", "a2"]
    assert _in_turn([*a, *c_], 5) == [*a, *c_]  # under the bound: all, in order
