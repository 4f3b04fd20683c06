"""After every other test: no credential in any log line of our controllers or any Event."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from clusters import setup
from clusters.bed import Bed

pytestmark = [pytest.mark.bed, pytest.mark.last]


def secrets_of(bed: Bed, controllers: list[setup.Controller]) -> dict[str, str]:
    """What must never be written out: the tokens in the manager's worker kubeconfig Secrets
    and in our controllers' own credentials (a slice of each is enough to spot)."""
    found: dict[str, str] = {}
    core = client.CoreV1Api(bed.api(bed.config.managers[0].name))
    for worker in bed.config.workers:
        secret = core.read_namespaced_secret(f"{worker.name}-secret", bed.config.kueue_namespace)
        kubeconfig = yaml.safe_load(base64.b64decode(secret.data["kubeconfig"]))
        token = str(kubeconfig["users"][0]["user"]["token"])
        found[f"the manager's token for {worker.name}"] = token[40:100]
    for ctrl in controllers:
        kubeconfig = yaml.safe_load(Path(ctrl.env["KUBECONFIG"]).read_text())
        token = str(kubeconfig["users"][0]["user"]["token"])
        found[f"the token of {ctrl.identity} on {ctrl.cluster}"] = token[40:100]
    return found


def test_no_kubeconfig_content_or_key_in_logs_or_events(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    secrets = secrets_of(bed, controllers)
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
