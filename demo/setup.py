"""Installing a MultiKueue set-up on the bed and running our controllers as processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from clusters.bed import Bed
from clusters.config import Port
from clusters.kube import Applier, load_manifests
from clusters.pki import ensure_cert
from clusters.processes import http_ok, log_tail, port_in_use

Dict = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent
KUEUE = "kueue.x-k8s.io/v1beta2"


def _obj(
    kind: str, name: str, spec: Dict | None = None, namespace: str | None = None, **extra: Any
) -> Dict:
    meta: Dict = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    obj: Dict = {"apiVersion": KUEUE, "kind": kind, "metadata": meta, **extra}
    if spec is not None:
        obj["spec"] = spec
    return obj


def queue_objects(
    namespace: str, cpu: str, *, checks: list[str] | None = None, suffix: str = ""
) -> list[Dict]:
    """ResourceFlavor `default`, ClusterQueue `cq<suffix>` (cpu quota) and LocalQueue `q`."""
    cq_spec: Dict = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default",
                        "resources": [
                            {"name": "cpu", "nominalQuota": cpu},
                            {"name": "memory", "nominalQuota": "1Ti"},
                        ],
                    }
                ],
            }
        ],
    }
    if checks:
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in checks]}
    return [
        _obj("ResourceFlavor", "default", {}),
        _obj("ClusterQueue", f"cq{suffix}", cq_spec),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        _obj("LocalQueue", "q", {"clusterQueue": f"cq{suffix}"}, namespace=namespace),
    ]


def multikueue_objects(bed: Bed) -> list[Dict]:
    """The standard MultiKueue objects on the manager, one MultiKueueCluster per worker."""
    workers = [w.name for w in bed.config.workers]
    return [
        _obj(
            "AdmissionCheck",
            "multikueue",
            {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "MultiKueueConfig",
                    "name": "multikueue",
                },
            },
        ),
        _obj("MultiKueueConfig", "multikueue", {"clusters": workers}),
        *[
            _obj(
                "MultiKueueCluster",
                w,
                {
                    "clusterSource": {
                        "kubeConfig": {"locationType": "Secret", "location": f"{w}-secret"}
                    }
                },
            )
            for w in workers
        ],
    ]


def install(
    bed: Bed,
    namespace: str,
    *,
    worker_cpu: str = "16",
    cpu_by_worker: dict[str, str] | None = None,
    runtime: Path = REPO / "examples" / "torch-distributed.yaml",
    on_workers: bool = True,
) -> None:
    """Runtime everywhere; a MultiKueue-checked queue `q` in `namespace` on the manager; a plain
    queue `q` there on every worker (quota per worker from `cpu_by_worker`), unless
    `on_workers` is False (then the workers have neither the namespace nor the queue)."""
    runtime_docs = load_manifests(runtime.read_text())
    manager = bed.config.managers[0].name
    suffix = f"-{namespace}"
    Applier(bed.api(manager)).apply_all(
        [
            *runtime_docs,
            *queue_objects(namespace, "1000", checks=["multikueue"], suffix=suffix),
            *multikueue_objects(bed),
        ]
    )
    for worker in bed.config.workers if on_workers else []:
        cpu = (cpu_by_worker or {}).get(worker.name, worker_cpu)
        Applier(bed.api(worker.name)).apply_all(
            [*runtime_docs, *queue_objects(namespace, cpu, suffix=suffix)]
        )


@dataclass
class Controller:
    name: str
    cluster: str
    proc: subprocess.Popen[bytes]
    log: Path
    health: int
    argv: list[str]
    env: dict[str, str]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def start(self) -> None:
        """Start the same command again (after `stop`), and wait until it is healthy."""
        self.proc = subprocess.Popen(
            self.argv, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, cwd=REPO, env=self.env
        )
        wait_healthy(self)


# The Lease both controllers elect their leader on lives in Kueue's namespace, which every
# cluster of the bed has.
LEASE_NAMESPACE = "kueue-system"


def _spawn(
    bed: Bed, module: str, cluster: str, offset: int, extra: list[str], replica: int = 0
) -> Controller:
    base = bed.config.port(cluster, Port.CONTROLLER_BASE) + offset
    for port in (base, base + 1):
        if port_in_use(port):
            raise RuntimeError(
                f"port {port} for {module} on {cluster} is in use; is an "
                "earlier controller still running?"
            )
    cert = ensure_cert(
        bed.ca(),
        bed.pki_dir / cluster,
        f"{module}-webhook",
        module,
        hosts=("127.0.0.1",),
        server=True,
    )
    log = bed.cluster_dir(cluster) / f"{module.replace('_', '-')}.log"
    argv = [
        sys.executable,
        "-m",
        module,
        "--kubeconfig",
        str(bed.kubeconfig(cluster)),
        "--bind-address",
        "127.0.0.1",
        "--health-port",
        str(base),
        "--leader-elect",
        "--leader-election-namespace",
        LEASE_NAMESPACE,
        "--webhook-port",
        str(base + 1),
        "--webhook-cert",
        str(cert.cert),
        "--webhook-key",
        str(cert.key),
        "--webhook-ca",
        str(bed.ca().cert),
        *extra,
    ]
    # As a kubelet would: the pod's name, through the downward API (the replica's identity).
    env = {**os.environ, "POD_NAME": f"{module.replace('_', '-')}-{cluster}-{replica}"}
    proc = subprocess.Popen(
        argv, stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=REPO, env=env
    )
    return Controller(module, cluster, proc, log, base, argv, env)


def spawn_replica(ctrl: Controller, replica: int) -> Controller:
    """Another replica of a running controller: the same command and identity scheme (its
    own POD_NAME), its own health port, and no webhook server (the webhook configuration
    keeps pointing at the first replica's). Waits until it is healthy."""
    argv, skip = [], 0
    for arg in ctrl.argv:
        if skip:
            skip -= 1
        elif arg in ("--webhook-port", "--webhook-cert", "--webhook-key", "--webhook-ca"):
            skip = 1
        else:
            argv.append(arg)
    health = ctrl.health + 2 * replica
    argv[argv.index("--health-port") + 1] = str(health)
    if port_in_use(health):
        raise RuntimeError(f"port {health} for replica {replica} of {ctrl.name} is in use")
    env = {**ctrl.env, "POD_NAME": f"{ctrl.name.replace('_', '-')}-{ctrl.cluster}-{replica}"}
    log = ctrl.log.with_name(f"{ctrl.log.stem}-{replica}.log")
    proc = subprocess.Popen(
        argv, stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=REPO, env=env
    )
    other = Controller(ctrl.name, ctrl.cluster, proc, log, health, argv, env)
    wait_healthy(other)
    return other


def start_controllers(
    bed: Bed, *, worker_lost_timeout: float = 900.0, resync: float = 2.0
) -> list[Controller]:
    """A worker controller on every worker and the dispatcher on the manager; waits healthy."""
    ctrls = [
        _spawn(
            bed,
            "worker_controller",
            w.name,
            0,
            ["--cluster-name", w.name, "--resync-seconds", str(resync)],
        )
        for w in bed.config.workers
    ]
    ctrls.append(
        _spawn(
            bed,
            "dispatcher",
            bed.config.managers[0].name,
            2,
            [
                "--worker-lost-timeout",
                str(worker_lost_timeout),
                "--resync-seconds",
                str(resync),
                "--gc-interval",
                "10",
            ],
        )
    )
    for ctrl in ctrls:
        wait_healthy(ctrl)
    for ctrl in ctrls:
        wait_webhooks(bed, ctrl)
    return ctrls


def wait_healthy(ctrl: Controller, timeout: float = 60) -> None:
    """Liveness answers and the webhook server listens (its registration may outlive it)."""
    deadline = time.monotonic() + timeout
    webhooks = "--webhook-port" in ctrl.argv
    while not (
        http_ok(f"http://127.0.0.1:{ctrl.health}/healthz")
        and (not webhooks or port_in_use(ctrl.health + 1))
    ):
        if ctrl.proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"{ctrl.name} on {ctrl.cluster} did not start; log "
                f"{ctrl.log}:\n{log_tail(ctrl.log)}"
            )
        time.sleep(0.2)


def webhook_config_name(ctrl: Controller) -> str:
    prefix = "worker-controller" if ctrl.name == "worker_controller" else "dispatcher"
    return f"{prefix}.trainjob.dev"


def wait_webhooks(bed: Bed, ctrl: Controller, timeout: float = 30) -> None:
    api = client.AdmissionregistrationV1Api(bed.api(ctrl.cluster))
    name = webhook_config_name(ctrl)
    deadline = time.monotonic() + timeout
    while True:
        mut = {w.metadata.name: w for w in api.list_mutating_webhook_configuration().items}
        if name in mut and mut[name].webhooks:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{ctrl.name} on {ctrl.cluster} registered no webhooks; log "
                f"{ctrl.log}:\n{log_tail(ctrl.log)}"
            )
        time.sleep(0.2)


def stop_controllers(bed: Bed, ctrls: list[Controller]) -> None:
    for ctrl in ctrls:
        ctrl.proc.terminate()
    for ctrl in ctrls:
        try:
            ctrl.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            ctrl.proc.kill()
            ctrl.proc.wait()
        # A killed controller cannot clean up its webhooks; a dangling one blocks creates.
        api = client.AdmissionregistrationV1Api(bed.api(ctrl.cluster))
        for delete in (
            api.delete_mutating_webhook_configuration,
            api.delete_validating_webhook_configuration,
        ):
            try:
                delete(webhook_config_name(ctrl))
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
