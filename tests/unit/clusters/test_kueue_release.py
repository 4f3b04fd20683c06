"""Kueue's release manifests as the bed renders them from Kueue's module (clusters/kueue.py):
what its release's `manifests.yaml` holds, with the image the bed builds under its name."""

from __future__ import annotations

import pytest
import yaml

from clusters import builds, images
from clusters.kube import load_manifests
from clusters.kueue import release_manifests


@pytest.fixture(scope="module")
def rendered() -> str:
    return release_manifests(images.KUEUE.name)


def test_the_release_manifests_name_the_release_image_and_kueues_names(rendered: str) -> None:
    docs = load_manifests(rendered)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    assert deployment["metadata"] == {
        **deployment["metadata"],
        "name": "kueue-controller-manager",
        "namespace": "kueue-system",
    }
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"registry.k8s.io/kueue/kueue:{builds.KUEUE_VERSION}"
    assert container["image"] == images.KUEUE.name
    assert container["command"] == ["/manager"] and images.KUEUE.path == "/manager"
    assert rendered.count("imagePullPolicy: Always") == 1  # what the runbook test swaps
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("ConfigMap", "kueue-manager-config") in names
    assert ("CustomResourceDefinition", "workloads.kueue.x-k8s.io") in names
    assert ("MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration") in names


def test_the_release_configuration_is_kueues_shipped_one(rendered: str) -> None:
    (config_map,) = [
        d
        for d in load_manifests(rendered)
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "kueue-manager-config"
    ]
    kueue = builds.module_source_dir("kueue", f"sigs.k8s.io/kueue@{builds.KUEUE_VERSION}")
    shipped = kueue / "config/components/manager/controller_manager_config.yaml"
    assert yaml.safe_load(config_map["data"]["controller_manager_config.yaml"]) == yaml.safe_load(
        shipped.read_text()
    )
