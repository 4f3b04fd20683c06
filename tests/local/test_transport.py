"""What our API client does when no answer comes: a loopback port that accepts and never
answers (a timeout, or the low-speed limit without one), and one that refuses. Both are
transient (kube.io_retry retries them). And what it keeps of an error answer, and how long it
waits when told to (Retry-After), from a loopback HTTP server."""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import select
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import orjson
import pycurl
import pytest

from clusters import pki
from clusters.helpers.waiting import QuietHandler, http_server, loopback_client
from kubecontrol import client as kubeclient
from kubecontrol import cluster as kube
from kubecontrol.certs import issue
from kubecontrol.client import ApiClient, ApiException, TransportError, _curl_setup
from kubecontrol.credentials import Credentials


def test_no_answer_is_a_transient_transport_error(silent_server: int) -> None:
    silent = loopback_client(silent_server)
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


def test_a_request_that_got_no_answer_leaves_no_handle_to_reuse(silent_server: int) -> None:
    """A handle keeps the addresses it resolved for a minute: after a failed connect, the
    next request must look the name up again, on a handle of its own."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    api = ApiClient(
        replace(loopback_client(silent_server).credentials, server=f"http://127.0.0.1:{port}")
    )
    for _ in range(3):
        with pytest.raises(TransportError):
            api.request("GET", "/api")
        assert api._idle == []
    answering = loopback_client(silent_server)
    with pytest.raises(TransportError):
        answering.request("GET", "/api", timeout=0.3)
    assert answering._idle == []


@pytest.fixture
def refusing_server() -> Iterator[int]:
    """A loopback HTTP server that answers every request 429 with `Retry-After`, as the API
    server does when its priority and fairness turns a request away."""

    class Refuse(QuietHandler):
        def do_GET(self) -> None:
            body = b'{"kind":"Status","code":429,"message":"too many requests"}'
            self.reply(429, body, Retry_After="3")

    with http_server(Refuse) as port:
        yield port


def test_an_error_answer_keeps_status_reason_body_and_the_headers_a_client_acts_on(
    refusing_server: int,
) -> None:
    # A request's header lines are not handed to Python; what an error needs, libcurl keeps.
    client = loopback_client(refusing_server)
    for _ in range(2):  # the second on a handle that served before
        with pytest.raises(ApiException) as refused:
            client.request("GET", "/api/v1/namespaces")
        exc = refused.value
        assert (exc.status, exc.reason) == (429, "Too Many Requests")
        assert exc.headers == {"Content-Type": "application/json", "Retry-After": "3"}
        assert '"too many requests"' in exc.body


def test_a_request_without_a_timeout_ends_when_its_answer_stops_coming(
    silent_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The low-speed limit (30 s; 1 s here) ends it; without one it would wait for ever."""
    monkeypatch.setattr(kubeclient, "LOW_SPEED_SECONDS", 1)
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            loopback_client(silent_server).request("GET", "/api")
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(15)
    assert not thread.is_alive(), "a request with no timeout waited on a silent server"
    assert isinstance(outcome[0], TransportError)
    assert outcome[0].code == pycurl.E_OPERATION_TIMEDOUT and kube._transient(outcome[0])


def test_a_retry_waits_as_long_as_retry_after_asks() -> None:
    """Two 429s with Retry-After: 2, then an answer: each retry came 2 s or more after the
    refusal (the backoff alone would have sent it after 0.2-1.4 s)."""
    arrivals: list[float] = []

    class Busy(QuietHandler):
        def do_GET(self) -> None:
            arrivals.append(time.monotonic())
            if len(arrivals) <= 2:
                self.reply(429, b'{"kind":"Status","code":429}', Retry_After="2")
            else:
                self.reply(200, b'{"kind":"APIVersions"}')

    with http_server(Busy) as port:
        answer = kube.io_retry(loopback_client(port).get_json)("/api")
    assert answer == {"kind": "APIVersions"} and len(arrivals) == 3
    assert all(later - earlier >= 1.95 for earlier, later in itertools.pairwise(arrivals))


def test_a_tenant_sized_body_arrives_whole_and_no_idle_handle_keeps_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Bodies go out in pieces of the client's upload buffer (libcurl's least, 16 KiB, to keep
    # idle handles small); a tenant-sized object is many of them, sent on a kept connection.
    # The handle then waits in the pool without it (pycurl would keep it for the handle's life).
    class Echo(QuietHandler):
        protocol_version = "HTTP/1.1"  # the connection stays open for the next request
        peers: ClassVar[set[tuple[str, int]]] = set()

        def do_POST(self) -> None:
            self.peers.add(self.client_address)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            code = 409 if self.path.endswith("/taken") else 200  # an error answer keeps none
            self.reply(code, orjson.dumps({"sha256": hashlib.sha256(body).hexdigest()}))

        do_PATCH = do_PUT = do_POST

    sent = {"kind": "ConfigMap", "data": {str(i): "x" * 1000 for i in range(1500)}}
    want = hashlib.sha256(orjson.dumps(sent)).hexdigest()
    assert len(orjson.dumps(sent)) > 90 * kubeclient.UPLOAD_BUFFER
    bodies: list[bytes] = []

    def dumps(obj: object) -> bytes:
        bodies.append(orjson.dumps(obj))
        return bodies[-1]

    monkeypatch.setattr(kubeclient, "orjson", SimpleNamespace(dumps=dumps, loads=orjson.loads))
    with http_server(Echo) as port:
        client = loopback_client(port)
        for method in ("POST", "PATCH", "PUT"):
            answer = client.request(method, "/api/v1/namespaces/a/configmaps", body=sent)
            assert orjson.loads(answer) == {"sha256": want}, method
            # the body sent, held by `bodies` and getrefcount's argument alone (counted before
            # the assert, whose rewriting by pytest would hold it once more)
            held = sys.getrefcount(bodies[-1])
            assert held == 2, method
        with pytest.raises(ApiException) as refused:
            client.request("POST", "/api/v1/namespaces/a/configmaps/taken", body=sent)
        assert refused.value.status == 409
        held = sys.getrefcount(bodies[-1])
        assert held == 2, "after an error answer"
        assert len(client._idle) == 1 and len(Echo.peers) == 1, "one handle, one connection"
        # nor does libcurl keep a copy: the idle handle, sent as it is, sends an empty body
        curl, answer_chunks = client._idle[-1], list[bytes]()
        curl.setopt(pycurl.WRITEFUNCTION, answer_chunks.append)
        curl.setopt(pycurl.URL, f"http://127.0.0.1:{port}/api/v1/namespaces/a/configmaps")
        curl.perform()
        assert orjson.loads(b"".join(answer_chunks)) == {"sha256": hashlib.sha256().hexdigest()}


def test_every_handle_sends_from_the_small_upload_buffer() -> None:
    # What the buffer saves shows only in memory (benchmarks/connections.py): here, that it is set.
    client = loopback_client(1)
    assert (pycurl.UPLOAD_BUFFERSIZE, kubeclient.UPLOAD_BUFFER) in client._curl_options
    assert kubeclient.UPLOAD_BUFFER == 16 * 1024  # libcurl's least


def test_only_the_kubeconfigs_ca_is_trusted_never_libcurls_built_in_folder(tmp_path: Path) -> None:
    """client-go trusts a kubeconfig's CA alone. Debian's libcurl is built with a CA folder
    (/etc/ssl/certs: every public root) that it reads besides a CA given as data or a file,
    unless it is unset. A folder holding the server's CA stands in for it here, set on the
    handle before the cluster's options as libcurl's built-in default is: the server is then
    trusted only when the kubeconfig names its CA."""
    now = dt.datetime.now(dt.UTC)
    served = issue(["127.0.0.1"], now)
    other = pki.ensure_ca(tmp_path / "other", name="another-ca").cert_pem()  # another subject
    folder = tmp_path / "certs"
    folder.mkdir()
    (folder / "served-ca.pem").write_bytes(served.ca_crt)
    subprocess.run(["openssl", "rehash", str(folder)], check=True)  # as a CA folder is kept
    (tmp_path / "other-ca.pem").write_bytes(other)
    (tmp_path / "tls.crt").write_bytes(served.tls_crt)
    (tmp_path / "tls.key").write_bytes(served.tls_key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")

    class Answer(QuietHandler):
        def do_GET(self) -> None:
            self.reply(200, b"{}")

    class Proxy(QuietHandler):  # an https proxy tunnelling CONNECT to loopback ports alone
        def do_CONNECT(self) -> None:
            host, port = self.path.rsplit(":", 1)
            assert host == "127.0.0.1"
            upstream = socket.create_connection((host, int(port)), timeout=5)
            self.send_response(200)
            self.end_headers()
            ends = [self.connection, upstream]
            while ready := select.select(ends, [], [], 5)[0]:
                for end in ready:
                    data = end.recv(65536)
                    if not data:
                        upstream.close()
                        return
                    (upstream if end is self.connection else self.connection).sendall(data)
            upstream.close()

    def status(credentials: Credentials, *more: tuple[int, object]) -> int:
        curl = pycurl.Curl()
        curl.setopt(pycurl.CAPATH, str(folder))  # the stand-in for the built-in folder
        curl.setopt(pycurl.PROXY_CAPATH, str(folder))  # and the proxy's
        curl.setopt(pycurl.CAINFO, str(folder / "served-ca.pem"))  # the built-in CA file
        curl.setopt(pycurl.PROXY_CAINFO, str(folder / "served-ca.pem"))
        origin, options = _curl_setup(credentials)
        for option, value in [*options, *more]:
            curl.setopt(option, value)
        curl.setopt(pycurl.URL, origin + "/api")
        curl.setopt(pycurl.WRITEFUNCTION, lambda _: None)
        try:
            curl.perform()
            return int(curl.getinfo(pycurl.RESPONSE_CODE))
        except pycurl.error as exc:
            return int(exc.args[0])
        finally:
            curl.close()

    with http_server(Answer, tls=context) as port:
        server = Credentials(server=f"https://127.0.0.1:{port}")
        assert status(replace(server, ca_pem=served.ca_crt.decode())) == 200
        assert status(replace(server, ca_pem=other.decode())) == pycurl.E_PEER_FAILED_VERIFICATION
        assert status(replace(server, ca_file=str(tmp_path / "other-ca.pem"))) == 60
        # The stand-in does what the built-in folder would, were it left set:
        leaves_it = replace(server, ca_pem=other.decode())
        assert status(leaves_it, (pycurl.CAPATH, str(folder))) == 200
        # An https proxy is verified as the server is (Go verifies it with the transport's TLS
        # settings): through the kubeconfig's CA alone, or not at all when told to skip.
        with http_server(Proxy, tls=context) as proxy_port:
            proxied = replace(server, proxy_url=f"https://127.0.0.1:{proxy_port}")
            assert status(replace(proxied, ca_pem=served.ca_crt.decode())) == 200
            assert status(replace(proxied, ca_pem=other.decode()), (pycurl.SSL_VERIFYPEER, 0)) in (
                pycurl.E_PEER_FAILED_VERIFICATION,
                pycurl.E_SSL_CONNECT_ERROR,
            )  # the server's check off: what fails is the proxy's
            assert status(
                replace(proxied, ca_file=str(tmp_path / "other-ca.pem")), (pycurl.SSL_VERIFYPEER, 0)
            ) in (pycurl.E_PEER_FAILED_VERIFICATION, pycurl.E_SSL_CONNECT_ERROR)
            nothing = tmp_path / "no-certs"
            nothing.mkdir()
            trusting_none = [
                (pycurl.CAPATH, str(nothing)), (pycurl.PROXY_CAPATH, str(nothing)),
                (pycurl.CAINFO, None), (pycurl.PROXY_CAINFO, None),
            ]  # fmt: skip
            assert status(replace(proxied, insecure=True), *trusting_none) == 200
