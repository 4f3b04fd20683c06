"""The dispatcher's configuration: the shared controller settings plus MultiKueue's."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from trainjob import constants as c
from trainjob.settings import ControllerSettings


class DispatcherSettings(ControllerSettings):
    kubeconfig: Path | None = Field(
        default=None,
        description="kubeconfig of the manager cluster (default: $KUBECONFIG, then "
        "in-cluster, then ~/.kube/config)",
    )
    cluster_name: str = Field(default="manager", description="name used in every log line")
    namespace: str = Field(
        default="kueue-system",
        description="where MultiKueueCluster kubeconfig Secrets live (Kueue's config namespace)",
    )
    controller_name: str = Field(
        default=c.MANAGED_BY_MULTIKUEUE, description="AdmissionCheck controllerName we serve"
    )
    origin: str = Field(
        default="multikueue",
        description="value of the multikueue-origin label on everything we create on workers",
    )
    strategy: Literal["AllAtOnce", "Incremental"] = Field(
        default="AllAtOnce", description="which workers get a copy of a Workload, and when"
    )
    incremental_batch: int = Field(
        default=3, ge=1, description="Incremental: clusters added to the dispatch each round"
    )
    incremental_round_seconds: float = Field(
        default=300.0, gt=0, description="Incremental: seconds a round waits for an admission"
    )
    worker_lost_timeout: float = Field(
        default=900.0,
        gt=0,
        description="seconds a worker may be unreachable "
        "before its TrainJobs are dispatched elsewhere",
    )
    resync_seconds: float = Field(
        default=30.0, gt=0, description="safety-net pass over the TrainJobs in flight"
    )
    gc_interval: float = Field(default=60.0, gt=0, description="orphan sweep on workers")
    retention_seconds: float = Field(
        default=0.0,
        ge=0,
        description="how long finished remote TrainJobs and Workloads are kept on the worker",
    )
    health_port: int = Field(
        default=8081,
        ge=1,
        le=65535,
        description="/healthz, /readyz and Prometheus /metrics on http://ADDRESS:PORT",
    )
    leader_election_id: str = Field(
        default="trainjob-dispatcher", min_length=1, description="name of the Lease"
    )
