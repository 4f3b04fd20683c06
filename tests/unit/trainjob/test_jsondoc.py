"""json_copy: a deep copy of API data, equal and sharing nothing."""

from __future__ import annotations

from trainjob.jsondoc import json_copy


def test_a_copy_is_equal_and_shares_nothing() -> None:
    spec = {"a": [{"b": {"c": 1}}, "x", 2.5, None, True], "n": 2**62, "s": "ü"}
    copied = json_copy(spec)
    assert copied == spec
    copied["a"][0]["b"]["c"] = 2
    copied["a"].append("y")
    assert spec == {"a": [{"b": {"c": 1}}, "x", 2.5, None, True], "n": 2**62, "s": "ü"}
