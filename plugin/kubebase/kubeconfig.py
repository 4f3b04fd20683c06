"""Vetting of kubeconfigs that come from others (a worker's Secret, a file): parsed by our own
rules, with a size cap and no YAML aliases, before any library sees them; only the fields
vetted are kept, so nothing a kubeconfig names (exec plugins, auth-provider commands, files)
can run or be read while a client is built from it."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from kubebase.objects import Dict

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A kubeconfig with a client certificate and key is a few KiB.
MAX_KUBECONFIG_BYTES = 64 * 1024


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases: a few hundred bytes of nested aliases expand to
    gigabytes once the document is walked or serialised."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases are not allowed", event.start_mark
            )
        return super().compose_node(parent, index)


def _syntax_only(quoted: re.Match[str]) -> str:
    text = quoted.group(0)
    return text if re.fullmatch(r"'(<[a-z ]+>|[^\w\s']{1,2})'", text) else "..."


def _at(exc: yaml.YAMLError) -> str:
    """Where a YAML error is, and what, without quoting the text (it may hold a token)."""
    mark = getattr(exc, "problem_mark", None)
    problem = str(getattr(exc, "problem", "") or "")
    # PyYAML quotes what it found: a token kind ('<scalar>') or a character of syntax is
    # kept, any other quoted text (it may be part of a token) is not.
    what = re.sub(r"'[^']*'|\"[^\"]*\"", _syntax_only, problem)[:80]
    if mark is None:
        return f" ({what})" if what else ""
    return f" (line {mark.line + 1}, column {mark.column + 1}: {what})"


@dataclass(frozen=True)
class KubeconfigProblem:
    reason: str  # BadKubeConfig (cannot be used) | InsecureKubeConfig (refused on purpose)
    message: str


def https_host_ok(server: str) -> bool:
    """An https URL whose host is an IP address or a DNS name (Kueue's trusted endpoint)."""
    try:
        url = urllib.parse.urlparse(server)
    except ValueError:
        return False
    if url.scheme != "https" or not url.hostname:
        return False
    host = url.hostname.lower()
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return len(host) <= 253 and bool(_DNS_SUBDOMAIN.match(host))


def vet_kubeconfig(
    raw: bytes | str | None,
    where: str,
    connect_problem: Callable[[Dict], str | None] | None = None,
) -> tuple[Dict | None, KubeconfigProblem | None]:
    """Parse and vet a kubeconfig (`where` names its source in the messages); returns
    (kubeconfig, None), the kubeconfig holding only what `minimal_kubeconfig` keeps, or
    (None, problem). No message quotes the kubeconfig's text. `connect_problem`, when given,
    has the last word: why a client cannot be built from the vetted kubeconfig, or None."""
    if not raw:
        return None, KubeconfigProblem("BadKubeConfig", f"{where} is missing or empty")
    if len(raw) > MAX_KUBECONFIG_BYTES:
        return None, KubeconfigProblem(
            "BadKubeConfig", f"{where} is {len(raw)} bytes, over {MAX_KUBECONFIG_BYTES}"
        )
    try:
        cfg = yaml.load(raw, Loader=_NoAliasLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        return None, KubeconfigProblem("BadKubeConfig", f"{where} is not valid YAML{_at(exc)}")
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
        if not https_host_ok(str(cluster["server"])):
            return None, KubeconfigProblem(
                insecure,
                f"{where}: cluster {name!r} server {str(cluster['server'])[:200]!r} is not "
                "an https URL with an IP address or DNS name (the token would travel in clear "
                "text over http)",
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
    cfg = minimal_kubeconfig(cfg)
    loads = connect_problem(cfg) if connect_problem is not None else None
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


def minimal_kubeconfig(cfg: Dict) -> Dict:
    """The current context of a vetted kubeconfig, under its own names, with only the fields a
    connection needs: its cluster's server, CA data and TLS server name, its user's token or
    client certificate and key data."""
    current = cfg["current-context"]
    context = next(e for e in cfg["contexts"] if e["name"] == current)["context"]
    cluster_name, user_name = context["cluster"], context.get("user")
    cluster = next(e for e in cfg["clusters"] if e["name"] == cluster_name)["cluster"]
    keep_cluster = ("server", "certificate-authority-data", "tls-server-name")
    ctx: Dict = {"cluster": cluster_name}
    for key in ("user", "namespace"):
        if context.get(key):
            ctx[key] = str(context[key])
    out: Dict = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "clusters": [
            {"name": cluster_name, "cluster": {k: cluster[k] for k in keep_cluster if k in cluster}}
        ],
        "contexts": [{"name": current, "context": ctx}],
    }
    if user_name:
        user = next(e for e in cfg.get("users") or [] if e["name"] == user_name)["user"]
        keep_user = ("token", "client-certificate-data", "client-key-data")
        out["users"] = [{"name": user_name, "user": {k: user[k] for k in keep_user if k in user}}]
    return out
