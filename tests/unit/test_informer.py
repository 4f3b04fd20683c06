"""The informer's second index (group key -> objects): kept right through puts and drops.
No API is reached: the cache is fed as a list or a watch would feed it."""

from __future__ import annotations

from kubernetes import client

from trainjob import constants as c
from trainjob.informer import Informer


def _pod(name: str, owner: str, phase: str = "Running") -> dict:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {"owner": owner}},
        "status": {"phase": phase},
    }


def test_objects_move_between_groups_and_empty_groups_go() -> None:
    informer = Informer(
        client.ApiClient(), c.POD, group_by=lambda o: o["metadata"]["labels"]["owner"]
    )
    informer._put(("ns", "a"), _pod("a", "x"))
    informer._put(("ns", "b"), _pod("b", "x"))
    informer._put(("ns", "a"), _pod("a", "x", "Succeeded"))  # a change stays one member
    assert sorted(p["status"]["phase"] for p in informer.group("x")) == ["Running", "Succeeded"]
    informer._put(("ns", "b"), _pod("b", "y"))  # relabelled: it leaves its old group
    assert [p["metadata"]["name"] for p in informer.group("x")] == ["a"]
    assert [p["metadata"]["name"] for p in informer.group("y")] == ["b"]
    informer._drop(("ns", "a"))
    informer._drop(("ns", "missing"))
    assert informer.group("x") == [] and "x" not in informer._groups
    assert informer.get(("ns", "b")) is not None and informer.get(("ns", "a")) is None


def test_without_group_by_there_are_no_groups() -> None:
    informer = Informer(client.ApiClient(), c.POD)
    informer._put(("ns", "a"), _pod("a", "x"))
    assert informer.group("x") == [] and informer.items() == [_pod("a", "x")]
