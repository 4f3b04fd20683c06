"""Test helpers: polling with a deadline and small object factories."""

from __future__ import annotations

import contextlib
import datetime as dt
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar

from kubecontrol.certs import issue
from kubecontrol.client import ApiClient
from kubecontrol.credentials import load_credentials
from kubecontrol.webhook_server import Route, WebhookServer

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float = 60.0,
    *,
    what: str = "condition",
    interval: float = 0.25,
) -> T:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # the API may be briefly unavailable (e.g. during restarts)
            last_error = exc
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def stays_false(
    predicate: Callable[[], object], seconds: float, *, what: str, interval: float = 0.25
) -> None:
    """Poll `predicate` for `seconds`; fail as soon as it returns something truthy. For what
    must not happen, given time to happen (e.g. a few resync periods of a controller)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            raise AssertionError(f"{what} happened within {seconds:.0f}s")
        time.sleep(interval)


def sooner_than(took: float, alternative: float, what: str) -> None:
    """Fail unless `took` seconds is less than `alternative`, the time `what` (the behaviour the
    one under test replaces) would take at least. An ordering, not a speed: the bound is the
    logic's, so a loaded machine narrows the margin but never turns a right answer wrong. The
    suite's guard refuses any other upper bound on a clock in a test."""
    assert took < alternative, f"took {took:.1f}s: as long as {what} ({alternative:g}s)"


def loopback_client(port: int) -> ApiClient:
    """Our API client for plain HTTP on a loopback port (a test server of the test's own)."""
    return ApiClient(load_credentials({
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k"}}],
        "clusters": [{"name": "k", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
    }))  # fmt: skip


class QuietHandler(BaseHTTPRequestHandler):
    """A test server's handler that logs nothing and answers in one call."""

    def reply(self, code: int, body: bytes, **headers: str) -> None:
        """`body` as JSON with status `code` and more `headers` (`Retry_After="3"`)."""
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@contextlib.contextmanager
def http_server(
    handler: type[BaseHTTPRequestHandler], port: int = 0, tls: ssl.SSLContext | None = None
) -> Iterator[int]:
    """A loopback HTTP server answering with `handler`, in a thread (on `port`, or any free
    one), over TLS when given a server context; yields its port."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def loopback_webhooks(
    routes: Mapping[str, Route], resource: tuple[str, str]
) -> Iterator[tuple[WebhookServer, bytes]]:
    """The product's webhook server on a loopback port with a certificate of its own, ready
    at once (its CA, for clients); stopped on leaving."""
    material = issue(["127.0.0.1"], dt.datetime.now(dt.UTC))
    stop, ready = threading.Event(), threading.Event()
    ready.set()
    with tempfile.TemporaryDirectory() as scratch:
        crt, key = Path(scratch) / "tls.crt", Path(scratch) / "tls.key"
        crt.write_bytes(material.tls_crt)
        key.write_bytes(material.tls_key)
        server = WebhookServer("127.0.0.1", 0, (crt, key), routes, ready, resource=resource)
        server.start(stop)
        try:
            wait_for(lambda: server.port or None, 10, what="the webhook server's port")
            yield server, material.ca_crt
        finally:
            stop.set()
