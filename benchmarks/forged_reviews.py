"""Benchmark: the latency of the API server's reviews while pods post forged ones, on loopback.

The dispatcher's webhook server (kubecontrol/webhook_server.py, real TLS) with its two judges
(dispatcher/controller/webhooks.py: the mutating one, then the validating one, on a runtime of the
product's examples and the product's CRD bounds) answers a steady stream of honest reviews
over one kept-alive connection, as the API server sends them, while a pod (a process of its
own, a connection of its own for each review) posts forged reviews at `--forged-per-minute`:
in turn, a namespace that climbs to a cluster-wide watch, a TrainJob of 10,000
runtimePatches no API server would send (1.8 MB), and one naming a namespace and queue that
exist nowhere. Each phase prints the honest reviews' p50, p99 and max, and what the forged
ones got.

    .venv/bin/python benchmarks/forged_reviews.py [--seconds 20] [--per-second 10]
        [--forged-per-minute 0 20 1200]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import ssl
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clusters.helpers.waiting import loopback_webhooks
from clusters.kube import load_manifests
from dispatcher.controller import webhooks
from kubecontrol.schema_bounds import version_schema
from tests.support.builders import make_runtime, make_trainjob, runtime_patch
from trainjob.queues import LocalQueueView
from trainjob_api import constants as c

Dict = dict[str, Any]
ROOT = Path(__file__).resolve().parent.parent
CLIMBING = "x/../../../api/v1/pods?watch=1&"
TRAINJOBS = {"group": c.TRAINER_GROUP, "version": c.TRAINER_VERSION, "resource": "trainjobs"}


class Caches:
    """The dispatcher's watch caches for one namespace with a queue and a runtime."""

    def __init__(self) -> None:
        self.runtime = make_runtime("torch-distributed")
        self.runtime["metadata"].update(uid="uid-rt", resourceVersion="1")

    def local_queue(self, namespace: str, name: str) -> LocalQueueView | None:
        if (namespace, name) != ("team-a", "user-queue"):
            return None
        return LocalQueueView({"metadata": {"name": name, "namespace": namespace}})

    def runtime_of(self, _tj: Any) -> Dict:
        return self.runtime

    def cluster_queue(self, _name: str) -> None:
        return None


class NoServer:
    """The manager's API, for what the caches do not hold: nothing is there."""

    def within(self, _deadline: Any) -> NoServer:
        return self

    def get_or_none(self, *_: Any) -> None:
        return None


def review(uid: str, namespace: str, tj: Dict) -> bytes:
    request = {
        "uid": uid,
        "resource": TRAINJOBS,
        "operation": "CREATE",
        "namespace": namespace,
        "name": tj["metadata"]["name"],
        "object": tj,
    }
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(body).encode()


def honest(i: int) -> bytes:
    tj = make_trainjob(f"tj-{i}", "team-a")
    tj["metadata"]["labels"] = {c.KUEUE_QUEUE_NAME_LABEL: "user-queue"}
    return review(f"honest-{i}", "team-a", tj)


def forged_bodies() -> list[tuple[str, str, bytes]]:
    climbing = make_trainjob("tj", "team-a")
    patched = make_trainjob("forged", "team-a")
    patched["spec"]["runtimePatches"] = [
        runtime_patch(f"m{i}", "node", {"spec": {"containers": [{"name": "node"}]}})
        for i in range(10_000)
    ]
    nowhere = make_trainjob("tj", "nowhere")
    nowhere["metadata"]["labels"] = {c.KUEUE_QUEUE_NAME_LABEL: "no-such-queue"}
    return [
        ("a namespace climbing to a watch", "/queue-exists", review("f1", CLIMBING, climbing)),
        ("10,000 runtimePatches", "/queue-exists", review("f2", "team-a", patched)),
        # the mutating judge: its queue read of the API server, within the allowance
        ("a namespace and queue nowhere", "/suspend-and-route", review("f3", "nowhere", nowhere)),
    ]


def connect(port: int, ca: bytes) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cadata=ca.decode())
    return http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)


def post(conn: http.client.HTTPSConnection, path: str, body: bytes) -> tuple[int, bytes]:
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    answer = conn.getresponse()
    return answer.status, answer.read()


def pod(port: int, ca: bytes, forged_per_minute: float, stop: Any, said: Any) -> None:
    """A pod posting forged reviews at `forged_per_minute` until `stop`, in a process of its
    own (as a pod is: its JSON and TLS cost the server nothing), each on a new connection;
    what each kind got is put on `said`."""
    forged: Counter[str] = Counter()
    bodies = forged_bodies()
    gap, k = 60.0 / forged_per_minute, 0
    while not stop.wait(gap if k else 0):
        what, path, body = bodies[k % len(bodies)]
        k += 1
        conn = connect(port, ca)
        try:
            status, data = post(conn, path, body)
            answer = json.loads(data)["response"] if status == 200 else {}
            verdict = "allowed" if answer.get("allowed") else "refused"
            code = (answer.get("status") or {}).get("code", status)
            forged[f"{what}: {verdict} ({code})"] += 1
        except (OSError, http.client.HTTPException) as exc:
            forged[f"{what}: {type(exc).__name__}"] += 1
        finally:
            conn.close()
    said.put(dict(forged))


def phase(
    port: int, ca: bytes, seconds: float, per_second: float, forged_per_minute: float
) -> None:
    stop, said = multiprocessing.Event(), multiprocessing.Queue()  # type: ignore[var-annotated]
    flooder = None
    if forged_per_minute > 0:
        flooder = multiprocessing.Process(
            target=pod, args=(port, ca, forged_per_minute, stop, said), name="forged-reviews"
        )
        flooder.start()
    conn, taken, refused = connect(port, ca), [], 0
    end, i = time.monotonic() + seconds, 0
    forged: dict[str, int] = {}
    try:
        while time.monotonic() < end:
            due = time.monotonic() + 1.0 / per_second
            for path in ("/suspend-and-route", "/queue-exists"):  # as the API server calls
                started = time.perf_counter()
                status, data = post(conn, path, honest(i))
                taken.append(time.perf_counter() - started)
                refused += status != 200 or not json.loads(data)["response"]["allowed"]
            i += 1
            time.sleep(max(0.0, due - time.monotonic()))
    finally:
        stop.set()
        if flooder is not None:
            forged = said.get(timeout=60)
            flooder.join()
        conn.close()
    ms = sorted(t * 1000 for t in taken)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(
        f"[figure] forged {forged_per_minute:g}/min: honest reviews {len(ms)}, refused "
        f"{refused}; p50 {statistics.median(ms):.1f} ms, p99 {p99:.1f} ms, max {ms[-1]:.1f} ms"
    )
    for what, count in sorted(forged.items()):
        print(f"[figure]   forged {what}: {count}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--per-second", type=float, default=10.0)
    parser.add_argument("--forged-per-minute", type=float, nargs="+", default=[0, 20, 1200])
    args = parser.parse_args()
    [crd] = load_manifests((ROOT / "crds" / "trainer.kubeflow.org_trainjobs.yaml").read_text())
    ctx: Any = SimpleNamespace(
        crd_problem=None,
        trainjob_schema=version_schema(crd, c.TRAINER_VERSION),
        caches=Caches(),
        manager=NoServer(),
        settings=SimpleNamespace(manager_runs_trainjobs=False, controller_name="ours"),
    )
    resource = (c.TRAINER_GROUP, "trainjobs")
    with loopback_webhooks(webhooks.routes(ctx), resource) as (server, ca):
        for rate in args.forged_per_minute:
            phase(server.port, ca, args.seconds, args.per_second, rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
