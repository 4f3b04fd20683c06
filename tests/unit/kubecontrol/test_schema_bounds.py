"""An object held to an installed CRD's size limits and shapes (kubecontrol/schema_bounds.py):
one walk, linear in the object and stopped at MAX_VALUES, as the API server checks them before
it stores an object. The TrainJob's own CRD through the webhooks:
tests/unit/trainjob/test_admission_bounds.py."""

from __future__ import annotations

from typing import Any

from kubecontrol.schema_bounds import MAX_VALUES, bounds_problem


class Unlistable(list):  # type: ignore[type-arg]
    """A list whose items fail the test if gone through: its count must refuse it first."""

    def __iter__(self) -> Any:
        raise AssertionError("the items of a list past the walk's bound were gone through")


def test_the_walk_is_bounded_and_open_schemas_are_not_walked() -> None:
    deep: Any = []
    for _ in range(MAX_VALUES):
        deep = [deep]
    nested = {"type": "array"}
    nested["items"] = nested
    assert "more than" in str(bounds_problem(deep, nested))
    assert bounds_problem({"anything": [1] * 10}, {"type": "object"}) is None
    assert bounds_problem({"x": 1}, None) is None
    assert (
        bounds_problem(
            {"m": {"k": "vvvv"}},
            {"properties": {"m": {"additionalProperties": {"type": "string", "maxLength": 3}}}},
        )
        == ".m.k: 4 characters, over the 3 the CRD allows"
    )


def test_the_walks_bound_is_counted_before_anything_is_pushed() -> None:
    """A forged review of 900,000 entries in a list the schema does not bound built a tuple
    and a path for each (272 MB) before the bound was checked."""
    open_list = {"type": "array", "items": {"type": "object"}}
    assert bounds_problem(Unlistable([{}] * 150_000), open_list) == (
        "the object holds more than 100000 values"
    )
    wide = {"type": "object", "additionalProperties": {"type": "string"}}
    assert "more than 100000" in str(bounds_problem({str(i): "" for i in range(150_000)}, wide))


def test_a_keyed_lists_keys_are_scalars() -> None:
    deep: Any = "x"
    for _ in range(5000):  # repr of this raised RecursionError
        deep = [deep]
    keyed = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object"},
    }
    assert "key is not a scalar" in str(bounds_problem([{"name": deep}], keyed))
    assert bounds_problem([{"name": 1}, {"name": "1"}, {"name": True}], keyed) is None


def test_a_keyed_list_refuses_a_key_seen_anywhere_before_and_keys_by_every_key() -> None:
    names = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object"},
    }
    assert bounds_problem([{"name": "a"}, {"name": "b"}, {"name": "a"}], names)
    ports = {**names, "x-kubernetes-list-map-keys": ["containerPort", "protocol"]}
    tcp, udp = {"containerPort": 80, "protocol": "TCP"}, {"containerPort": 80, "protocol": "UDP"}
    assert bounds_problem([tcp, udp], ports) is None
    assert bounds_problem([tcp, udp, dict(tcp)], ports)
