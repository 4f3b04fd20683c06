"""The whole-pass harness's own rules (tests/support/whole_pass.py): what a pass is said to
have posted."""

from __future__ import annotations

from typing import Any

from tests.support.memory_api import MemoryApi
from tests.support.whole_pass import event_keys, new_events


def event(name: str, namespace: str | None, reason: str) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": meta,
        "type": "Warning",
        "reason": reason,
        "involvedObject": {"name": "tj"},
    }


def test_a_passs_events_are_those_new_since_it_began_whatever_their_names() -> None:
    api = MemoryApi("c", [event("b.1", "ns", "Old"), event("cluster.1", None, "Cluster")])
    before = event_keys(api)
    api.put(event("a.1", "ns", "New"))  # named before the older one
    api.put(event("b.1", "other", "Elsewhere"))  # the older one's name, in another namespace
    assert sorted(new_events(api, before)) == [
        ("Warning", "Elsewhere", "tj"),
        ("Warning", "New", "tj"),
    ]
