"""The HTTP endpoints a cluster asks a controller for: /healthz and /readyz over HTTP, and
/metrics over HTTPS for the callers the API server vouches for (kubecontrol/metrics_auth.py),
or, with the metrics port 0, over HTTP beside the probes."""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kubecontrol.metrics import REGISTRY
from kubecontrol.metrics_auth import MetricsAuth

log = logging.getLogger(__name__)


def serve_probes(
    address: str, port: int, not_ready: Callable[[], str | None], *, metrics: bool = True
) -> ThreadingHTTPServer:
    """Serve in a thread: /healthz answers while the process runs; /readyz answers 200 when
    `not_ready()` has nothing to say (else 503 with its reason); with `metrics`, /metrics in
    Prometheus' text format. Raises OSError naming the address when the port is taken."""

    class Handler(_Quiet):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                self._answer(200, b"ok\n")
            elif path == "/readyz":
                reason = not_ready()
                if reason is None:
                    self._answer(200, b"ok\n")
                else:
                    self._answer(503, f"{reason}\n".encode())
            elif path == "/metrics" and metrics:
                self._answer(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
            else:
                self._answer(404, b"not found\n")

    return _serve(address, port, Handler, "probes", "--health-port")


def serve_metrics(
    address: str, port: int, cert: Path, key: Path, auth: MetricsAuth
) -> ThreadingHTTPServer:
    """Serve /metrics over HTTPS (certificate `cert`, key `key`) in a thread, to callers whose
    bearer token `auth` allows; 401 or 403 with the reason to the others."""

    class Handler(_Quiet):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self._answer(404, b"not found\n")
                return
            verdict = auth.check(self.headers.get("Authorization"))
            if verdict.code != 200:
                self._answer(verdict.code, f"{verdict.reason}\n".encode())
                return
            self._answer(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)

    server = _serve(address, port, Handler, "metrics", "--metrics-port", start=False)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    # The handshake happens in each request's thread, so a slow client holds up no other.
    server.socket = context.wrap_socket(
        server.socket, server_side=True, do_handshake_on_connect=False
    )
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


# Each connection: this long to send its request (a slow or idle one is closed), and this
# many served at once per port (more are closed at once): probes and scrapes are small and
# few, and a flood of connections must not become a flood of threads.
REQUEST_TIMEOUT = 10.0
MAX_CONNECTIONS = 16


class _Quiet(BaseHTTPRequestHandler):
    timeout = REQUEST_TIMEOUT

    def _answer(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # probes every few seconds
        pass


class _BoundedServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with at most MAX_CONNECTIONS connections served at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # all slots busy: closed, not queued
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def _serve(
    address: str,
    port: int,
    handler: type[BaseHTTPRequestHandler],
    name: str,
    flag: str,
    start: bool = True,
) -> ThreadingHTTPServer:
    try:
        server = _BoundedServer((address, port), handler)
    except OSError as exc:
        raise OSError(
            f"cannot serve {name} on {address}:{port} (--bind-address, {flag}): {exc.strerror}"
        ) from None
    server.daemon_threads = True
    if start:
        threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server
