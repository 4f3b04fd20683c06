"""Bearer tokens from a kubeconfig's exec credential plugin, as client-go runs one.

The plugin is run with the kubeconfig's `args` and `env` on top of our own environment, and
`KUBERNETES_EXEC_INFO` holding an ExecCredential of the requested `apiVersion` (with the
cluster's connection in `spec.cluster` when `provideClusterInfo` is set). It must print an
ExecCredential of that same apiVersion whose `status.token` we send; the token is kept until
its `expirationTimestamp` (less a margin) or until the server refuses it (401), then the
plugin runs again. Bounded: one run at a time per client, at most RUN_SECONDS, at most
MAX_OUTPUT bytes read. A plugin that answers with a client certificate instead of a token is
refused with that said: our connections are set up once, with the kubeconfig's TLS identity.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

from kubebase.objects import Dict

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
RUN_SECONDS = 30.0  # a plugin that hangs is a failed request, not a held thread
MAX_OUTPUT = 1024 * 1024
EXPIRY_MARGIN_SECONDS = 30.0  # a token is renewed this long before it expires
# Where a ClusterProfile (or a kubeconfig) carries the plugin's own settings for a cluster.
EXEC_EXTENSION = "client.authentication.k8s.io/exec"


class CredentialPluginError(ConnectionError):
    """The plugin gave no token: it could not be run, failed, or printed no ExecCredential.
    A ConnectionError, so callers treat it as a worker they cannot reach now."""


@dataclass(frozen=True)
class ExecPlugin:
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = API_VERSIONS[0]
    # spec.cluster of KUBERNETES_EXEC_INFO (JSON), when the plugin asked for it
    cluster_info: str | None = None

    @classmethod
    def from_kubeconfig(cls, spec: Any, cluster: Dict, where: str) -> ExecPlugin:
        """A user's `exec` section; `cluster` is the kubeconfig's cluster it connects to.
        Raises ValueError naming the field it cannot use."""
        if not isinstance(spec, dict):
            raise ValueError(f"{where}: exec must be a mapping")
        command = spec.get("command")
        if not command or not isinstance(command, str):
            raise ValueError(f"{where}: exec.command must be a non-empty string")
        version = spec.get("apiVersion") or ""
        if version not in API_VERSIONS:
            raise ValueError(f"{where}: exec.apiVersion must be one of {', '.join(API_VERSIONS)}")
        args = spec.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError(f"{where}: exec.args must be a list of strings")
        env = []
        for i, item in enumerate(spec.get("env") or []):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise ValueError(f"{where}: exec.env[{i}] must have a name and a value")
            env.append((item["name"], str(item.get("value") or "")))
        info = None
        if spec.get("provideClusterInfo"):
            info = json.dumps(_cluster_info(cluster), sort_keys=True)
        return cls(command, tuple(args), tuple(env), version, info)

    def exec_info(self) -> str:
        """KUBERNETES_EXEC_INFO: what the plugin is told of the request."""
        spec: Dict = {"interactive": False}
        if self.cluster_info is not None:
            spec["cluster"] = json.loads(self.cluster_info)
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})


def _cluster_info(cluster: Dict) -> Dict:
    """client-go's ExecCredential spec.cluster, from a kubeconfig cluster (the exec
    extension, if any, becomes `config`)."""
    out: Dict = {"server": cluster.get("server", "")}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if cluster.get(key):
            out[key] = cluster[key]
    if cluster.get("certificate-authority-data"):
        out["certificate-authority-data"] = cluster["certificate-authority-data"]
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == EXEC_EXTENSION:
            out["config"] = ext.get("extension")
    return out


class ExecTokens:
    """The plugin's current token for one client, run again when it expires or is refused."""

    def __init__(self, plugin: ExecPlugin) -> None:
        self.plugin = plugin
        self._token: str | None = None
        self._until = 0.0  # monotonic time after which the token is renewed
        self._lock = threading.Lock()

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.monotonic() >= self._until:
                self._token, self._until = self._run()
            return self._token

    def refused(self) -> None:
        """The server answered 401: the next request runs the plugin again."""
        with self._lock:
            self._token = None

    def _run(self) -> tuple[str, float]:
        plugin = self.plugin
        env = {**os.environ, **dict(plugin.env), "KUBERNETES_EXEC_INFO": plugin.exec_info()}
        try:
            done = subprocess.run(
                [plugin.command, *plugin.args],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=RUN_SECONDS,
                check=False,
            )
        except FileNotFoundError:
            raise CredentialPluginError(
                f"credential plugin {plugin.command!r} not found (install it in the image, "
                "or name it by its full path)"
            ) from None
        except subprocess.TimeoutExpired:
            raise CredentialPluginError(
                f"credential plugin {plugin.command!r} gave no answer within {RUN_SECONDS:g}s"
            ) from None
        except OSError as exc:
            raise CredentialPluginError(
                f"credential plugin {plugin.command!r} cannot be run: {exc.strerror}"
            ) from None
        if done.returncode != 0:
            said = done.stderr[-300:].decode(errors="replace").strip()
            raise CredentialPluginError(
                f"credential plugin {plugin.command!r} exited with {done.returncode}"
                + (f": {said}" if said else "")
            )
        return _token_of(done.stdout[:MAX_OUTPUT], plugin)


def _token_of(out: bytes, plugin: ExecPlugin) -> tuple[str, float]:
    name = repr(plugin.command)
    try:
        cred = json.loads(out)
    except ValueError:
        raise CredentialPluginError(
            f"credential plugin {name} printed no JSON ExecCredential"
        ) from None
    if not isinstance(cred, dict) or cred.get("kind") != "ExecCredential":
        raise CredentialPluginError(f"credential plugin {name} printed no ExecCredential")
    if cred.get("apiVersion") != plugin.api_version:
        raise CredentialPluginError(
            f"credential plugin {name} answered {cred.get('apiVersion')!r}, "
            f"not the {plugin.api_version!r} it was asked for"
        )
    status = cred.get("status") or {}
    token = status.get("token") if isinstance(status, dict) else None
    if not token or not isinstance(token, str):
        cert = isinstance(status, dict) and status.get("clientCertificateData")
        raise CredentialPluginError(
            f"credential plugin {name} gave a client certificate; only tokens are supported"
            if cert
            else f"credential plugin {name} gave no status.token"
        )
    until = float("inf")
    expires = status.get("expirationTimestamp")
    if expires:
        try:
            at = dt.datetime.fromisoformat(str(expires).replace("Z", "+00:00"))
        except ValueError:
            raise CredentialPluginError(
                f"credential plugin {name}: status.expirationTimestamp {expires!r} is not a time"
            ) from None
        left = (at - dt.datetime.now(dt.UTC)).total_seconds()
        until = time.monotonic() + max(0.0, left - EXPIRY_MARGIN_SECONDS)
    return token, until
