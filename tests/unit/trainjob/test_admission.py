"""The JSON patch the TrainJob webhooks answer with (trainjob/admission.py: trainjob_patch)."""

from __future__ import annotations

from typing import Any

from trainjob.admission import Admitted, trainjob_patch

Dict = dict[str, Any]


def admitted(body: Dict) -> Admitted:
    return Admitted({"object": body, "namespace": "ns"})


def test_spec_fields_and_finalizers_become_add_operations() -> None:
    obj = {"metadata": {"name": "tj"}, "spec": {"suspend": False}}
    patches = [{"manager": "m", "time": "t"}]
    assert trainjob_patch(
        admitted(obj), {"suspend": True, "runtimePatches": patches}, ["trainjob.dev/x"]
    ) == (
        {"op": "add", "path": "/spec/suspend", "value": True},
        {"op": "add", "path": "/spec/runtimePatches", "value": patches},
        {"op": "add", "path": "/metadata/finalizers", "value": ["trainjob.dev/x"]},
    )


def test_a_missing_spec_is_added_whole_and_keys_are_escaped() -> None:
    assert trainjob_patch(admitted({"metadata": {}}), {"suspend": True}) == (
        {"op": "add", "path": "/spec", "value": {"suspend": True}},
    )
    assert trainjob_patch(admitted({"spec": {}}), {"a/b~c": 1}) == (
        {"op": "add", "path": "/spec/a~1b~0c", "value": 1},
    )
    assert trainjob_patch(admitted({"spec": {}}), {}) == ()


def test_a_defaulted_queue_label_creates_the_labels_map_only_when_it_is_missing() -> None:
    # An "add" under /metadata/labels fails on an object without labels (RFC 6902: the
    # parent must exist), so the map comes first; with labels there, it would wipe them.
    label = "/metadata/labels/kueue.x-k8s.io~1queue-name"
    assert trainjob_patch(
        admitted({"metadata": {"name": "tj"}, "spec": {}}), {"suspend": True}, ["f"], queue="q"
    ) == (
        {"op": "add", "path": "/spec/suspend", "value": True},
        {"op": "add", "path": "/metadata/finalizers", "value": ["f"]},
        {"op": "add", "path": "/metadata/labels", "value": {}},
        {"op": "add", "path": label, "value": "q"},
    )
    with_labels = {"metadata": {"name": "tj", "labels": {"team": "a"}}, "spec": {}}
    assert trainjob_patch(admitted(with_labels), {}, queue="q") == (
        {"op": "add", "path": label, "value": "q"},
    )


def test_the_namespace_is_the_requests_else_the_objects() -> None:
    in_object = {"metadata": {"name": "tj", "namespace": "team-a"}}
    assert Admitted({"object": in_object, "namespace": "team-b"}).namespace == "team-b"
    assert Admitted({"object": in_object}).namespace == "team-a"
    assert Admitted({"object": {"metadata": {"name": "tj"}}}).namespace == ""
