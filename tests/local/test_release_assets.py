"""A release's assets as the release workflow builds them (`python -m release.assets`, with
the bed's kubectl and helm): what they hold, that each is ordered to install from nothing in
one `kubectl apply --server-side -f crds.yaml -f <role>.yaml`, that deleting a role's file
cannot take the CRDs (and every TrainJob) with it, and that the workflow publishes exactly
them. The bed's
installs apply the same rendering (deploy/<role>); tests/real/test_runbook.py applies
manager.yaml and worker.yaml themselves to empty clusters, as docs/operators/install.md says
(worker-identity.yaml is not applied as a release file by any test)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from clusters import builds
from release import assets
from tests.support.files import yaml_documents

Dict = dict[str, Any]
DIGEST = "sha256:" + "ab" * 32
IMAGE = "registry.example.com/ml/trainjob-multicluster"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("assets")
    return {p.name: p for p in assets.build(out, IMAGE, DIGEST)}


def docs(path: Path) -> list[Dict]:
    return yaml_documents(path.read_text())


def test_every_asset_is_there_with_its_checksum(built: dict[str, Path]) -> None:
    version = assets.chart_version()
    assert sorted(built) == sorted(
        [
            "crds.yaml",
            "manager.yaml",
            "worker.yaml",
            "worker-identity.yaml",
            "crds.tar.gz",
            f"trainjob-multicluster-{version}.tgz",
            f"kubectl_trainjob-{version}-py3-none-any.whl",
            f"kubectl-trainjob-{version}.tar.gz",
            "trainjob.yaml",
            f"trainjob_dispatcher-{version}-py3-none-any.whl",
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


def test_the_crds_are_an_asset_of_their_own(built: dict[str, Path]) -> None:
    """crds.yaml holds our three CRDs as crds/ renders them, and nothing else: the role files
    hold none, so `kubectl delete -f manager.yaml` leaves every TrainJob where it is."""
    objs = docs(built["crds.yaml"])
    assert [o["kind"] for o in objs] == [assets.CRD] * 3
    assert {o["metadata"]["name"] for o in objs} == {
        "trainjobs.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    }
    assert objs == assets.kustomized(assets.CRDS)
    assert (
        "kubectl apply --server-side -f crds.yaml -f manager.yaml" in built["crds.yaml"].read_text()
    )


@pytest.mark.parametrize("role", ["manager", "worker", "worker-identity"])
def test_a_manifest_is_ordered_to_install_from_nothing_in_one_apply(
    built: dict[str, Path], role: str
) -> None:
    objs = docs(built[f"{role}.yaml"])
    kinds = [o["kind"] for o in objs]
    # The namespace first, before anything that lives in it; never a CRD (crds.yaml comes
    # before this file in the same apply; a worker running Trainer keeps Trainer's).
    assert kinds[0] == "Namespace" and objs[0]["metadata"]["name"] == "trainjob-system"
    assert assets.CRD not in kinds
    together = "-f crds.yaml " if role != "worker-identity" else ""
    assert (
        f"kubectl apply --server-side {together}-f {role}.yaml\n"
        in built[f"{role}.yaml"].read_text()
    )
    # Namespaced objects go to ours, or to Kueue's and Kubernetes' own (a Role on the
    # kubeconfig Secrets in kueue-system, the front proxy's CA in kube-system).
    spaces = {o["metadata"].get("namespace") for o in objs} - {None}
    assert spaces <= {"trainjob-system", "kueue-system", "kube-system"}
    # Webhooks last, all of them: nothing after them is refused because their server is not
    # up yet. The manager and a worker have theirs; the identity file none.
    hooks = [i for i, k in enumerate(kinds) if k.endswith("WebhookConfiguration")]
    assert hooks == list(range(len(kinds) - len(hooks), len(kinds)))
    assert (hooks == []) == (role == "worker-identity")
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
    assert [
        (o["kind"], o["metadata"]["name"]) for o in overlay if o and o["kind"] != assets.CRD
    ] == [(o["kind"], o["metadata"]["name"]) for o in objs]


def test_the_chart_package_is_the_charts_version(built: dict[str, Path]) -> None:
    version = assets.chart_version()
    with tarfile.open(built[f"trainjob-multicluster-{version}.tgz"]) as tar:
        chart = tar.extractfile("trainjob-multicluster/Chart.yaml")
        assert chart is not None
        meta = yaml.safe_load(io.BytesIO(chart.read()))
        names = tar.getnames()
    assert meta["version"] == version and meta["appVersion"] == version
    assert "trainjob-multicluster/files/crds/trainer.kubeflow.org_trainjobs.json" in names
    assert "trainjob-multicluster/templates/crds.yaml" in names
    assert not [n for n in names if n.startswith("trainjob-multicluster/crds/")]  # Helm's once-only


@contextlib.contextmanager
def oci_registry(root: Path) -> Iterator[str]:
    """The CNCF Distribution registry (built from its module) on a free loopback port, plain
    HTTP, its storage under `root`; yields its host:port and stops it."""
    builds.build_one(builds.BUILDS["registry"])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = root / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "version": 0.1,
                "log": {"level": "warn"},
                "storage": {"filesystem": {"rootdirectory": str(root / "data")}},
                "http": {"addr": f"127.0.0.1:{port}"},
            }
        )
    )
    log = (root / "registry.log").open("w")
    server = subprocess.Popen(
        [str(builds.binary("registry")), "serve", str(config)], stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert server.poll() is None, (root / "registry.log").read_text()
            assert time.monotonic() < deadline, "the registry did not answer in 30 s"
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


def test_the_chart_pushes_as_oci_and_installs_from_there(
    built: dict[str, Path], tmp_path: Path
) -> None:
    """What the workflow's `helm push` does, to a registry of our own: the package goes up as
    an OCI artifact, comes back byte for byte, and Helm renders it from the registry's
    reference (CRDs included) as `helm install oci://...` would."""
    version = assets.chart_version()
    package = built[f"trainjob-multicluster-{version}.tgz"]
    helm = str(builds.binary("helm"))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HELM_CONFIG_HOME": str(tmp_path)}

    def run(*args: str) -> str:
        done = subprocess.run(
            [helm, *args], capture_output=True, text=True, env=env, timeout=120, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    with oci_registry(tmp_path) as registry:
        charts = f"oci://{registry}/charts"
        pushed = run("push", str(package), charts, "--plain-http")
        assert f"Pushed: {registry}/charts/trainjob-multicluster:{version}" in pushed, pushed
        ref = f"{charts}/trainjob-multicluster"
        (tmp_path / "pulled").mkdir()
        run("pull", ref, "--version", version, "--plain-http", "-d", str(tmp_path / "pulled"))
        pulled = tmp_path / "pulled" / package.name
        assert pulled.read_bytes() == package.read_bytes()
        meta = yaml.safe_load(run("show", "chart", ref, "--version", version, "--plain-http"))
        assert (meta["name"], meta["version"]) == ("trainjob-multicluster", version)
        rendered = yaml_documents(
            run("template", "tj", ref, "--version", version, "--plain-http",
                "--kube-version", "1.36.0", "--set", "role=manager")
        )  # fmt: skip
    crds = {d["metadata"]["name"] for d in rendered if d["kind"] == "CustomResourceDefinition"}
    assert crds == {f"{p}.trainer.kubeflow.org" for p in ("trainjobs", "trainingruntimes",
                                                          "clustertrainingruntimes")}  # fmt: skip
    assert any(d["kind"] == "Deployment" for d in rendered)


def test_the_workflow_publishes_what_release_assets_builds() -> None:
    workflow = yaml.safe_load((assets.REPO / ".github/workflows/release.yml").read_text())
    jobs = workflow["jobs"]
    assert jobs["test"]["needs"] == "check"
    assert "test" in jobs["image"]["needs"]  # nothing is pushed before the suite passed
    assert any(s.get("run") == "bash .ci/run" for s in jobs["test"]["steps"])
    runs = "\n".join(s.get("run", "") for s in jobs["chart"]["steps"])
    assert 'python -m release.assets --image "$IMAGE" --digest "$DIGEST" --out out' in runs
    published = runs[runs.index("gh release create") :]
    for name in ("crds.yaml", "manager.yaml", "worker.yaml", "worker-identity.yaml", "crds.tar.gz"):
        assert f"out/{name}" in published
    assert "out/SHA256SUMS" in published and "trainjob-multicluster-$VERSION.tgz" in published
    wheels = (
        "kubectl_trainjob-$VERSION-py3-none-any.whl",
        "trainjob_dispatcher-$VERSION-py3-none-any.whl",
    )
    for name in (*wheels, "kubectl-trainjob-$VERSION.tar.gz"):
        assert f"out/{name}" in published
    to_pypi = runs[runs.index("mkdir out/pypi") :]  # both wheels go to PyPI
    assert all(f"out/{w}" in to_pypi.split("\n", 2)[1] for w in wheels), to_pypi
    assert "out/trainjob.yaml" in published
    assert "tar -czf" not in runs  # the archive is release.assets', with the CRDs themselves


def test_the_plugins_wheel_holds_the_plugin_and_what_it_reads_only(
    built: dict[str, Path],
) -> None:
    """The wheel is plugin/ (its own modules of trainjob and kubecontrol, none of the
    product's), for Python 3.10 on, with plugin/pyproject.toml's dependencies only."""
    version = assets.chart_version()
    with zipfile.ZipFile(built[f"kubectl_trainjob-{version}-py3-none-any.whl"]) as wheel:
        names = wheel.namelist()
        meta = wheel.read(f"kubectl_trainjob-{version}.dist-info/METADATA").decode()
    modules = {n for n in names if n.endswith(".py")}
    want = {
        p.relative_to(assets.PLUGIN).as_posix()
        for package in ("kubectl_trainjob", "trainjob_api", "kubebase")
        for p in (assets.PLUGIN / package).rglob("*.py")
    }
    assert modules == want and "trainjob_api/views.py" in want
    tops = {n.split("/")[0] for n in names}
    assert not tops & {"dispatcher", "worker_controller", "trainjob", "kubecontrol", "tests"}
    assert "trainjob/workload.py" not in names and "kubecontrol/client.py" not in names
    assert "kubectl_trainjob/ui/index.html" in names
    project = tomllib.loads((assets.PLUGIN / "pyproject.toml").read_text())["project"]
    assert "Requires-Python: >=3.10" in meta.splitlines()
    requires = [
        line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist")
    ]
    assert sorted(map(Requirement, requires), key=str) == sorted(
        map(Requirement, project["dependencies"]), key=str
    )
    assert (
        plugin_wheel_again(version)
        == built[f"kubectl_trainjob-{version}-py3-none-any.whl"].read_bytes()
    )


def test_the_products_wheel_holds_the_product_and_the_operators_commands(
    built: dict[str, Path],
) -> None:
    """The product's wheel (what `pipx install` gives an operator, and the image holds): its
    packages and no test, bed or release code; the three commands of the runbook as console
    scripts whose modules it holds; pyproject.toml's Python range and dependencies."""
    version = assets.chart_version()
    with zipfile.ZipFile(built[f"trainjob_dispatcher-{version}-py3-none-any.whl"]) as wheel:
        names = wheel.namelist()
        info = f"trainjob_dispatcher-{version}.dist-info"
        meta = wheel.read(f"{info}/METADATA").decode()
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"dispatcher", "worker_controller", "trainjob", "kubecontrol", info}
    tracked = subprocess.run(
        ["git", "-C", str(assets.REPO), "ls-files", "dispatcher", "worker_controller", "trainjob",
         "kubecontrol"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert {n for n in names if n.endswith(".py")} == {p for p in tracked if p.endswith(".py")}
    with tempfile.TemporaryDirectory() as tmp:  # the same bytes each build
        again = assets.product_wheel(Path(tmp), version).read_bytes()
    assert again == built[f"trainjob_dispatcher-{version}-py3-none-any.whl"].read_bytes()
    # The plugin's wheel is a dependency: no file of one is the other's (an install of both
    # would have one overwrite the other's).
    with zipfile.ZipFile(built[f"kubectl_trainjob-{version}-py3-none-any.whl"]) as plugin:
        theirs = {n for n in plugin.namelist() if ".dist-info/" not in n}
    assert not {n for n in names if ".dist-info/" not in n} & theirs
    assert "trainjob_api/views.py" in theirs
    scripts = dict(line.split(" = ") for line in entry_points.splitlines() if " = " in line)
    for command in ("trainjob-fleet", "trainjob-kueue-config", "trainjob-worker-secret"):
        module = scripts[command].split(":")[0]
        assert module.replace(".", "/") + ".py" in names, command
    project = tomllib.loads((assets.REPO / "pyproject.toml").read_text())["project"]
    (python,) = [line for line in meta.splitlines() if line.startswith("Requires-Python: ")]
    assert SpecifierSet(python.split(": ", 1)[1]) == SpecifierSet(project["requires-python"])
    requires = [
        line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist")
    ]
    assert sorted(map(Requirement, requires), key=str) == sorted(
        map(Requirement, project["dependencies"]), key=str
    )


@pytest.mark.parametrize("distribution", ["kubectl_trainjob", "trainjob_dispatcher"])
def test_pypi_would_take_each_wheel(built: dict[str, Path], distribution: str) -> None:
    """`twine check --strict`, PyPI's own checks of an upload's metadata (its description
    renders, its fields are there), on each wheel the workflow publishes."""
    wheel = built[f"{distribution}-{assets.chart_version()}-py3-none-any.whl"]
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "PASSED" in done.stdout, done.stdout + done.stderr


def plugin_wheel_again(version: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        return assets.plugin_wheel(Path(tmp), version).read_bytes()


def test_krew_installs_the_plugin_which_then_runs_on_its_own(
    built: dict[str, Path], tmp_path: Path
) -> None:
    """krew itself (v0.4.3, built from its module) installs the manifest with the archive, as
    `kubectl krew install --manifest=trainjob.yaml --archive=...` does for a user; the plugin
    installs its wheel on first use into its own environment, which holds nothing of the
    product, and answers --version; the second run is the installed one."""
    version = assets.chart_version()
    archive = built[f"kubectl-trainjob-{version}.tar.gz"]
    plugin = yaml.safe_load(built["trainjob.yaml"].read_text())
    (platform,) = plugin["spec"]["platforms"]
    assert platform["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert platform["uri"].endswith(f"/releases/download/v{version}/{archive.name}")
    builds.build_one(builds.BUILDS["krew"])
    root = tmp_path / "krew"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "KREW_ROOT": str(root)}
    done = subprocess.run(
        [str(builds.binary("krew")), "install", f"--manifest={built['trainjob.yaml']}",
         f"--archive={archive}"],
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    command = root / "bin" / "kubectl-trainjob"
    assert command.is_symlink()
    env["KUBECTL_TRAINJOB_PYTHON"] = sys.executable
    for first in (True, False):
        ran = subprocess.run(
            [str(command), "--version"], capture_output=True, text=True, env=env, timeout=240
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert ran.stdout.strip() == f"kubectl-trainjob {version}"
        assert ("first run: installing" in ran.stderr) is first
    own = command.resolve().parent / "python" / "bin" / "python"
    alone = subprocess.run(
        [str(own), "-c", "import importlib.util as u; print([m for m in "
         "('dispatcher', 'trainjob', 'kubecontrol', 'pycurl') if u.find_spec(m)])"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert alone.stdout.strip() == "[]", alone.stdout + alone.stderr
    refused = subprocess.run(
        [str(command), "--version"],
        capture_output=True,
        text=True,
        env={**env, "KUBECTL_TRAINJOB_PYTHON": "false"},
        timeout=60,
    )
    assert refused.returncode == 1 and "needs Python 3.10 or later" in refused.stderr
