"""Bring the multi-cluster bed up, report on it, and take it down."""

from __future__ import annotations

import shutil
import ssl
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from kubernetes import client

from clusters import builds, images, metrics_server, nodes, peer, processes, replicas
from clusters.config import REAL_NODES_MARKER, REPO_ROOT, BedConfig, ClusterSpec, Port, load_config
from clusters.errors import BedError
from clusters.kube import (
    Applier,
    api_client,
    build_kubeconfig,
    load_manifests,
    render,
    service_account_token,
    write_kubeconfig,
    write_token_kubeconfig,
)
from clusters.kueue import build_config, build_crds, build_webhook_configurations, shipped_config
from clusters.pki import CertPair, ensure_ca, ensure_cert, ensure_service_account_keys
from clusters.processes import Component

CRDS_DIR = REPO_ROOT / "crds"
# Audit every request of the identities in the product's namespace (our controllers, and the
# manager's identity on the workers), nothing else: the tests read it per user and per token.
# A peer bed audits the upstream pipeline's identities instead (clusters/peer.py).
AUDITED = ["system:serviceaccounts:trainjob-system"]


def audit_policy(config: BedConfig) -> dict[str, Any]:
    groups = peer.audited_groups() if config.is_peer else AUDITED
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [{"level": "Metadata", "userGroups": groups}, {"level": "None"}],
    }


STAGES_FILE = Path(__file__).resolve().parent / "kwok" / "stages.yaml"
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")  # fixed path in Kueue v0.19
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = nodes.SERVICE_CIDR
FRONT_PROXY_CLIENT = "front-proxy-client"  # the name kubeadm gives the aggregator's client
COREDNS_MANIFEST = Path(__file__).resolve().parent / "manifests" / "coredns.yaml"
_KUBELET_SOCKET_LOCK = threading.Lock()  # real nodes' kubelets start one at a time (_up_node)


def _say(msg: str) -> None:
    print(f"[bed {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class ComponentStatus:
    cluster: str
    name: str
    pid: int | None
    ports: list[int]
    healthy: bool
    rss_kib: int
    log: Path


class Bed:
    """The local multi-cluster bed described by a `BedConfig` (see `clusters/config.py`)."""

    def __init__(self, config: BedConfig | None = None) -> None:
        self.config = config or load_config()
        self.state = self.config.state_dir
        self._lock = threading.Lock()

    # ---- paths and credentials -------------------------------------------------------------

    @property
    def pki_dir(self) -> Path:
        return self.state / "pki"

    def cluster_dir(self, cluster: str) -> Path:
        return self.state / cluster

    def kubeconfig(self, cluster: str) -> Path:
        """Admin kubeconfig of `cluster` (credentials inline)."""
        return self.cluster_dir(cluster) / "kubeconfig"

    def server(self, cluster: str) -> str:
        return f"https://127.0.0.1:{self.config.port(cluster, Port.APISERVER)}"

    def ca(self) -> CertPair:
        return ensure_ca(self.pki_dir)

    def _cert(self, cluster: str, name: str, cn: str, **kw: Any) -> CertPair:
        with self._lock:
            return ensure_cert(self.ca(), self.pki_dir / cluster, name, cn, **kw)

    def front_proxy(self) -> tuple[CertPair, CertPair]:
        """The aggregation layer's CA and the API servers' client certificate under it (a CA
        of its own, as kubeadm makes: no certificate the cluster CA signs can pose as the
        front proxy)."""
        directory = self.pki_dir / "front-proxy"
        with self._lock:
            ca = ensure_ca(directory, "trainjob-bed-front-proxy-ca")
            return ca, ensure_cert(ca, directory, "client", FRONT_PROXY_CLIENT, client=True)

    def _front_proxy_flags(self) -> list[str]:
        """The aggregation layer: what an aggregated API server (the dispatcher's) checks a
        proxied request against, as a kubeadm cluster sets it."""
        ca, client_pair = self.front_proxy()
        return [
            f"--requestheader-client-ca-file={ca.cert}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-uid-headers=X-Remote-Uid",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={client_pair.cert}",
            f"--proxy-client-key-file={client_pair.key}",
        ]

    def admin_cert(self, cluster: str) -> CertPair:
        return self._cert(
            cluster, "admin", "bed-admin", organizations=("system:masters",), client=True
        )

    def api(self, cluster: str) -> client.ApiClient:
        return api_client(self.kubeconfig(cluster))

    # ---- components ---------------------------------------------------------------------------

    def components(self, spec: ClusterSpec, every: bool = False) -> list[Component]:
        """The processes of one cluster, in start order (`every`: the peer pipeline's too,
        whichever pipeline this bed runs, so that `down` stops what an earlier bed started)."""
        c, cfg, d = spec.name, self.config, self.cluster_dir(spec.name)

        def port(which: Port) -> int:
            return cfg.port(c, which)

        pki = self.pki_dir / c
        ca = self.pki_dir / "ca.crt"
        kubeconfig = str(self.kubeconfig(c))
        admin = CertPair(pki / "admin.crt", pki / "admin.key")

        def api_ctx() -> ssl.SSLContext:
            return processes.client_context(ca, admin.cert, admin.key)

        insecure = processes.insecure_context()
        etcd_client, etcd_peer = port(Port.ETCD_CLIENT), port(Port.ETCD_PEER)
        comps = [
            Component(
                c,
                "etcd",
                [
                    str(builds.binary("etcd")),
                    f"--name={c}",
                    f"--data-dir={d / 'etcd'}",
                    f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
                    f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
                    f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                    f"--initial-cluster={c}=http://127.0.0.1:{etcd_peer}",
                    # A test bed: fsync buys nothing but latency here.
                    "--unsafe-no-fsync",
                    "--quota-backend-bytes=4294967296",
                    "--log-level=warn",
                ],
                [etcd_client, etcd_peer],
                lambda: processes.http_ok(
                    f"http://127.0.0.1:{etcd_client}/health", expect='"health":"true"'
                ),
                d,
            ),
            Component(
                c,
                "kube-apiserver",
                [
                    str(builds.binary("kube-apiserver")),
                    f"--etcd-servers=http://127.0.0.1:{etcd_client}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={port(Port.APISERVER)}",
                    f"--tls-cert-file={pki / 'apiserver.crt'}",
                    f"--tls-private-key-file={pki / 'apiserver.key'}",
                    f"--client-ca-file={ca}",
                    f"--service-account-key-file={pki / 'sa.pub'}",
                    f"--service-account-signing-key-file={pki / 'sa.key'}",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    "--allow-privileged=true",
                    *self._apiserver_node_flags(c),
                    *self._front_proxy_flags(),
                    f"--cert-dir={d / 'apiserver-certs'}",
                    # Who did what, for the pipeline's identities only (audit_policy): the
                    # tests count requests per identity and per token from it.
                    f"--audit-policy-file={d / 'audit-policy.yaml'}",
                    f"--audit-log-path={d / 'audit.log'}",
                    "--audit-log-format=json",
                    "--audit-log-maxsize=200",
                    "--audit-log-maxbackup=1",
                    "--v=1",
                ],
                [port(Port.APISERVER)],
                lambda: processes.http_ok(f"{self.server(c)}/readyz", context=api_ctx()),
                d,
            ),
            Component(
                c,
                "kube-controller-manager",
                [
                    str(builds.binary("kube-controller-manager")),
                    f"--kubeconfig={kubeconfig}",
                    f"--authentication-kubeconfig={kubeconfig}",
                    f"--authorization-kubeconfig={kubeconfig}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={port(Port.CONTROLLER_MANAGER)}",
                    "--leader-elect=false",
                    "--controllers=*",
                    f"--service-account-private-key-file={pki / 'sa.key'}",
                    f"--root-ca-file={ca}",
                    "--use-service-account-credentials=false",
                    # The default 20 QPS makes the Job controller the bottleneck of any load test.
                    "--kube-api-qps=200",
                    "--kube-api-burst=400",
                    f"--cert-dir={d / 'kcm-certs'}",
                    "--v=1",
                ],
                [port(Port.CONTROLLER_MANAGER)],
                lambda: processes.http_ok(
                    f"https://127.0.0.1:{port(Port.CONTROLLER_MANAGER)}/healthz", context=insecure
                ),
                d,
            ),
        ]
        if spec.role == "worker" or cfg.real_nodes:
            comps.append(
                Component(
                    c,
                    "kube-scheduler",
                    [
                        str(builds.binary("kube-scheduler")),
                        f"--kubeconfig={kubeconfig}",
                        f"--authentication-kubeconfig={kubeconfig}",
                        f"--authorization-kubeconfig={kubeconfig}",
                        "--bind-address=127.0.0.1",
                        f"--secure-port={port(Port.SCHEDULER)}",
                        "--leader-elect=false",
                        "--kube-api-qps=200",
                        "--kube-api-burst=400",
                        f"--cert-dir={d / 'scheduler-certs'}",
                        "--v=1",
                    ],
                    [port(Port.SCHEDULER)],
                    lambda: processes.http_ok(
                        f"https://127.0.0.1:{port(Port.SCHEDULER)}/healthz", context=insecure
                    ),
                    d,
                )
            )
        if spec.role == "worker" and not cfg.real_nodes:
            comps.append(
                Component(
                    c,
                    "kwok",
                    [
                        str(builds.binary("kwok")),
                        f"--kubeconfig={kubeconfig}",
                        f"--config={d / 'kwok.yaml'}",
                        "--manage-all-nodes=false",
                        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                        f"--server-address=127.0.0.1:{port(Port.KWOK)}",
                        "--node-lease-duration-seconds=40",
                        "--cidr=10.0.0.1/16",
                        "--node-ip=10.0.0.1",
                    ],
                    [port(Port.KWOK)],
                    lambda: processes.http_ok(f"http://127.0.0.1:{port(Port.KWOK)}/healthz"),
                    d,
                )
            )
        # peer-lifted: the manager's Kueue is the build with its worker clients' limit lifted.
        lifted = cfg.pipeline == "peer-lifted" and spec.role == "manager"
        comps.append(
            Component(
                c,
                "kueue",
                [
                    str(builds.binary("kueue-lifted" if lifted else "kueue")),
                    f"--config={d / 'kueue-config.yaml'}",
                    "--zap-log-level=2",
                ],
                [port(Port.KUEUE_WEBHOOK), port(Port.KUEUE_METRICS), port(Port.KUEUE_HEALTH)],
                lambda: processes.http_ok(f"http://127.0.0.1:{port(Port.KUEUE_HEALTH)}/readyz"),
                d,
                env={"KUBECONFIG": kubeconfig},
            )
        )
        comps += peer.components(cfg, spec, d, every=every)
        node = self.node(c)
        if node is not None:
            comps += nodes.components(
                node, self.node_kubeconfig(c, "kubelet"), self.node_kubeconfig(c, "kube-proxy")
            )
        return comps

    def _apiserver_node_flags(self, cluster: str) -> list[str]:
        """With real nodes: kubelets authorised as nodes, the `kubernetes` Service at the
        address pods reach the API server by, webhooks and kubelets called directly."""
        if not self.config.real_nodes:
            # The `kubernetes` Service cannot point at a loopback address.
            return ["--authorization-mode=RBAC", "--endpoint-reconciler-type=none"]
        pki = self.pki_dir / cluster
        return [
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--advertise-address={nodes.HOST_IP}",
            f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
            # The host cannot resolve node names; their InternalIP is routed.
            "--kubelet-preferred-address-types=InternalIP",
            # Webhooks and aggregated APIs by their endpoints (pod IPs, routed from the host),
            # not by ClusterIPs, which only exist inside each node.
            "--enable-aggregator-routing=true",
        ]

    # ---- real nodes ---------------------------------------------------------------------------

    def node(self, cluster: str) -> nodes.Node | None:
        """The cluster's real node (None on a kwok bed)."""
        return next((n for n in nodes.nodes(self.config) if n.cluster == cluster), None)

    def node_kubeconfig(self, cluster: str, who: str) -> Path:
        return self.cluster_dir(cluster) / f"{who}.kubeconfig"

    def pod_server(self, cluster: str) -> str:
        """The API server's address as pods and nodes reach it (the host's on the bridge)."""
        if not self.config.real_nodes:
            return self.server(cluster)
        return f"https://{nodes.HOST_IP}:{self.config.port(cluster, Port.APISERVER)}"

    def _node_pki(self, cluster: str) -> None:
        node = self.node(cluster)
        assert node is not None
        self._cert(
            cluster,
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            organizations=("system:masters",),
            client=True,
        )
        for who, cn, orgs in (
            ("kubelet", f"system:node:{node.name}", ("system:nodes",)),
            ("kube-proxy", "system:kube-proxy", ()),
        ):
            pair = self._cert(cluster, who, cn, organizations=orgs, client=True)
            write_kubeconfig(
                self.node_kubeconfig(cluster, who),
                build_kubeconfig(
                    cluster,
                    self.pod_server(cluster),
                    self.ca().cert_pem(),
                    cn,
                    pair.cert_pem(),
                    pair.key_pem(),
                ),
            )

    def _up_node(self, spec: ClusterSpec, comps: dict[str, Component]) -> None:
        """The cluster's real node: network, containerd with the bed's images, kubelet,
        kube-proxy, then CoreDNS as the cluster DNS."""
        c = spec.name
        node = self.node(c)
        assert node is not None
        nodes.node_network_up(node)
        serving = self._cert(
            c,
            "kubelet-serving",
            f"system:node:{node.name}",
            organizations=("system:nodes",),
            hosts=(node.ip, node.name),
            server=True,
        )
        nodes.write_configs(
            node,
            self.pki_dir / "ca.crt",
            (serving.cert, serving.key),
            self.node_kubeconfig(c, "kubelet"),
            self.node_kubeconfig(c, "kube-proxy"),
        )
        self._start(comps["containerd"])
        nodes.import_images(node)
        # Every kubelet binds the same device-plugin socket (a path kubelet does not put under
        # --root-dir); two binding it at once, the second exits ("address already in use").
        # One kubelet at a time, each until it has bound it.
        with _KUBELET_SOCKET_LOCK:
            started = time.time()
            self._start(comps["kubelet"])
            nodes.wait_device_plugin_socket(started)
        self._start(comps["kube-proxy"])
        self._wait_nodes_ready(c, 1, selector="type=real", timeout=120)
        text = (
            COREDNS_MANIFEST.read_text()
            .replace("COREDNS_IMAGE", images.COREDNS.name)
            .replace("CLUSTER_DNS", nodes.CLUSTER_DNS)
        )
        Applier(self.api(c)).apply_all(load_manifests(text))
        self.wait_deployment_ready(c, "kube-system", "coredns")
        if spec.role == "worker":
            self._up_metrics_server(c)

    def _up_metrics_server(self, cluster: str) -> None:
        """metrics-server on a worker, from its release manifests (its module's
        manifests/overlays/release, as its components.yaml is made), checking the kubelet's
        serving certificate against the cluster CA that signs it (_up_node), where the
        manifests' default reads the kubelet's address only."""
        docs = metrics_server.manifests()
        Applier(self.api(cluster)).apply_all(docs)
        self.wait_deployment_ready(cluster, "kube-system", "metrics-server", timeout=180)
        metrics_server.wait_available(self.api(cluster))

    def wait_deployment_ready(
        self, cluster: str, namespace: str, name: str, timeout: float = 120.0
    ) -> None:
        apps = client.AppsV1Api(self.api(cluster))
        deadline = time.monotonic() + timeout
        while True:
            dep = apps.read_namespaced_deployment(name, namespace)
            want = dep.spec.replicas or 0
            if (dep.status.ready_replicas or 0) >= want and (
                dep.status.updated_replicas or 0
            ) >= want:
                return
            if time.monotonic() > deadline:
                raise BedError(
                    f"{cluster}: Deployment {namespace}/{name} has "
                    f"{dep.status.ready_replicas or 0}/{want} ready replicas after "
                    f"{timeout:.0f}s; see `kubectl -n {namespace} describe pods` and the "
                    f"kubelet log {self.cluster_dir(cluster) / 'node' / 'kubelet.log'}"
                )
            time.sleep(0.5)

    def component(self, cluster: str, name: str) -> Component:
        for comp in self.components(self.config.cluster(cluster)):
            if comp.name == name:
                return comp
        raise BedError(f"cluster {cluster!r} has no component {name!r}")

    # ---- up -----------------------------------------------------------------------------------

    def up(self) -> float:
        """Bring every cluster up (idempotent: running parts are kept, missing ones started)."""
        start = time.monotonic()
        real = self.config.real_nodes
        if real:
            nodes.check_host()
        trainer = any(self.config.runs_trainer(c) for c in self.config.clusters)
        builds.build_all(peer=self.config.is_peer, real=real, trainer=trainer)
        if real:
            images.build_all()
        self.state.mkdir(parents=True, exist_ok=True)
        if real:
            nodes.claim(self.state)
            (self.state / REAL_NODES_MARKER).touch()
            nodes.host_network_up(self.config)
        self._prepare_pki()
        with ThreadPoolExecutor(max_workers=len(self.config.clusters)) as pool:
            futures = [pool.submit(self._up_cluster, spec) for spec in self.config.clusters]
            errors = [f.exception() for f in futures]
        failed = [e for e in errors if e is not None]
        if failed:
            if len(failed) == 1:
                raise failed[0]
            raise BedError("\n\n".join(str(e) for e in failed))
        took = time.monotonic() - start
        _say(
            f"bed is up in {took:.1f}s: "
            + ", ".join(f"{c.name} ({c.role}) {self.server(c.name)}" for c in self.config.clusters)
        )
        return took

    def _prepare_pki(self) -> None:
        self.ca()
        KUEUE_METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
        metrics = ensure_cert(
            self.ca(),
            self.pki_dir,
            "kueue-metrics",
            "kueue-metrics",
            hosts=("127.0.0.1", "localhost"),
            server=True,
        )
        for src, dst in ((metrics.cert, "tls.crt"), (metrics.key, "tls.key")):
            target = KUEUE_METRICS_CERT_DIR / dst
            if not target.exists():
                shutil.copyfile(src, target)
        for spec in self.config.clusters:
            c = spec.name
            self._cert(
                c,
                "apiserver",
                "kube-apiserver",
                server=True,
                hosts=(
                    "127.0.0.1",
                    "localhost",
                    "kubernetes",
                    "kubernetes.default",
                    "kubernetes.default.svc",
                    "10.96.0.1",
                    nodes.HOST_IP,
                ),
            )
            for name in ("kueue-webhook", peer.WEBHOOK_CERT):
                self._cert(c, name, name, server=True, hosts=("127.0.0.1", "localhost"))
            ensure_service_account_keys(self.pki_dir / c)
            if self.config.real_nodes:
                self._node_pki(c)
            admin = self.admin_cert(c)
            write_kubeconfig(
                self.kubeconfig(c),
                build_kubeconfig(
                    c,
                    self.server(c),
                    self.ca().cert_pem(),
                    "bed-admin",
                    admin.cert_pem(),
                    admin.key_pem(),
                ),
            )

    def _start(self, comp: Component, timeout: float = 90.0) -> None:
        if processes.start(comp):
            where = f"port {comp.ports[0]}" if comp.ports else "no host port"
            _say(f"{comp.label}: started (pid {comp.pid()}, {where})")
        processes.wait_healthy(comp, timeout)

    def _up_cluster(self, spec: ClusterSpec) -> None:
        c = spec.name
        d = self.cluster_dir(c)
        d.mkdir(parents=True, exist_ok=True)
        comps = {comp.name: comp for comp in self.components(spec)}
        policy = audit_policy(self.config)
        (d / "audit-policy.yaml").write_text(yaml.safe_dump(policy, sort_keys=False))
        self._start(comps["etcd"])
        self._start(comps["kube-apiserver"])
        applier = Applier(self.api(c))
        self._apply_crds(applier, spec)
        self._start(comps["kube-controller-manager"])
        if "kube-scheduler" in comps:
            self._start(comps["kube-scheduler"])
        if "kwok" in comps:
            self._write_kwok_config(d)
            self._apply_nodes(applier, spec)
            self._start(comps["kwok"])
            self._wait_nodes_ready(c, sum(p.count for p in spec.nodes))
        self._write_kueue_config(spec)
        self._start(comps["kueue"], timeout=120)
        if self.config.real_nodes:
            self._up_node(spec, comps)
        if self.config.runs_trainer(spec):
            pki = self.pki_dir / c
            cert, key = pki / f"{peer.WEBHOOK_CERT}.crt", pki / f"{peer.WEBHOOK_CERT}.key"
            peer.write_configs(self.config, spec, d, cert, key)
            jobset = spec.role == "worker"
            applier.apply_all(
                peer.worker_rbac(render, self.config, jobset=jobset, multikueue=self.config.is_peer)
            )
            names = ("jobset", "trainer") if jobset else ("trainer",)
            for name in names:
                namespace, account = peer.IDENTITIES[name]
                token = service_account_token(self.api(c), namespace, account)
                write_token_kubeconfig(self.kubeconfig(c), token, peer.kubeconfig(d, name))
            for comp in peer.components(self.config, spec, d):  # every replica (peer_replicas)
                self._start(comps[comp.name], timeout=120)
        _say(f"{c}: ready")

    def _apply_crds(self, applier: Applier, spec: ClusterSpec) -> None:
        """Our CRDs (Trainer's and JobSet's for the peer pipeline, with their webhooks on a
        worker), then Kueue's CRDs and webhooks, all pointed at this cluster's servers."""
        ours = self._trainer_api(spec)
        kueue = self._kueue_api(spec)
        applier.apply_all([*ours, *kueue])
        applier.wait_crds_established(
            [
                crd["metadata"]["name"]
                for crd in [*ours, *kueue]
                if crd.get("kind") == "CustomResourceDefinition"
            ]
        )

    def _trainer_api(self, spec: ClusterSpec) -> list[dict[str, Any]]:
        """The TrainJob API the bed serves in a cluster: our CRDs, or Trainer's and JobSet's
        where Trainer runs the TrainJobs, with the webhooks of the Trainer the bed runs."""
        cfg = self.config
        if cfg.is_peer or (spec.trainer and spec.role == "worker"):
            ours = peer.crds(cfg)
        else:
            ours = [
                doc
                for path in sorted(CRDS_DIR.glob("trainer.kubeflow.org_*.yaml"))
                for doc in load_manifests(path.read_text())
            ]
            if spec.trainer:  # a manager: our TrainJob CRD, JobSet's for Trainer's informers
                ours += peer.crds(cfg, trainer=False)
        if cfg.runs_trainer(spec):
            ours += peer.webhooks(cfg, spec, self.ca().cert_pem(), render)
        return ours

    def put_back_crds(self, cluster: str) -> None:
        """The TrainJob API as `up` serves it in `cluster`, after a test replaced it."""
        applier = Applier(self.api(cluster))
        crds = self._trainer_api(self.config.cluster(cluster))
        applier.apply_all(crds)
        applier.wait_crds_established(
            [o["metadata"]["name"] for o in crds if o["kind"] == "CustomResourceDefinition"]
        )

    def _kueue_api(self, spec: ClusterSpec) -> list[dict[str, Any]]:
        """What the bed's Kueue process serves in a cluster: Kueue's CRDs, its namespace and
        its webhook configurations, pointed at the process."""
        kueue_dir = builds.module_source_dir("kueue", f"sigs.k8s.io/kueue@{builds.KUEUE_VERSION}")
        url = f"https://127.0.0.1:{self.config.port(spec.name, Port.KUEUE_WEBHOOK)}"
        ca_pem = self.ca().cert_pem()
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": self.config.kueue_namespace},
        }
        return [
            *build_crds(kueue_dir, url, ca_pem),
            namespace,
            *build_webhook_configurations(
                kueue_dir,
                url,
                ca_pem,
                self.config.kueue_namespace,
                peer=self.config.kueue_runs_trainjobs(spec),
            ),
        ]

    def take_out_kueue(self) -> None:
        """Stop the bed's Kueue in every cluster and delete what it served (its CRDs with
        their objects, its webhook configurations), so that Kueue can be installed in the
        clusters as users install it. `bring_back_kueue` undoes both."""
        for spec in self.config.clusters:
            applier = Applier(self.api(spec.name))
            kueue = self._kueue_api(spec)
            applier.remove_all([o for o in kueue if o["kind"] == "CustomResourceDefinition"])
            self.stop_component(spec.name, "kueue")
            applier.remove_all([o for o in kueue if o["kind"].endswith("WebhookConfiguration")])
            _say(f"{spec.name}: the bed's Kueue is out")

    def bring_back_kueue(self, installed: list[dict[str, Any]]) -> None:
        """Delete a Kueue installed in the clusters from the manifests `installed` (its
        Deployment first, so that nothing puts finalizers back), then start the bed's Kueue
        again with what it serves."""
        for spec in self.config.clusters:
            applier = Applier(self.api(spec.name))
            applier.remove_all([o for o in installed if o["kind"] == "Deployment"])
            applier.remove_all([o for o in installed if o["kind"] != "Deployment"])
            kueue = self._kueue_api(spec)
            applier.apply_all(kueue)
            applier.wait_crds_established(
                [o["metadata"]["name"] for o in kueue if o["kind"] == "CustomResourceDefinition"]
            )
            self._write_kueue_config(spec)
            self.start_component(spec.name, "kueue", timeout=120)
            _say(f"{spec.name}: the bed's Kueue is back")

    def _write_kwok_config(self, d: Path) -> None:
        run_ms = int(self.config.pod_run_seconds * 1000)
        stages = STAGES_FILE.read_text().replace("DEFAULT_RUN_MS", str(run_ms))
        (d / "kwok.yaml").write_text(stages)

    def _apply_nodes(self, applier: Applier, spec: ClusterSpec) -> None:
        for pool in spec.nodes:
            for i in range(pool.count):
                name = f"{spec.name}-{pool.name}-{i}"
                capacity = {"cpu": pool.cpu, "memory": pool.memory, "pods": str(pool.pods)}
                if pool.gpu:
                    capacity["nvidia.com/gpu"] = str(pool.gpu)
                applier.apply(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {
                            "name": name,
                            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                            "labels": {
                                "kubernetes.io/hostname": name,
                                "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64",
                                "type": "kwok",
                                "bed.trainjob.dev/pool": pool.name,
                                **pool.labels,
                            },
                        },
                        "status": {"capacity": capacity, "allocatable": capacity},
                    }
                )

    def _wait_nodes_ready(
        self, cluster: str, count: int, selector: str = "type=kwok", timeout: float = 60.0
    ) -> None:
        core = client.CoreV1Api(self.api(cluster))
        deadline = time.monotonic() + timeout
        while True:
            listed = core.list_node(label_selector=selector).items
            ready = [
                n
                for n in listed
                if any(
                    cond.type == "Ready" and cond.status == "True"
                    for cond in (n.status.conditions or [])
                )
            ]
            if len(ready) >= count:
                return
            if time.monotonic() > deadline:
                log = "node/kubelet.log" if selector == "type=real" else "kwok.log"
                raise BedError(
                    f"{cluster}: only {len(ready)}/{count} nodes ({selector}) Ready after "
                    f"{timeout:.0f}s; log: {self.cluster_dir(cluster) / log}"
                )
            time.sleep(0.3)

    def _write_kueue_config(self, spec: ClusterSpec) -> None:
        c = spec.name
        cert_dir = self.cluster_dir(c) / "kueue-certs"
        cert_dir.mkdir(parents=True, exist_ok=True)
        webhook = self.pki_dir / c
        shutil.copyfile(webhook / "kueue-webhook.crt", cert_dir / "tls.crt")
        shutil.copyfile(webhook / "kueue-webhook.key", cert_dir / "tls.key")
        cfg = build_config(
            namespace=self.config.kueue_namespace,
            webhook_port=self.config.port(c, Port.KUEUE_WEBHOOK),
            metrics_port=self.config.port(c, Port.KUEUE_METRICS),
            health_port=self.config.port(c, Port.KUEUE_HEALTH),
            cert_dir=cert_dir,
            manager=spec.role == "manager",
            pods_ready_timeout=self.config.wait_for_pods_ready.timeout_seconds,
            requeue_backoff_base=self.config.wait_for_pods_ready.backoff_base_seconds,
            multikueue=self.config.multikueue_mode in ("coexist", "kueue"),
            peer=self.config.is_peer,
            trainjobs=self.config.kueue_runs_trainjobs(spec),
            shipped=shipped_config(
                builds.module_source_dir("kueue", f"sigs.k8s.io/kueue@{builds.KUEUE_VERSION}")
            ),
            gates=self.config.kueue_feature_gates,
        )
        (self.cluster_dir(c) / "kueue-config.yaml").write_text(yaml.safe_dump(cfg))

    # ---- status, restart, down ----------------------------------------------------------------

    def status(self) -> list[ComponentStatus]:
        out = []
        for spec in self.config.clusters:
            for comp in self.components(spec):
                pid = comp.pid()
                out.append(
                    ComponentStatus(
                        spec.name,
                        comp.name,
                        pid,
                        comp.ports,
                        healthy=pid is not None and comp.health(),
                        rss_kib=processes.resident_kib(pid) if pid else 0,
                        log=comp.log_file,
                    )
                )
        return out

    def is_up(self) -> bool:
        return all(s.healthy for s in self.status())

    def stop_component(self, cluster: str, name: str) -> None:
        processes.stop(self.component(cluster, name))

    def start_component(self, cluster: str, name: str, timeout: float = 90.0) -> None:
        self._start(self.component(cluster, name), timeout)

    def restore_api_server(self, cluster: str, wait_runs_jobs: bool = True) -> None:
        """Start a stopped kube-apiserver again, then what caches its objects, as an operator
        would after a long outage. Seen on this bed: Kueue v0.19's caches stayed stale for
        minutes (Workloads Pending with "namespace does not exist" for new namespaces), and
        v1.36's Job controller stopped syncing Jobs for good ("read version ... is not as new
        as written version"). Trainer's and JobSet's controllers, where they run, are started
        again too. `wait_runs_jobs`: wait until the worker runs a Job again (up to a minute
        and more here: see `wait_runs_jobs`)."""
        self.start_component(cluster, "kube-apiserver")
        # Not kwok: a new kwok waits for the old one's node leases to expire (about 40 s)
        # before it runs any pod. The scheduler: left running after a 40 s outage, it bound
        # the first new pod 45 s after the API server was back (its watches backing off).
        spec = self.config.cluster(cluster)
        names = {comp.name for comp in self.components(spec)}
        for component in ("kube-controller-manager", "kube-scheduler", "kueue"):
            if component in names:
                self.stop_component(cluster, component)
                self.start_component(cluster, component, timeout=120)
        for comp in peer.components(self.config, spec, self.cluster_dir(cluster)):
            self.stop_component(cluster, comp.name)
            self.start_component(cluster, comp.name, timeout=120)
        if wait_runs_jobs and spec.role == "worker":
            self.wait_runs_jobs(cluster)

    def set_multikueue_mode(self, mode: Literal["replace", "coexist", "kueue"]) -> None:
        """Restart the manager's Kueue with its own MultiKueue off (replace) or on (coexist),
        or with its own MultiKueue and TrainJob integration (kueue: no TrainJob webhook of
        Kueue's is registered, so TrainJobs are created suspended); reinstalling the product
        to match is the caller's."""
        self.config = self.config.model_copy(update={"multikueue_mode": mode})
        for spec in self.config.managers:
            self._write_kueue_config(spec)
            self.stop_component(spec.name, "kueue")
            self.start_component(spec.name, "kueue", timeout=120)

    def set_kueue_feature_gates(self, gates: dict[str, bool]) -> None:
        """Restart every cluster's Kueue with `gates` on top of the bed's own feature gates
        (an empty mapping: the bed's own only)."""
        self.config = self.config.model_copy(update={"kueue_feature_gates": dict(gates)})
        for spec in self.config.clusters:
            self._write_kueue_config(spec)
            self.stop_component(spec.name, "kueue")
            self.start_component(spec.name, "kueue", timeout=120)

    def wait_runs_jobs(self, cluster: str, timeout: float = 180.0) -> float:
        """Wait until a worker runs a Job to the end again (controller-manager, scheduler and
        kwok have caught up after an outage); returns the seconds it took. Seen on this bed:
        up to a minute after the API server is back, new pods are neither bound nor started."""
        start = time.monotonic()
        batch = client.BatchV1Api(self.api(cluster))
        name = f"bed-probe-{int(time.time() * 1000) % 10**8}"
        pod = {
            "metadata": {"annotations": {"bed.trainjob.dev/run-duration": "1s"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "probe", "image": "x"}]},
        }
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}}
        job["spec"] = {"template": pod, "backoffLimit": 0}
        batch.create_namespaced_job("default", job)
        try:
            while time.monotonic() - start < timeout:
                status = batch.read_namespaced_job_status(name, "default").status
                if status and status.succeeded:
                    _say(f"{cluster}: runs Jobs again ({time.monotonic() - start:.0f}s)")
                    return time.monotonic() - start
                time.sleep(0.5)
            raise BedError(f"{cluster} runs no Job {timeout:.0f}s after its API server came back")
        finally:
            batch.delete_namespaced_job(name, "default", propagation_policy="Background")

    def down(self, keep_state: bool = False) -> float:
        """Stop every process the bed started (by PID), newest first, then remove its state."""
        start = time.monotonic()
        if self.state.exists():
            if replicas.stop_recorded(self.state):
                _say("our controllers: stopped")

            def stop_cluster(spec: ClusterSpec) -> None:
                for comp in reversed(self.components(spec, every=True)):
                    if processes.stop(comp):
                        _say(f"{comp.label}: stopped")

            _parallel(stop_cluster, self.config.clusters)
        # Whatever the config says, if this bed ran real nodes (its state says so): one left
        # behind would keep its containers. Another bed's nodes (a kwok bed beside a real
        # one shares the cluster names) are not this bed's to end.
        if self.config.real_nodes or (self.state / REAL_NODES_MARKER).exists():
            for i, spec in enumerate(self.config.clusters):
                nodes.node_down(nodes.Node(spec.name, i, self.cluster_dir(spec.name) / "node"))
            if nodes.release(self.state):
                nodes.host_network_down()
        if self.state.exists() and not keep_state:
            shutil.rmtree(self.state, ignore_errors=True)
        took = time.monotonic() - start
        _say(f"bed is down in {took:.1f}s")
        return took

    def env_lines(self) -> list[str]:
        lines = [
            f"export KUBECONFIG_{c.name.upper().replace('-', '_')}={self.kubeconfig(c.name)}"
            for c in self.config.clusters
        ]
        if self.config.managers:
            lines.append(f"export KUBECONFIG={self.kubeconfig(self.config.managers[0].name)}")
        lines.append(f"export TJ_BED_STATE_DIR={self.state}")
        return lines


def _parallel(fn: Callable[[ClusterSpec], None], specs: list[ClusterSpec]) -> None:
    with ThreadPoolExecutor(max_workers=max(1, len(specs))) as pool:
        for future in [pool.submit(fn, s) for s in specs]:
            future.result()
