"""A list's answer decoded an object at a time when large (kubecontrol/lists.py): the same
objects as a whole decode, for any JSON the API server may send, and a page of objects a
tenant sized never decoded whole."""

from __future__ import annotations

import json
import threading
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubecontrol import lists
from kubecontrol.informer import Informer
from kubecontrol.lists import decode_list
from tests.support.traced import BytesApi, traced_peak
from trainjob_api import constants as c

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)  # what orjson and the API server encode
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
LISTS = st.fixed_dictionaries(
    {"kind": st.just("PodList"), "metadata": st.dictionaries(st.text(), JSON, max_size=3)},
    optional={
        "items": st.none() | st.lists(st.dictionaries(st.text(), JSON, max_size=4), max_size=6)
    },
)


def _encodings(page: Any) -> list[bytes]:
    """The ways a server may write it: compact, indented, keys in another order, non-ASCII
    escaped or not."""
    reordered = dict(reversed(list(page.items())))
    return [
        orjson.dumps(page),
        json.dumps(page, indent=2).encode(),
        json.dumps(reordered, ensure_ascii=False, separators=(" , ", " : ")).encode(),
    ]


@settings(max_examples=100, deadline=None)
@given(LISTS)
def test_an_answer_decoded_by_item_is_the_whole_decode(page: dict[str, Any]) -> None:
    whole = {**page, "items": page.get("items") or []}
    for data in _encodings(page):
        assert decode_list(data, lambda item: item) == whole
        assert lists._by_item(data, lambda item: item) == whole


def test_each_item_goes_through_the_reader_in_order_on_both_paths() -> None:
    page = {"metadata": {"continue": "x"}, "items": [{"n": i} for i in range(5)]}
    for data in _encodings(page):
        assert decode_list(data, lambda item: item["n"])["items"] == [0, 1, 2, 3, 4]
        assert lists._by_item(data, lambda item: item["n"])["items"] == [0, 1, 2, 3, 4]


NOT_JSON = [
    "{",
    '{"items": [1, 2}',
    '{"items": [1 2]}',
    '{"a" 1}',
    "{1: 2}",
    '{"a": 1,}',
    '{"items": [1,]}',
    '{"items": [1]} {"items": [2]}',
    '{"items": [NaN]}',
    '{"items": [Infinity]}',
    '{"a": 1e400}',
    '{"items": ["\\ud800"]}',
    '{"items": ' + "[" * 5000 + "]" * 5000 + "}",
]
NOT_A_LIST = ["[]", '"a"', '{"items": "ab"}', '{"items": {"a": 1}}']


@pytest.mark.parametrize(
    "text", NOT_JSON + NOT_A_LIST, ids=[f"json-{i}" for i in range(len(NOT_JSON))] + NOT_A_LIST
)
def test_what_orjson_refuses_is_refused_on_both_paths(text: str) -> None:
    """The item-by-item path refuses what orjson refuses (the whole path): trailing data or
    commas, NaN, a lone surrogate, a number beyond a double, nesting beyond 1,024; and both
    refuse JSON that is not a list object."""
    if text in NOT_JSON:
        with pytest.raises(ValueError):
            orjson.loads(text)
    with pytest.raises(ValueError):
        decode_list(text.encode(), lambda item: item)
    with pytest.raises(ValueError):
        lists._by_item(text.encode(), lambda item: item)


@pytest.mark.parametrize("items", ["", ', "items": null'])
def test_a_list_without_items_has_none_on_both_paths(items: str) -> None:
    data = f'{{"metadata": {{}}{items}}}'.encode()
    assert decode_list(data, lambda item: item) == {"metadata": {}, "items": []}
    assert lists._by_item(data, lambda item: item) == {"metadata": {}, "items": []}


def _pod(i: int, entries: int, first: str = "v") -> dict[str, Any]:
    """A pod as a tenant can size it: many short env entries, each decoding to many times its
    bytes (the first entry's value `first`)."""
    env = [{"name": f"E{j}", "value": first if j == 0 else "v"} for j in range(entries)]
    return {
        "metadata": {"name": f"p{i}", "namespace": "ns", "resourceVersion": str(i + 1)},
        "spec": {"containers": [{"name": "c", "env": env}]},
        "status": {"phase": "Running"},
    }


def test_a_large_page_is_never_decoded_whole() -> None:
    """40 pods of ~0.12 MB (5 MB of JSON): decoded whole they take ~10 times that at once;
    an item at a time, the answer's bytes, a text of their size and one pod, whatever the
    characters (one beyond U+FFFF made a text decoded as UTF-8 four bytes a character)."""
    pods = [_pod(i, 4_000, "\N{SNAKE}" if i == 0 else "v") for i in range(40)]
    data = orjson.dumps({"metadata": {}, "items": pods})
    del pods
    assert len(data) > lists.WHOLE_BYTES

    def names(item: dict[str, Any]) -> str:
        return str(item["metadata"]["name"])

    whole = traced_peak(lambda: [names(i) for i in orjson.loads(data)["items"]])
    by_item = traced_peak(lambda: decode_list(data, names))
    assert decode_list(data, names)["items"] == [f"p{i}" for i in range(40)]
    assert whole > 8 * len(data), (whole, len(data))  # the cost this bounds, still there
    assert by_item < 3 * len(data), (by_item, len(data))


def test_an_informer_keeps_a_large_page_an_object_at_a_time() -> None:
    """The worker controller's pod list: 8 tenant-sized pods with our label, kept as
    digests; the page is never held decoded whole."""
    page = {"metadata": {"resourceVersion": "9"}, "items": [_pod(i, 20_000) for i in range(8)]}
    data = orjson.dumps(page)
    del page

    def digest(pod: dict[str, Any]) -> dict[str, Any]:
        return {key: pod[key] for key in ("apiVersion", "kind", "metadata", "status") if key in pod}

    informer = Informer(BytesApi(data), c.POD, transform=digest)  # type: ignore[arg-type]
    peak = traced_peak(informer.list_now)
    assert sorted(informer.view) == sorted(("ns", f"p{i}") for i in range(8))
    cached = informer.get(("ns", "p3"))
    assert cached is not None and "spec" not in cached
    assert (cached.get("apiVersion"), cached.get("kind")) == (
        "v1",
        "Pod",
    )  # a list's items lack them
    assert peak < 4 * len(data), (peak, len(data))


def _nested(depth: int) -> bytes:
    """A list whose one item holds arrays `depth` deep (the item itself one more)."""
    return b'{"items": [{"x": ' + b"[" * depth + b"]" * depth + b"}]}"


@pytest.mark.parametrize("depth", [900, 990, 1000, 1021, 1022, 1023, 1030])
def test_nesting_is_refused_by_orjsons_rule_on_both_paths_on_any_thread(depth: int) -> None:
    """What orjson accepts (the whole path, and each watch event) the item-by-item path
    accepts too, however deep the caller's own stack: the standard library's scanner gives
    up near Python's recursion limit, far below orjson's 1,024."""
    data = _nested(depth)
    try:
        orjson.loads(data)
        accepted = True
    except orjson.JSONDecodeError:
        accepted = False
    found: list[bool] = []

    def decode() -> None:
        try:
            lists._by_item(data, lambda item: item)
            found.append(True)
        except ValueError:
            found.append(False)

    decode()
    worker = threading.Thread(target=decode)
    worker.start()
    worker.join(30)
    assert found == [accepted, accepted], (depth, accepted, found)
