"""Benchmark: what a watch costs a controller's process in memory, with a TLS connection of its
own (as our API client watched up to 0.3.0) and with a cluster's watches sharing one (HTTP/2,
`kubecontrol/transfers.py`); and what a request's idle handle costs, kept with its connection
after a write (a dry-run create), with libcurl's default upload buffer and with the client's
(`kubecontrol.client.UPLOAD_BUFFER`).

Each round is a fresh Python process with the dispatcher's imports and the chart's allocator
settings (`MALLOC_ARENA_MAX=2`, `GLIBC_TUNABLES`), which opens watches of ConfigMaps on the
bed's manager with our API client, each on a thread of its own as an informer's, waits until
every one is answered, and prints its resident memory, of it anonymous, and its TCP
connections to the API server. A watch's (a handle's) cost is the difference between
`--watches` and `--base` of them, divided; each figure is the median of `--repeat` rounds,
with its range. Needs a running bed.

    .venv/bin/python benchmarks/connections.py --watches 100 --base 20 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.figures import spread
from clusters.bed import Bed
from clusters.config import load_config

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, os, sys, threading
import dispatcher.app  # a controller's imports
import pycurl
from kubecontrol.client import ApiClient
from kubecontrol.credentials import load_credentials

kubeconfig, count, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
api = ApiClient(load_credentials(kubeconfig))
port = int(api.credentials.server.rsplit(":", 1)[1].strip("/"))
answered, stop = threading.Semaphore(0), threading.Event()
PATH, QUERY = "/api/v1/namespaces/default/configmaps", {"timeoutSeconds": 300}

def shared():
    try:
        api.watch(PATH, QUERY, lambda _: True, on_open=answered.release, abort=stop)
    except Exception:
        pass

def own():  # as the client watched up to 0.3.0: a handle of its own, read on this thread
    curl = api._new_handle()
    api._prepare(curl, "GET", PATH, {**QUERY, "watch": "true"}, None, "", "application/json",
                 None, None)
    first = []
    def write(data):
        if not first:
            first.append(answered.release())
    curl.setopt(pycurl.WRITEFUNCTION, write)
    curl.setopt(pycurl.NOPROGRESS, 0)
    curl.setopt(pycurl.XFERINFOFUNCTION, lambda *_: 1 if stop.is_set() else 0)
    try:
        curl.perform()
    except pycurl.error:
        pass

def requests(upload_buffer):  # `count` request handles, each kept with its connection after
    # a write (a dry-run create of a 2 KiB ConfigMap), as a busy controller's pool keeps them
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "bench-"},
            "data": {"pad": "x" * 2048}}
    kept = []
    for _ in range(count):
        curl = api._new_handle()
        if upload_buffer:
            curl.setopt(pycurl.UPLOAD_BUFFERSIZE, upload_buffer)
        api._idle[:] = [curl]
        api.request("POST", PATH, query={"dryRun": "All"}, body=body)
        kept.append(api._idle.pop())
    return kept

if mode.startswith("requests"):
    kept = requests(65536 if mode == "requests-64k" else 0)
else:
    for _ in range(count):
        threading.Thread(target=shared if mode == "shared" else own, daemon=True).start()
    for _ in range(count):
        assert answered.acquire(timeout=60), "a watch was not answered"
stop.wait(2)  # what the answers leave behind settles

def connections():
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        target = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            found += fields[3] == "01" and remote_port == port and fields[9] in inodes
    return found

status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
kib = lambda name: int(status[name].split()[0])
print(json.dumps({"rss": kib("VmRSS"), "anon": kib("RssAnon"), "connections": connections()}))
stop.set()
"""


def measure(kubeconfig: str, count: int, mode: str) -> dict[str, int]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "MALLOC_ARENA_MAX": "2",  # as deploy/ sets them
        "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=131072",
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kubeconfig, str(count), mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"the round failed:\n{done.stderr[-2000:]}")
    figures: dict[str, int] = json.loads(done.stdout.splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watches", type=int, default=100)
    parser.add_argument("--base", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    config = load_config()
    kubeconfig = str(Bed(config).kubeconfig(config.managers[0].name))
    print(f"watches (or handles): {args.base} and {args.watches}, {args.repeat} rounds each; KiB")
    modes = (
        ("own", "a watch, a connection each"),
        ("shared", "a watch, one shared connection (HTTP/2)"),
        ("requests-64k", "a request's handle after a write, libcurl's 64 KiB upload buffer"),
        ("requests", "a request's handle after a write, as the client sets it"),
    )
    for mode, what in modes:
        per_watch: list[float] = []
        anon_per_watch: list[float] = []
        connections: list[float] = []
        for _ in range(args.repeat):
            low = measure(kubeconfig, args.base, mode)
            high = measure(kubeconfig, args.watches, mode)
            extra = args.watches - args.base
            per_watch.append((high["rss"] - low["rss"]) / extra)
            anon_per_watch.append((high["anon"] - low["anon"]) / extra)
            connections.append(high["connections"])
        print(
            f"{what}: each {spread(per_watch, 1)} resident, "
            f"{spread(anon_per_watch, 1)} anonymous; "
            f"connections at {args.watches} {spread(connections, 0)}"
        )


if __name__ == "__main__":
    main()
