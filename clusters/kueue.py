"""Kueue's own manifests and config, rendered for a Kueue process serving webhooks on loopback,
and its release manifests for Kueue installed as users install it."""

from __future__ import annotations

import base64
import copy
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from clusters import builds
from clusters.kube import kustomize, load_manifests

# Built-in Kueue integrations the bed enables, with the (group, resource) their webhooks watch.
# TrainJob is deliberately absent: our own code is the TrainJob integration.
FRAMEWORKS: dict[str, tuple[str, str]] = {"batch/job": ("batch", "jobs")}
EXTERNAL_FRAMEWORKS = ["TrainJob.v1alpha1.trainer.kubeflow.org"]
# The upstream peer pipeline (clusters/peer.py): Kueue's own TrainJob integration instead.
PEER_FRAMEWORKS = {
    **FRAMEWORKS,
    "trainer.kubeflow.org/trainjob": ("trainer.kubeflow.org", "trainjobs"),
}
KUEUE_GROUP = "kueue.x-k8s.io"
CONVERSION_PATCH_PREFIX = "patches/webhook_in_"


def _uncommented_patch_paths(kustomization: dict[str, Any]) -> list[str]:
    return [p["path"] for p in kustomization.get("patches") or [] if "path" in p]


def build_crds(kueue_dir: Path, webhook_base_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """Kueue's CRDs; those Kueue's kustomization wires to the conversion webhook point at us."""
    crd_dir = kueue_dir / "config" / "components" / "crd"
    kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    converted = set()
    for rel in _uncommented_patch_paths(kustomization):
        if rel.startswith(CONVERSION_PATCH_PREFIX):
            patch = yaml.safe_load((crd_dir / rel).read_text())
            converted.add(patch["metadata"]["name"])
    crds = []
    for rel in kustomization["resources"]:
        crd = yaml.safe_load((crd_dir / rel).read_text())
        if crd["metadata"]["name"] in converted:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {
                        "url": f"{webhook_base_url}/convert",
                        "caBundle": base64.b64encode(ca_pem).decode(),
                    },
                    "conversionReviewVersions": ["v1"],
                },
            }
        crds.append(crd)
    return crds


def _is_kept(webhook: dict[str, Any], peer: bool) -> bool:
    enabled = set((PEER_FRAMEWORKS if peer else FRAMEWORKS).values())
    for rule in webhook.get("rules") or []:
        for group in rule["apiGroups"]:
            if group == KUEUE_GROUP:
                continue
            if not all((group, res) in enabled for res in rule["resources"]):
                return False
    return True


def _is_framework(webhook: dict[str, Any]) -> bool:
    return any(g != KUEUE_GROUP for r in webhook.get("rules") or [] for g in r["apiGroups"])


def build_webhook_configurations(
    kueue_dir: Path, webhook_base_url: str, ca_pem: bytes, namespace: str, peer: bool = False
) -> list[dict[str, Any]]:
    """Kueue's admission webhooks pointed at `webhook_base_url`, for the enabled integrations.

    Webhooks of integrations we do not enable are dropped (Kueue would only answer them
    with a no-op); job webhooks skip kube-system and Kueue's namespace, as Kueue's own
    kustomization does.
    """
    path = kueue_dir / "config" / "components" / "webhook" / "manifests.yaml"
    ca = base64.b64encode(ca_pem).decode()
    out = []
    for doc in load_manifests(path.read_text()):
        cfg = copy.deepcopy(doc)
        cfg["metadata"] = {"name": f"kueue-{doc['metadata']['name']}"}
        hooks = []
        for hook in cfg["webhooks"]:
            if not _is_kept(hook, peer):
                continue
            service_path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{webhook_base_url}{service_path}", "caBundle": ca}
            if _is_framework(hook):
                hook["namespaceSelector"] = {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system", namespace],
                        }
                    ]
                }
            hooks.append(hook)
        cfg["webhooks"] = hooks
        out.append(cfg)
    return out


def build_config(
    *,
    namespace: str,
    webhook_port: int,
    metrics_port: int,
    health_port: int,
    cert_dir: Path,
    manager: bool,
    pods_ready_timeout: int = 1800,
    requeue_backoff_base: int = 60,
    multikueue: bool = False,
    peer: bool = False,
    trainjobs: bool | None = None,
    shipped: dict[str, Any] | None = None,
    gates: dict[str, bool] | None = None,
) -> dict[str, Any]:
    """Kueue's Configuration for one bed cluster (compare Kueue's controller_manager_config).
    `shipped`: the Configuration Kueue's release ships (`shipped_config`), whose controller
    concurrency and API client limits are kept as they are. `multikueue`: the manager's Kueue
    runs its own MultiKueue too (our Coexist mode), with a garbage-collection interval short
    enough for tests to see it work. `peer`: the upstream pipeline (Kueue's own TrainJob
    integration and, on the manager, its own MultiKueue with Kueue's default intervals).
    `trainjobs`: Kueue's own TrainJob integration (default: with `peer`), as on a worker that
    runs Kubeflow Trainer."""
    multikueue = multikueue or peer
    trainjobs = peer if trainjobs is None else trainjobs
    cfg: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": namespace,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        # One Kueue per cluster, started and stopped by the bed: nothing to elect.
        "leaderElection": {"leaderElect": False},
        # Its rotator expects in-cluster Service names; the bed issues the certificates.
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        # On by default in Kueue v0.19; only its times are shortened (recoveryTimeout follows
        # timeout, as in Kueue; blockAdmission stays off).
        "waitForPodsReady": {
            "timeout": f"{pods_ready_timeout}s",
            "requeuingStrategy": {"backoffBaseSeconds": requeue_backoff_base},
        },
        # As shipped: Kueue's per-kind reconciler concurrency and its API client's limits.
        "controller": dict((shipped or {}).get("controller") or {}),
        "clientConnection": dict(
            (shipped or {}).get("clientConnection") or {"qps": 300, "burst": 500}
        ),
        "integrations": {
            "frameworks": list(PEER_FRAMEWORKS if trainjobs else FRAMEWORKS),
            "externalFrameworks": [] if trainjobs else list(EXTERNAL_FRAMEWORKS),
        },
        "featureGates": {
            # Replace mode: the dispatcher is the kueue.x-k8s.io/multikueue controller here.
            "MultiKueue": multikueue,
            # Its aggregated API server would need an APIService and a fixed port per host.
            "VisibilityOnDemand": False,
            **(gates or {}),
        }
        if manager
        else {"VisibilityOnDemand": False, **(gates or {})},
    }
    if manager and peer:
        cfg["multiKueue"] = {"origin": "multikueue"}  # Kueue's default intervals
    elif manager and multikueue:
        cfg["multiKueue"] = {"gcInterval": "10s", "origin": "multikueue"}
    return cfg


def shipped_config(kueue_dir: Path) -> dict[str, Any]:
    """The Configuration Kueue's release manifests ship (its controller_manager_config.yaml)."""
    path = kueue_dir / "config" / "components" / "manager" / "controller_manager_config.yaml"
    config: dict[str, Any] = yaml.safe_load(path.read_text())
    return config


def release_manifests(image: str) -> str:
    """Kueue's release manifests (its `manifests.yaml`), rendered from the bed's Kueue module
    as its release does: the manager's image set to `image` (`kustomize edit set image
    controller=...`), then `config/default` built, here with the bed's kubectl. The module
    cache is read-only: the render works on a copy of `config/`."""
    kueue_dir = builds.module_source_dir("kueue", f"sigs.k8s.io/kueue@{builds.KUEUE_VERSION}")
    with tempfile.TemporaryDirectory(prefix="trainjob-kueue.") as work:
        config = Path(work) / "config"
        shutil.copytree(kueue_dir / "config", config)
        for path in config.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        manager = config / "components" / "manager" / "kustomization.yaml"
        kustomization = yaml.safe_load(manager.read_text())
        name, _, tag = image.rpartition(":")
        kustomization["images"] = [{"name": "controller", "newName": name, "newTag": tag}]
        manager.write_text(yaml.safe_dump(kustomization, sort_keys=False))
        return kustomize(config / "default")


def cluster_profile_crd() -> dict[str, Any]:
    """The Cluster Inventory API's ClusterProfile CRD, at the version Kueue's go.mod names
    (a fleet manager such as OCM or GKE Fleet installs it; so does a test that needs it)."""
    kueue_dir = builds.module_source_dir("kueue", f"sigs.k8s.io/kueue@{builds.KUEUE_VERSION}")
    module = "sigs.k8s.io/cluster-inventory-api"
    version = next(
        line.split()[-1]
        for line in (kueue_dir / "go.mod").read_text().splitlines()
        if line.strip().startswith(module + " ")
    )
    source = builds.module_source_dir("kueue", f"{module}@{version}")
    path = source / "config" / "crd" / "bases" / "multicluster.x-k8s.io_clusterprofiles.yaml"
    (crd,) = load_manifests(path.read_text())
    return crd
