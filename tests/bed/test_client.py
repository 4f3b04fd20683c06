"""Our API client's requests (libcurl, through pycurl) against a real API server: each verb
with and without a body, error answers as ApiException with the server's reason and headers,
connections kept and shared (HTTP/2), TLS by the kubeconfig's rules
(tests/local/test_transport.py: no answer)."""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pycurl
import pytest
from kubernetes import client as k8s

from clusters.bed import Bed
from clusters.helpers.waiting import sooner_than, wait_for
from kubebase.kinds import CONFIG_MAP, Kind
from kubecontrol import transfers
from kubecontrol.client import ApiClient, ApiException, TransportError
from kubecontrol.cluster import Cluster
from kubecontrol.controller import ControllerContext, Watch, start_watches
from kubecontrol.credentials import load_credentials
from kubecontrol.informer import Informer, key_of
from kubecontrol.settings import ControllerSettings
from kubecontrol.watchdog import WatchDog

pytestmark = pytest.mark.bed


@pytest.fixture
def manager(bed: Bed) -> str:
    return bed.config.managers[0].name


def test_every_verb_round_trips_and_errors_carry_the_servers_answer(
    bed: Bed, manager: str, namespace_factory: Any
) -> None:
    ns = namespace_factory(manager, "client")
    kube_ = Cluster.from_kubeconfig(manager, bed.kubeconfig(manager), "tests")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}}
    created = kube_.create(CONFIG_MAP, {**cm, "data": {"a": "1"}})
    assert kube_.get(CONFIG_MAP, "c", ns)["data"] == {"a": "1"}
    assert kube_.patch(CONFIG_MAP, "c", ns, {"data": {"b": "2"}})["data"] == {
        "a": "1",
        "b": "2",
    }
    # A GET after a request with a body sends none (the handle is reused).
    latest = kube_.get(CONFIG_MAP, "c", ns)
    assert latest["data"]["b"] == "2"
    replaced = kube_.replace(CONFIG_MAP, {**latest, "data": {"z": "9"}})
    assert replaced["data"] == {"z": "9"}

    with pytest.raises(ApiException) as conflict:
        kube_.create(CONFIG_MAP, cm)
    assert (conflict.value.status, conflict.value.reason) == (409, "Conflict")
    assert conflict.value.headers["Content-Type"] == "application/json"
    assert '"reason":"AlreadyExists"' in conflict.value.body

    with pytest.raises(ApiException) as stale:
        kube_.replace(CONFIG_MAP, created)  # its resourceVersion is gone: the server refuses it
    assert stale.value.status == 409

    # DELETE with a body: a uid precondition naming another object leaves this one alone.
    kube_.delete(CONFIG_MAP, "c", ns, uid="00000000-0000-0000-0000-000000000000")
    assert kube_.get(CONFIG_MAP, "c", ns)["metadata"]["uid"] == created["metadata"]["uid"]
    kube_.delete(CONFIG_MAP, "c", ns, uid=created["metadata"]["uid"])
    assert kube_.get_or_none(CONFIG_MAP, "c", ns) is None
    with pytest.raises(ApiException) as missing:
        kube_.get(CONFIG_MAP, "c", ns)
    assert (missing.value.status, missing.value.reason) == (404, "Not Found")


def test_one_connection_serves_request_after_request(bed: Bed, manager: str) -> None:
    api = ApiClient(load_credentials(bed.kubeconfig(manager)))
    for _ in range(5):
        api.request("GET", "/api/v1/namespaces/default")
    assert len(api._idle) == 1  # one handle served them all, one at a time
    assert api._idle[0].getinfo(pycurl.NUM_CONNECTS) == 0  # the last reused its connection


def _connections_to(port: int) -> set[str]:
    """This process's established TCP connections to a loopback `port` (their sockets)."""
    mine = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                mine.add(target[8:-1])
    found = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote = int(fields[2].rsplit(":", 1)[1], 16)
            if fields[3] == "01" and remote == port and fields[9] in mine:
                found.add(fields[9])
    return found


def test_a_clusters_streams_share_one_http2_connection(
    bed: Bed, manager: str, namespace_factory: Any
) -> None:
    """Each TLS connection costs a process about 180 KiB (benchmarks/connections.py): a
    cluster's watches are streams of one, however many are open at once; a stream a tenant's
    reader paces (a followed log) has one of its own."""
    _, _, path = _configmaps(bed, manager, namespace_factory)
    api = ApiClient(load_credentials(bed.kubeconfig(manager)))
    port = int(bed.server(manager).rsplit(":", 1)[1])
    before = _connections_to(port)
    opened = [threading.Event() for _ in range(6)]
    ended: list[int] = []

    def watch(i: int) -> None:
        query = {"watch": "true", "timeoutSeconds": 5}
        api.stream(path, query, lambda _: True, on_open=opened[i].set, own_connection=i >= 4)
        ended.append(i)

    watches = [threading.Thread(target=watch, args=(i,)) for i in range(6)]
    for thread in watches:
        thread.start()
    assert all(event.wait(30) for event in opened)  # six streams open at once
    # New ones only: the tests before may leave connections of their own, closing as they go.
    assert len(_connections_to(port) - before) == 1 + 2
    for thread in watches:
        thread.join(30)
    assert sorted(ended) == list(range(6))  # each ended by the server, as it asked


def test_a_paused_stream_holds_up_no_other_stream_of_the_shared_connection(
    bed: Bed, manager: str, namespace_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream whose reader stops is paused once BACKLOG_BYTES wait unread, once; the
    cluster's other streams on the same HTTP/2 connection go on, a watch handled on the pump
    and a stream read on its caller's thread alike (an informer's watches, while one handler
    is slow), and the paused one, resumed, hands over every byte once. A libcurl that stops
    reading the connection for one paused stream fails here."""
    kube_, ns, path = _configmaps(bed, manager, namespace_factory)
    for i in range(12):  # about 2.4 MB listed: ten times the backlog
        cm = {"metadata": {"name": f"big-{i}", "namespace": ns}, "data": {"k": "x" * 200_000}}
        kube_.create(CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap", **cm})
    api = ApiClient(load_credentials(bed.kubeconfig(manager)))
    stuck, release = threading.Event(), threading.Event()
    got: list[bytes] = []
    paused: list[int] = []
    ended: list[tuple[int, int]] = []  # each stream's connections made, and its HTTP version
    received, end = transfers.Transfer.received, transfers.Transfers._end

    def counted(self: transfers.Transfer, data: bytes) -> int | None:
        answer = received(self, data)
        if answer == pycurl.WRITEFUNC_PAUSE:
            paused.append(len(data))
        return answer

    def recorded(self: transfers.Transfers, transfer: transfers.Transfer, *why: Any) -> None:
        curl = transfer.curl
        ended.append((curl.getinfo(pycurl.NUM_CONNECTS), curl.getinfo(pycurl.INFO_HTTP_VERSION)))
        end(self, transfer, *why)

    monkeypatch.setattr(transfers.Transfer, "received", counted)
    monkeypatch.setattr(transfers.Transfers, "_end", recorded)

    def slow(piece: bytes) -> bool:
        if not stuck.is_set():
            stuck.set()
            release.wait(120)  # the reader stops; the other streams must not
        got.append(piece)
        return True

    finished: list[str] = []

    def read_all() -> None:
        api.stream(path, {}, slow, timeout=150)
        finished.append("read")

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    events: list[str] = []
    pieces: list[bytes] = []
    query = {"timeoutSeconds": 3, "fieldSelector": "metadata.name=big-0"}

    def seen(event: Any) -> bool:
        events.append(event["type"])
        return True

    def on_the_pump() -> None:  # a watch's events handled on the pump
        api.watch(path, query, seen, timeout=60)
        events.append("ended")

    def on_its_thread() -> None:  # a stream read on its caller's thread, as a handed-over watch
        api.stream(path, {**query, "watch": "true"}, lambda p: pieces.append(p) or True, timeout=60)
        pieces.append(b"ended")

    try:
        assert stuck.wait(30)
        wait_for(lambda: paused, 30, what="the stream paused, its backlog full")
        besides = [threading.Thread(target=t, daemon=True) for t in (on_the_pump, on_its_thread)]
        for thread in besides:
            thread.start()
        for thread in besides:
            thread.join(30)  # served and ended by the server (3 s), the first still paused
        assert events == ["ADDED", "ended"]
        assert pieces[-1] == b"ended" and b'"type":"ADDED"' in b"".join(pieces[:-1])
        # both on the paused stream's connection, made before them, over HTTP/2
        assert ended == [(0, pycurl.CURL_HTTP_VERSION_2_0)] * 2, ended
        assert len(paused) == 1  # paused once: offered nothing more while its reader is stuck
    finally:
        release.set()
    wait_for(lambda: finished, 60, what="the paused stream, resumed, read to its end")
    items = orjson.loads(b"".join(got))["items"]  # every byte, once, in order
    big = [i for i in items if i["metadata"]["name"] != "kube-root-ca.crt"]  # the namespace's
    assert sorted(i["metadata"]["name"] for i in big) == sorted(f"big-{i}" for i in range(12))
    assert all(len(i["data"]["k"]) == 200_000 for i in big)


def test_tls_server_name_is_what_the_certificate_is_checked_against(bed: Bed, manager: str) -> None:
    creds = load_credentials(bed.kubeconfig(manager))
    named = ApiClient(replace(creds, tls_server_name="localhost"))  # a name the cert holds
    assert named.get_json("/api/v1/namespaces/default")["metadata"]["name"] == "default"
    stranger = ApiClient(replace(creds, tls_server_name="elsewhere.example"))
    with pytest.raises(TransportError) as refused:
        stranger.request("GET", "/api/v1/namespaces/default")
    assert refused.value.code == pycurl.E_PEER_FAILED_VERIFICATION, refused.value


def _configmaps(bed: Bed, manager: str, namespace_factory: Any) -> tuple[Cluster, str, str]:
    """A client of the manager, a fresh namespace, and the path of its ConfigMaps."""
    ns = namespace_factory(manager, "watch")
    kube_ = Cluster.from_kubeconfig(manager, bed.kubeconfig(manager), "tests")
    return kube_, ns, f"/api/v1/namespaces/{ns}/configmaps"


def test_a_watch_hands_over_each_event_as_it_comes_and_ends_with_the_server(
    bed: Bed, manager: str, namespace_factory: Any
) -> None:
    kube_, ns, path = _configmaps(bed, manager, namespace_factory)
    since = kube_.api.get_json(path)["metadata"]["resourceVersion"]
    events: queue.Queue[Any] = queue.Queue()
    large = "x" * 200_000  # an event libcurl hands over in several pieces

    def watch() -> None:
        # Only ours: the namespace's own kube-root-ca.crt may be written at any time.
        query = {"resourceVersion": since, "timeoutSeconds": 5, "fieldSelector": "metadata.name=w"}
        kube_.api.watch(path, query, lambda event: events.put(event) or True, timeout=15)
        events.put("ended")

    threading.Thread(target=watch, daemon=True).start()
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w", "namespace": ns}}
    kube_.create(CONFIG_MAP, cm)
    first = events.get(timeout=10)  # before anything else is written: it came on its own
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "w")
    kube_.patch(CONFIG_MAP, "w", ns, {"data": {"k": large}})
    kube_.delete(CONFIG_MAP, "w", ns)
    rest = [events.get(timeout=15) for _ in range(3)]
    assert [(e["type"], e["object"]["data"]["k"] == large) for e in rest[:2]] == [
        ("MODIFIED", True),
        ("DELETED", True),
    ]
    assert rest[2] == "ended"  # then the server ended it (5 s), and `watch` returned

    with pytest.raises(ApiException) as missing:
        kube_.api.watch("/apis/example.com/v1/nothings", {"timeoutSeconds": 5}, lambda e: True)
    assert missing.value.status == 404


def test_a_watch_ends_when_its_handler_says_so_or_fails(
    bed: Bed, manager: str, namespace_factory: Any
) -> None:
    kube_, ns, path = _configmaps(bed, manager, namespace_factory)
    for name in ("a", "b", "c"):
        meta = {"name": name, "namespace": ns, "labels": {"ours": "yes"}}
        kube_.create(CONFIG_MAP, {"metadata": meta})
    # The three as ADDED (not the namespace's own kube-root-ca.crt), then nothing for 30 s.
    query = {"resourceVersion": "0", "timeoutSeconds": 30, "labelSelector": "ours=yes"}
    seen: list[str] = []

    def enough(event: Any) -> bool:
        seen.append(event["object"]["metadata"]["name"])
        return len(seen) < 2

    started = time.monotonic()
    kube_.api.watch(path, query, enough, timeout=60)
    assert len(seen) == 2  # not the third
    sooner_than(time.monotonic() - started, 30, "waiting for the server to end the watch")

    def broken(_event: Any) -> bool:
        raise KeyError("the handler's own failure")

    with pytest.raises(KeyError, match="the handler's own failure"):
        kube_.api.watch(path, query, broken, timeout=60)
    # The handles those watches left mid-answer were closed, not put back: requests still work.
    assert len(kube_.api.get_json(path, query={"labelSelector": "ours=yes"})["items"]) == 3


def test_a_401_reads_the_token_file_again_and_the_request_goes_through(
    bed: Bed, manager: str, namespace_factory: Any, tmp_path: Any
) -> None:
    """A token that kubelet rotated within the minute: the API server's 401 makes the client
    read the file again and send the request once more (client-go does the same)."""
    ns = namespace_factory(manager, "token")
    core = k8s.CoreV1Api(bed.api(manager))
    core.create_namespaced_service_account(ns, k8s.V1ServiceAccount(metadata={"name": "sa"}))
    token = core.create_namespaced_service_account_token(
        "sa", ns, k8s.AuthenticationV1TokenRequest(spec={"audiences": []})
    ).status.token
    token_file = tmp_path / "token"
    token_file.write_text("a-token-that-was-rotated-away")
    creds = replace(
        load_credentials(bed.kubeconfig(manager)), token=None, token_file=str(token_file)
    )
    creds = replace(creds, cert_pem=None, key_pem=None, cert_file=None, key_file=None)
    api = ApiClient(creds)
    assert api.bearer_token() == "a-token-that-was-rotated-away"  # read and cached
    token_file.write_text(token)
    assert b'"kind":"APIVersions"' in api.request("GET", "/api")
    # A token the server refuses however often it is read: the 401 stands.
    token_file.write_text("still-wrong")
    api.token_refused()
    with pytest.raises(ApiException) as refused:
        api.request("GET", "/api")
    assert refused.value.status == 401


GONE = {
    "type": "ERROR",
    "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
}


class _Faulty:
    """The real client, recording the lists and watches an informer asks for, and breaking
    the next watch on request: its stream cut before the next event (as a reset connection
    would), or frozen (events dropped, the stream left open), or that event replaced by the
    server's 410 Gone (what a watch from a
    resourceVersion the server no longer keeps gets: a young bed's server still has them all)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self.pages: list[dict[str, Any]] = []
        self.watched_from: list[str] = []
        self.cut = threading.Event()
        self.gone = threading.Event()
        self.frozen = threading.Event()

    def request(self, method: str, path: str, **kwargs: Any) -> bytes:
        """A request as the API client sends it; each GET (a list's page) noted."""
        if method == "GET":
            self.pages.append(dict(kwargs.get("query") or {}))
        return self.api.request(method, path, **kwargs)

    def watch(self, path: str, query: dict[str, Any], on_event: Any, **kwargs: Any) -> None:
        self.watched_from.append(query["resourceVersion"])

        def relay(event: Any) -> Any:
            if self.cut.is_set():
                self.cut.clear()
                raise TransportError(pycurl.E_RECV_ERROR, "connection reset (cut by the test)")
            if self.gone.is_set():
                self.gone.clear()
                return on_event(GONE)
            if self.frozen.is_set():
                return True  # dropped: the stream goes on, the cache learns nothing
            return on_event(event)

        self.api.watch(path, query, relay, **kwargs)


def test_an_informer_pages_its_list_resumes_a_broken_watch_and_lists_again_only_on_410(
    bed: Bed, manager: str, namespace_factory: Any
) -> None:
    kube_, ns, _path = _configmaps(bed, manager, namespace_factory)

    def make(name: str) -> None:
        meta = {"name": name, "namespace": ns, "labels": {"ours": "yes"}}
        kube_.create(CONFIG_MAP, {"metadata": meta})

    for i in range(7):
        make(f"cm{i}")
    faulty = _Faulty(kube_.api)
    states: list[bool] = []
    informer = Informer(
        faulty,  # type: ignore[arg-type]
        Kind("", "v1", "configmaps", "ConfigMap", True),
        namespace=ns,
        label_selector="ours=yes",
        on_state=lambda ok, _error: states.append(ok),
        page=3,
    )
    informer.start()
    try:
        assert informer.synced.wait(30)
        assert len(informer.items()) == 7 and informer.lists == 1
        # Three pages of at most three, the later ones by the server's continue token.
        assert [p["limit"] for p in faulty.pages] == [3, 3, 3]
        assert ["continue" in p for p in faulty.pages] == [False, True, True]
        assert all(o["kind"] == "ConfigMap" for o in informer.items())  # typed, though listed

        # A cut stream: watched on from the last resourceVersion it delivered, no list.
        wait_for(lambda: faulty.watched_from, 10, what="the first watch")
        faulty.cut.set()
        make("after-cut")
        wait_for(lambda: informer.get((ns, "after-cut")), 30, what="the ConfigMap after the cut")
        assert informer.lists == 1 and len(faulty.pages) == 3
        # From where the cut stream had got to (the list's version, or a bookmark's since).
        assert len(faulty.watched_from) == 2
        assert int(faulty.watched_from[1]) >= int(faulty.watched_from[0]) > 0
        assert states == [True, False, True]  # the failure, then the watch answered again

        # 410 Gone: listed again, at once (and the new ConfigMap comes with the list).
        faulty.gone.set()
        make("after-gone")
        wait_for(lambda: informer.lists == 2, 30, what="the list after 410 Gone")
        wait_for(lambda: informer.get((ns, "after-gone")), 30, what="the ConfigMap after 410")
        assert len(informer.items()) == 9 and states[-1] is True
    finally:
        informer.stop()


def test_a_frozen_watch_is_found_by_the_watchdog_and_listed_again_in_the_same_process(
    bed: Bed, manager: str, namespace_factory: Any
) -> None:
    """A watch that stays open but delivers nothing (what kopf's did after an API-server
    restart) is ended and replaced by a list, with no process restart."""
    kube_, ns, _path = _configmaps(bed, manager, namespace_factory)
    faulty = _Faulty(kube_.api)
    informer = Informer(faulty, Kind("", "v1", "configmaps", "ConfigMap", True))  # type: ignore[arg-type]
    informer.start()
    try:
        assert informer.synced.wait(30)
        wait_for(lambda: faulty.watched_from, 10, what="the first watch")
        faulty.frozen.set()  # from now on the stream hands nothing over, and stays open
        meta = {"name": "while-frozen", "namespace": ns}
        kube_.create(CONFIG_MAP, {"metadata": meta})
        time.sleep(2)
        assert informer.get((ns, "while-frozen")) is None  # frozen indeed

        def cached() -> list[tuple[Any, str]]:
            return [(key_of(o), str(o["metadata"]["resourceVersion"])) for o in informer.items()]

        def relist() -> None:
            faulty.frozen.clear()
            informer.relist()

        dog = WatchDog(kube_, [(CONFIG_MAP, cached, relist)], period=60)
        dog.check()  # a suspect: out of date, for the first time
        assert informer.lists == 1
        dog.check()  # still out of date a period later: frozen, listed again
        wait_for(lambda: informer.lists == 2, 10, what="the list the watchdog asked for")
        assert informer.get((ns, "while-frozen")) is not None
        assert len(faulty.watched_from) == 2  # the frozen watch ended, a new one began
    finally:
        informer.stop()


def test_a_watch_of_a_kind_the_server_does_not_serve_says_why_readiness_fails(
    bed: Bed, manager: str
) -> None:
    """A controller whose CRD is missing never syncs: /readyz fails, naming the watch and
    the missing CRD, instead of a bare "not synced"."""
    kube_ = Cluster.from_kubeconfig(manager, bed.kubeconfig(manager), "tests")
    ctx = ControllerContext(settings=ControllerSettings())
    start_watches(
        ctx,
        kube_,
        [Watch("widgets", Kind("nowhere.example.com", "v1", "widgets", "Widget", True))],
    )
    try:
        reason = wait_for(
            lambda: "widgets" in (ctx.not_ready() or "") and ctx.not_ready(),
            30,
            what="readiness to name the failing watch",
        )
        assert reason.startswith("caches not synced yet (widgets: ApiException: (404)")
        assert reason.endswith("(is its CustomResourceDefinition installed?))")
    finally:
        for informer in ctx.informers.values():
            informer.stop()
