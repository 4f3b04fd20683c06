"""After every other test: no credential in any log line of our controllers, any Event, any
status condition's message of the objects the product writes status to (MultiKueueClusters,
TrainJobs, Workloads) or any ConfigMap in trainjob-system (the log tails the dispatcher keeps).
The mixed-fleet module's own bed is scanned by that module, not here."""

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
    and in our controllers' own credentials (a slice of each and its end: a JWT's signature)."""
    found: dict[str, str] = {}
    core = client.CoreV1Api(bed.api(bed.config.managers[0].name))
    for worker in bed.config.workers:
        secret = core.read_namespaced_secret(f"{worker.name}-secret", bed.config.kueue_namespace)
        kubeconfig = yaml.safe_load(base64.b64decode(secret.data["kubeconfig"]))
        token = str(kubeconfig["users"][0]["user"]["token"])
        found[f"the manager's token for {worker.name}"] = token[40:100]
        found[f"the end of the manager's token for {worker.name}"] = token[-20:]
    for ctrl in controllers:
        kubeconfig = yaml.safe_load(Path(ctrl.env["KUBECONFIG"]).read_text())
        token = str(kubeconfig["users"][0]["user"]["token"])
        found[f"the token of {ctrl.identity} on {ctrl.cluster}"] = token[40:100]
        found[f"the end of the token of {ctrl.identity} on {ctrl.cluster}"] = token[-20:]
    return found


STATUS_KINDS = [  # (group, version, plural) of what the product writes conditions to
    ("kueue.x-k8s.io", "v1beta2", "multikueueclusters"),
    ("kueue.x-k8s.io", "v1beta2", "workloads"),
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
]


def _messages(bed: Bed, cluster: str) -> list[str]:
    """Every condition message of every object of STATUS_KINDS on `cluster`."""
    custom = client.CustomObjectsApi(bed.api(cluster))
    found = []
    for group, version, plural in STATUS_KINDS:
        if plural == "multikueueclusters":
            items = custom.list_cluster_custom_object(group, version, plural)["items"]
        else:
            items = custom.list_custom_object_for_all_namespaces(group, version, plural)["items"]
        for obj in items:
            conditions = (obj.get("status") or {}).get("conditions") or []
            found += [str(c.get("message") or "") for c in conditions]
    return found


def test_no_kubeconfig_content_or_key_in_logs_or_events(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    secrets = secrets_of(bed, controllers)
    texts: dict[str, str] = {}
    for ctrl in controllers:
        texts[str(ctrl.log)] = ctrl.log.read_text(errors="replace")
    for cluster in [c.name for c in bed.config.clusters]:
        core = client.CoreV1Api(bed.api(cluster))
        events = core.list_event_for_all_namespaces().items
        texts[f"Events on {cluster}"] = "\n".join(f"{e.reason}: {e.message}" for e in events)
        texts[f"condition messages on {cluster}"] = "\n".join(_messages(bed, cluster))
        kept = core.list_namespaced_config_map("trainjob-system").items
        texts[f"ConfigMaps of trainjob-system on {cluster}"] = "\n".join(
            str(value) for cm in kept for value in (cm.data or {}).values()
        )
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
