"""What our API client does when no answer comes: a loopback port that accepts and never
answers (a timeout), and one that refuses. Both are transient (kube.io_retry retries them)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import replace

import pycurl
import pytest

from trainjob import kube
from trainjob.kubeclient import ApiClient, TransportError, load_credentials


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
