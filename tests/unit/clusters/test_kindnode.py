"""The kind node image's settings (clusters/kindnode.py) applied to kind's own files, from its
module: each change lands, and a kind whose files moved on fails the build by name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clusters import images, kindnode
from clusters.errors import BedError


@pytest.fixture
def rootfs(tmp_path: Path) -> Path:
    files = kindnode.kind_source() / "images" / "base" / "files"
    root = tmp_path / "rootfs"
    for rel in ("etc/containerd/config.toml", "etc/default/kubelet"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(files / rel, root / rel)
    return root


def test_containerd_kubelet_and_the_pod_network_are_set_for_this_host(rootfs: Path) -> None:
    kindnode._settings(rootfs)
    containerd = (rootfs / "etc/containerd/config.toml").read_text()
    assert f'sandbox_image = "{images.PAUSE.name}"' in containerd
    assert "restrict_oom_score_adj = true" in containerd
    assert "restrict_oom_score_adj = false" not in containerd
    kubelet = (rootfs / "etc/default/kubelet").read_text()
    assert kubelet.startswith("KUBELET_EXTRA_ARGS=")
    assert kubelet.endswith(" --fail-cgroupv1=false\n")
    cni = json.loads((rootfs / "etc/cni/net.d/10-kind-offline.conflist").read_text())
    assert [p["type"] for p in cni["plugins"]] == ["bridge", "portmap"]
    assert cni["plugins"][0]["ipam"]["ranges"] == [[{"subnet": kindnode.POD_SUBNET}]]
    assert {p["type"] for p in cni["plugins"]} | {"host-local"} <= set(kindnode.CNI_PLUGINS)
    assert "kind: ConfigMap" in (rootfs / "kind/manifests/default-cni.yaml").read_text()


def test_a_kind_whose_containerd_settings_moved_on_is_refused_by_name(rootfs: Path) -> None:
    config = rootfs / "etc/containerd/config.toml"
    config.write_text(config.read_text().replace("restrict_oom_score_adj = false", ""))
    with pytest.raises(BedError, match="restrict_oom_score_adj"):
        kindnode._settings(rootfs)
