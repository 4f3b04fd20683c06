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
