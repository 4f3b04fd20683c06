"""The upstream pipeline the comparison benchmark runs, on the same bed topology.

Manager: Kueue v0.19.2 with its `MultiKueue` gate on and its own TrainJob integration
(`trainer.kubeflow.org/trainjob` in `integrations.frameworks`), and the Trainer and JobSet CRDs.
Each worker: Kueue with the same integration, Kubeflow Trainer's controller and JobSet's, at the
versions Kueue v0.19.2's go.mod names. All built from their published Go modules (pinned
wrapper modules in clusters/gomod, cached by version) and run unmodified as processes; their
webhooks are served on loopback with certificates from the bed's CA, as Kueue's are. The CRDs
and webhook configurations come from the same modules (`kubectl kustomize` of their own
manifests), with each webhook's `clientConfig.service` turned into a loopback URL. Trainer and
JobSet run as their releases' ServiceAccounts, with their RBAC, and Kueue's MultiKueue reaches
the workers as a ServiceAccount of its own (worker_rbac); the bed audits them as it audits ours.
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from typing import Any

import yaml

from clusters import builds
from clusters.config import BedConfig, ClusterSpec, Port
from clusters.kube import load_manifests
from clusters.processes import Component, http_ok

Dict = dict[str, Any]
JOBSET_MODULE = f"sigs.k8s.io/jobset@{builds.JOBSET_VERSION}"
# Offsets from a worker's CONTROLLER_BASE port (our own controllers do not run in a peer bed);
# a second replica of each (peer_replicas 2) takes these plus SECOND.
JOBSET_WEBHOOK, JOBSET_HEALTH, TRAINER_WEBHOOK, TRAINER_HEALTH = 0, 1, 2, 3
SECOND = 4
# On a manager Trainer runs beside the dispatcher, whose replicas take offsets 0..5.
MANAGER_TRAINER_WEBHOOK, MANAGER_TRAINER_HEALTH = 8, 9
WEBHOOK_CERT = "peer-webhook"  # the bed's serving certificate for both (127.0.0.1)
# Who each controller runs as on a worker: the namespace and ServiceAccount its release's
# manifests bind its RBAC to (the same identity regime as the product's, and audited).
IDENTITIES = {
    "jobset": ("jobset-system", "jobset-controller-manager"),
    "trainer": ("kubeflow-system", "kubeflow-trainer-controller-manager"),
}
# The Leases their releases elect a leader by (JobSet's default ID; Trainer's shipped config).
LEASES = {"jobset": "6d4f6a47.jobset.x-k8s.io", "trainer": "trainer.kubeflow.org"}
# Kueue's MultiKueue identity on a worker, as Kueue's MultiKueue setup guide names it.
MULTIKUEUE_IDENTITY = ("kueue-system", "multikueue-sa")
RBAC_KINDS = ("ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


def trainer_version(config: BedConfig | None = None) -> str:
    """The Trainer release a bed runs: the one Kueue v0.19.2 names for the peer pipeline (and
    without a bed), the one the product follows on a mixed fleet's `trainer` clusters."""
    if config is None or config.is_peer:
        return builds.TRAINER_VERSION
    return builds.TRAINER_API_VERSION


def trainer_dir(config: BedConfig | None = None) -> Path:
    module = f"{builds.TRAINER_PACKAGE}@{trainer_version(config)}"
    return builds.module_source_dir("trainer", module)


def trainer_binary(config: BedConfig) -> str:
    """The name of Trainer's controller command in the build cache for that release."""
    if trainer_version(config) == builds.TRAINER_VERSION:
        return "trainer-controller-manager"
    return "trainer-controller-manager-v2.3"


def jobset_dir() -> Path:
    return builds.module_source_dir("jobset", JOBSET_MODULE)


def trainer_chart(config: BedConfig, into: Path) -> Path:
    """Trainer's Helm chart as its release packages it: the chart from its module, with each
    chart it depends on (JobSet's, LeaderWorkerSet's) in its `charts/` from that project's
    module at the version its Chart.yaml names, as `helm dependency build` puts them there.
    Those modules' charts name their projects' development images; an install names the
    release images (the bed's images.JOBSET)."""
    source = trainer_dir(config) / "charts" / "kubeflow-trainer"
    out = into / "kubeflow-trainer"
    _writable_copy(source, out)
    for dep in yaml.safe_load((source / "Chart.yaml").read_text())["dependencies"]:
        module = f"sigs.k8s.io/{dep['name']}@v{dep['version']}"
        source_dir = builds.module_source_dir("trainer-v2.3", module)
        _writable_copy(source_dir / "charts" / dep["name"], out / "charts" / dep["name"])
    return out


def _writable_copy(source: Path, out: Path) -> None:
    """A copy of a directory of the (read-only) module cache that its owner can write into."""
    shutil.copytree(source, out)
    for path in [out, *out.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)


def crds(config: BedConfig | None = None, trainer: bool = True) -> list[Dict]:
    """Trainer's CRDs (TrainJob, TrainingRuntime, ClusterTrainingRuntime; with `trainer`)
    of the release `config` runs, and JobSet's."""
    paths = []
    if trainer:
        crd_dir = trainer_dir(config) / "manifests" / "base" / "crds"
        paths += sorted(crd_dir.glob("trainer.kubeflow.org_*"))
    paths += sorted((jobset_dir() / "config" / "components" / "crd" / "bases").glob("*.yaml"))
    return [doc for path in paths for doc in load_manifests(path.read_text())]


def webhook_configurations(
    rendered: list[Dict], prefix: str, url: str, ca_pem: bytes
) -> list[Dict]:
    """The webhook configurations among `rendered` manifests, renamed with `prefix` (each
    project calls its own `mutating-webhook-configuration`) and pointed at `url`."""
    ca = base64.b64encode(ca_pem).decode()
    out = []
    for doc in rendered:
        if doc.get("kind") not in (
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ):
            continue
        doc = {**doc, "metadata": {"name": f"{prefix}-{doc['metadata']['name']}"}}
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{url}{path}", "caBundle": ca}
        out.append(doc)
    return out


def trainer_ports(spec: ClusterSpec) -> tuple[int, int]:
    """Offsets of Trainer's webhook and health ports from the cluster's CONTROLLER_BASE."""
    if spec.role == "manager":
        return MANAGER_TRAINER_WEBHOOK, MANAGER_TRAINER_HEALTH
    return TRAINER_WEBHOOK, TRAINER_HEALTH


def webhooks(config: BedConfig, spec: ClusterSpec, ca_pem: bytes, render: Any) -> list[Dict]:
    """Trainer's webhook configurations (and JobSet's, on a worker) for a cluster's loopback
    servers; `render` is `kubectl kustomize` (clusters.kube.render)."""
    base = config.port(spec.name, Port.CONTROLLER_BASE)
    out = []
    if spec.role == "worker":
        out += webhook_configurations(
            render(jobset_dir() / "config" / "components" / "webhook"),
            "jobset",
            f"https://127.0.0.1:{base + JOBSET_WEBHOOK}",
            ca_pem,
        )
    out += webhook_configurations(
        render(trainer_dir(config) / "manifests" / "base" / "webhook"),
        "trainer",
        f"https://127.0.0.1:{base + trainer_ports(spec)[0]}",
        ca_pem,
    )
    return out


def _namespace(name: str) -> Dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _in_namespace(docs: list[Dict], namespace: str) -> list[Dict]:
    """What kustomize's `namespace:` does to RBAC objects: namespaced ones and ServiceAccount
    subjects without a namespace get `namespace`."""
    out = []
    for doc in docs:
        doc = {**doc, "metadata": dict(doc["metadata"])}
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            doc["metadata"].setdefault("namespace", namespace)
        if "subjects" in doc:
            doc["subjects"] = [
                {**sub, "namespace": sub.get("namespace") or namespace}
                if sub["kind"] == "ServiceAccount"
                else sub
                for sub in doc["subjects"]
            ]
        out.append(doc)
    return out


def worker_rbac(
    render: Any, config: BedConfig | None = None, jobset: bool = True, multikueue: bool = True
) -> list[Dict]:
    """Trainer's namespace, ServiceAccount and RBAC as its release installs them (its base
    RBAC in `kubeflow-system`, as its manager overlay puts it); with `jobset`, JobSet's
    (its default kustomization); with `multikueue`, Kueue's MultiKueue identity
    (multikueue_rbac)."""
    trainer_ns = IDENTITIES["trainer"][0]
    rbac = render(trainer_dir(config) / "manifests" / "base" / "rbac")
    trainer = _in_namespace(rbac, trainer_ns)
    out = [_namespace(trainer_ns), *trainer]
    if jobset:
        rendered = render(jobset_dir() / "config" / "default")
        out = [
            _namespace(IDENTITIES["jobset"][0]),
            *[d for d in rendered if d["kind"] in RBAC_KINDS],
            *out,
        ]
    return [*out, *(multikueue_rbac() if multikueue else [])]


def multikueue_rbac() -> list[Dict]:
    """The ServiceAccount Kueue's manager reaches a worker as, bound to what Kueue's MultiKueue
    setup guide grants it (create, delete and watch the workloads and the jobs they belong to;
    their status), with TrainJobs for the TrainJob integration in place of the guide's other
    job kinds. Its namespace is the bed's Kueue namespace, which the bed creates."""
    namespace, name = MULTIKUEUE_IDENTITY
    manage = ["create", "delete", "get", "list", "watch"]
    rules = [
        {"apiGroups": [group], "resources": [plural], "verbs": manage}
        for group, plural in (
            ("batch", "jobs"),
            ("jobset.x-k8s.io", "jobsets"),
            ("trainer.kubeflow.org", "trainjobs"),
            ("kueue.x-k8s.io", "workloads"),
        )
    ]
    rules += [
        {"apiGroups": [group], "resources": [f"{plural}/status"], "verbs": ["get"]}
        for group, plural in (
            ("batch", "jobs"),
            ("jobset.x-k8s.io", "jobsets"),
            ("trainer.kubeflow.org", "trainjobs"),
        )
    ]
    rules.append(
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["workloads/status"],
            "verbs": ["get", "patch", "update"],
        }
    )
    rbac = "rbac.authorization.k8s.io"
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace},
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"{name}-role"},
            "rules": rules,
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{name}-crb"},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": f"{name}-role"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]


def audited_groups() -> list[str]:
    """The ServiceAccount groups of the peer's identities, which the bed's audit policy
    records as it records ours."""
    namespaces = sorted({ns for ns, _ in [*IDENTITIES.values(), MULTIKUEUE_IDENTITY]})
    return [f"system:serviceaccounts:{ns}" for ns in namespaces]


def kubeconfig(d: Path, name: str) -> Path:
    """Where the bed writes the token kubeconfig controller `name` runs with."""
    return d / f"{name}.kubeconfig"


# What each project's release sets that bears on its speed, kept as shipped:
# reconciler concurrency per kind and the API client's limits.
SHIPPED_KEYS = ("controller", "clientConnection")


def as_shipped(manager_dir: Path) -> Dict:
    """The SHIPPED_KEYS of the controller_manager_config.yaml a project's manifests ship (an
    absent key keeps the binary's default, as in the release)."""
    shipped = yaml.safe_load((manager_dir / "controller_manager_config.yaml").read_text()) or {}
    return {key: shipped[key] for key in SHIPPED_KEYS if key in shipped}


def write_configs(config: BedConfig, spec: ClusterSpec, d: Path, cert: Path, key: Path) -> None:
    """Each controller's Configuration file and serving certificate under `d`."""
    base = config.port(spec.name, Port.CONTROLLER_BASE)
    jobset_certs = d / "jobset-certs"
    # Trainer's webhook server reads $TMPDIR/k8s-webhook-server/serving-certs (no setting).
    trainer_certs = d / "trainer-tmp" / "k8s-webhook-server" / "serving-certs"
    for where in (jobset_certs, trainer_certs):
        where.mkdir(parents=True, exist_ok=True)
        (where / "tls.crt").write_bytes(cert.read_bytes())
        (where / "tls.key").write_bytes(key.read_bytes())
    for replica in range(config.peer_replicas if spec.role == "worker" else 1):
        shift = replica * SECOND
        # One replica: no election (nothing to elect). Two: each project's own Lease, as
        # its release elects (controller-runtime's defaults; the namespace is its own).
        common = {
            "metrics": {"bindAddress": "0"},  # the benchmark reads /proc, not their metrics
            "leaderElection": {"leaderElect": False},
        }
        jobset = {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            **common,
            **as_shipped(jobset_dir() / "config" / "components" / "manager"),
            "health": {"healthProbeBindAddress": f"127.0.0.1:{base + shift + JOBSET_HEALTH}"},
            "webhook": {
                "host": "127.0.0.1",
                "port": base + shift + JOBSET_WEBHOOK,
                "certDir": str(jobset_certs),
            },
            "internalCertManagement": {"enable": False},
        }
        webhook, health = trainer_ports(spec)
        trainer = {
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
            "kind": "Configuration",
            **common,
            **as_shipped(trainer_dir(config) / "manifests" / "base" / "manager"),
            "health": {"healthProbeBindAddress": f"127.0.0.1:{base + shift + health}"},
            "webhook": {"host": "127.0.0.1", "port": base + shift + webhook},
            "certManagement": {"enable": False},
        }
        if config.peer_replicas > 1:
            for project, doc in (("jobset", jobset), ("trainer", trainer)):
                doc["leaderElection"] = {
                    "leaderElect": True,
                    "resourceName": LEASES[project],
                    "resourceNamespace": IDENTITIES[project][0],
                    # controller-runtime's defaults, as both releases ship them (a
                    # Configuration without them has zero durations and will not start)
                    "leaseDuration": "15s",
                    "renewDeadline": "10s",
                    "retryPeriod": "2s",
                }
        suffix = f"-{replica + 1}" if replica else ""
        (d / f"jobset{suffix}-config.yaml").write_text(yaml.safe_dump(jobset))
        (d / f"trainer{suffix}-config.yaml").write_text(yaml.safe_dump(trainer))


def components(
    config: BedConfig, spec: ClusterSpec, d: Path, every: bool = False
) -> list[Component]:
    """JobSet's and Trainer's controllers on a worker (Trainer's alone on a manager), in start
    order, each as its own ServiceAccount (the bed writes their kubeconfigs before it starts
    them). `every`: whether or not this cluster runs them, so that `down` stops them."""
    if not (every or config.runs_trainer(spec)):
        return []
    base = config.port(spec.name, Port.CONTROLLER_BASE)

    def controller(
        name: str, binary: str, webhook: int, health: int, identity: str, **more: str
    ) -> Component:
        return Component(
            spec.name,
            name,
            [str(builds.binary(binary)), f"--config={d / f'{name}-config.yaml'}"],
            [base + webhook, base + health],
            lambda: http_ok(f"http://127.0.0.1:{base + health}/readyz"),
            d,
            env={"KUBECONFIG": str(kubeconfig(d, identity)), **more},
        )

    out = []
    on_worker = every or spec.role == "worker"
    for replica in range(config.peer_replicas if on_worker else 1):
        shift, suffix = replica * SECOND, f"-{replica + 1}" if replica else ""
        webhook, health = trainer_ports(spec)
        trainer = controller(
            f"trainer{suffix}",
            trainer_binary(config),
            shift + webhook,
            shift + health,
            "trainer",
            TMPDIR=str(d / "trainer-tmp"),
        )
        if on_worker:
            out.append(
                controller(
                    f"jobset{suffix}",
                    "jobset-controller-manager",
                    shift + JOBSET_WEBHOOK,
                    shift + JOBSET_HEALTH,
                    "jobset",
                )
            )
        out.append(trainer)
    return out
