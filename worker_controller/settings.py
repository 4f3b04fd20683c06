"""The worker controller's configuration: one pydantic model, loaded once at start-up."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator


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
    workers: int = Field(default=8, ge=1, le=64, description="threads running reconciles")
    # Admission webhooks (mutating + validating TrainJobs), served on 127.0.0.1 when set.
    webhook_port: int | None = Field(default=None, ge=1, le=65535)
    webhook_cert: Path | None = None
    webhook_key: Path | None = None
    webhook_ca: Path | None = Field(default=None, description="CA for the caBundle")

    @model_validator(mode="after")
    def _webhook_needs_tls(self) -> WorkerSettings:
        if self.webhook_port and not (self.webhook_cert and self.webhook_key):
            raise ValueError(
                "--webhook-port needs --webhook-cert and --webhook-key "
                "(a serving certificate for 127.0.0.1 and its key)"
            )
        for path in (self.webhook_cert, self.webhook_key, self.webhook_ca):
            if path is not None and not path.is_file():
                raise ValueError(f"{path} does not exist")
        return self
