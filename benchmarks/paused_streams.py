"""Benchmark: what a paused HTTP/2 stream costs a controller's process, and whether its memory
comes back once the stream ends, with the client the controllers use (`kubecontrol.client`,
libcurl through pycurl) against the bed's manager. Needs a running bed.

A namespace of its own holds `--objects` ConfigMaps of `--kb` KB each. A watch stays open on
the cluster's shared HTTP/2 connection all along, as an informer's does. Each round:
- a stream LISTs them and its reader stops at its first piece: once BACKLOG_BYTES wait unread,
  the stream is paused (`kubecontrol/transfers.py`);
- another stream on the same connection LISTs them whole, so the connection is read on and
  libcurl takes in what the paused stream's window lets the server send;
- then the paused stream ends: its reader gives up (`--end give-up`, as a stopped informer or a
  handler's exception) or its timeout runs out (`--end timeout`).

Printed: libcurl's version; each round's resident memory with the stream paused and after it
ended (glibc's free memory given back first, `malloc_trim`); and the growth from the first
round's end to the last's. A libcurl that keeps a paused stream's buffer after the stream ends
while its connection serves others (7.88.1: curl issue #10971, fixed in 8.1) grows by about
that buffer (up to its 32 MiB window) each round.

    .venv/bin/python benchmarks/paused_streams.py --rounds 6
    PYTHONPATH=DIR .venv/bin/python benchmarks/paused_streams.py --rounds 6   # pycurl from DIR
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pycurl

from benchmarks.on_bed import manager_namespace
from kubebase.kinds import CONFIG_MAP, NAMESPACE
from kubecontrol.client import ApiClient, TransportError


def resident_mib() -> float:
    """This process's resident memory, after glibc has given back what it can."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def one_round(api: ApiClient, path: str, end: str, timeout: float) -> tuple[float, float, str]:
    """Resident MiB with a stream paused (its connection read on by another), then after it
    ended; and how it ended."""
    stopped, release, how = threading.Event(), threading.Event(), []

    def stuck(_piece: bytes) -> bool:
        stopped.set()
        release.wait(timeout + 60)
        return False  # the reader stops for good: the stream is given up

    def read() -> None:
        try:
            api.stream(path, {}, stuck, timeout=timeout if end == "timeout" else 600)
            how.append("given up")
        except TransportError as exc:
            how.append(f"ended by libcurl ({exc.code})")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not stopped.wait(60):
        raise RuntimeError("the paused stream never began")
    api.stream(path, {}, lambda _piece: True, timeout=600)  # the connection is read on
    paused = resident_mib()
    if end == "timeout":
        reader.join(timeout + 60)
    release.set()
    reader.join(60)
    time.sleep(1)
    return paused, resident_mib(), (how or ["still running"])[0]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--objects", type=int, default=60, help="ConfigMaps listed")
    parser.add_argument("--kb", type=int, default=900, help="KB of data in each")
    parser.add_argument("--end", choices=("give-up", "timeout"), default="give-up")
    parser.add_argument(
        "--timeout", type=float, default=5.0, help="the stream's, for --end timeout"
    )
    args = parser.parse_args()
    found = manager_namespace("paused")
    if found is None:
        return 1
    kube, ns = found
    path = f"/api/v1/namespaces/{ns}/configmaps"
    try:
        for i in range(args.objects):
            meta = {"name": f"cm-{i}", "namespace": ns}
            data = {"payload": "x" * (args.kb * 1000)}
            kube.create(CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                                     "data": data})  # fmt: skip
        api = ApiClient(kube.api.credentials)
        held = threading.Thread(
            target=lambda: api.watch(path, {"timeoutSeconds": 3600}, lambda _e: True, timeout=3700),
            daemon=True,
        )
        held.start()  # keeps the shared connection serving between rounds
        print(f"{pycurl.version.split()[1]}; {args.objects} ConfigMaps of {args.kb} KB listed; "
              f"the paused stream ends by {args.end}; start {resident_mib():.0f} MiB")  # fmt: skip
        after = []
        for r in range(args.rounds):
            paused, ended, how = one_round(api, path, args.end, args.timeout)
            after.append(ended)
            print(f"round {r}: {paused:.0f} MiB with the stream paused, {ended:.0f} MiB after "
                  f"it ended ({how})", flush=True)  # fmt: skip
        print(f"after each end: {after[0]:.0f} -> {after[-1]:.0f} MiB over {args.rounds} rounds "
              f"({(after[-1] - after[0]) / max(args.rounds - 1, 1):+.1f} MiB a round)")  # fmt: skip
    finally:
        kube.delete(NAMESPACE, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
