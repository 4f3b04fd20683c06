"""What our API client does when no answer comes: a loopback port that accepts and never
answers (a timeout), and one that refuses. Both are transient (kube.io_retry retries them).
And what it keeps of an error answer, from a loopback HTTP server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pycurl
import pytest

from trainjob import kube
from trainjob.kubeclient import ApiClient, ApiException, TransportError, load_credentials


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def test_no_answer_is_a_transient_transport_error(silent_server: int) -> None:
    silent = ApiClient(load_credentials({
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k"}}],
        "clusters": [{"name": "k", "cluster": {"server": f"http://127.0.0.1:{silent_server}"}}],
    }))  # fmt: skip
    with pytest.raises(TransportError) as timed_out:
        silent.request("GET", "/api", timeout=0.5)
    assert timed_out.value.code == pycurl.E_OPERATION_TIMEDOUT
    assert kube._transient(timed_out.value)

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # a port nobody listens on
    closed = replace(silent.credentials, server=f"http://127.0.0.1:{port}")
    with pytest.raises(TransportError) as refused:
        ApiClient(closed).request("GET", "/api")
    assert refused.value.code == pycurl.E_COULDNT_CONNECT
    assert kube._transient(refused.value) and isinstance(refused.value, ConnectionError)


@pytest.fixture
def refusing_server() -> Iterator[int]:
    """A loopback HTTP server that answers every request 429 with `Retry-After`, as the API
    server does when its priority and fairness turns a request away."""

    class Refuse(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"kind":"Status","code":429,"message":"too many requests"}'
            self.send_response(429)
            self.send_header("Content-Type", "application/json")
            self.send_header("Retry-After", "3")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_an_error_answer_keeps_status_reason_body_and_the_headers_a_client_acts_on(
    refusing_server: int,
) -> None:
    # A request's header lines are not handed to Python; what an error needs, libcurl keeps.
    client = ApiClient(load_credentials({
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k"}}],
        "clusters": [{"name": "k", "cluster": {"server": f"http://127.0.0.1:{refusing_server}"}}],
    }))  # fmt: skip
    for _ in range(2):  # the second on a handle that served before
        with pytest.raises(ApiException) as refused:
            client.request("GET", "/api/v1/namespaces")
        exc = refused.value
        assert (exc.status, exc.reason) == (429, "Too Many Requests")
        assert exc.headers == {"Content-Type": "application/json", "Retry-After": "3"}
        assert '"too many requests"' in exc.body
