"""The probe and metrics ports on loopback, against a pod that holds slow connections: the
kubelet's probes and Prometheus' scrapes are answered all the same, and a connection that
trickles its request is closed at its deadline.

The attacker connects from 127.0.0.2 (the whole of 127/8 is this host's), as a training pod
would from its own address; the kubelet and Prometheus from 127.0.0.1."""

from __future__ import annotations

import datetime as dt
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from clusters.helpers.waiting import stays_false, wait_for
from kubecontrol import serving
from kubecontrol.certs import issue
from kubecontrol.metrics_auth import MetricsAuth

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
    """Slow connections from the attacker's address: each sends a byte of a request line
    every `every` seconds, on a thread of its own, until stopped."""

    def __init__(self, port: int, count: int, every: float) -> None:
        self.socks = [
            socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(ATTACKER, 0))
            for _ in range(count)
        ]
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
    attack = Trickle(port, serving.MAX_CONNECTIONS, every=0.5)
    try:
        wait_for(lambda: _held(probes) == serving.MAX_CONNECTIONS, 10, what="every slot held")
        for _ in range(5):
            assert probe(port) == 200
        wait_for(lambda: attack.closed, 10, what="the pod's oldest connection cut")
        stays_false(lambda: len(attack.closed) > 5, 1.5, what="more cut than probes made")
        assert _held(probes) <= serving.MAX_CONNECTIONS
    finally:
        attack.stop()


def test_connections_past_the_bound_each_cut_one_and_never_add_a_thread(
    probes: ThreadingHTTPServer,
) -> None:
    """A flood of connections is not a flood of threads: past MAX_CONNECTIONS each new one
    takes the place of the oldest of the address holding the most."""
    port = probes.server_address[1]
    extra = 4
    attack = Trickle(port, serving.MAX_CONNECTIONS + extra, every=0.3)
    try:
        wait_for(lambda: len(attack.closed) == extra, 10, what=f"{extra} connections cut")
        stays_false(lambda: len(attack.closed) > extra, 1.0, what="more connections cut")
        assert _held(probes) == serving.MAX_CONNECTIONS
    finally:
        attack.stop()


def test_a_request_that_trickles_is_closed_at_its_deadline(
    probes: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read timeout is per read; the deadline is for the whole connection."""
    monkeypatch.setattr(serving, "REQUEST_TIMEOUT", 1.0)
    attack = Trickle(probes.server_address[1], 1, every=0.2)
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
    attack = Trickle(port, serving.MAX_CONNECTIONS, every=0.5)
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
