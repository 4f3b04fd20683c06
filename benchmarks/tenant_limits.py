"""Benchmark: what a hostile tenant's inputs cost the controllers, on loopback only.

Two figures, each printed with what it measured:
- memory: the peak Python allocation (tracemalloc) and the time of one runtime resolution of
  an MPI TrainJob with `--nodes` nodes (the pass the dispatcher runs before admission);
- idle connections: `--connections` TCP connections opened to the webhook server and to the
  probe server (each in this process, on 127.0.0.1) that send nothing, and as many TLS
  connections to the webhook server that send no request, and how many each server still
  holds open after `--wait` seconds (a closed one reads as end-of-file).

    .venv/bin/python benchmarks/tenant_limits.py --nodes 1000000 --connections 20 --wait 40
"""

from __future__ import annotations

import argparse
import datetime as dt
import socket
import ssl
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubecontrol.admission import Verdict
from kubecontrol.certs import issue
from kubecontrol.serving import serve_probes
from kubecontrol.webhook_server import WebhookServer
from tests.support.builders import make_trainjob, mpi_runtime
from trainjob.models import parse_trainjob
from trainjob.runtime import resolve_runtime_info
from trainjob_api.views import RuntimeView

Dict = dict[str, Any]


def resolution(nodes: int) -> tuple[float, float, str]:
    """(peak MiB, seconds, outcome) of one resolution of an MPI TrainJob of `nodes` nodes."""
    tj = parse_trainjob(
        make_trainjob("big", runtimeRef={"name": "mpi-runtime"}, trainer={"numNodes": nodes})
    )
    tracemalloc.start()
    started = time.perf_counter()
    info, problem = resolve_runtime_info(tj, RuntimeView(mpi_runtime()))
    spent = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    outcome = "built" if info is not None else f"refused: {problem.message[:90] if problem else ''}"
    return peak / 2**20, spent, outcome


def _still_open(socks: list[socket.socket]) -> int:
    """How many of `socks` the server has not closed (no end-of-file to read)."""
    open_ = 0
    for sock in socks:
        sock.setblocking(False)
        try:
            open_ += sock.recv(1) != b""
        except (BlockingIOError, ssl.SSLWantReadError):
            open_ += 1  # nothing to read: still open
        except OSError:
            pass
    return open_


def idle_connections(count: int, wait: float) -> dict[str, int]:
    """Connections each server still holds `wait` seconds after `count` idle ones opened."""
    stop = threading.Event()
    ready = threading.Event()
    ready.set()
    with tempfile.TemporaryDirectory() as tmp:
        material = issue(["127.0.0.1"], dt.datetime.now(dt.UTC))
        crt, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        crt.write_bytes(material.tls_crt)
        key.write_bytes(material.tls_key)

        async def allow(admission: Dict) -> Verdict:
            return Verdict()

        webhook = WebhookServer(
            "127.0.0.1",
            0,
            (crt, key),
            {"/x": allow},
            ready,
            resource=("trainer.kubeflow.org", "trainjobs"),
        )
        webhook.start(stop)
        probes = serve_probes("127.0.0.1", 0, lambda: None)
        ports = {"webhook": webhook.port, "probes": probes.server_address[1]}
        time.sleep(0.5)
        held = {}
        opened = {
            name: [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
            for name, port in ports.items()
        }
        # And to the webhook port over TLS: the handshake done, no request sent.
        tls = ssl.create_default_context(cadata=material.ca_crt.decode())
        opened["webhook (TLS, no request)"] = [
            tls.wrap_socket(
                socket.create_connection(("127.0.0.1", webhook.port)), server_hostname="127.0.0.1"
            )
            for _ in range(count)
        ]
        time.sleep(wait)
        for name, socks in opened.items():
            held[name] = _still_open(socks)
            for sock in socks:
                sock.close()
        stop.set()
        probes.shutdown()
    return held


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--wait", type=float, default=40.0)
    args = parser.parse_args()
    peak, spent, outcome = resolution(args.nodes)
    print(
        f"resolution of an MPI TrainJob of {args.nodes} nodes: peak {peak:.1f} MiB, "
        f"{spent:.2f} s, {outcome}"
    )
    held = idle_connections(args.connections, args.wait)
    for name, count in held.items():
        print(
            f"{name}: {count} of {args.connections} idle connections still open after "
            f"{args.wait:.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
