"""Deep copies of JSON documents: API objects as decoded, and what we build from them."""

from __future__ import annotations

from typing import TypeVar

import orjson

T = TypeVar("T")


def json_copy(value: T) -> T:
    """A deep copy of a JSON value (dicts with string keys, lists, strings, numbers, booleans,
    None) through orjson, cheaper than copy.deepcopy (docs/contributors/design.md, "Choices
    measured").
    For JSON values only: a tuple would come back as a list."""
    copied: T = orjson.loads(orjson.dumps(value))
    return copied
