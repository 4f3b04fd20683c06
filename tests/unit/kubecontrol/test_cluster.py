"""`kube.io_retry`: a plain first attempt, then tenacity's backoff for transient failures; and
one object's requests, never sent to its collection."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from tenacity import wait_none

from kubebase.kinds import CONFIG_MAP, NAMESPACE, POD, InvalidName
from kubebase.shares import Remembered
from kubecontrol import cluster as kube
from kubecontrol.client import ApiException, TransportError
from kubecontrol.deadline import Deadline, DeadlinePassed
from tests.support.builders import edit
from tests.support.memory_api import MemoryApi
from tests.support.traced import BytesApi, traced_peak


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube, "_RETRYING", kube._RETRYING.copy(wait=wait_none()))


def flaky(*failures: BaseException) -> tuple[list[int], Callable[[int], int]]:
    """A call that raises `failures` in turn, then returns its argument; and its call count."""
    calls = [0]

    @kube.io_retry
    def call(value: int) -> int:
        calls[0] += 1
        if calls[0] <= len(failures):
            raise failures[calls[0] - 1]
        return value

    return calls, call


def test_success_is_one_call() -> None:
    calls, call = flaky()
    assert call(7) == 7
    assert calls == [1]


def test_transient_failures_are_retried_with_the_same_arguments() -> None:
    calls, call = flaky(ApiException(503, "Service Unavailable"), ConnectionResetError())
    assert call(7) == 7
    assert calls == [3]


def test_other_answers_are_the_callers_at_once() -> None:
    calls, call = flaky(ApiException(404, "Not Found"))
    with pytest.raises(ApiException) as raised:
        call(7)
    assert raised.value.status == 404
    assert calls == [1]


def test_five_attempts_in_all_then_the_last_failure() -> None:
    failures = [ApiException(429, f"Too Many Requests {i}") for i in range(6)]
    calls, call = flaky(*failures)
    with pytest.raises(ApiException) as raised:
        call(7)
    assert calls == [5]
    assert raised.value is failures[4]


def test_a_failure_after_retries_began_is_retried_too() -> None:
    calls, call = flaky(TimeoutError(), TimeoutError(), ApiException(409, "Conflict"))
    with pytest.raises(ApiException) as raised:
        call(7)
    assert raised.value.status == 409
    assert calls == [3]


class HeldApi:
    """An API client stand-in that records each Event created, and holds every request until
    `go` is set (a busy API server)."""

    def __init__(self) -> None:
        self.created: list[dict[str, object]] = []
        self.go = threading.Event()

    def request(self, method: str, path: str, *, body: object = None, **_: object) -> bytes:
        self.go.wait(10)
        self.created.append(body)  # type: ignore[arg-type]
        return b"{}"


def about(ns: str, name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": f"{ns}/{name}"},
    }


def test_events_are_spam_filtered_per_object_and_shared_per_namespace() -> None:
    """The review's N7: every count of a worker's pod warning became an Event on the manager,
    and one tenant's filled the one backlog: everyone else's were dropped."""
    api = HeldApi()
    cluster = kube.Cluster("c", api, "test")  # type: ignore[arg-type]
    for i in range(40):  # one object's own Events
        cluster.post_event(about("a", "tj"), "Warning", "BackOff", f"{i}")
    for i in range(40):  # recorded again from a worker, under names: a bucket of their own
        cluster.post_event(about("a", "tj"), "Warning", "BackOff", f"m{i}", name=f"tj.w.{i}")
    for i in range(2000):  # a tenant's many objects while the API server is slow
        cluster.post_event(about("noisy", f"tj-{i}"), "Warning", "BackOff", "x")
    cluster.post_event(about("quiet", "tj"), "Normal", "Dispatched", "to worker1")
    api.go.set()
    deadline = time.monotonic() + 10
    while len(api.created) < 25 + 25 + 1000 + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # nothing more comes
    by_ns: dict[str, int] = {}
    for event in api.created:
        ns = event["metadata"]["namespace"]  # type: ignore[index]
        by_ns[ns] = by_ns.get(ns, 0) + 1
    # one may be taken off the backlog (held in the sender) before the namespace's share fills
    assert by_ns["a"] == 50 and by_ns["quiet"] == 1 and 1000 <= by_ns["noisy"] <= 1001, by_ns
    # Sent, they leave the namespace's share: its next Events (new objects) go out again.
    sent = len(api.created)
    for i in range(100):
        cluster.post_event(about("noisy", f"later-{i}"), "Warning", "BackOff", "x")
    deadline = time.monotonic() + 10
    while len(api.created) < sent + 100 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(api.created) == sent + 100


def _sent(api: HeldApi, count: int) -> None:
    """Waits until `count` Events are created (10 s at most), and that no more come."""
    deadline = time.monotonic() + 10
    while len(api.created) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)  # nothing more comes
    assert len(api.created) == count


def test_an_event_said_once_is_sent_once_and_spends_no_more_of_its_objects_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pass that says a named Event on every look (a TrainJob waiting for a missing
    priority class) sends it once: repeats spend neither a request nor the object's rate,
    which other named Events of it (a worker's, recorded again) still have whole. After
    ONCE_KEPT_SECONDS it goes once more (Events last an hour on the API server)."""
    api = HeldApi()
    api.go.set()
    cluster = kube.Cluster("c", api, "test")  # type: ignore[arg-type]

    cluster.post_event(about("a", "tj"), "Warning", "ErrWorkloadCompose", "x", name="tj.once")
    _sent(api, 1)
    for _ in range(100):
        cluster.post_event(about("a", "tj"), "Warning", "ErrWorkloadCompose", "x", name="tj.once")
    for i in range(kube.EVENT_BURST - 1):
        cluster.post_event(about("a", "tj"), "Warning", "BackOff", f"m{i}", name=f"tj.w.{i}")
    _sent(api, kube.EVENT_BURST)
    names = [e["metadata"]["name"] for e in api.created]  # type: ignore[index]
    assert names == ["tj.once", *(f"tj.w.{i}" for i in range(kube.EVENT_BURST - 1))]
    cluster.post_event(about("b", "tj"), "Warning", "ErrWorkloadCompose", "x", name="tj.once")
    _sent(api, kube.EVENT_BURST + 1)  # the name in another namespace: another Event
    monkeypatch.setattr(kube, "ONCE_KEPT_SECONDS", 0.0)
    cluster.post_event(about("b", "tj"), "Warning", "ErrWorkloadCompose", "x", name="tj.once")
    _sent(api, kube.EVENT_BURST + 2)


def test_a_namespace_saying_many_once_events_forgets_its_own_never_anothers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The memory of Events said once is shared per namespace: a tenant whose jobs say more
    names than it holds forgets its own oldest, and another namespace's name stays said
    (before, it was pushed out, and that job's repeats went to the API server again,
    spending its object's rate)."""
    monkeypatch.setattr(kube, "ONCE_KEPT", 8)
    api = HeldApi()
    api.go.set()
    cluster = kube.Cluster("c", api, "test")  # type: ignore[arg-type]

    cluster.post_event(about("quiet", "tj"), "Warning", "ErrWorkloadCompose", "x", name="tj.1")
    _sent(api, 1)
    for i in range(50):
        cluster.post_event(about("noisy", f"tj-{i}"), "Warning", "E", "x", name=f"tj-{i}.1")
    _sent(api, 51)
    cluster.post_event(about("quiet", "tj"), "Warning", "ErrWorkloadCompose", "x", name="tj.1")
    cluster.post_event(about("noisy", "tj-49"), "Warning", "E", "x", name="tj-49.1")
    _sent(api, 51)
    cluster.post_event(about("noisy", "tj-0"), "Warning", "E", "x", name="tj-0.1")
    _sent(api, 52)  # its own oldest, forgotten


class TakenApi(HeldApi):
    """An API client stand-in whose every Event create meets one of that name (409)."""

    def request(self, method: str, path: str, *, body: object = None, **_: object) -> bytes:
        self.created.append(body)  # type: ignore[arg-type]
        raise ApiException(409, "AlreadyExists")


def test_an_event_said_once_found_there_already_is_not_sent_again() -> None:
    """A named Event the API server holds already (recorded before a restart, or by another
    replica) answers 409: that counts as said, and repeats send nothing."""
    api = TakenApi()
    cluster = kube.Cluster("c", api, "test")  # type: ignore[arg-type]
    cluster.post_event(about("a", "tj"), "Warning", "ErrWorkloadCompose", "x", name="tj.once")
    _sent(api, 1)
    cluster.post_event(about("a", "tj"), "Warning", "ErrWorkloadCompose", "x", name="tj.once")
    _sent(api, 1)


def test_a_full_memory_of_events_said_once_forgets_the_stale_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the memory is full, names said longer ago than ONCE_KEPT_SECONDS go before the
    live ones of the namespace holding the most."""
    now = [0.0]
    monkeypatch.setattr(kube, "ONCE_KEPT_SECONDS", 100.0)
    api = HeldApi()
    api.go.set()
    cluster = kube.Cluster("c", api, "test")  # type: ignore[arg-type]
    cluster._said_once = Remembered(3, clock=lambda: now[0])
    cluster.post_event(about("x", "tj"), "Warning", "E", "x", name="old")
    _sent(api, 1)
    now[0] = 150
    for name in ("y1", "y2"):
        cluster.post_event(about("y", name), "Warning", "E", "x", name=name)
    _sent(api, 3)
    now[0] = 160
    cluster.post_event(about("z", "tj"), "Warning", "E", "x", name="z1")
    _sent(api, 4)
    for name in ("y1", "y2"):  # still said: the stale "old" went instead
        cluster.post_event(about("y", name), "Warning", "E", "x", name=name)
    _sent(api, 4)
    assert len(cluster._said_once) == 3
    cluster.post_event(about("x", "tj"), "Warning", "E", "x", name="old")
    _sent(api, 5)  # forgotten: said again


class Unavailable:
    """An ApiClient whose every answer is 503; the first gives the caller's deadline up (the
    review it served was answered meanwhile). Records each request's timeout."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.timeouts: list[float] = []

    def request(self, method: str, path: str, **options: Any) -> bytes:
        self.timeouts.append(options["timeout"])
        self.deadline.give_up()
        raise ApiException(503, "Service Unavailable", headers={"Retry-After": "10"})


def test_a_call_within_a_deadline_waits_no_longer_than_it_and_is_not_tried_again_past_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The backoff before a second attempt ends with the deadline (never the process-wide
    sleep), and that attempt is refused before anything is sent."""
    slept: list[float] = []
    monkeypatch.setattr(kube, "_RETRYING", kube._RETRYING.copy(sleep=slept.append))
    deadline = Deadline(5)
    api = Unavailable(deadline)
    cluster = kube.Cluster("worker", api, "test").within(deadline)  # type: ignore[arg-type]
    with pytest.raises(DeadlinePassed, match="out of time before GET /api/v1/namespaces/a/pods/p"):
        cluster.get(POD, "p", "a")
    assert len(api.timeouts) == 1 and api.timeouts[0] <= 5
    assert slept == []


@pytest.mark.parametrize("name", [None, ""])
def test_a_write_to_one_object_without_its_name_sends_nothing(name: str | None) -> None:
    """A name read from an object that has none: refused before any request, never the
    collection's path (a DELETE there deletes them all)."""
    api = MemoryApi(
        "c", [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}]
    )
    cluster = kube.Cluster("c", api, "test")  # type: ignore[arg-type]
    calls: list[Callable[[], object]] = [
        lambda: cluster.delete(POD, name, "ns"),  # type: ignore[arg-type]
        lambda: cluster.get(POD, name, "ns"),  # type: ignore[arg-type]
        lambda: cluster.patch(POD, name, "ns", {"metadata": {"labels": {"a": "b"}}}),  # type: ignore[arg-type]
        lambda: cluster.replace(POD, {"metadata": {"name": name, "namespace": "ns"}}),
        lambda: cluster.apply(POD, {"metadata": {"name": name, "namespace": "ns"}}),
        # A subresource under no name would be the object named "status".
        lambda: cluster.apply(
            POD, {"metadata": {"name": name, "namespace": "ns"}}, subresource="status"
        ),
        lambda: cluster.patch(POD, name, "ns", {"status": {}}, subresource="status"),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidName):
            call()
    assert api.requests == [] and api.refused == []  # none sent, none refused by the server


def _config_map(namespace: str, name: str, managers: int = 0) -> dict[str, Any]:
    """A ConfigMap whose metadata carries `managers` managedFields entries, as the API server
    keeps them for each writer."""
    fields = {f"f:k{i}": {} for i in range(40)}
    managed = [
        {"manager": f"m{i}", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields}
        for i in range(managers)
    ]
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "managedFields": managed}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "b"}}


def test_versions_and_metadata_come_from_every_page_without_managed_fields() -> None:
    """Seven objects over two namespaces, three a page: each one's version by its key; the
    metadata list holds no managedFields and no data."""
    objects = [_config_map(ns, f"cm-{i}", managers=2) for ns in ("a", "b") for i in range(3)]
    api = MemoryApi("c", [*objects, _config_map("a", "cm-9")])
    cluster = kube.Cluster("c", api, "test")  # type: ignore[arg-type]
    stored = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for o in cluster.list_metadata(CONFIG_MAP, page=3)
    }
    assert cluster.versions(CONFIG_MAP, page=3) == stored and len(stored) == 7
    assert cluster.versions(CONFIG_MAP, "b", page=3) == {
        k: v for k, v in stored.items() if k[0] == "b"
    }
    listed = cluster.list_metadata(CONFIG_MAP, "a", page=3)
    assert [o["metadata"]["name"] for o in listed] == ["cm-0", "cm-1", "cm-2", "cm-9"]
    assert not any("managedFields" in o["metadata"] or "data" in o for o in listed), listed
    assert sum(path.endswith("/configmaps") for _, path in api.requests) == 3 + 3 + 1 + 2
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}
    cluster = kube.Cluster("c", MemoryApi("c", [namespace]), "test")  # type: ignore[arg-type]
    assert (None, "a") in cluster.versions(NAMESPACE)  # cluster-scoped, as caches key it


def test_versions_never_hold_a_page_of_metadata_decoded() -> None:
    """A page of 500 objects' metadata (1 MB of JSON, each with a writer's managedFields) is
    many times its bytes decoded whole; the watchdog's versions of it hold the bytes, a text
    of their size and one object at a time, and keep only keys and versions."""
    items = []
    for i in range(500):
        meta = _config_map("ns", f"cm-{i:04d}", managers=3)["metadata"]
        items.append(
            {"kind": "PartialObjectMetadata", "metadata": {**meta, "resourceVersion": str(i)}}
        )
    data = orjson.dumps({"metadata": {}, "items": items})
    del items
    cluster = kube.Cluster("c", BytesApi(data), "test")  # type: ignore[arg-type]
    whole = traced_peak(lambda: orjson.loads(data))
    found = traced_peak(lambda: cluster.versions(CONFIG_MAP))
    assert cluster.versions(CONFIG_MAP)[("ns", "cm-0042")] == "42"
    assert whole > 8 * len(data), (whole, len(data))  # the cost this bounds, still there
    assert found < 3 * len(data), (found, len(data))


class _Recorded:
    """An API client that records each request's method and timeout, and answers each with
    `answer` (bytes), or raises it."""

    def __init__(self, answer: bytes | Exception) -> None:
        self.answer = answer
        self.sent: list[tuple[str, float]] = []

    def request(self, method: str, path: str, **options: Any) -> bytes:
        self.sent.append((method, options["timeout"]))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _count(metric: Any, *labels: str) -> float:
    return float(metric.labels(*labels)._value.get())


def test_an_answer_is_decoded_and_counted_and_a_write_waits_on_the_gate() -> None:
    """`send`: JSON decoded (bytes as they came with `raw`), nothing for an empty answer;
    each request counted by cluster and verb, each failure by its code (0: no answer); a write
    refused before it is sent while the replica may not write or its budget is spent, and
    bounded by that budget; a read bounded by the timeout given."""
    api = _Recorded(b'{"metadata": {"name": "p"}}')
    cluster = kube.Cluster("gated", api, "test", may_write=lambda: allowed[0])  # type: ignore[arg-type]
    allowed, budget = [False], [2.5]
    cluster.write_budget = lambda: budget[0]
    before = _count(kube.metrics.API_REQUESTS, "gated", "GET")
    assert cluster.send("GET", "/api/v1/namespaces/a/pods/p", timeout=1) == {
        "metadata": {"name": "p"}
    }
    assert _count(kube.metrics.API_REQUESTS, "gated", "GET") == before + 1
    with pytest.raises(kube.NotLeader):
        cluster.send("DELETE", "/api/v1/namespaces/a/pods/p")
    allowed[0], budget[0] = True, 0
    with pytest.raises(kube.NotLeader):
        cluster.send("DELETE", "/api/v1/namespaces/a/pods/p")
    budget[0] = 2.5
    cluster.send("DELETE", "/api/v1/namespaces/a/pods/p")
    assert api.sent == [("GET", 1), ("DELETE", 2.5)]
    assert cluster.send("GET", "/api/v1/namespaces/a/pods/p", raw=True) == api.answer
    api.answer = b""
    assert cluster.send("GET", "/api/v1/namespaces/a/pods/p") is None
    for failure, code in (
        (ApiException(503, "Unavailable"), "503"),
        (TransportError(7, "no"), "0"),
    ):
        api.answer = failure
        errors = _count(kube.metrics.API_ERRORS, "gated", code)
        with pytest.raises(type(failure)):
            cluster.send("GET", "/api/v1/namespaces/a/pods/p")
        assert _count(kube.metrics.API_ERRORS, "gated", code) == errors + 1


def test_metadata_lists_keep_to_their_label_selector() -> None:
    labelled = edit(_config_map("a", "cm-l")).labels({"tails": "yes"}).obj()
    api = MemoryApi("c", [labelled, _config_map("a", "cm-u")])
    cluster = kube.Cluster("c", api, "test")  # type: ignore[arg-type]
    listed = cluster.list_metadata(CONFIG_MAP, "a", label_selector="tails=yes")
    assert [o["metadata"]["name"] for o in listed] == ["cm-l"]
