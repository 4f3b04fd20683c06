"""The dispatcher's configuration: one pydantic model, loaded once at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from trainjob import constants as c


class DispatcherSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kubeconfig: Path | None = Field(
        default=None, description="manager cluster (default: in-cluster)"
    )
    cluster_name: str = "manager"
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
    strategy: Literal["AllAtOnce", "Incremental"] = "AllAtOnce"
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
    workers: int = Field(default=8, ge=1, le=64, description="threads reconciling TrainJobs")
    gc_interval: float = Field(default=60.0, gt=0, description="orphan sweep on workers")
    retention_seconds: float = Field(
        default=0.0,
        ge=0,
        description="how long finished remote TrainJobs and Workloads are kept on the worker",
    )
    health_port: int = Field(default=8081, ge=1, le=65535)
    webhook_port: int | None = Field(default=None, ge=1, le=65535)
    webhook_cert: Path | None = None
    webhook_key: Path | None = None
    webhook_ca: Path | None = None

    @model_validator(mode="after")
    def _webhook_needs_tls(self) -> DispatcherSettings:
        if self.webhook_port and not (self.webhook_cert and self.webhook_key):
            raise ValueError("--webhook-port needs --webhook-cert and --webhook-key")
        return self
