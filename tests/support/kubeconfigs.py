"""Worker kubeconfigs for the unit tests of the vetting rules (a real CA, so the rules load it
as a connection would), and a worker's connection dialled from one."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import yaml

from dispatcher.workers.remote import RemoteCluster, dial
from kubecontrol.certs import issue

Dict = dict[str, Any]


# A real CA: the check loads it, as the connection would.
CA_DATA = base64.b64encode(issue(["127.0.0.1"], dt.datetime.now(dt.UTC)).ca_crt).decode()


def kubeconfig(cluster: Dict | None = None, user: Dict | None = None) -> bytes:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "w",
            "clusters": [
                {
                    "name": "w",
                    "cluster": cluster
                    or {"server": "https://127.0.0.1:6443", "certificate-authority-data": CA_DATA},
                }
            ],
            "users": [{"name": "u", "user": user or {"token": "abc"}}],
            "contexts": [{"name": "w", "context": {"cluster": "w", "user": "u"}}],
        }
    ).encode()


def remote_cluster(down: float | None = None) -> RemoteCluster:
    """A worker's connection as the dispatcher keeps it, dialled from `kubeconfig()` (no
    thread started); `down` when it was lost."""
    return RemoteCluster(
        "w1",
        dial("w1", yaml.safe_load(kubeconfig()), "test"),
        "origin",
        lambda ns, name, urgent: None,
        down_since=down,
    )
