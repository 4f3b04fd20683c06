"""The HTTP endpoints a cluster asks a controller for: /healthz, /readyz and /metrics."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kubecontrol.metrics import REGISTRY

log = logging.getLogger(__name__)


def serve_probes(
    address: str, port: int, not_ready: Callable[[], str | None]
) -> ThreadingHTTPServer:
    """Serve in a thread: /healthz answers while the process runs; /readyz answers 200 when
    `not_ready()` has nothing to say (else 503 with its reason); /metrics in Prometheus' text
    format. Raises OSError naming the address when the port is taken."""

    class Handler(BaseHTTPRequestHandler):
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
            elif path == "/metrics":
                self._answer(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
            else:
                self._answer(404, b"not found\n")

        def _answer(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # probes every few seconds
            pass

    try:
        server = ThreadingHTTPServer((address, port), Handler)
    except OSError as exc:
        raise OSError(
            f"cannot serve probes and metrics on {address}:{port} (--bind-address, "
            f"--health-port): {exc.strerror}"
        ) from None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="probes", daemon=True).start()
    return server
