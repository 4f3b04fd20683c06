"""What both controllers are configured with, and their command line, derived from the model.

Each controller's settings are one pydantic model (a subclass of `ControllerSettings`); its
command-line flags are built from the model's fields (`resync_seconds` -> `--resync-seconds`,
help from the field's description, the default shown from the field), so a default or a limit
is written in one place only. Bad values are refused with the flag's name and pydantic's reason.
"""

from __future__ import annotations

import argparse
import sys
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ControllerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kubeconfig: Path | None = Field(
        default=None, description="kubeconfig of the cluster to run on (default: in-cluster)"
    )
    cluster_name: str = Field(default="cluster", description="name used in every log line")
    health_port: int = Field(
        default=8080, ge=1, le=65535, description="liveness endpoint http://127.0.0.1:PORT/healthz"
    )
    resync_seconds: float = Field(
        default=10.0, gt=0, description="safety-net pass over the TrainJobs not yet settled"
    )
    workers: int = Field(default=8, ge=1, le=64, description="threads reconciling TrainJobs")
    webhook_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="serve the admission webhooks on https://127.0.0.1:PORT "
        "(needs --webhook-cert and --webhook-key)",
    )
    webhook_cert: Path | None = Field(default=None, description="serving certificate (PEM)")
    webhook_key: Path | None = Field(default=None, description="its private key (PEM)")
    webhook_ca: Path | None = Field(default=None, description="CA that signed it (caBundle)")

    @model_validator(mode="after")
    def _files_exist(self) -> Self:
        if self.webhook_port and not (self.webhook_cert and self.webhook_key):
            raise ValueError(
                "--webhook-port needs --webhook-cert and --webhook-key "
                "(a serving certificate for 127.0.0.1 and its key)"
            )
        for flag, path in (
            ("--kubeconfig", self.kubeconfig),
            ("--webhook-cert", self.webhook_cert),
            ("--webhook-key", self.webhook_key),
            ("--webhook-ca", self.webhook_ca),
        ):
            if path is not None and not path.is_file():
                raise ValueError(f"{flag} {path} does not exist")
        return self

    @property
    def webhook(self) -> tuple[int, Path | None, Path | None, Path | None] | None:
        if not self.webhook_port:
            return None
        return (self.webhook_port, self.webhook_cert, self.webhook_key, self.webhook_ca)

    @classmethod
    def from_argv(
        cls, argv: Sequence[str] | None, prog: str, description: str | None
    ) -> tuple[Self, bool]:
        """(settings, --verbose) from the command line; exits 2 with the reason when invalid."""
        parser = argparse.ArgumentParser(prog=prog, description=description)
        for name, field in cls.model_fields.items():
            choices = None
            if typing.get_origin(field.annotation) is typing.Literal:
                choices = list(typing.get_args(field.annotation))
            default = "" if field.default is None else f" (default: {field.default})"
            parser.add_argument(
                _flag(name),
                dest=name,
                default=argparse.SUPPRESS,  # unset flags take the model's default
                choices=choices,
                help=f"{field.description or ''}{default}".strip(),
            )
        parser.add_argument("--verbose", action="store_true", help="debug logging")
        values = vars(parser.parse_args(argv))
        verbose = bool(values.pop("verbose"))
        try:
            return cls(**values), verbose
        except ValidationError as exc:
            for error in exc.errors():
                where = " ".join(_flag(str(part)) for part in error["loc"]) or "settings"
                print(f"error: {where}: {error['msg']}", file=sys.stderr)
            raise SystemExit(2) from None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")
