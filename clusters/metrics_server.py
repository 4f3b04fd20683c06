"""metrics-server on the workers of the real-node bed: the metrics API (metrics.k8s.io) that
the web view's pods' CPU and memory come from, installed from its release manifests."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from clusters import builds
from clusters.kube import render, wait_api_service

API_SERVICE = "v1beta1.metrics.k8s.io"
# The kubelets' serving certificates come from the cluster CA (Bed._node_pki), which every
# pod's ServiceAccount volume holds: metrics-server checks them against it, where the release
# manifests would have it trust the system's CAs only.
CHECK_KUBELETS = (
    "--kubelet-certificate-authority=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)


def manifests() -> list[dict[str, Any]]:
    """Its release manifests (`kubectl kustomize manifests/overlays/release` of the module,
    as its components.yaml is made), the kubelets' certificates checked as said above."""
    source = builds.module_source_dir(
        "metrics-server", f"sigs.k8s.io/metrics-server@{builds.METRICS_SERVER_VERSION}"
    )
    docs = render(source / "manifests" / "overlays" / "release")
    for doc in docs:
        if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "metrics-server":
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            container["args"] = [*container["args"], CHECK_KUBELETS]
    return docs


def wait_available(api: client.ApiClient, timeout: float = 120.0) -> None:
    """Until the API server finds metrics-server answering behind its APIService."""
    wait_api_service(
        api,
        API_SERVICE,
        time.monotonic() + timeout,
        lambda: "; see `kubectl -n kube-system logs deploy/metrics-server`",
    )
