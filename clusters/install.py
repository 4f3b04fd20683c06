"""The product installed on the bed from deploy/, as a platform team installs it.

`kubectl kustomize deploy/<manager|worker>` renders the manifests; everything but the
Deployments is applied as it is, except one translation: a webhook's
`clientConfig.service` becomes `url: https://127.0.0.1:<port>/<path>` (the bed has no Service
network). Then the bed plays the kubelet for our Deployments: each replica runs the
container's command as a local process with what a pod would get:

- the ServiceAccount's token (TokenRequest API) in a kubeconfig, in place of the in-cluster
  credentials (never the bed's admin identity);
- the ConfigMap and Secret volumes written to files, emptyDirs as empty directories, and the
  container's mount paths mapped to those directories in its command and its config files;
- POD_NAME and POD_NAMESPACE from the downward API (the replica's identity, as a kubelet
  would give it: `<deployment>-<index>`), the other env values as written;
- its own ports on 127.0.0.1 (the pod network's stand-in) and 127.0.0.1 among the names of
  its serving certificate (so the URL above verifies);
- the manifest's replica count.
"""

from __future__ import annotations

import base64
import copy
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from clusters import chart
from clusters import replicas as replicas_record
from clusters.config import ClusterSpec, Port
from clusters.errors import BedError
from clusters.kube import (
    TOKEN_SECONDS,
    Applier,
    load_manifests,
    render,
    service_account_token,
    wait_api_service,
    write_token_kubeconfig,
)
from clusters.processes import http_ok, log_tail, port_in_use

if TYPE_CHECKING:
    from clusters.bed import Bed

Dict = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"


@dataclass
class Replica:
    """One replica of one of our Deployments, run as a local process."""

    name: str  # the Deployment's name
    cluster: str
    proc: subprocess.Popen[bytes]
    log: Path
    health: int  # /healthz, /readyz (and /metrics, when served over HTTP)
    webhook: int | None
    argv: list[str]
    env: dict[str, str]
    metrics: int | None = None  # /metrics over HTTPS, for the bed's reader token
    metrics_token: str | None = None
    progress: int | None = None  # a worker controller's progress reports (a port of their own)

    @property
    def identity(self) -> str:
        return self.env["POD_NAME"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def start(self) -> None:
        """Start the same command again (a container restart: same pod, same identity)."""
        self.proc = _spawn(self.argv, self.log, self.env)
        self.wait_healthy()

    def wait_healthy(self, timeout: float = 90) -> None:
        """Liveness answers, and the webhook server listens (a standby waits for the leader's
        certificate first)."""
        deadline = time.monotonic() + timeout
        while not (
            http_ok(f"http://127.0.0.1:{self.health}/healthz")
            and (self.webhook is None or port_in_use(self.webhook))
        ):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise BedError(
                    f"{self.identity} on {self.cluster} did not start; log {self.log}:\n"
                    f"{log_tail(self.log)}"
                )
            time.sleep(0.2)

    def state(self) -> Dict:
        return {
            "deployment": self.name,
            "identity": self.identity,
            "health": self.health,
            "webhook": self.webhook,
            "metrics": self.metrics,
            "metrics_token": self.metrics_token,
            "progress": self.progress,
            "log": str(self.log),
            "pid_file": str(self.log.with_suffix(".pid")),
            "program": self.argv[0],
        }


def webhook_url(hook: Dict, port: int) -> None:
    """The bed's one translation: a webhook's Service becomes our loopback address."""
    cfg = hook["clientConfig"]
    service = cfg.pop("service", None)
    if service is not None:
        cfg["url"] = f"https://127.0.0.1:{port}{service.get('path') or '/'}"


def api_service_address(api_service: Dict, docs: list[Dict], port: int) -> None:
    """The bed's other translation, for an aggregated API: the Service the APIService names
    becomes an ExternalName of our loopback address, and the APIService's port the replica's
    (the API server dials an ExternalName Service's name at the APIService's port, and checks
    the certificate for the Service's in-cluster name, as for any Service)."""
    ref = api_service["spec"]["service"]
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] == "Service" and (meta["name"], meta.get("namespace")) == (
            ref["name"],
            ref["namespace"],
        ):
            spec = doc["spec"]
            spec.pop("selector", None)
            spec.pop("clusterIP", None)
            spec.update(type="ExternalName", externalName="127.0.0.1")
    ref["port"] = port


def install_overlay(
    api: client.ApiClient,
    kubeconfig: Path,
    cluster: str,
    docs: list[Dict],
    workdir: Path,
    first_port: int,
    extra_args: list[str] | None = None,
) -> list[Replica]:
    """Apply the rendered manifests `docs` (an overlay of deploy/, or the chart) to the
    cluster and start every replica of their Deployments. Ports are taken three per replica
    from `first_port` (health, webhook, metrics), and a fourth for a replica that takes
    progress reports."""
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    ports = iter(range(first_port, first_port + 100))
    plans = []
    for dep in deployments:
        for index in range(int(dep["spec"].get("replicas", 1))):
            # health, webhook, metrics; and progress reports where they are taken
            taken = (next(ports), next(ports), next(ports))
            plans.append((dep, index, *taken, next(ports) if _serves(dep, "progress") else None))
    # One Deployment per overlay serves its webhooks: every configuration points at replica 0
    # (a Service would spread the calls over the ready replicas; the bed has no Service network).
    webhook_port = plans[0][3] if plans else None
    for doc in docs:
        if doc["kind"] == "APIService" and (doc.get("spec") or {}).get("service"):
            assert webhook_port is not None
            api_service_address(doc, docs, webhook_port)
    applier = Applier(api)
    for doc in docs:
        if doc["kind"] == "Deployment":
            continue
        if doc["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            assert webhook_port is not None
            for hook in doc.get("webhooks") or []:
                webhook_url(hook, webhook_port)
        applier.apply(doc)
    readers = [
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-metrics-reader")
    ]
    serves = any(_serves_metrics(d) for d in deployments)
    reader = metrics_reader_token(api, readers[0]) if serves and readers else None
    replicas = []
    for dep, index, health, webhook, port, progress in plans:
        metrics = port if _serves_metrics(dep) else None
        extra = [
            *(extra_args or []),
            *(["--metrics-port", str(metrics)] if metrics else []),
            *(["--progress-port", str(progress)] if progress else []),
        ]
        replica = _start(
            api, kubeconfig, cluster, dep, index, health, webhook, docs, workdir, extra
        )
        replica.metrics, replica.metrics_token = metrics, reader if metrics else None
        replica.progress = progress
        replicas.append(replica)
    for replica in replicas:
        replica.wait_healthy()
    hooks = [d for d in docs if d["kind"].endswith("WebhookConfiguration")]
    _wait_ca_bundles(api, hooks, replicas)
    _wait_api_services(api, [d for d in docs if d["kind"] == "APIService"], replicas)
    return replicas


def _serves_metrics(dep: Dict) -> bool:
    """Whether the Deployment's container serves /metrics over HTTPS (a port named
    `metrics`, as the chart writes it when `metrics.port` is set)."""
    return _serves(dep, "metrics")


def _serves(dep: Dict, port: str) -> bool:
    """Whether the Deployment's container declares a port of that name (`progress`: a worker
    controller takes progress reports on a port of their own)."""
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    return any(p.get("name") == port for p in container.get("ports") or [])


METRICS_READER = "trainjob-bed-metrics"  # the bed's scraper, as a Prometheus would be


def metrics_reader_token(api: client.ApiClient, cluster_role: str) -> str:
    """A token of the bed's scraper identity on this cluster: a ServiceAccount bound to the
    install's metrics reader ClusterRole, as a platform team binds its Prometheus."""
    namespace = "kube-system"
    Applier(api).apply_all(
        [
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": METRICS_READER, "namespace": namespace},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{METRICS_READER}-{cluster_role}"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": cluster_role,
                },
                "subjects": [
                    {"kind": "ServiceAccount", "name": METRICS_READER, "namespace": namespace}
                ],
            },
        ]
    )
    return service_account_token(api, namespace, METRICS_READER)


def _wait_ca_bundles(api: client.ApiClient, hooks: list[Dict], replicas: list[Replica]) -> None:
    """Until the leader has injected its CA into every webhook configuration (the API server
    refuses to call a webhook it cannot verify)."""
    admission = client.AdmissionregistrationV1Api(api)
    read = {
        "MutatingWebhookConfiguration": admission.read_mutating_webhook_configuration,
        "ValidatingWebhookConfiguration": admission.read_validating_webhook_configuration,
    }
    deadline = time.monotonic() + 90
    for doc in hooks:
        while not all(
            (w.client_config.ca_bundle or "")
            for w in read[doc["kind"]](doc["metadata"]["name"]).webhooks or []
        ):
            if time.monotonic() > deadline:
                logs = "\n".join(f"{r.log}:\n{log_tail(r.log)}" for r in replicas)
                raise BedError(f"no caBundle in {doc['kind']} {doc['metadata']['name']}:\n{logs}")
            time.sleep(0.2)


def _wait_api_services(api: client.ApiClient, docs: list[Dict], replicas: list[Replica]) -> None:
    """Until each APIService is Available (its caBundle injected, its server answering the
    API server's discovery call through the front proxy)."""
    deadline = time.monotonic() + 90

    def logs() -> str:
        return ":\n" + "\n".join(f"{r.log}:\n{log_tail(r.log)}" for r in replicas)

    for doc in docs:
        wait_api_service(api, doc["metadata"]["name"], deadline, logs)


def _start(
    api: client.ApiClient,
    admin_kubeconfig: Path,
    cluster: str,
    dep: Dict,
    index: int,
    health: int,
    webhook: int,
    docs: list[Dict],
    workdir: Path,
    extra_args: list[str],
) -> Replica:
    for port in (health, webhook):
        if port_in_use(port):
            raise BedError(f"port {port} for {dep['metadata']['name']} is in use")
    namespace = dep["metadata"].get("namespace", "default")
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    identity = f"{dep['metadata']['name']}-{index}"
    pod_dir = workdir / identity
    shutil.rmtree(pod_dir, ignore_errors=True)
    pod_dir.mkdir(parents=True)
    token = service_account_token(api, namespace, pod.get("serviceAccountName") or "default")
    kubeconfig = pod_dir / "kubeconfig"
    write_token_kubeconfig(admin_kubeconfig, token, kubeconfig)
    mounts = _materialise_volumes(api, namespace, pod, container, docs, pod_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env.update(_env(container, identity, namespace))
    env["KUBECONFIG"] = str(kubeconfig)  # the token stands in for the in-cluster credentials
    command = [*container.get("command", []), *container.get("args", [])]
    program = Path(sys.executable).parent / command[0]
    if not program.is_file():
        raise BedError(f"{command[0]} is not installed in {program.parent} (pip install -e .)")
    argv = [str(program), *(_map_path(arg, mounts) for arg in command[1:])]
    argv += [
        "--bind-address",
        "127.0.0.1",
        "--health-port",
        str(health),
        "--webhook-port",
        str(webhook),
        "--webhook-cert-hosts",
        "127.0.0.1",
        *extra_args,
    ]
    log = workdir / f"{identity}.log"
    proc = _spawn(argv, log, env)
    return Replica(dep["metadata"]["name"], cluster, proc, log, health, webhook, argv, env)


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Its own session, as the bed's other processes: it outlives the command that started it
    (`python -m clusters up --install`), and `down` stops it by the PID in `<log>.pid`
    (rewritten at every restart)."""
    proc = subprocess.Popen(
        argv,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        cwd=REPO,
        env=env,
        start_new_session=True,
    )
    log.with_suffix(".pid").write_text(str(proc.pid))
    return proc


def _materialise_volumes(
    api: client.ApiClient,
    namespace: str,
    pod: Dict,
    container: Dict,
    docs: list[Dict],
    pod_dir: Path,
) -> dict[str, Path]:
    """Write the container's volumes under pod_dir; return mountPath -> local directory."""
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    mounts = {
        m["mountPath"]: pod_dir / "volumes" / m["name"] for m in container.get("volumeMounts") or []
    }
    for mount in container.get("volumeMounts") or []:
        local = mounts[mount["mountPath"]]
        local.mkdir(parents=True, exist_ok=True)
        volume = volumes[mount["name"]]
        files: dict[str, bytes] = {}
        if "configMap" in volume:
            name = volume["configMap"]["name"]
            cm = (
                next(
                    (d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name),
                    None,
                )
                or client.CoreV1Api(api).read_namespaced_config_map(name, namespace).to_dict()
            )
            # Config files name other mount paths: map them as the command's arguments are.
            files = {k: _map_text(v, mounts).encode() for k, v in (cm.get("data") or {}).items()}
        elif "secret" in volume:
            secret = client.CoreV1Api(api).read_namespaced_secret(
                volume["secret"]["secretName"], namespace
            )
            files = {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
        for key, data in files.items():
            (local / key).write_bytes(data)
    return mounts


def _map_path(value: str, mounts: dict[str, Path]) -> str:
    for mount_path, local in sorted(mounts.items(), key=lambda m: -len(m[0])):
        if value == mount_path or value.startswith(mount_path.rstrip("/") + "/"):
            return str(local) + value[len(mount_path.rstrip("/")) :]
    return value


def _map_text(text: str, mounts: dict[str, Path]) -> str:
    for mount_path, local in sorted(mounts.items(), key=lambda m: -len(m[0])):
        text = text.replace(mount_path, str(local))
    return text


def _env(container: Dict, identity: str, namespace: str) -> dict[str, str]:
    out = {}
    for item in container.get("env") or []:
        if "value" in item:
            out[item["name"]] = str(item["value"])
            continue
        field = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if field == "metadata.name":
            out[item["name"]] = identity
        elif field == "metadata.namespace":
            out[item["name"]] = namespace
        else:
            raise BedError(f"env {item['name']}: the bed cannot provide {item.get('valueFrom')}")
    return out


# ---- the whole product on the whole bed ---------------------------------------------------------

DISPATCHER = "trainjob-dispatcher"
WORKER_CONTROLLER = "trainjob-worker-controller"
# Each Deployment's webhook configurations carry its name (deploy/*/webhooks.yaml).
WEBHOOK_CONFIGURATIONS = {DISPATCHER: DISPATCHER, WORKER_CONTROLLER: WORKER_CONTROLLER}


# The overlay of deploy/ each role is installed from, by the bed's multikueue_mode.
OVERLAYS = {
    "replace": {"worker": "worker", "manager": "manager", "worker-identity": "worker-identity"},
    "coexist": {
        "worker": "coexist/worker",
        "manager": "coexist/manager",
        "worker-identity": "worker-identity",
    },
}


def worker_role(worker: ClusterSpec) -> str:
    """What a worker installs: the worker controller, or on a worker that runs Kubeflow
    Trainer (ClusterSpec.trainer) only the manager's identity (deploy/worker-identity)."""
    return "worker-identity" if worker.trainer else "worker"


def manifests(bed: Bed, role: str, chart_values: Dict | None = None) -> list[Dict]:
    """What `role` installs: deploy/'s overlay for the bed's MultiKueue mode, or, given
    `chart_values`, the Helm chart rendered with them (the role and mode set for the bed), in
    its namespace made first, as `helm install --create-namespace` does."""
    if chart_values is None:
        return render(DEPLOY / OVERLAYS[bed.config.multikueue_mode][role])
    values: Dict = {**chart_values, "role": "worker" if role == "worker-identity" else role}
    if role == "worker-identity":
        values["worker"] = {**values.get("worker", {}), "controller": {"enabled": False}}
    if role == "manager" and bed.config.multikueue_mode == "coexist":
        values["manager"] = {**values.get("manager", {}), "mode": "Coexist"}
    if role == "worker" and bed.config.multikueue_mode == "coexist":
        identity = {"kueueMultiKueueAccess": True}
        values["worker"] = {**values.get("worker", {}), "multikueueIdentity": identity}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": chart.NAMESPACE}}
    return [namespace, *chart.template(values)]


def install_product(
    bed: Bed,
    *,
    worker_args: list[str] | None = None,
    manager_args: list[str] | None = None,
    chart_values: Dict | None = None,
) -> list[Replica]:
    """deploy/worker on every worker, the manager's kubeconfig Secret for each worker made
    with `trainjob-worker-secret` (as the install runbook tells users), then deploy/manager
    (both from deploy/coexist/ when the bed's manager runs Kueue's own MultiKueue too), or
    the chart in their place when `chart_values` are given. Flags in `*_args` go on top of
    each replica's command (the tests shorten timers with them).

    On real nodes the Deployments run as Pods from the product's image and nothing is
    returned: the kubelet, not the bed, runs the replicas."""
    if bed.config.real_nodes:
        install_on_nodes(bed, worker_args=worker_args, manager_args=manager_args)
        return []
    replicas: list[Replica] = []
    try:
        # Rendered once per kind; each worker gets its own copy (the bed rewrites webhook
        # addresses).
        rendered: dict[str, list[Dict]] = {}
        for w in bed.config.workers:
            role = worker_role(w)
            if role not in rendered:
                rendered[role] = manifests(bed, role, chart_values)
            replicas += _install_on(
                bed,
                w.name,
                copy.deepcopy(rendered[role]),
                ["--cluster-name", w.name, *(worker_args or [])],
            )
        manager = bed.config.managers[0].name
        applier = Applier(bed.api(manager))
        for w in bed.config.workers:
            applier.apply_all(load_manifests(worker_secret(bed, w.name)))
        replicas += _install_on(
            bed, manager, manifests(bed, "manager", chart_values), list(manager_args or [])
        )
    except BaseException:
        stop_product(bed, replicas)
        raise
    replicas_record.write_state(bed.state, [{"cluster": r.cluster, **r.state()} for r in replicas])
    return replicas


def _install_on(bed: Bed, cluster: str, docs: list[Dict], extra: list[str]) -> list[Replica]:
    return install_overlay(
        bed.api(cluster),
        bed.kubeconfig(cluster),
        cluster,
        docs,
        bed.cluster_dir(cluster) / "pods",
        bed.config.port(cluster, Port.CONTROLLER_BASE),
        extra,
    )


def install_on_nodes(
    bed: Bed, *, worker_args: list[str] | None = None, manager_args: list[str] | None = None
) -> None:
    """The product applied as it is (`kubectl apply -k`, webhooks through their Services),
    with `*_args` added to each container's args as a kustomize patch would; then every
    Deployment Ready and every webhook configuration holding its CA."""
    for w in bed.config.workers:
        _apply_on_nodes(
            bed,
            w.name,
            manifests(bed, worker_role(w)),
            ["--cluster-name", w.name, *(worker_args or [])],
        )
    manager = bed.config.managers[0].name
    applier = Applier(bed.api(manager))
    for w in bed.config.workers:
        applier.apply_all(load_manifests(worker_secret(bed, w.name)))
    _apply_on_nodes(bed, manager, manifests(bed, "manager"), list(manager_args or []))


def _apply_on_nodes(bed: Bed, cluster: str, docs: list[Dict], extra: list[str]) -> None:
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    for dep in deployments:
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        container["args"] = [*container.get("args", []), *extra]
    api = bed.api(cluster)
    Applier(api).apply_all(docs)
    for dep in deployments:
        meta = dep["metadata"]
        bed.wait_deployment_ready(cluster, meta.get("namespace", "default"), meta["name"])
    hooks = [d for d in docs if d["kind"].endswith("WebhookConfiguration")]
    _wait_ca_bundles(api, hooks, [])


def worker_secret(bed: Bed, worker: str) -> str:
    """The manager's kubeconfig Secret for `worker`, from a token of deploy/worker's identity,
    naming the worker's API server as the dispatcher reaches it (from a Pod on a real node:
    the host's bridge address)."""
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "trainjob-worker-secret"),
            "--worker-kubeconfig",
            str(bed.kubeconfig(worker)),
            "--server",
            bed.pod_server(worker),
            "--name",
            worker,
            "--namespace",
            bed.config.kueue_namespace,
            "--duration-seconds",
            str(TOKEN_SECONDS),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise BedError(f"trainjob-worker-secret for {worker} failed: {out.stderr.strip()}")
    return out.stdout


def stop_product(bed: Bed, replicas: list[Replica]) -> None:
    """Stop every replica, then remove our webhook configurations: with failurePolicy Fail,
    ones left behind would refuse every TrainJob on a bed that runs no controller."""
    for replica in replicas:
        replica.proc.terminate()
    for replica in replicas:
        try:
            replica.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            replica.proc.kill()
            replica.proc.wait()
    for cluster, name in {(r.cluster, WEBHOOK_CONFIGURATIONS[r.name]) for r in replicas}:
        api = client.AdmissionregistrationV1Api(bed.api(cluster))
        for delete in (
            api.delete_mutating_webhook_configuration,
            api.delete_validating_webhook_configuration,
        ):
            try:
                delete(name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
    replicas_record.forget_recorded(bed.state, {str(r.state()["pid_file"]) for r in replicas})


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(replica: Replica | Dict) -> Samples:
    """A replica's /metrics (a Replica, or its state as `state()` records it): (series name,
    sorted labels) -> value. Over HTTPS with the bed's reader token when it serves them so,
    else over HTTP on its health port. OSError if it does not answer."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(metrics_text(replica))
        for sample in family.samples
    }


def metrics_text(replica: Replica | Dict, token: str | None = None) -> str:
    """The text of a replica's /metrics, read as `scrape` reads it (with `token` in place of
    the bed's reader token, when given). OSError if it does not answer (urllib's HTTPError,
    with the status, when it refuses)."""
    state = replica.state() if isinstance(replica, Replica) else replica
    if state.get("metrics"):
        request = urllib.request.Request(
            f"https://127.0.0.1:{state['metrics']}/metrics",
            headers={"Authorization": f"Bearer {token or state['metrics_token']}"},
        )
        # The controller's certificate is self-signed: scrapers check the caller's token.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with urllib.request.urlopen(request, timeout=5, context=context) as r:
            return str(r.read().decode())
    with urllib.request.urlopen(f"http://127.0.0.1:{state['health']}/metrics", timeout=5) as r:
        return str(r.read().decode())


def leads(replica: Replica | Dict) -> bool | None:
    """Whether the replica holds its Lease, from its /metrics (None: it does not answer)."""
    try:
        samples = scrape(replica)
    except OSError:
        return None
    return any(v == 1 for (name, _), v in samples.items() if name == "trainjob_leader")


def leading_dispatcher(replicas: list[Replica]) -> Replica:
    """The dispatcher replica that holds the Lease now (StopIteration: none does)."""
    return next(r for r in replicas if r.name == DISPATCHER and leads(r))
