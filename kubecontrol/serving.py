"""The HTTP endpoints a cluster asks a controller for: /healthz and /readyz over HTTP, and
/metrics over HTTPS for the callers the API server vouches for (kubecontrol/metrics_auth.py),
or, with the metrics port 0, over HTTP beside the probes."""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kubebase.shares import Held, make_room, turned_away
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


# Each connection: this long from accept to the end of its answer (a probe or a scrape is one
# request; the time covers the TLS handshake, the request line, headers and the answer), and
# this many served at once per port: probes and scrapes are small and few, and a flood of
# connections must not become a flood of threads. Beyond it, a new connection from an address
# that already holds the most connections is closed as it is accepted (no thread, no TLS
# handshake, nothing read); one from an address holding fewer gets in, and the address holding
# the most gives up its oldest (plugin/kubebase/shares.py), so slow connections from a pod never
# keep the kubelet's probes or Prometheus out, and a pod's flood costs it its own newcomers.
REQUEST_TIMEOUT = 10.0
MAX_CONNECTIONS = 16
# Connections the kernel holds before the serving thread accepts them. The standard library's
# 5 dropped the SYN of the seventh connection of a burst, and its client tried again a second
# later: a kubelet probe (1 s timeout by default) behind a few pod connections failed. Not
# thousands either: the queue is first come, first served, and a burst a busy process accepts
# slowly would keep a probe waiting behind all of it (asyncio's servers hold 100).
LISTEN_BACKLOG = 128


class _Quiet(BaseHTTPRequestHandler):
    timeout = REQUEST_TIMEOUT  # per read; the whole connection's deadline is the server's

    def _answer(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # probes every few seconds
        pass


class _BoundedServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with at most MAX_CONNECTIONS connections served at once, each
    within REQUEST_TIMEOUT of its accept."""

    request_queue_size = LISTEN_BACKLOG

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._live: dict[socket.socket, Held[socket.socket]] = {}

    def verify_request(self, request: Any, client_address: Any) -> bool:
        """On the serving thread, as each connection is accepted: False (socketserver then
        closes it) for a newcomer from the address already holding the most of a full table."""
        with self._lock:
            refused = turned_away(
                list(self._live.values()), MAX_CONNECTIONS, _source(client_address)
            )
        if refused:
            log.debug(
                "connection closed: its address holds the most",
                extra={"client": str(client_address)},
            )
        return not refused

    def process_request(self, request: Any, client_address: Any) -> None:
        source = _source(client_address)
        with self._lock:
            victim = make_room(list(self._live.values()), MAX_CONNECTIONS)
            if victim is not None:
                self._cut(victim)
            self._live[request] = Held(request, source, False, time.monotonic())
        try:
            super().process_request(request, client_address)
        except Exception:
            with self._lock:
                self._live.pop(request, None)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._live.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection cut or reset under its handler (its deadline, or room made) is no
        error worth a traceback on every probe port a pod floods."""
        if isinstance(sys.exc_info()[1], OSError):
            log.debug(
                "connection ended",
                extra={"client": str(client_address), "error": str(sys.exc_info()[1])},
            )
            return
        super().handle_error(request, client_address)

    def service_actions(self) -> None:
        """Between polls of the listening socket (every 0.5 s): connections past their
        deadline are cut."""
        late = time.monotonic() - REQUEST_TIMEOUT
        with self._lock:
            for held in [h for h in self._live.values() if h.since < late]:
                self._cut(held.ref)

    def _cut(self, sock: socket.socket) -> None:
        """End a connection now: its thread's pending read returns, and the thread ends and
        closes it. Called with the lock held."""
        self._live.pop(sock, None)
        # the plain socket's shutdown: an SSLSocket's own would drop its TLS state under the
        # thread still using it; OSError: already closed by its thread
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _source(client_address: Any) -> Any:
    """Whose a connection is: its peer's address (the whole of it for a Unix socket)."""
    return client_address[0] if isinstance(client_address, tuple) else client_address


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
