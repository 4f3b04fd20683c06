"""The bed's topology and settings: a small pydantic model, loadable from YAML."""

from __future__ import annotations

import os
from enum import IntEnum
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from clusters.errors import BedError

REPO_ROOT = Path(__file__).resolve().parent.parent
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
REAL_NODES_MARKER = "real-nodes"  # in the state directory of a bed that runs real nodes


class Port(IntEnum):
    """Offsets of each listening port from a cluster's first port."""

    ETCD_CLIENT = 0
    ETCD_PEER = 1
    APISERVER = 2
    CONTROLLER_MANAGER = 3
    SCHEDULER = 4
    KWOK = 5
    KUEUE_WEBHOOK = 6
    KUEUE_METRICS = 7
    KUEUE_HEALTH = 8
    # 10..19 are left for our own controllers (webhooks, health endpoints).
    CONTROLLER_BASE = 10


class NodePool(BaseModel):
    """A group of identical kwok fake nodes on a worker."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="node", pattern=DNS_LABEL)
    count: int = Field(default=2, ge=0, le=500)
    cpu: str = "8"
    memory: str = "32Gi"
    gpu: int = Field(default=0, ge=0, description="nvidia.com/gpu capacity per node")
    pods: int = Field(default=110, ge=1)
    labels: dict[str, str] = Field(default_factory=dict)


class ClusterSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=DNS_LABEL, max_length=30)
    role: Literal["manager", "worker"]
    nodes: list[NodePool] = Field(default_factory=list)
    trainer: bool = Field(
        default=False,
        description="Kubeflow Trainer's controller and webhooks run here as its release "
        "installs them (clusters/peer.py). On a worker, with JobSet's and Kueue's own TrainJob "
        "integration, and in place of our worker controller: only the manager's identity is "
        "installed there (deploy/worker-identity). On a manager, beside the dispatcher, with "
        "JobSet's CRD and our TrainJob CRD",
    )

    @model_validator(mode="after")
    def _workers_get_nodes(self) -> ClusterSpec:
        if self.role == "worker" and not self.nodes:
            self.nodes = [NodePool()]
        if self.role == "manager" and self.nodes:
            raise ValueError(f"cluster {self.name!r}: a manager runs no pods, remove its `nodes`")
        return self


class WaitForPodsReady(BaseModel):
    """Kueue's `waitForPodsReady` on every cluster of the bed. Kueue turns it on by default
    (timeout 30 min, backoff from 60 s); the bed keeps it on with times short enough that tests
    run jobs longer than the timeout."""

    model_config = ConfigDict(extra="forbid")

    timeout_seconds: int = Field(
        default=20, ge=1, description="admitted -> PodsReady=True deadline (and recovery)"
    )
    backoff_base_seconds: int = Field(
        default=5, ge=1, description="requeue delay after a PodsReady timeout, doubled each time"
    )


def _default_clusters() -> list[ClusterSpec]:
    return [
        ClusterSpec(name="manager", role="manager"),
        ClusterSpec(name="worker1", role="worker"),
        ClusterSpec(name="worker2", role="worker"),
    ]


class BedConfig(BaseModel):
    """Everything `python -m clusters up` needs to know."""

    model_config = ConfigDict(extra="forbid")

    clusters: list[ClusterSpec] = Field(default_factory=_default_clusters)
    base_port: int = Field(default=21000, ge=1024, le=60000)
    port_stride: int = Field(default=20, ge=20)
    state_dir: Path = Field(default_factory=lambda: REPO_ROOT / ".bed")
    pod_run_seconds: float = Field(
        default=3.0, ge=0, description="how long a pod that asks nothing stays Running"
    )
    kueue_namespace: str = "kueue-system"
    wait_for_pods_ready: WaitForPodsReady = Field(default_factory=WaitForPodsReady)
    pipeline: Literal["ours", "peer", "peer-lifted"] = Field(
        default="ours",
        description="peer: the upstream pipeline instead of ours, for the comparison benchmark "
        "(clusters/peer.py: Kueue's own MultiKueue and TrainJob integration, Trainer's and "
        "JobSet's controllers on the workers); the product is not installed on it. "
        "peer-lifted: the same, with the manager's Kueue a build patched to lift its "
        "MultiKueue worker clients' rate limit (clusters/gomod/kueue/*.patch)",
    )
    peer_replicas: Literal[1, 2] = Field(
        default=1,
        description="replicas of Trainer's and JobSet's controllers on each worker of a peer "
        "bed; with 2, both hold their release's leader election (a Lease in their namespace) "
        "and the second stands by, as a Deployment of two would (benchmarks/compare.py "
        "--replicas)",
    )
    real_nodes: bool = Field(
        default=False,
        description="one real node per cluster (kubelet, containerd, kube-proxy, CoreDNS; "
        "clusters/nodes.py) instead of kwok's: pods run as containers from images, and the "
        "workers have no kwok nodes. Needs root. `up --real-nodes` sets it and the bed "
        "remembers it in its state directory",
    )
    multikueue_mode: Literal["replace", "coexist", "kueue"] = Field(
        default="replace",
        description="replace: the manager's Kueue keeps its MultiKueue gate off and the "
        "dispatcher serves kueue.x-k8s.io/multikueue; coexist: the manager's Kueue runs its own "
        "MultiKueue too, and the product is installed from deploy/coexist/*; kueue: the "
        "manager's Kueue runs its own MultiKueue and TrainJob integration, as a fleet does "
        "before it switches to the dispatcher (set for a while by a test, never at `up`)",
    )
    kueue_feature_gates: dict[str, bool] = Field(
        default_factory=dict,
        description="feature gates every cluster's Kueue runs with besides the bed's own (an "
        "alpha gate such as MultiKueueOrchestratedPreemption, set for a while by a test, or "
        "from `up` by a benchmark's own bed: benchmarks/preemption.py)",
    )

    @field_validator("clusters")
    @classmethod
    def _unique_names(cls, clusters: list[ClusterSpec]) -> list[ClusterSpec]:
        names = [c.name for c in clusters]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"cluster names must be unique; repeated: {sorted(dupes)}")
        if not clusters:
            raise ValueError("at least one cluster is needed")
        return clusters

    def cluster(self, name: str) -> ClusterSpec:
        for c in self.clusters:
            if c.name == name:
                return c
        raise BedError(
            f"no cluster named {name!r} in the bed; known: "
            f"{', '.join(c.name for c in self.clusters)}"
        )

    def port(self, cluster: str, which: Port | int) -> int:
        index = [c.name for c in self.clusters].index(self.cluster(cluster).name)
        return self.base_port + index * self.port_stride + int(which)

    @property
    def is_peer(self) -> bool:
        """The upstream pipeline runs on this bed (either variant), not ours."""
        return self.pipeline != "ours"

    def runs_trainer(self, spec: ClusterSpec) -> bool:
        """Trainer's controller runs in this cluster (and JobSet's, on a worker)."""
        return spec.trainer or (self.is_peer and spec.role == "worker")

    def kueue_runs_trainjobs(self, spec: ClusterSpec) -> bool:
        """This cluster's Kueue runs its own TrainJob integration (not the external one our
        worker controller is)."""
        if spec.role == "manager":
            return self.is_peer or self.multikueue_mode == "kueue"
        return self.is_peer or spec.trainer

    @property
    def managers(self) -> list[ClusterSpec]:
        return [c for c in self.clusters if c.role == "manager"]

    @property
    def workers(self) -> list[ClusterSpec]:
        return [c for c in self.clusters if c.role == "worker"]


def real_bed_config() -> BedConfig:
    """The bed with real nodes that the tests (tests/real) and `./run demo --real` use: its
    own ports and state directory, so that a kwok bed can be up beside it."""
    state = os.environ.get("TJ_REAL_BED_STATE_DIR") or str(REPO_ROOT / ".bed-real")
    return BedConfig(base_port=23000, state_dir=Path(state), real_nodes=True)


def mixed_bed_config() -> BedConfig:
    """A fleet of both kinds of worker, for tests/e2e/test_mixed_fleet.py: worker1 runs our
    worker controller, worker2 Kubeflow Trainer and JobSet as released, and Trainer runs on
    the manager too. Its own ports and state directory, so it can be up beside the kwok bed."""
    state = os.environ.get("TJ_MIXED_BED_STATE_DIR") or str(REPO_ROOT / ".bed-mixed")
    return BedConfig(
        base_port=25000,
        state_dir=Path(state),
        clusters=[
            ClusterSpec(name="manager", role="manager", trainer=True),
            ClusterSpec(name="worker1", role="worker"),
            ClusterSpec(name="worker2", role="worker", trainer=True),
        ],
    )


def lone_manager_bed_config() -> BedConfig:
    """One manager cluster and nothing of ours running on it, for what Helm installs and
    removes there beside another project's release (tests/e2e/test_trainer_chart.py). Its own
    ports and state directory, so it can be up beside the other beds."""
    state = os.environ.get("TJ_LONE_BED_STATE_DIR") or str(REPO_ROOT / ".bed-lone")
    return BedConfig(
        base_port=27000,
        state_dir=Path(state),
        clusters=[ClusterSpec(name="manager", role="manager")],
    )


def load_config(path: Path | None = None) -> BedConfig:
    """Load the bed config from `path` (or $TJ_BED_CONFIG), else the defaults.

    $TJ_BED_STATE_DIR overrides `state_dir` so tests can point at an existing bed.
    """
    path = path or (Path(os.environ["TJ_BED_CONFIG"]) if os.environ.get("TJ_BED_CONFIG") else None)
    data: dict[str, object] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except OSError as exc:
            raise BedError(f"cannot read bed config {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise BedError(f"bed config {path} is not valid YAML: {exc}") from exc
        if not isinstance(loaded, dict):
            raise BedError(f"bed config {path} must be a mapping at the top level")
        data = loaded
    if os.environ.get("TJ_BED_STATE_DIR"):
        data["state_dir"] = os.environ["TJ_BED_STATE_DIR"]
    state_dir = Path(str(data.get("state_dir") or REPO_ROOT / ".bed"))
    if (state_dir / REAL_NODES_MARKER).exists():
        data["real_nodes"] = True
    try:
        return BedConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise BedError(f"invalid bed config{f' {path}' if path else ''}: {problems}") from exc
