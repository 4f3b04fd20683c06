"""Credentials from a kubeconfig or the pod's service account (what `kubecontrol.client`
connects with), read and checked without connecting: what is supported is listed in
kubecontrol/client.py."""

from __future__ import annotations

import ipaddress
import os
import re
import ssl
import tempfile
from base64 import b64decode
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import yaml

from kubebase.objects import Dict
from kubecontrol.exec_credentials import ExecPlugin

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeconfigError(ValueError):
    """A kubeconfig this client cannot use; the message names the field, never a secret."""


@dataclass(frozen=True)
class Credentials:
    server: str
    ca_pem: str | None = None
    ca_file: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    token: str | None = None
    token_file: str | None = None
    exec_plugin: ExecPlugin | None = None  # tokens from a credential plugin
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    cert_file: str | None = None
    key_file: str | None = None
    namespace: str | None = None  # the context's default namespace
    proxy_url: str | None = None  # the cluster's proxy-url (http, https, socks5)
    # Impersonation (the user's `as`, `as-uid`, `as-groups`, `as-user-extra`): the headers
    # every request carries, as client-go sends them.
    impersonate: tuple[tuple[str, str], ...] = ()

    def client_cert_files(self) -> tuple[str, str] | None:
        """The client certificate and key files, when both come from files (TLS then reads
        them itself); None when either has data (`client_cert`) or there is none."""
        if self.cert_file and self.key_file and not (self.cert_pem or self.key_pem):
            return self.cert_file, self.key_file
        return None

    def client_cert(self) -> tuple[bytes | None, bytes | None]:
        """The client certificate and key, each from its data or else its file (client-go's
        rule: data wins), so a certificate file may go with inline key data or the reverse."""
        return _data_or_file(self.cert_pem, self.cert_file), _data_or_file(
            self.key_pem, self.key_file
        )

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS settings; raises when a CA, certificate or key cannot be loaded."""
        context = ssl.create_default_context()
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.ca_pem is not None:
            context.load_verify_locations(cadata=self.ca_pem)
        elif self.ca_file:
            context.load_verify_locations(cafile=self.ca_file)
        files = self.client_cert_files()
        if files:
            context.load_cert_chain(*files)
        else:
            cert, key = self.client_cert()
            if cert and key:
                _load_cert_chain_from_memory(context, cert, key)
        return context


def _data_or_file(data: bytes | None, file: str | None) -> bytes | None:
    if data:
        return data
    return Path(file).read_bytes() if file else None


def _load_cert_chain_from_memory(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """`ssl` reads a certificate chain from files only: write both to a private directory,
    load them, remove them."""
    with tempfile.TemporaryDirectory(prefix="trainjob-tls-") as tmp:
        paths = []
        for name, data in (("tls.crt", cert), ("tls.key", key)):
            path = os.path.join(tmp, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            paths.append(path)
        context.load_cert_chain(paths[0], paths[1])


def credentials_from_kubeconfig(
    kubeconfig: Dict, *, base_dir: Path | None = None, context: str | None = None
) -> Credentials:
    """The connection of a kubeconfig's context (its current one by default). Relative file
    paths are taken from `base_dir`, the kubeconfig file's directory."""
    if not isinstance(kubeconfig, dict):
        raise KubeconfigError("the kubeconfig is not a mapping")
    name = context or kubeconfig.get("current-context")
    if not name:
        raise KubeconfigError("current-context is not set")
    ctx = _named(kubeconfig, "contexts", "context", name)
    cluster = _named(kubeconfig, "clusters", "cluster", ctx.get("cluster"))
    user = _named(kubeconfig, "users", "user", ctx["user"]) if ctx.get("user") else {}
    server = cluster.get("server")
    if not server or not isinstance(server, str):
        raise KubeconfigError(f"cluster {ctx.get('cluster')!r} has no server")
    for field in ("auth-provider", "username", "password"):
        if user.get(field):
            raise KubeconfigError(
                f"user {ctx.get('user')!r} uses {field!r}, which this client does not support "
                "(use a token or a client certificate)"
            )
    plugin = None
    if user.get("exec"):
        try:
            plugin = ExecPlugin.from_kubeconfig(user["exec"], cluster, f"user {ctx.get('user')!r}")
        except ValueError as exc:
            raise KubeconfigError(str(exc)) from None

    def path(value: Any) -> str | None:
        if not value:
            return None
        p = Path(str(value))
        return str(p if p.is_absolute() or base_dir is None else base_dir / p)

    def data(section: Dict, key: str) -> bytes | None:
        value = section.get(key)
        if not value:
            return None
        try:
            return b64decode(str(value), validate=True)
        except ValueError:
            raise KubeconfigError(f"{key} is not base64") from None

    insecure = cluster.get("insecure-skip-tls-verify")
    insecure = False if insecure is None else insecure  # absent or null: verify
    if not isinstance(insecure, bool):
        # client-go refuses such a kubeconfig too; bool("false") would turn verification off.
        raise KubeconfigError(
            f"cluster {ctx.get('cluster')!r}: insecure-skip-tls-verify must be true or false "
            f"(unquoted), not {type(insecure).__name__} {insecure!r}"
        )
    cert_pem, key_pem = data(user, "client-certificate-data"), data(user, "client-key-data")
    has_cert = bool(cert_pem or user.get("client-certificate"))
    has_key = bool(key_pem or user.get("client-key"))
    if has_cert != has_key:
        has, missing = ("certificate", "key") if has_cert else ("key", "certificate")
        raise KubeconfigError(
            f"user {ctx.get('user')!r} has a client {has} but no client-{missing}(-data)"
        )
    proxy = cluster.get("proxy-url")
    if proxy and (not isinstance(proxy, str) or urlsplit(proxy).scheme not in _PROXY_SCHEMES):
        raise KubeconfigError(
            f"cluster {ctx.get('cluster')!r}: proxy-url must be an http, https or socks5 URL"
        )
    ca = data(cluster, "certificate-authority-data")
    token = user.get("token")
    return Credentials(
        server=server.rstrip("/"),
        ca_pem=ca.decode("ascii", errors="replace") if ca else None,
        ca_file=path(cluster.get("certificate-authority")),
        insecure=insecure,
        tls_server_name=_server_name(cluster.get("tls-server-name"), ctx.get("cluster")),
        token=str(token) if token else None,
        token_file=path(user.get("tokenFile")),
        exec_plugin=plugin,
        cert_pem=cert_pem,
        key_pem=key_pem,
        cert_file=path(user.get("client-certificate")),
        key_file=path(user.get("client-key")),
        namespace=ctx.get("namespace") or None,
        proxy_url=proxy or None,
        impersonate=_impersonation(user, ctx.get("user")),
    )


_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")
# A host name as TLS names a server (RFC 1123 labels, dots between them; 253 characters).
_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?")
# A last label libcurl would read as a number: the whole name is then taken as an IPv4
# address in one of its other forms (2130706433, 127.1, 0x7f.0.0.1, 017.0.0.1 in octal).
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")


def _server_name(value: Any, cluster: Any) -> str | None:
    """`tls-server-name`: a host name or an IP address, or None. It becomes the host of every
    request's URL (libcurl checks the server's certificate against it, and connects to the
    server's own address through CONNECT_TO only while the URL's host is this very name), so
    anything else is refused, never put into a URL: a port, a path, user info, a space, an
    IPv6 zone (`%eth0`), or a name libcurl would rewrite as an address (the dotted-quad form
    alone is an IPv4 address here; an IPv4-mapped IPv6 address is taken as its IPv4 one)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and len(value) <= 253 and "%" not in value:
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            last = value.removesuffix(".").rsplit(".", 1)[-1]
            if _HOST_NAME.fullmatch(value) and not _NUMERIC_LABEL.fullmatch(last):
                return value
        else:
            mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
            return str(mapped or address)
    raise KubeconfigError(
        f"cluster {cluster!r}: tls-server-name must be a host name or an IP address, "
        f"not {str(value)[:80]!r}"
    )


def _impersonation(user: Dict, name: Any) -> tuple[tuple[str, str], ...]:
    """The Impersonate-* headers of a kubeconfig user's `as` fields (client-go's names)."""
    headers: list[tuple[str, str]] = []
    if user.get("as"):
        headers.append(("Impersonate-User", str(user["as"])))
    if user.get("as-uid"):
        headers.append(("Impersonate-Uid", str(user["as-uid"])))
    groups = user.get("as-groups") or []
    extra = user.get("as-user-extra") or {}
    if not isinstance(groups, list) or not isinstance(extra, dict):
        raise KubeconfigError(f"user {name!r}: as-groups must be a list, as-user-extra a mapping")
    headers += [("Impersonate-Group", str(g)) for g in groups]
    for key, values in extra.items():
        for value in values if isinstance(values, list) else [values]:
            headers.append((f"Impersonate-Extra-{quote(str(key), safe='')}", str(value)))
    if (groups or extra or user.get("as-uid")) and not user.get("as"):
        raise KubeconfigError(f"user {name!r}: as-groups, as-uid and as-user-extra need 'as'")
    return tuple(headers)


def _named(kubeconfig: Dict, section: str, field: str, name: Any) -> Dict:
    for entry in kubeconfig.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            found = entry.get(field)
            if isinstance(found, dict):
                return found
            raise KubeconfigError(f"{section} entry {name!r} has no {field}")
    raise KubeconfigError(f"{field} {name!r} is not listed in {section}")


def in_cluster_credentials(sa_dir: Path = SERVICE_ACCOUNT_DIR) -> Credentials:
    """The pod's service account, as client-go's rest.InClusterConfig finds it."""
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT"),
    )
    if not host or not port:
        raise KubeconfigError("not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    token = sa_dir / "token"
    if not token.is_file():
        raise KubeconfigError(f"not in a cluster: {token} is missing")
    namespace = sa_dir / "namespace"
    return Credentials(
        server=f"https://{host}:{port}",
        ca_file=str(sa_dir / "ca.crt"),
        token_file=str(token),
        namespace=namespace.read_text().strip() if namespace.is_file() else None,
    )


def load_credentials(kubeconfig: Path | str | Dict) -> Credentials:
    """The credentials of a kubeconfig file (its relative paths taken from its directory), or
    of one already read (a dict)."""
    if isinstance(kubeconfig, dict):
        return credentials_from_kubeconfig(kubeconfig)
    path = Path(kubeconfig)
    return credentials_from_kubeconfig(yaml.safe_load(path.read_text()), base_dir=path.parent)
