"""A list's answer decoded one object at a time when it is large.

A page of objects a tenant sizes (pods, TrainJobs, Secrets) can be tens of megabytes, and
decoded whole it is many times that: a pod of many small `env` entries decodes to ~17 times its
JSON. Readers keep little of each object (a digest, a cut-down copy), so an answer larger than
WHOLE_BYTES is decoded an item at a time, each item handed to its reader as it is decoded:
what is held at once is the answer's bytes, a text of the same size, one decoded object and
what the reader kept of those before it. Smaller answers are decoded whole. Either way orjson
decodes every value, so both accept and refuse the same JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

from kubebase.objects import Dict

WHOLE_BYTES = 4 * 1024 * 1024
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')  # a string, or a bracket


def decode_list(
    data: bytes, each: Callable[[Dict], Any], *, whole_bytes: int | None = None
) -> Dict:
    """The list object `data` holds, its `items` replaced by what `each` makes of each item
    (in order); no items for an empty answer. ValueError when `data` is not one JSON object
    (orjson's rules, both ways). An answer over `whole_bytes` (WHOLE_BYTES if not given) is
    decoded an item at a time: 0 for a reader that keeps a few bytes of each item, for whom
    even a small page decoded whole costs many times what it keeps."""
    if not data:
        return {"items": []}
    if len(data) <= (WHOLE_BYTES if whole_bytes is None else whole_bytes):
        whole = orjson.loads(data)
        if not isinstance(whole, dict):
            raise ValueError(f"a list answer is a JSON object, not {type(whole).__name__}")
        whole["items"] = [each(item) for item in _listed(whole.get("items"))]
        return whole
    return _by_item(data, each)


def _by_item(data: bytes, each: Callable[[Dict], Any]) -> Dict:
    """The top level decoded key by key, the `items` array element by element. The standard
    library's scanner finds where each value ends, in the answer read as Latin-1 (one character
    per byte, so its positions are the bytes' and its size theirs, whatever characters the
    objects hold: read as UTF-8, one character beyond U+FFFF would make it four bytes a
    character); orjson decodes the value's bytes."""
    text = data.decode("latin-1")
    view = memoryview(data)
    found: Dict = {"items": []}
    at = _expect(text, 0, "{")
    while text[at : at + 1] != "}":
        key, at = _value(view, text, at, 1)
        if not isinstance(key, str):
            raise ValueError(f"a list answer: a key expected at byte {at}")
        at = _expect(text, at, ":")
        if key == "items" and text[at : at + 1] == "[":
            found["items"], at = _items(view, text, _expect(text, at, "["), each)
        else:
            found[key], at = _value(view, text, at, 1)
            if key == "items":
                found[key] = _listed(found[key])
        at = _skip(text, at)
        if text[at : at + 1] == "}":
            break
        at = _expect(text, at, ",")
        if text[at : at + 1] == "}":
            raise ValueError(f"a list answer: a key expected at byte {at}")
    if _skip(text, at + 1) != len(text):
        raise ValueError(f"a list answer: more after its end, at byte {at + 1}")
    return found


def _listed(items: Any) -> list[Any]:
    """A list's `items`: an array, or none (null or absent)."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise ValueError(f"a list answer's items are an array, not {type(items).__name__}")
    return items


def _value(view: memoryview, text: str, at: int, within: int = 0) -> tuple[Any, int]:
    """The value that begins at `at`, `within` arrays or objects of the answer, and the
    position after it. orjson decides what is valid, nesting included (the value is decoded
    inside as many arrays as it is nested in the answer, so that its depth counts as in a
    decode of the whole): the standard library's scanner, which recurses, finds the end of all
    but the most deeply nested values, and those are measured by their brackets."""
    try:
        end = _DECODER.raw_decode(text, at)[1]
    except RecursionError:
        end = _end_by_brackets(text, at)
    if not within:
        return orjson.loads(view[at:end]), end
    decoded = orjson.loads(b"[" * within + view[at:end].tobytes() + b"]" * within)
    for _ in range(within):
        decoded = decoded[0]
    return decoded, end


def _end_by_brackets(text: str, at: int) -> int:
    """The position after the array or object that begins at `at`, found by counting its
    brackets outside strings (no recursion, whatever the depth)."""
    depth = 0
    for token in _STRUCTURE.finditer(text, at):
        mark = token.group()
        if mark in "[{":
            depth += 1
        elif mark in "]}":
            depth -= 1
            if depth == 0:
                return token.end()
    raise ValueError(f"a list answer: the value at byte {at} does not end")


def _items(
    view: memoryview, text: str, at: int, each: Callable[[Dict], Any]
) -> tuple[list[Any], int]:
    """The array whose first element (or `]`) is at `at`, each element through `each`; and
    the position after its `]`."""
    made: list[Any] = []
    if text[at : at + 1] == "]":
        return made, at + 1
    while True:
        item, at = _value(view, text, at, 2)
        made.append(each(item))
        del item  # not held while the next one is decoded
        at = _skip(text, at)
        if text[at : at + 1] == "]":
            return made, at + 1
        at = _expect(text, at, ",")


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def _expect(text: str, at: int, char: str) -> int:
    """The position after `char` (white space around it skipped); ValueError when another
    character or the end comes first."""
    at = _skip(text, at)
    if text[at : at + 1] != char:
        raise ValueError(f"a list answer: {char!r} expected at character {at}")
    return _skip(text, at + 1)
