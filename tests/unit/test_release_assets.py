"""A release's assets as the release workflow builds them (`python -m release.assets`, with
the bed's kubectl and helm): what they hold, that each installs from nothing in one
`kubectl apply --server-side -f`, and that the workflow publishes exactly them. The bed's
installs apply the same rendering (deploy/<role>); tests/e2e/test_release_install.py applies
the files themselves to empty clusters."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters import builds
from release import assets

Dict = dict[str, Any]
DIGEST = "sha256:" + "ab" * 32
IMAGE = "registry.example.com/ml/trainjob-multicluster"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("assets")
    return {p.name: p for p in assets.build(out, IMAGE, DIGEST)}


def docs(path: Path) -> list[Dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_every_asset_is_there_with_its_checksum(built: dict[str, Path]) -> None:
    version = assets.chart_version()
    assert sorted(built) == sorted(
        [
            "manager.yaml",
            "worker.yaml",
            "worker-identity.yaml",
            "crds.tar.gz",
            f"trainjob-multicluster-{version}.tgz",
            "SHA256SUMS",
        ]
    )
    sums = dict(reversed(line.split("  ")) for line in built["SHA256SUMS"].read_text().splitlines())
    assert set(sums) == set(built) - {"SHA256SUMS"}
    for name, digest in sums.items():
        assert hashlib.sha256(built[name].read_bytes()).hexdigest() == digest, name


def test_the_crds_archive_holds_the_crds_themselves(built: dict[str, Path]) -> None:
    with tarfile.open(built["crds.tar.gz"]) as tar:
        members = tar.getmembers()
        assert all(m.isfile() for m in members)  # never the `crds` link of a checkout
        got = {m.name: tar.extractfile(m).read() for m in members}  # type: ignore[union-attr]
    want = {f"crds/{p.name}": p.read_bytes() for p in assets.CRDS.iterdir() if p.is_file()}
    assert got == want and len(want) == 4
    assert assets.crds_archive() == built["crds.tar.gz"].read_bytes()  # reproducible


@pytest.mark.parametrize("role", ["manager", "worker", "worker-identity"])
def test_a_manifest_installs_from_nothing_in_one_apply(built: dict[str, Path], role: str) -> None:
    objs = docs(built[f"{role}.yaml"])
    kinds = [o["kind"] for o in objs]
    # The namespace, then the CRDs (a worker running Trainer keeps Trainer's), before
    # anything that lives in them or uses them.
    assert kinds[0] == "Namespace" and objs[0]["metadata"]["name"] == "trainjob-system"
    crds = [i for i, k in enumerate(kinds) if k == "CustomResourceDefinition"]
    assert crds == ([] if role == "worker-identity" else [1, 2, 3])
    # Namespaced objects go to ours, or to Kueue's and Kubernetes' own (a Role on the
    # kubeconfig Secrets in kueue-system, the front proxy's CA in kube-system).
    spaces = {o["metadata"].get("namespace") for o in objs} - {None}
    assert spaces <= {"trainjob-system", "kueue-system", "kube-system"}
    # Webhooks last: nothing after them is refused because their server is not up yet.
    hooks = [i for i, k in enumerate(kinds) if k.endswith("WebhookConfiguration")]
    assert not hooks or hooks[-1] == len(kinds) - 1
    images = [c["image"] for o in objs for c in assets.containers(o)]
    assert (images == []) if role == "worker-identity" else bool(images)
    assert all(i == f"{IMAGE}@{DIGEST}" for i in images)
    # What the bed installs (deploy/<role>) but for the image: the same objects.
    overlay = yaml.safe_load_all(
        subprocess.run(
            [str(builds.binary("kubectl")), "kustomize", str(assets.REPO / "deploy" / role)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert [(o["kind"], o["metadata"]["name"]) for o in overlay if o] == [
        (o["kind"], o["metadata"]["name"]) for o in objs
    ]


def test_the_chart_package_is_the_charts_version(built: dict[str, Path]) -> None:
    version = assets.chart_version()
    with tarfile.open(built[f"trainjob-multicluster-{version}.tgz"]) as tar:
        chart = tar.extractfile("trainjob-multicluster/Chart.yaml")
        assert chart is not None
        meta = yaml.safe_load(io.BytesIO(chart.read()))
        names = tar.getnames()
    assert meta["version"] == version and meta["appVersion"] == version
    assert "trainjob-multicluster/crds/trainer.kubeflow.org_trainjobs.yaml" in names


def test_the_workflow_publishes_what_release_assets_builds() -> None:
    workflow = yaml.safe_load((assets.REPO / ".github/workflows/release.yml").read_text())
    jobs = workflow["jobs"]
    assert jobs["test"]["needs"] == "check"
    assert "test" in jobs["image"]["needs"]  # nothing is pushed before the suite passed
    assert any(s.get("run") == "bash .ci/run" for s in jobs["test"]["steps"])
    runs = "\n".join(s.get("run", "") for s in jobs["chart"]["steps"])
    assert 'python -m release.assets --image "$IMAGE" --digest "$DIGEST" --out out' in runs
    published = runs[runs.index("gh release create") :]
    for name in ("manager.yaml", "worker.yaml", "worker-identity.yaml", "crds.tar.gz"):
        assert f"out/{name}" in published
    assert "out/SHA256SUMS" in published and "trainjob-multicluster-$VERSION.tgz" in published
    assert "tar -czf" not in runs  # the archive is release.assets', with the CRDs themselves
