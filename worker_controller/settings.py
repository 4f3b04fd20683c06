"""The worker controller's configuration: one pydantic model, loaded once at start-up."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class WorkerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kubeconfig: Path | None = Field(
        default=None, description="kubeconfig of the cluster to run on (default: in-cluster)"
    )
    cluster_name: str = Field(default="worker", description="name used in every log line")
    health_port: int = Field(
        default=8080, ge=1, le=65535, description="kopf liveness endpoint on 127.0.0.1"
    )
    resync_seconds: float = Field(
        default=10.0,
        gt=0,
        description="how often every TrainJob is reconciled anyway (drift, deadlines)",
    )
    workers: int = Field(default=16, ge=1, description="threads running reconciles")
