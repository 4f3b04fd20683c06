"""A trainer pod's progress reports, made as a pod would make them: a token the API server
binds to the pod, the CA the pod is given, a POST to its worker's controller."""

from __future__ import annotations

import datetime as dt
import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from clusters import setup
from clusters.helpers.waiting import wait_for
from clusters.install import WORKER_CONTROLLER
from tests.support.multikueue import MultiKueue
from trainjob import progress

Dict = dict[str, Any]


def token_for(api: client.ApiClient, ns: str, audience: str, pod: Any | None = None) -> str:
    """A token of ns's `default` ServiceAccount for `audience`, bound to `pod` if given."""
    spec: Dict = {"audiences": [audience], "expirationSeconds": 600}
    if pod is not None:
        spec["boundObjectRef"] = {
            "kind": "Pod",
            "apiVersion": "v1",
            "name": pod.metadata.name,
            "uid": pod.metadata.uid,
        }
    made = client.CoreV1Api(api).create_namespaced_service_account_token(
        "default", ns, {"spec": spec}
    )
    return str(made.status.token)


class Reporter:
    """POSTs reports to one worker-controller replica as a pod would, trusting only the CA
    the pods are given."""

    def __init__(self, replica: setup.Controller, ca_pem: str) -> None:
        self.base = f"https://127.0.0.1:{replica.progress}"
        self.context = ssl.create_default_context(cadata=ca_pem)

    def post(self, path: str, body: bytes, token: str | None) -> tuple[int, Dict]:
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.base + path, body, headers, method="POST")
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=15) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


def report(percent: int, **more: Any) -> bytes:
    now = dt.datetime.now(dt.UTC).isoformat()
    return json.dumps(
        {"trainerStatus": {"progressPercentage": percent, "lastUpdatedTime": now, **more}}
    ).encode()


@dataclass
class Reporting:
    """A TrainJob running on a worker, and what one of its pods reports with."""

    worker: str
    api: client.ApiClient
    pod: Any
    ca: str  # the CA the pods are given (its <trainjob>-tls-config ConfigMap)
    reporter: Reporter
    token: str  # one its pod would hold: for its audience, bound to that pod
    path: str


def reporting(mk: MultiKueue, controllers: list[setup.Controller], name: str) -> Reporting:
    mk.submit(name, run="300s")
    worker = mk.started_on(name)
    api = mk.bed.api(worker)
    pod = wait_for(lambda: (mk.pods(worker, name) or [None])[0], 60, what="a pod")
    ca = client.CoreV1Api(api).read_namespaced_config_map(f"{name}-tls-config", mk.ns)
    reporter = Reporter(worker_replica(controllers, worker), ca.data["ca.crt"])
    token = token_for(api, mk.ns, progress.audience(mk.ns, name), pod)
    return Reporting(
        worker, api, pod, ca.data["ca.crt"], reporter, token, progress.status_path(mk.ns, name)
    )


def worker_replica(controllers: list[setup.Controller], worker: str) -> setup.Controller:
    return next(c for c in controllers if c.name == WORKER_CONTROLLER and c.cluster == worker)


def trainer_status(mk: MultiKueue, name: str, cluster: str | None = None) -> Dict:
    return dict(((mk.get(name, cluster) or {}).get("status") or {}).get("trainerStatus") or {})


def progress_interval() -> float:
    from worker_controller.settings import WorkerSettings

    return float(WorkerSettings.model_fields["progress_interval_seconds"].default)
