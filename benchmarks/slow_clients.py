"""Benchmark: the answers the API server and the kubelet get while a pod holds slow
connections to a controller's ports, on loopback.

A webhook server (the product's, real TLS, its shipped limits) and a probe server run in this
process. From 127.0.0.2, as a training pod from its own address, `--slow` connections to the
webhook port each send a review's headers (`Content-Length: 65536`) and then one byte of the
body every `--every` seconds, and `MAX_CONNECTIONS` connections to the probe port trickle a
request line the same way. Meanwhile, from 127.0.0.1, `--reviews` AdmissionReviews are sent on
a new connection each (as the API server opens one when its pooled ones are gone) and
`--probes` probes are made. Printed: how many were answered, and the answer time's p50, p99
and maximum. Nothing leaves loopback; everything ends within the run.

    .venv/bin/python benchmarks/slow_clients.py [--slow 1100] [--every 2] [--reviews 200]
"""

from __future__ import annotations

import argparse
import http.client
import json
import resource
import select
import socket
import ssl
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clusters.helpers.waiting import loopback_webhooks
from kubecontrol import serving, webhook_server
from kubecontrol.admission import Verdict

POD = "127.0.0.2"
REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "u",
        "resource": {"group": "trainer.kubeflow.org", "version": "v1", "resource": "trainjobs"},
        "operation": "CREATE",
        "namespace": "team-a",
        "object": {"metadata": {"name": "tj"}, "spec": {}},
    },
}


async def allow(_admission: object) -> Verdict:
    return Verdict()


class Drip:
    """Connections from the pod's address, each sent a byte every `every` seconds by one
    thread, until stopped; `ended` counts those the server answered (408) or closed."""

    def __init__(self, socks: list[socket.socket], every: float) -> None:
        self.socks, self.every, self.ended = socks, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        live = list(self.socks)
        while live and not self._stop.wait(self.every):
            poll = select.poll()
            for sock in live:
                poll.register(sock, select.POLLIN)
            heard = {fd for fd, _ in poll.poll(0)}
            for sock in [s for s in live if s.fileno() in heard]:  # an answer, or a close
                live.remove(sock)
                self.ended += 1
            for sock in list(live):
                try:
                    sock.send(b"x")
                except OSError:
                    live.remove(sock)
                    self.ended += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in self.socks:
            sock.close()


def tls_slow(port: int, ca: str, count: int) -> list[socket.socket]:
    context = ssl.create_default_context(cadata=ca)
    socks: list[socket.socket] = []
    for _ in range(count):
        raw = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(POD, 0))
        try:
            conn = context.wrap_socket(raw, server_hostname="127.0.0.1")
            conn.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 65536\r\n\r\n{")
        except OSError:  # made room for a later one already
            raw.close()
            continue
        socks.append(conn)
    return socks


def plain_slow(port: int, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(POD, 0))
        sock.sendall(b"GET /readyz HTTP/1.0\r\n")
        socks.append(sock)
    return socks


def timed(calls: int, call: object) -> tuple[int, list[float]]:
    answered, times = 0, []
    for _ in range(calls):
        started = time.monotonic()
        try:
            ok = call()  # type: ignore[operator]
        except (OSError, http.client.HTTPException):
            ok = False
        times.append(time.monotonic() - started)
        answered += bool(ok)
    return answered, times


def line(what: str, calls: int, answered: int, times: list[float]) -> str:
    ms = sorted(t * 1e3 for t in times)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return (
        f"{what}: {answered}/{calls} answered; p50 {statistics.median(ms):.1f} ms, "
        f"p99 {p99:.1f} ms, max {ms[-1]:.1f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slow", type=int, default=1100, help="slow webhook connections")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between their bytes")
    parser.add_argument("--reviews", type=int, default=200)
    parser.add_argument("--probes", type=int, default=50)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * args.slow + 256)), hard))

    with loopback_webhooks({"/mutate": allow}, ("x", "y")) as (hooks, ca_crt):
        ca = ca_crt.decode()
        probes = serving.serve_probes("127.0.0.1", 0, lambda: None)
        time.sleep(1)
        body = json.dumps(REVIEW).encode()
        context = ssl.create_default_context(cadata=ca)

        def review() -> bool:
            conn = http.client.HTTPSConnection("127.0.0.1", hooks.port, context=context, timeout=15)
            try:
                conn.request("POST", "/mutate", body, {"Content-Type": "application/json"})
                return conn.getresponse().status == 200
            finally:
                conn.close()

        def probe() -> bool:
            port = probes.server_address[1]
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
            try:
                conn.request("GET", "/readyz")
                return conn.getresponse().status == 200
            finally:
                conn.close()

        print(line("reviews, no load", args.reviews, *timed(args.reviews, review)))
        print(line("probes, no load", args.probes, *timed(args.probes, probe)))
        started = time.monotonic()
        webhook_drip = Drip(tls_slow(hooks.port, ca, args.slow), args.every)
        probe_drip = Drip(plain_slow(probes.server_address[1], serving.MAX_CONNECTIONS), args.every)
        print(
            f"held: {len(webhook_drip.socks)} slow webhook connections "
            f"(cap {webhook_server.MAX_CONNECTIONS}), {len(probe_drip.socks)} slow probe "
            f"connections (cap {serving.MAX_CONNECTIONS}), opened in "
            f"{time.monotonic() - started:.1f} s"
        )
        print(line("reviews, slow pod", args.reviews, *timed(args.reviews, review)))
        print(line("probes, slow pod", args.probes, *timed(args.probes, probe)))
        time.sleep(2 * args.every + 1)  # the drips notice what was ended
        print(
            f"the pod's connections ended by the servers within {time.monotonic() - started:.0f}"
            f" s: {webhook_drip.ended} webhook, {probe_drip.ended} probe"
        )
        webhook_drip.stop()
        probe_drip.stop()
        probes.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
