"""The bed's translations of an install (pure parts of clusters/install.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters.errors import BedError
from clusters.install import _env, _map_path, _map_text, webhook_url


def test_a_webhook_service_becomes_the_loopback_url_of_the_first_replica() -> None:
    hook = {
        "clientConfig": {
            "service": {"name": "svc", "namespace": "ns", "path": "/suspend-and-route"},
            "caBundle": "Q0E=",
        }
    }
    webhook_url(hook, 21013)
    assert hook == {
        "clientConfig": {"url": "https://127.0.0.1:21013/suspend-and-route", "caBundle": "Q0E="}
    }


def test_mount_paths_map_to_the_replicas_directories_in_arguments_and_files() -> None:
    mounts = {"/etc/trainjob": Path("/bed/p/config"), "/etc/trainjob/x": Path("/bed/p/x")}
    assert _map_path("/etc/trainjob/config.yaml", mounts) == "/bed/p/config/config.yaml"
    assert _map_path("/etc/trainjob/x/y", mounts) == "/bed/p/x/y"  # the longest mount wins
    assert _map_path("/etc/trainjobs", mounts) == "/etc/trainjobs"
    assert _map_text("webhookCertDir: /etc/trainjob/x\n", mounts) == "webhookCertDir: /bed/p/x\n"


def test_the_downward_api_gives_the_replicas_identity_and_namespace() -> None:
    container = {
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            {"name": "PLAIN", "value": 3},
        ]
    }
    assert _env(container, "tj-dispatcher-1", "tj-system") == {
        "POD_NAME": "tj-dispatcher-1",
        "POD_NAMESPACE": "tj-system",
        "PLAIN": "3",
    }
    with pytest.raises(BedError, match="cannot provide"):
        _env(
            {"env": [{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]},
            "a",
            "b",
        )
