"""Validation of worker kubeconfigs the way Kueue's MultiKueue does it, with reasons and fixes."""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

import yaml

Dict = dict[str, Any]
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class KubeconfigProblem:
    reason: str  # BadKubeConfig (cannot be used) | InsecureKubeConfig (refused on purpose)
    message: str


def _host_ok(server: str) -> bool:
    try:
        url = urllib.parse.urlparse(server)
    except ValueError:
        return False
    if url.scheme not in ("https", "http") or not url.hostname:
        return False
    host = url.hostname.lower()
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return len(host) <= 253 and bool(_DNS_SUBDOMAIN.match(host))


def check_kubeconfig(
    raw: bytes | str | None, secret: str
) -> tuple[Dict | None, KubeconfigProblem | None]:
    """Parse and vet a worker kubeconfig; returns (kubeconfig, None) or (None, problem)."""
    where = f"Secret {secret!r} key 'kubeconfig'"
    if not raw:
        return None, KubeconfigProblem("BadKubeConfig", f"{where} is missing or empty")
    try:
        cfg = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        return None, KubeconfigProblem("BadKubeConfig", f"{where} is not valid YAML: {exc}")
    if not isinstance(cfg, dict) or not cfg.get("clusters") or not cfg.get("contexts"):
        return None, KubeconfigProblem(
            "BadKubeConfig", f"{where} is not a kubeconfig (needs clusters and contexts)"
        )
    insecure = "InsecureKubeConfig"
    for entry in cfg.get("clusters") or []:
        name, cluster = entry.get("name", "?"), entry.get("cluster") or {}
        if cluster.get("insecure-skip-tls-verify"):
            return None, KubeconfigProblem(
                insecure,
                f"{where}: cluster {name!r} sets insecure-skip-tls-verify; give its "
                "CA as certificate-authority-data instead",
            )
        if cluster.get("certificate-authority"):
            return None, KubeconfigProblem(
                insecure,
                f"{where}: cluster {name!r} names a certificate-authority file; "
                "inline it as certificate-authority-data",
            )
        if not cluster.get("server"):
            return None, KubeconfigProblem(
                "BadKubeConfig", f"{where}: cluster {name!r} has no server URL"
            )
        if not _host_ok(str(cluster["server"])):
            return None, KubeconfigProblem(
                insecure,
                f"{where}: cluster {name!r} server {cluster['server']!r} is not a "
                "valid https URL with an IP address or DNS name",
            )
    for entry in cfg.get("users") or []:
        name, user = entry.get("name", "?"), entry.get("user") or {}
        for key, fix in (
            ("tokenFile", "inline the token as `token`"),
            ("token-file", "inline the token as `token`"),
            ("exec", "use a token or client certificate instead"),
            ("auth-provider", "use a token or client certificate instead"),
            ("username", "basic auth is not allowed; use a token"),
            ("password", "basic auth is not allowed; use a token"),
            ("client-certificate", "inline it as client-certificate-data"),
            ("client-key", "inline it as client-key-data"),
        ):
            if user.get(key):
                return None, KubeconfigProblem(
                    insecure, f"{where}: user {name!r} uses {key}; {fix}"
                )
    return cfg, None
