"""What both controllers are configured with, and their command line, derived from the model.

Each controller's settings are one pydantic model (a subclass of `ControllerSettings`); its
command-line flags are built from the model's fields (`resync_seconds` -> `--resync-seconds`,
help from the field's description, the default shown from the field), so a default or a limit
is written in one place only. Bad values are refused with the flag's name and pydantic's reason.
"""

from __future__ import annotations

import argparse
import re
import sys
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)


class ControllerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kubeconfig: Path | None = Field(
        default=None,
        description="kubeconfig of the cluster to run on (default: $KUBECONFIG, then "
        "in-cluster, then ~/.kube/config)",
    )
    cluster_name: str = Field(default="cluster", description="name used in every log line")
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="log lines as text (a message, then its fields as key=value; a traceback "
        "follows on indented lines), or one JSON object a line for a log pipeline (time, "
        "level, logger, message, the line's fields such as cluster, trainjob and error, and "
        "exc_info with a traceback)",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="the least severe level logged (--verbose: debug)"
    )
    bind_address: str = Field(
        default="0.0.0.0",
        description="address the probes, metrics and webhook servers listen on",
    )
    health_port: int = Field(
        default=8080,
        ge=1,
        le=65535,
        description="/healthz and /readyz on http://ADDRESS:PORT (and /metrics, when "
        "--metrics-port is 0)",
    )
    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Prometheus /metrics on https://ADDRESS:PORT, for callers whose bearer "
        "token the API server authenticates (TokenReview) and authorizes to get the "
        "non-resource URL /metrics (SubjectAccessReview), as Kueue's; 0: /metrics on the "
        "health port over plain HTTP, without authentication",
    )
    leader_elect: bool = Field(
        default=False,
        description="elect a leader on a Lease: only the leader writes (replicas > 1)",
    )
    leader_election_id: str = Field(
        default="trainjob-controller", min_length=1, description="name of the Lease"
    )
    leader_election_namespace: str | None = Field(
        default=None,
        description="namespace of the Lease (default: the pod's namespace, else 'default')",
    )
    lease_duration_seconds: float = Field(
        default=15.0, gt=0, description="a standby takes over after this long without renewal"
    )
    renew_deadline_seconds: float = Field(
        default=10.0, gt=0, description="the leader stops writing when it could not renew"
    )
    retry_period_seconds: float = Field(
        default=2.0, gt=0, description="how often the leader renews and a standby looks"
    )
    resync_seconds: float = Field(
        default=10.0, gt=0, description="safety-net pass over the keys not yet settled"
    )
    workers: int = Field(default=8, ge=1, le=64, description="threads working the queue's keys")
    watch_check_seconds: float = Field(
        default=60.0,
        ge=5,
        description="how often the watch caches are compared with the API (a frozen watch "
        "lists again)",
    )
    webhook_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="serve the admission webhooks on https://ADDRESS:PORT, with the certificate "
        "kept in --webhook-cert-secret, or with --webhook-cert and --webhook-key",
    )
    webhook_cert: Path | None = Field(
        default=None, description="serving certificate (PEM) managed by someone else"
    )
    webhook_key: Path | None = Field(default=None, description="its private key (PEM)")
    webhook_cert_secret: str | None = Field(
        default=None,
        description="Secret (in our namespace) where we keep our own serving certificate",
    )
    webhook_service: str | None = Field(
        default=None, description="Service in front of the webhooks (the certificate's names)"
    )
    webhook_cert_hosts: list[str] = Field(
        default_factory=list, description="more names or IPs the certificate covers (a,b,...)"
    )
    webhook_configurations: list[str] = Field(
        default_factory=list,
        description="our webhook configurations, whose caBundle we keep (a,b,...)",
    )
    api_services: list[str] = Field(
        default_factory=list,
        description="our APIServices (the aggregated API served beside the webhooks), whose "
        "caBundle we keep (a,b,...)",
    )
    webhook_cert_dir: Path = Field(
        default=Path("/tmp/trainjob-webhook-certs"),
        description="where our own serving certificate is written for the webhook server",
    )

    @field_validator("webhook_cert_hosts", "webhook_configurations", "api_services", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        return [v for v in value.split(",") if v] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _lease_timings(self) -> Self:
        if not (
            self.lease_duration_seconds > self.renew_deadline_seconds > self.retry_period_seconds
        ):
            raise ValueError(
                "--lease-duration-seconds must be greater than --renew-deadline-seconds, and "
                "that greater than --retry-period-seconds"
            )
        return self

    @model_validator(mode="after")
    def _files_exist(self) -> Self:
        own = bool(self.webhook_cert_secret)
        if self.webhook_port and not (own or (self.webhook_cert and self.webhook_key)):
            raise ValueError(
                "--webhook-port needs --webhook-cert-secret (we keep our own certificate) or "
                "--webhook-cert and --webhook-key (someone else does)"
            )
        if own and not (self.webhook_service or self.webhook_cert_hosts):
            raise ValueError(
                "--webhook-cert-secret needs --webhook-service or --webhook-cert-hosts "
                "(the names the certificate is for)"
            )
        for flag, path in (
            ("--kubeconfig", self.kubeconfig),
            ("--webhook-cert", self.webhook_cert),
            ("--webhook-key", self.webhook_key),
        ):
            if path is not None and not path.is_file():
                raise ValueError(f"{flag} {path} does not exist")
        return self

    @classmethod
    def layers_below(cls, chosen: dict[str, object]) -> dict[str, object]:
        """Settings from other sources that `--config` and the flags (`chosen`) override;
        ConfigFileError names what is wrong with them. None for the shared settings."""
        return {}

    @property
    def webhook_files(self) -> tuple[Path, Path] | None:
        """(certificate, key) the webhook server reads, when it serves."""
        if not self.webhook_port:
            return None
        if self.webhook_cert_secret:
            return (self.webhook_cert_dir / "tls.crt", self.webhook_cert_dir / "tls.key")
        assert self.webhook_cert is not None and self.webhook_key is not None
        return (self.webhook_cert, self.webhook_key)

    @classmethod
    def from_argv(
        cls, argv: Sequence[str] | None, prog: str, description: str | None
    ) -> tuple[Self, bool]:
        """(settings, --verbose) from `--config FILE` (a YAML mapping of the same settings,
        say a mounted ConfigMap) overridden by the command line; exits 2 with the reason when
        a value, the file or one of its keys is bad."""
        # The name it was started by: its console script in the image (`trainjob-dispatcher`),
        # else `python -m ...` (argv[0] is then the module's __main__.py).
        started_as = Path(sys.argv[0]).name
        if started_as and started_as != "__main__.py" and not started_as.startswith("python"):
            prog = started_as
        parser = argparse.ArgumentParser(prog=prog, description=description)
        parser.add_argument(
            "--config",
            type=Path,
            help="YAML file of these settings (keys as the flags, camelCase or snake_case); "
            "flags win",
        )
        for name, field in cls.model_fields.items():
            choices = None
            if typing.get_origin(field.annotation) is typing.Literal:
                choices = list(typing.get_args(field.annotation))
            default = "" if field.default is None else f" (default: {field.default})"
            flag_only = {"nargs": "?", "const": "true"} if field.annotation is bool else {}
            parser.add_argument(
                _flag(name),
                dest=name,
                default=argparse.SUPPRESS,  # unset flags take the file's value or the default
                choices=choices,
                help=f"{field.description or ''}{default}".strip(),
                **flag_only,  # type: ignore[arg-type]
            )
        parser.add_argument("--verbose", action="store_true", help="debug logging")
        values = vars(parser.parse_args(argv))
        verbose = bool(values.pop("verbose"))
        config = values.pop("config", None)
        try:
            chosen = {**(_read_config(config, cls) if config else {}), **values}
        except ConfigFileError as exc:
            print(f"error: --config {config}: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        try:
            below = cls.layers_below(chosen)
        except ConfigFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        try:
            return cls(**{**below, **chosen}), verbose
        except ValidationError as exc:
            for error in exc.errors():
                where = " ".join(_flag(str(part)) for part in error["loc"]) or "settings"
                print(f"error: {where}: {error['msg']}", file=sys.stderr)
            raise SystemExit(2) from None


class ConfigFileError(ValueError):
    pass


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """A YAML file holding one mapping (empty: {}); ConfigFileError says what is wrong."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigFileError(f"cannot read it: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"not YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError("must be a mapping of settings")
    return data


def _read_config(path: Path, model: type[BaseModel]) -> dict[str, object]:
    """The settings in a YAML config file, keys turned into field names."""
    data = read_yaml_mapping(path)
    out: dict[str, object] = {}
    for key, value in data.items():
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", str(key)).replace("-", "_").lower()
        if name not in model.model_fields:
            raise ConfigFileError(f"unknown setting {key!r}")
        out[name] = value
    return out


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")
