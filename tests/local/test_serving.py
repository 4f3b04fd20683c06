"""The probe and metrics ports on loopback, against a pod that holds slow connections: the
kubelet's probes and Prometheus' scrapes are answered all the same, and a connection that
trickles its request is closed at its deadline. And what each caller reads there (status,
body, Content-Type and -Length of each path), and what the operator reads of a connection
that fails (a debug line, or a traceback) or of a port that is taken.

The attacker connects from 127.0.0.2 (the whole of 127/8 is this host's), as a training pod
would from its own address; the kubelet and Prometheus from 127.0.0.1."""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import logging
import re
import select
import socket
import socketserver
import ssl
import threading
import time
import warnings
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from prometheus_client import CONTENT_TYPE_LATEST

from clusters.helpers.waiting import stays_false, wait_for
from kubebase.shares import Held
from kubecontrol import serving
from kubecontrol.certs import Material, issue
from kubecontrol.controller import fields
from kubecontrol.metrics_auth import MetricsAuth
from kubecontrol.tokens import Verdict

ATTACKER = "127.0.0.2"


@pytest.fixture
def probes() -> Iterator[ThreadingHTTPServer]:
    server = serving.serve_probes("127.0.0.1", 0, lambda: None)
    yield server
    server.shutdown()
    server.server_close()


def probe(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status
    finally:
        conn.close()


class Trickle:
    """Slow connections to `server` from the attacker's address: each sends a byte of a
    request line every `every` seconds, on a thread of its own, until stopped."""

    def __init__(self, server: Any, count: int, every: float) -> None:
        port = server.server_address[1]
        self.socks = []
        for _ in range(count):
            self.socks.append(
                socket.create_connection(("127.0.0.1", port), 5, source_address=(ATTACKER, 0))
            )
            # each accepted before the next: the listen queue holds 5, and a connection the
            # kernel finds it full for waits for its SYN to be sent again, a second later
            wait_for(
                lambda: _held(server) == min(len(self.socks), serving.MAX_CONNECTIONS),
                10,
                what="the connection accepted",
                interval=0.005,
            )
        self.closed: list[float] = []  # when the server closed one, since it opened
        self._stop = threading.Event()
        self._opened = time.monotonic()
        self._threads = [
            threading.Thread(target=self._drip, args=(s, every), daemon=True) for s in self.socks
        ]
        for t in self._threads:
            t.start()

    def _drip(self, sock: socket.socket, every: float) -> None:
        """On a TLS port, these bytes are a handshake that never ends."""
        try:
            for byte in b"GET /healthz HTTP/1.0\r\nX-" + b"a" * 10_000:
                if self._stop.wait(every):
                    return
                sock.sendall(bytes([byte]))
        except OSError:  # reset by the server
            self.closed.append(time.monotonic() - self._opened)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)
        for s in self.socks:
            s.close()


def _held(server: Any) -> int:
    """Connections the server holds (each on a thread of its own)."""
    return len(server._live)


def test_the_kubelet_is_answered_while_a_pod_holds_every_slot(
    probes: ThreadingHTTPServer,
) -> None:
    """Before: 16 slow connections closed every probe unanswered (readiness dropped, and
    liveness restarted the replica). A probe that finds every slot held takes the pod's
    oldest (at most one each: a probe's own slot is freed as its answer goes)."""
    port = probes.server_address[1]
    attack = Trickle(probes, serving.MAX_CONNECTIONS, every=0.5)
    try:
        wait_for(lambda: _held(probes) == serving.MAX_CONNECTIONS, 10, what="every slot held")
        for _ in range(5):
            assert probe(port) == 200
        wait_for(lambda: attack.closed, 10, what="the pod's oldest connection cut")
        stays_false(lambda: len(attack.closed) > 5, 1.5, what="more cut than probes made")
        assert _held(probes) <= serving.MAX_CONNECTIONS
    finally:
        attack.stop()


def test_a_flood_from_the_address_holding_the_most_is_closed_as_it_comes_without_a_thread(
    probes: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_CONNECTIONS, each new connection from the address already holding the most
    is closed at accept: no thread, nothing read, none of its older ones closed. Before, each
    took the place of that address's oldest and started a thread of its own. A connection
    from another address still gets in and is answered."""
    started: list[object] = []
    serve_one = probes.process_request_thread

    def counted(request: Any, client_address: Any) -> None:
        started.append(client_address)
        serve_one(request, client_address)

    monkeypatch.setattr(probes, "process_request_thread", counted)
    # no connection is cut at its deadline while a loaded machine sets all this up: the
    # server reads REQUEST_TIMEOUT at each sweep (each drip, every 0.5 s, is within a read's)
    monkeypatch.setattr(serving, "REQUEST_TIMEOUT", 120.0)
    attack = Trickle(probes, serving.MAX_CONNECTIONS, every=0.5)
    flood: list[socket.socket] = []
    try:
        port = probes.server_address[1]
        for _ in range(20):
            flood.append(socket.create_connection(("127.0.0.1", port), 5, (ATTACKER, 0)))
        # closed by the server (the end of the stream, or a reset: readable either way)
        wait_for(
            lambda: len(select.select(flood, [], [], 0)[0]) == len(flood),
            5,
            what="every flooding connection closed",
            interval=0.05,
        )
        for sock in flood:
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(1) == b"", "a flooding connection was answered"
        assert len(started) == serving.MAX_CONNECTIONS, "a thread per flooding connection"
        assert attack.closed == [], "the flood closed the address's older connections"
        assert probe(port) == 200  # 127.0.0.1 holds none: room made from the pod's oldest
        assert len(started) == serving.MAX_CONNECTIONS + 1
        assert _held(probes) <= serving.MAX_CONNECTIONS
    finally:
        for sock in flood:
            sock.close()
        attack.stop()


def test_a_request_that_trickles_is_closed_at_its_deadline(
    probes: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read timeout is per read; the deadline is for the whole connection."""
    monkeypatch.setattr(serving, "REQUEST_TIMEOUT", 1.0)
    attack = Trickle(probes, 1, every=0.2)
    try:
        deadline = time.monotonic() + 10
        while not attack.closed and time.monotonic() < deadline:
            time.sleep(0.1)
        # cut at its deadline (1 s, and the sweep's 0.5 s); before, a drip every 0.2 s, each
        # within the per-read timeout, held it for as long as the drips came
        assert attack.closed, "the trickling connection is still open after 10 s"
    finally:
        attack.stop()


def test_prometheus_is_answered_while_a_pod_holds_every_slot_of_the_metrics_port(
    tmp_path: Path,
) -> None:
    """The metrics port: TLS, each handshake in its connection's thread; connections that
    never finish theirs, from a pod, do not keep a scrape out."""
    material = issue(["127.0.0.1"], dt.datetime.now(dt.UTC))
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(material.tls_crt)
    key.write_bytes(material.tls_key)
    auth: Any = MetricsAuth(cluster=None)  # type: ignore[arg-type]  # never asked: no token
    server = serving.serve_metrics("127.0.0.1", 0, cert, key, auth)
    port = server.server_address[1]
    attack = Trickle(server, serving.MAX_CONNECTIONS, every=0.5)
    try:
        wait_for(lambda: _held(server) == serving.MAX_CONNECTIONS, 10, what="every slot held")
        context = ssl.create_default_context(cadata=material.ca_crt.decode())
        for _ in range(3):
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
            conn.request("GET", "/metrics")
            assert conn.getresponse().status == 401  # answered: no token, so no review asked
            conn.close()
        wait_for(lambda: attack.closed, 10, what="the pod's oldest connection cut")
        assert _held(server) <= serving.MAX_CONNECTIONS
    finally:
        attack.stop()
        server.shutdown()
        server.server_close()


class Answer(NamedTuple):
    status: int
    content_type: str | None
    content_length: str | None
    body: bytes


def answer_of(conn: http.client.HTTPConnection, path: str, **headers: str) -> Answer:
    try:
        conn.request("GET", path, headers=headers)
        got = conn.getresponse()
        body = got.read()
        return Answer(
            got.status, got.getheader("Content-Type"), got.getheader("Content-Length"), body
        )
    finally:
        conn.close()


def get(port: int, path: str) -> Answer:
    return answer_of(http.client.HTTPConnection("127.0.0.1", port, timeout=5), path)


def text(status: int, body: bytes) -> Answer:
    """A plain-text answer, its length told."""
    return Answer(status, "text/plain", str(len(body)), body)


class Readiness:
    """The replica's readiness check, as each test sets it: a reason not to be ready, or the
    error the check fails with."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.error: Exception | None = None

    def __call__(self) -> str | None:
        if self.error is not None:
            raise self.error
        return self.reason


@pytest.fixture(scope="module")
def shared_probes() -> Iterator[tuple[ThreadingHTTPServer, Readiness]]:
    """One probe server for the tests that leave it as they found it (each of its servers
    costs half a second to stop: serve_forever's poll interval)."""
    readiness = Readiness()
    server = serving.serve_probes("127.0.0.1", 0, readiness)
    yield server, readiness
    server.shutdown()
    server.server_close()


@pytest.fixture
def ready_probes(
    shared_probes: tuple[ThreadingHTTPServer, Readiness],
) -> tuple[ThreadingHTTPServer, Readiness]:
    """The shared probe server, ready, holding no connection."""
    server, readiness = shared_probes
    readiness.reason, readiness.error = None, None
    wait_for(lambda: _held(server) == 0, 10, what="no connection held", interval=0.01)
    return server, readiness


def test_the_probe_port_answers_liveness_readiness_metrics_and_nothing_else(
    ready_probes: tuple[ThreadingHTTPServer, Readiness],
) -> None:
    """What the kubelet and a scraper read on the probe port (metrics are there unless the
    metrics port serves them). A query string is not part of the path, whatever it holds."""
    server, readiness = ready_probes
    port = server.server_address[1]
    assert get(port, "/healthz") == text(200, b"ok\n")
    assert get(port, "/healthz?verbose=1") == text(200, b"ok\n")
    assert get(port, "/readyz") == text(200, b"ok\n")
    assert get(port, "/readyz?a=1?b=2") == text(200, b"ok\n")
    readiness.reason = "the caches have not synced"
    assert get(port, "/readyz") == text(503, b"the caches have not synced\n")
    assert get(port, "/healthz") == text(200, b"ok\n")  # not ready, and alive all the same
    scraped = get(port, "/metrics")
    assert scraped.status == 200 and scraped.content_type == CONTENT_TYPE_LATEST
    assert b"\ntrainjob_build_info{" in scraped.body
    assert scraped.content_length == str(len(scraped.body))
    assert get(port, "/version") == text(404, b"not found\n")
    assert get(port, "/healthz/") == text(404, b"not found\n")
    # an answered request's connection is let go: it holds no slot a pod could need
    wait_for(lambda: _held(server) == 0, 10, what="answered connections let go", interval=0.01)


def test_the_probe_port_leaves_metrics_to_the_metrics_port_when_it_serves_them() -> None:
    server = serving.serve_probes("127.0.0.1", 0, lambda: None, metrics=False)
    try:
        port = server.server_address[1]
        assert get(port, "/metrics") == text(404, b"not found\n")
        assert get(port, "/healthz") == text(200, b"ok\n")
    finally:
        server.shutdown()
        server.server_close()


def test_a_readiness_check_that_raises_fails_the_probe_and_prints_its_traceback(
    ready_probes: tuple[ThreadingHTTPServer, Readiness], capsys: pytest.CaptureFixture[str]
) -> None:
    """Not an OSError of a connection: the kubelet's probe fails (no answer), and the
    traceback, naming the prober, is on stderr for the operator."""
    server, readiness = ready_probes
    readiness.error = RuntimeError("the cache is gone")
    with socket.create_connection(server.server_address, timeout=5) as kubelet:
        kubelet.sendall(b"GET /readyz HTTP/1.0\r\n\r\n")
        # closed unanswered, after the error was reported
        assert kubelet.makefile("rb").read() == b""
        prober = kubelet.getsockname()
    printed = capsys.readouterr().err
    assert f"Exception occurred during processing of request from {prober}\n" in printed
    assert "RuntimeError: the cache is gone" in printed


def test_a_connection_that_finds_every_slot_held_takes_one_of_the_address_holding_most(
    ready_probes: tuple[ThreadingHTTPServer, Readiness], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Room is made by the address with the most connections, not by whoever connected
    first: a scrape in flight from 127.0.0.1, older than every connection of the pod's, is
    answered, and the pod gives up its oldest."""
    server, _ = ready_probes
    port = server.server_address[1]
    monkeypatch.setattr(serving, "MAX_CONNECTIONS", 4)
    scrape = socket.create_connection(("127.0.0.1", port), timeout=5)
    pod: list[socket.socket] = []
    try:
        scrape.sendall(b"GET /readyz HTTP/1.0\r\n")  # its headers still to come
        wait_for(lambda: _held(server) == 1, 10, what="the scrape held", interval=0.01)
        for _ in range(3):
            pod.append(socket.create_connection(("127.0.0.1", port), 5, (ATTACKER, 0)))
            wait_for(lambda: _held(server) == len(pod) + 1, 10, what="held", interval=0.01)
        assert probe(port) == 200  # every slot was held: room was made for it
        scrape.sendall(b"\r\n")
        answer = scrape.makefile("rb").read()
        assert answer.startswith(b"HTTP/1.0 200 ") and answer.endswith(b"\r\n\r\nok\n")
        assert pod[0].recv(1) == b"", "the pod's oldest connection is still open"
        still_open = select.select(pod[1:], [], [], 0)[0]
        assert still_open == [], "more of the pod's connections were closed than needed"
    finally:
        scrape.close()
        for s in pod:
            s.close()


def test_a_connection_the_server_cannot_start_a_thread_for_is_closed_and_holds_no_slot(
    ready_probes: tuple[ThreadingHTTPServer, Readiness],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The process at its limit of threads: the connection is closed with the error on
    stderr, and its slot is free for the next (else each such failure would hold one until
    the deadline sweep)."""
    server, _ = ready_probes

    def no_thread(*args: object) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(socketserver.ThreadingMixIn, "process_request", no_thread)
    with socket.create_connection(server.server_address, timeout=5) as client:
        client.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        assert client.makefile("rb").read() == b""
        assert _held(server) == 0
    assert "RuntimeError: can't start new thread" in capsys.readouterr().err


def test_a_connection_already_closed_when_its_deadline_passes_is_dropped_quietly(
    ready_probes: tuple[ThreadingHTTPServer, Readiness],
) -> None:
    """Its thread closed it between the sweep's look and its cut: nothing to shut down, and
    no error out of the loop that serves the port."""
    server, _ = ready_probes
    gone = socket.socket()
    gone.close()
    with server._lock:  # type: ignore[attr-defined]
        server._live[gone] = Held(gone, ATTACKER, False, float("-inf"))  # type: ignore[attr-defined]
    server.service_actions()
    assert _held(server) == 0
    assert get(server.server_address[1], "/healthz") == text(200, b"ok\n")


@pytest.fixture(scope="module")
def material() -> Material:
    return issue(["127.0.0.1"], dt.datetime.now(dt.UTC))


@pytest.fixture
def tls_files(material: Material, tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(material.tls_crt)
    key.write_bytes(material.tls_key)
    return cert, key


class Reviewed(MetricsAuth):
    """The API server's verdicts, as its TokenReview and SubjectAccessReview would give
    them: Prometheus' token may get /metrics; a tenant's is valid but may not."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type]  # no cluster: _review answers

    def _review(self, token: str) -> Verdict:
        if token == "prometheus":
            return Verdict(200, "allowed")
        return Verdict(403, "system:serviceaccount:team-a:default may not get /metrics")


class MetricsPort(NamedTuple):
    server: ThreadingHTTPServer
    started: list[tuple[str, bool]]  # the threads serve_metrics started: (name, daemon)
    warned: list[str]  # the warnings serve_metrics gave
    context: ssl.SSLContext  # Prometheus' side: trusts the serving certificate's CA


@pytest.fixture(scope="module")
def metrics_port(
    material: Material, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetricsPort]:
    files = tmp_path_factory.mktemp("tls")
    cert, key = files / "tls.crt", files / "tls.key"
    cert.write_bytes(material.tls_crt)
    key.write_bytes(material.tls_key)
    before = set(threading.enumerate())
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        server = serving.serve_metrics("127.0.0.1", 0, cert, key, Reviewed())
    started = [(t.name, t.daemon) for t in threading.enumerate() if t not in before]
    context = ssl.create_default_context(cadata=material.ca_crt.decode())
    yield MetricsPort(server, started, [str(w.message) for w in warned], context)
    server.shutdown()
    server.server_close()


def test_the_metrics_port_answers_prometheus_and_refuses_the_others_with_the_reason(
    metrics_port: MetricsPort,
) -> None:
    # one thread serves the port (so shutdown() stops its only loop), named for it in a
    # thread dump, and a daemon: a replica's exit never waits for it
    assert metrics_port.started == [("metrics", True)]
    # and its TLS set up with nothing the ssl module deprecates (a later Python drops it)
    assert metrics_port.warned == []
    port = metrics_port.server.server_address[1]

    def scrape(path: str, **headers: str) -> Answer:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", port, context=metrics_port.context, timeout=5
        )
        return answer_of(conn, path, **headers)

    scraped = scrape("/metrics", Authorization="Bearer prometheus")
    assert scraped.status == 200 and scraped.content_type == CONTENT_TYPE_LATEST
    assert b"\ntrainjob_build_info{" in scraped.body
    assert scraped.content_length == str(len(scraped.body))
    assert scrape("/metrics?a=1?b=2", Authorization="Bearer prometheus").status == 200
    assert scrape("/metrics") == text(401, b"a bearer token is required\n")
    assert scrape("/metrics", Authorization="Bearer tenant") == text(
        403, b"system:serviceaccount:team-a:default may not get /metrics\n"
    )
    # only /metrics is served here, whoever asks: no token is reviewed for another path
    assert scrape("/healthz") == text(404, b"not found\n")
    assert scrape("/healthz", Authorization="Bearer prometheus") == text(404, b"not found\n")


def test_a_connection_that_ends_in_an_error_of_its_own_is_logged_at_debug_only(
    metrics_port: MetricsPort,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Plain HTTP to the TLS port: its handshake fails in its thread. A pod can do that on
    every port all day: one debug line naming the connection and why, no traceback."""
    caplog.set_level(logging.DEBUG, logger=serving.__name__)

    def ours() -> list[logging.LogRecord]:
        # not the lines of the pod's connections an earlier test left ending
        return [
            r
            for r in caplog.records
            if r.name == serving.__name__ and ATTACKER not in str(fields(r).get("client"))
        ]

    with socket.create_connection(metrics_port.server.server_address, timeout=5) as client:
        client.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        address = client.getsockname()
        ended = wait_for(ours, 10, what="the connection's end logged", interval=0.01)
    assert [r.levelno for r in ended] == [logging.DEBUG]
    assert ended[0].getMessage() == "connection ended"
    assert fields(ended[0])["client"] == str(address)
    assert str(fields(ended[0])["error"]).startswith("[SSL")
    assert "Traceback" not in capsys.readouterr().err


def test_a_taken_port_is_refused_naming_the_flags_that_choose_it(
    tls_files: tuple[Path, Path],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said = f"cannot serve probes on 127.0.0.1:{port} (--bind-address, --health-port): "
        with pytest.raises(OSError, match=re.escape(said) + "Address already in use$"):
            serving.serve_probes("127.0.0.1", port, lambda: None)
        said = f"cannot serve metrics on 127.0.0.1:{port} (--bind-address, --metrics-port): "
        with pytest.raises(OSError, match=re.escape(said) + "Address already in use$"):
            serving.serve_metrics("127.0.0.1", port, *tls_files, Reviewed())


def test_closing_the_probe_port_does_not_wait_for_a_client_that_holds_a_connection() -> None:
    """A client that connects and sends nothing is not waited for (up to the read timeout,
    10 s) by server_close(): its connection's thread is a daemon, which the process's exit
    does not wait for either."""
    server = serving.serve_probes("127.0.0.1", 0, lambda: None)
    client = socket.create_connection(server.server_address, timeout=5)
    closed = threading.Event()

    def close() -> None:
        server.shutdown()
        server.server_close()
        closed.set()

    closer = threading.Thread(target=close)
    try:
        wait_for(lambda: _held(server) == 1, 10, what="the connection held", interval=0.01)
        closer.start()
        # the client keeps its connection open until the server is closed, or this fails
        assert closed.wait(5), "server_close() waited for the client's connection"
    finally:
        client.close()
        if closer.ident is not None:
            closer.join()


def test_the_probe_port_is_served_by_one_daemon_thread_named_for_it() -> None:
    """Named in a thread dump, and a daemon: a replica's exit never waits for its probes."""
    before = set(threading.enumerate())
    server = serving.serve_probes("127.0.0.1", 0, lambda: None)
    try:
        started = [(t.name, t.daemon) for t in threading.enumerate() if t not in before]
        assert started == [("probes", True)]
    finally:
        server.shutdown()
        server.server_close()


def test_a_burst_of_connections_waits_in_the_listen_queue_until_the_server_accepts() -> None:
    """128 connections opened before the serving thread accepts any (a pod's burst, with the
    kubelet's probe among them) are all established by the kernel and wait their turn. With
    the standard library's queue of 5, the seventh on had their SYN dropped and tried again a
    second later, past a kubelet probe's timeout."""
    server = serving._serve("127.0.0.1", 0, serving._Quiet, "probes", "--health-port", start=False)
    clients: list[socket.socket] = []
    try:
        for _ in range(128):
            client = socket.socket()
            client.setblocking(False)
            client.connect_ex(server.server_address)
            clients.append(client)

        def established() -> bool:
            _, writable, _ = select.select([], clients, [], 0)
            return len(writable) == len(clients)

        wait_for(established, 10, what="128 connections established", interval=0.05)
        assert [c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) for c in clients] == [0] * 128
    finally:
        for client in clients:
            client.close()
        server.server_close()
