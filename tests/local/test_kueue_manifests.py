"""The bed's rendering of Kueue's own manifests, read from its Go module (downloaded by
`go mod download` on first use, then cached)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters import builds
from clusters.kueue import build_crds, build_webhook_configurations


@pytest.fixture(scope="module")
def kueue_dir() -> Path:
    return builds.module_source_dir("kueue", f"sigs.k8s.io/kueue@{builds.KUEUE_VERSION}")


def test_kueue_crds_use_our_conversion_webhook(kueue_dir: Path) -> None:
    crds = {c["metadata"]["name"]: c for c in build_crds(kueue_dir, "https://127.0.0.1:9", b"X")}
    assert "multikueueclusters.kueue.x-k8s.io" in crds
    converted = {n for n, c in crds.items() if c["spec"].get("conversion")}
    assert converted == {
        "localqueues.kueue.x-k8s.io",
        "clusterqueues.kueue.x-k8s.io",
        "cohorts.kueue.x-k8s.io",
        "workloads.kueue.x-k8s.io",
        "multikueueclusters.kueue.x-k8s.io",
    }
    client_cfg = crds["workloads.kueue.x-k8s.io"]["spec"]["conversion"]["webhook"]["clientConfig"]
    assert client_cfg == {"url": "https://127.0.0.1:9/convert", "caBundle": "WA=="}


def test_kueue_webhooks_point_at_loopback_and_skip_trainjob(kueue_dir: Path) -> None:
    cfgs = build_webhook_configurations(kueue_dir, "https://127.0.0.1:9", b"X", "kueue-system")
    hooks = {h["name"]: h for cfg in cfgs for h in cfg["webhooks"]}
    assert {"mjob.kb.io", "vjob.kb.io", "vclusterqueue.kb.io", "mworkload.kb.io"} <= set(hooks)
    assert not {"mtrainjob.kb.io", "vtrainjob.kb.io", "mpod.kb.io"} & set(hooks)
    assert hooks["vjob.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:9/validate-batch-v1-job",
        "caBundle": "WA==",
    }
    assert hooks["vjob.kb.io"]["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "kueue-system",
    ]
    assert "namespaceSelector" not in hooks["vclusterqueue.kb.io"]
