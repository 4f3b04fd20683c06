"""After every other test: no credential in any log line of our controllers or any Event."""

from __future__ import annotations

import base64

import pytest
from kubernetes import client

from clusters.bed import Bed
from demo import setup

pytestmark = [pytest.mark.bed, pytest.mark.last]


def secrets_of(bed: Bed) -> dict[str, str]:
    """What must never be written out: the workers' kubeconfig credentials, base64 and PEM."""
    found: dict[str, str] = {}
    for worker in bed.config.workers:
        kubeconfig = bed.multikueue_kubeconfig(worker.name)
        user = kubeconfig["users"][0]["user"]
        for key in ("client-key-data", "client-certificate-data"):
            encoded = str(user[key])
            found[f"{worker.name} {key}"] = encoded[40:100]
            pem = base64.b64decode(encoded).decode().splitlines()
            found[f"{worker.name} {key} (PEM)"] = pem[2]  # a line of the body, not the header
    return found


def test_no_kubeconfig_content_or_key_in_logs_or_events(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    secrets = secrets_of(bed)
    texts: dict[str, str] = {}
    for ctrl in controllers:
        texts[str(ctrl.log)] = ctrl.log.read_text(errors="replace")
    for cluster in [c.name for c in bed.config.clusters]:
        events = client.CoreV1Api(bed.api(cluster)).list_event_for_all_namespaces().items
        texts[f"Events on {cluster}"] = "\n".join(f"{e.reason}: {e.message}" for e in events)
    assert sum(len(t) for t in texts.values()) > 10_000, "the run left logs and Events to scan"
    leaks = [
        f"{what} in {where}"
        for where, text in texts.items()
        for what, needle in secrets.items()
        if needle in text
    ]
    leaks += [
        f"a PEM private key in {where}" for where, text in texts.items() if "PRIVATE KEY" in text
    ]
    assert leaks == []
