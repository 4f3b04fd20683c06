"""Validation of worker kubeconfigs the way Kueue's MultiKueue does it, with reasons and fixes."""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import json
import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

import yaml

from kubecontrol.client import ApiClient, KubeconfigError, credentials_from_kubeconfig

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
    """Parse and vet a worker kubeconfig from the Secret `secret`; returns (kubeconfig, None)
    or (None, problem)."""
    return _vet(raw, f"Secret {secret!r} key 'kubeconfig'")


def check_kubeconfig_file(
    raw: bytes | str | None, path: str
) -> tuple[Dict | None, KubeconfigProblem | None]:
    """`check_kubeconfig` for a kubeconfig read from the file `path` (locationType Path)."""
    return _vet(raw, f"file {path!r}")


def _vet(raw: bytes | str | None, where: str) -> tuple[Dict | None, KubeconfigProblem | None]:
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
    shape = _shape_problem(cfg)
    if shape:
        return None, KubeconfigProblem("BadKubeConfig", f"{where}: {shape}")
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
    loads = _load_problem(cfg)
    if loads:
        return None, KubeconfigProblem("BadKubeConfig", f"{where}: {loads}")
    return cfg, None


_SECTIONS = (("clusters", "cluster"), ("contexts", "context"), ("users", "user"))
_BASE64_FIELDS = {
    "cluster": ("certificate-authority-data",),
    "user": ("client-certificate-data", "client-key-data"),
}


def _shape_problem(cfg: Dict) -> str | None:
    """What makes `cfg` unusable as a kubeconfig (entries that are not named mappings, a
    current-context or reference to nothing, data that is not base64), else None. Messages
    name the entry and field, never their values."""
    named: dict[str, set[str]] = {}
    for section, field in _SECTIONS:
        entries = cfg.get(section) or []
        if not isinstance(entries, list):
            return f"{section} must be a list"
        names = set()
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                return f"{section}[{i}] must be a mapping with a name"
            if not isinstance(entry.get(field), dict):
                return f"{section}[{i}] ({entry['name']!r}) must have a `{field}` mapping"
            for key in _BASE64_FIELDS.get(field, ()):
                value = entry[field].get(key)
                if value is not None and not _is_base64(value):
                    return f"{section}[{i}] ({entry['name']!r}) {key} is not base64"
            names.add(entry["name"])
        named[field] = names
    current = cfg.get("current-context")
    if not current:
        return "current-context is not set"
    if current not in named["context"]:
        return f"current-context {current!r} names no context"
    context = next(e["context"] for e in cfg["contexts"] if e["name"] == current)
    if context.get("cluster") not in named["cluster"]:
        return f"context {current!r} names cluster {context.get('cluster')!r}, which is not listed"
    if context.get("user") and context["user"] not in named["user"]:
        return f"context {current!r} names user {context['user']!r}, which is not listed"
    return None


def _is_base64(value: Any) -> bool:
    try:
        base64.b64decode(str(value), validate=True)
        return True
    except (binascii.Error, ValueError):
        return False


def _load_problem(cfg: Dict) -> str | None:
    """Whether our client can build a connection from it, TLS included (the last word)."""
    return _connect_problem(json.dumps(cfg, sort_keys=True, default=str))


@functools.lru_cache(maxsize=64)
def _connect_problem(kubeconfig: str) -> str | None:
    """`_load_problem` of a kubeconfig as JSON text: a resync checks the same few kubeconfigs
    over and over, and a TLS context costs a millisecond or two to build."""
    try:
        ApiClient(credentials_from_kubeconfig(json.loads(kubeconfig)))
    except KubeconfigError as exc:  # names the field, never its value
        return f"cannot connect with it: {exc}"
    except Exception as exc:  # ssl's errors (a CA, certificate or key that does not load)
        return f"cannot connect with it ({type(exc).__name__}: {str(exc)[:120]})"
    return None


def kubeconfig_path_problem(raw_path: str, prefix: str) -> tuple[str | None, str | None]:
    """Kueue's rules for `kubeConfig.locationType: Path` (its MultiKueueKubeConfigPathValidation,
    on by default): an absolute path without "..", which, symlinks resolved, lies under
    `prefix`. Returns (the resolved path, None) or (None, why not)."""
    if not raw_path:
        return None, "the kubeconfig path must not be empty"
    cleaned = os.path.normpath(raw_path)
    if ".." in cleaned.split(os.sep):
        return None, f'{raw_path!r} is not allowed: the path contains ".."'
    if not os.path.isabs(cleaned):
        return None, f"{raw_path!r} is not allowed: the path must be absolute"
    if not os.path.isdir(prefix):
        return None, f"{cleaned!r} is not under {os.path.normpath(prefix)!r} (no such directory)"
    allowed = os.path.realpath(prefix)
    if not os.path.exists(cleaned):
        return None, f"{cleaned!r} does not exist"
    resolved = os.path.realpath(cleaned)
    if not (resolved + os.sep).startswith(allowed + os.sep):
        return None, f"{resolved!r} is not under {allowed!r}"
    return resolved, None
