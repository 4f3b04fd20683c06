"""The informer's second index (group key -> objects): kept right through puts and drops;
what its transform keeps, and what it keeps of an object the transform fails on; the strings
its objects share. No API is
reached: the cache is fed as a list or a watch would feed it."""

from __future__ import annotations

import logging
from collections.abc import Callable

import orjson
import pytest
from kubernetes import client

from kubecontrol import informer as informers
from kubecontrol.informer import STRINGS, Informer, Strings, same_apart_from_version
from tests.support.builders import edit
from trainjob_api import constants as c


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


def test_an_object_in_several_groups_leaves_each_it_no_longer_names() -> None:
    informer = Informer(
        client.ApiClient(), c.POD, groups_of=lambda o: o["metadata"]["labels"]["owner"].split(",")
    )
    informer._put(("ns", "a"), _pod("a", "x,y"))
    informer._put(("ns", "b"), _pod("b", "y"))
    assert [p["metadata"]["name"] for p in informer.group("x")] == ["a"]
    assert sorted(p["metadata"]["name"] for p in informer.group("y")) == ["a", "b"]
    informer._put(("ns", "a"), _pod("a", "y,z"))  # out of x, still in y, new in z
    assert "x" not in informer._groups
    assert sorted(p["metadata"]["name"] for p in informer.group("y")) == ["a", "b"]
    assert [p["metadata"]["name"] for p in informer.group("z")] == ["a"]
    informer._drop(("ns", "a"))
    assert sorted(informer._groups) == ["y"]
    assert [p["metadata"]["name"] for p in informer.group("y")] == ["b"]


def _owners(obj: dict) -> list[str]:
    owner = obj["metadata"]["labels"]["owner"]
    if owner == "boom":
        raise ValueError("an index function meets a shape it did not foresee")
    return [owner]


def test_an_object_the_index_fails_on_is_filed_under_no_group_and_the_cache_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by a hostile review: an index function that raised on one object raised out of
    the list or the watch, and every list and watch after failed on it again; the cache
    stopped for every object of the kind. Now it is kept, filed under no group, and said."""
    informer = Informer(client.ApiClient(), c.POD, groups_of=_owners)
    with caplog.at_level(logging.ERROR, logger="kubecontrol.informer"):
        informer._put(("ns", "a"), _pod("a", "x"))
        informer._put(("ns", "b"), _pod("b", "boom"))
        informer._put(("ns", "a"), _pod("a", "boom"))  # it leaves x, joins none
        informer._put(("ns", "b"), _pod("b", "x"))  # and back: filed again
        informer._drop(("ns", "a"))
    assert [p["metadata"]["name"] for p in informer.group("x")] == ["b"]
    assert sorted(informer._groups) == ["x"]
    assert informer.get(("ns", "b")) is not None
    assert {r.getMessage() for r in caplog.records} == {
        "index failed: the object is filed under no group"
    }


def test_without_group_by_there_are_no_groups() -> None:
    informer = Informer(client.ApiClient(), c.POD)
    informer._put(("ns", "a"), _pod("a", "x"))
    assert informer.group("x") == [] and informer.items() == [_pod("a", "x")]


class _Events:
    """Stands in for the API client's watch: hands over the events given, once."""

    def __init__(self, events: list[dict]) -> None:
        self.events = events

    def watch(self, path: str, query: dict, on_event: Callable[[dict], bool], **_: object) -> None:
        for event in self.events:
            if not on_event(event):
                return


def _job(version: str, phase: str, node: str, name: str = "a", **meta: object) -> dict:
    """An object `name` at `version`, in `phase` on `node`; more metadata fields `meta` after."""
    meta = {"name": name, "namespace": "ns", "resourceVersion": version, **meta}
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def test_a_change_the_transform_drops_updates_the_cache_but_calls_nobody() -> None:
    seen: list[tuple[str, str]] = []
    watch = _Events(
        [
            {"type": "ADDED", "object": _job("1", "Pending", "")},
            {"type": "MODIFIED", "object": _job("2", "Pending", "n1")},  # only the spec
        ]
    )
    informer = Informer(
        watch,  # type: ignore[arg-type]
        c.POD,
        lambda t, o: seen.append((t, o["metadata"]["resourceVersion"])),
        transform=lambda o: {"metadata": o["metadata"], "status": o["status"]},
    )
    assert informer._watch("0") == "2"
    assert seen == [("ADDED", "1")]
    assert informer.get(("ns", "a")) == {
        "metadata": _job("2", "", "")["metadata"],
        "status": {"phase": "Pending"},
    }
    watch.events = [
        {"type": "MODIFIED", "object": _job("3", "Running", "n1")},
        {"type": "MODIFIED", "object": _job("4", "Running", "n2")},
        {"type": "DELETED", "object": _job("5", "Running", "n2")},
    ]
    assert informer._watch("2") == "5"
    assert seen == [("ADDED", "1"), ("MODIFIED", "3"), ("DELETED", "5")]
    assert informer.get(("ns", "a")) is None


def test_an_object_no_longer_kept_leaves_as_if_deleted_and_one_never_kept_calls_nobody() -> None:
    seen: list[tuple[str, str]] = []
    kept, other = _job("1", "Running", "n1"), _job("2", "Running", "n1", "b")
    watch = _Events(
        [
            {"type": "ADDED", "object": kept},
            {"type": "ADDED", "object": other},  # never kept: nothing
            {"type": "MODIFIED", "object": _job("3", "Running", "")},  # no longer kept
            {"type": "MODIFIED", "object": _job("4", "Running", "n2")},  # kept again
        ]
    )
    informer = Informer(
        watch,  # type: ignore[arg-type]
        c.POD,
        lambda t, o: seen.append((t, o["metadata"]["resourceVersion"])),
        keep=lambda o: o["metadata"]["name"] == "a" and bool(o["spec"]["nodeName"]),
    )
    assert informer._watch("0") == "4"
    # It leaves as it was held (its handler finds whom it concerned): the version before.
    assert seen == [("ADDED", "1"), ("DELETED", "1"), ("MODIFIED", "4")]
    assert [o["metadata"]["resourceVersion"] for o in informer.items()] == ["4"]
    # The deletion of one never kept is no event.
    watch.events = [{"type": "DELETED", "object": other}]
    assert informer._watch("4") == "2" and len(seen) == 3


class _List:
    """Stands in for the API client's list: one page of the objects given."""

    def __init__(self, items: list[dict]) -> None:
        self.items = items

    def request(self, method: str, path: str, **_: object) -> bytes:
        return orjson.dumps({"metadata": {"resourceVersion": "9"}, "items": self.items})


def test_a_list_keeps_only_what_the_informer_keeps() -> None:
    kept, other = _job("1", "Running", "n1"), _job("2", "Running", "", "b")
    informer = Informer(
        _List([kept, other]),  # type: ignore[arg-type]
        c.POD,
        keep=lambda o: bool(o["spec"]["nodeName"]),
    )
    assert informer.list_now()
    assert [o["metadata"]["name"] for o in informer.items()] == ["a"]


def test_same_apart_from_version() -> None:
    a = _job("1", "Running", "n1")
    assert same_apart_from_version(a, _job("2", "Running", "n1"))
    assert not same_apart_from_version(a, _job("2", "Running", "n2"))
    assert not same_apart_from_version(None, a)
    b = _job("2", "Running", "n1", labels={"x": "y"})
    assert not same_apart_from_version(a, b)


def _fails_on_b(obj: dict) -> dict:
    """A transform with a bug: it fails on the object named b."""
    if obj["metadata"]["name"] == "b":
        raise KeyError("spec")
    return {"metadata": obj["metadata"], "status": obj["status"]}


def test_an_object_the_transform_fails_on_is_kept_whole_and_the_cache_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One object a transform cannot digest neither stops a list nor a watch (each would fail
    again on it, and the cache would stop for every object of its kind): it is kept whole
    but its managedFields, and the failure logged; the others are digested."""
    odd = _job("2", "Running", "n1", "b", managedFields=[{"manager": "x"}])
    informer = Informer(
        _List([_job("1", "Running", "n1"), odd]),  # type: ignore[arg-type]
        c.POD,
        transform=_fails_on_b,
    )
    with caplog.at_level(logging.ERROR, logger="kubecontrol.informer"):
        assert informer.list_now()
    assert informer.get(("ns", "a")) == {
        "metadata": _job("1", "", "")["metadata"], "status": {"phase": "Running"}
    }  # fmt: skip
    whole = _job("2", "Running", "n1", "b")
    assert informer.get(("ns", "b")) == {**whole, "apiVersion": "v1", "kind": "Pod"}
    assert [r.getMessage() for r in caplog.records] == [
        "transform failed: the object is kept as its fallback keeps it"
    ]
    later = {**_job("3", "Pending", ""), "metadata": {**odd["metadata"], "resourceVersion": "3"}}
    watch = _Events(
        [
            {"type": "MODIFIED", "object": later},
            {"type": "ADDED", "object": _job("4", "Pending", "")},
        ]
    )
    informer._api = watch  # type: ignore[assignment]
    assert informer._watch("2") == "4"
    assert informer.get(("ns", "b"))["status"] == {"phase": "Pending"}
    assert informer.get(("ns", "a"))["metadata"]["resourceVersion"] == "4"


def _script(n: int) -> str:
    """A long string made afresh at each call (never a constant the compiler shares)."""
    return "".join(f"print({i})\n" for i in range(n))


def test_objects_a_list_and_a_watch_bring_in_hold_one_instance_of_each_string() -> None:
    a, b = _job("1", "Running", "n1"), _job("1", "Running", "n1", "b")
    for obj in (a, b):
        edit(obj).spec(containers=[{"command": ["sh", "-c", _script(500)]}])
    informer = Informer(_List([a, b]), c.POD)  # type: ignore[arg-type]
    assert informer.list_now()
    held_a, held_b = informer.get(("ns", "a")), informer.get(("ns", "b"))
    assert (
        held_a["spec"]["containers"][0]["command"][2]
        is (held_b["spec"]["containers"][0]["command"][2])
    )
    assert held_a["status"]["phase"] is held_b["status"]["phase"]
    later = _job("2", "Running", "n2")
    edit(later).spec(containers=[{"command": ["sh", "-c", _script(500)]}])
    informer._api = _Events([{"type": "MODIFIED", "object": later}])  # type: ignore[assignment]
    assert informer._watch("1") == "2"
    assert (
        informer.get(("ns", "a"))["spec"]["containers"][0]["command"][2]
        is (held_b["spec"]["containers"][0]["command"][2])
    )
    assert informer.get(("ns", "a"))["spec"]["nodeName"] == "n2"


def test_a_string_goes_from_the_table_once_no_object_holds_it() -> None:
    strings = Strings()
    kept, dropped = {"script": _script(300) + "kept"}, {"script": _script(300) + "dropped"}
    strings.share(kept)
    strings.share(dropped)
    assert len(strings) == 2
    del dropped
    strings._sweep()
    assert len(strings) == 1
    again = {"script": _script(300) + "kept"}
    strings.share(again)
    assert again["script"] is kept["script"]  # the one held is still the one shared


def test_the_table_is_swept_as_it_grows_so_what_is_gone_does_not_pile_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(informers, "SWEEP_SLACK", 10)
    strings = Strings()
    held = []
    for i in range(1000):  # each object a tenant writes anew, its old version gone
        obj = {"annotation": f"{i}-{_script(3)}"}
        strings.share(obj)
        if i % 100 == 0:
            held.append(obj)
    assert len(strings) <= 2 * len(held) + 10 + 1
    assert all(h["annotation"] in strings._table for h in held)


def test_a_large_value_rewritten_again_and_again_is_swept_by_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(informers, "SWEEP_SLACK_CHARS", 100_000)
    strings = Strings()
    for i in range(50):  # one annotation of 20,000 characters, a new one each time
        strings.share({"annotation": f"{i:04d}" + "x" * 20_000})
    assert len(strings) <= 6  # entries alone would never have called for a sweep


def test_an_object_shares_a_bounded_number_of_its_strings() -> None:
    strings = Strings()
    strings.share({"args": [f"{i}-x" for i in range(10_000)]})  # the first ones only
    assert len(strings) == informers.SHARED_PER_OBJECT - 1
    wide = Strings()  # the values it goes through count, containers too: the work is bounded
    wide.share({"env": [{"name": f"{i}-x"} for i in range(10_000)], "z": "after"})
    assert len(wide) < informers.SHARED_PER_OBJECT


def test_the_informers_table_holds_no_object_once_its_cache_dropped_it() -> None:
    job = _job("1", "Running", "n1")
    edit(job).spec(tenant=_script(700) + "tenant")
    informer = Informer(_List([job]), c.POD)  # type: ignore[arg-type]
    assert informer.list_now()
    assert job["spec"]["tenant"] in STRINGS._table
    informer._api = _Events([{"type": "DELETED", "object": _job("2", "Running", "n1")}])  # type: ignore[assignment]
    assert informer._watch("1") == "2" and informer.get(("ns", "a")) is None
    STRINGS._sweep()
    assert job["spec"]["tenant"] not in STRINGS._table


def test_sharing_reaches_any_depth_and_leaves_what_is_not_json_alone() -> None:
    deep: dict = {}
    node = deep
    for _ in range(3000):  # deeper than the interpreter's recursion limit
        node["next"] = {}
        node = node["next"]
    node["leaf"], node["list"] = _script(40), [_script(40), 1, None, [_script(40)]]
    strings = Strings()
    strings.share(deep)
    assert node["leaf"] is node["list"][0] is node["list"][3][0]
    held = (_script(41),)  # a value the table does not hold: a tuple is not JSON
    strings.share(held)
    strings.share("x")
    assert len(strings) == 1 and held[0] not in strings._table
