"""A release's assets, built the one way the release workflow (.github/workflows/release.yml)
and `./run test` (tests/local/test_release_assets.py) both build them:

    python -m release.assets --image ghcr.io/OWNER/trainjob-multicluster --out out
    python -m release.assets --image ... --digest sha256:... --out out   # pinned by digest

- `crds.yaml`: our three CRDs (`kubectl kustomize crds`), an asset of their own so that
  removing the product (`kubectl delete -f manager.yaml`) never takes them, and every TrainJob
  and runtime with them;
- `manager.yaml`, `worker.yaml`, `worker-identity.yaml`: `kubectl kustomize deploy/<role>`
  but the CRDs, every other object a cluster needs from nothing (the namespace, RBAC, the
  Deployments, the webhooks, in an order `kubectl apply --server-side -f crds.yaml -f
  <role>.yaml` takes in one go), our image named `<image>:<version>` (or `<image>@<digest>`);
- `crds.tar.gz`: `crds/`, the CRDs themselves and their kustomization (never the link that
  `crds` is in a checkout), for `kubectl apply --server-side -k crds/`;
- `trainjob-multicluster-<version>.tgz`: the chart, `helm package`d (the workflow pushes it as
  an OCI artifact);
- `kubectl_trainjob-<version>-py3-none-any.whl`: the kubectl plugin's distribution (plugin/),
  for `pipx install`;
- `trainjob_dispatcher-<version>-py3-none-any.whl`: the product's (the controllers, and the
  commands operators run: trainjob-fleet, trainjob-kueue-config, trainjob-worker-secret), for
  `pipx install` on Python 3.11 to 3.13;
- `kubectl-trainjob-<version>.tar.gz` and `trainjob.yaml`: the plugin for krew (the wheel and
  plugin/krew/kubectl-trainjob, which installs it on first use) and its krew manifest, which
  names the archive by its URL on the release and its sha256;
- `SHA256SUMS`: the sha256 of each, as `sha256sum -c` reads it.

The version is the chart's (Chart.yaml's version and appVersion must agree). kubectl and helm
are taken from $KUBECTL / $HELM, else from PATH, else the bed's builds (`python -m clusters
build`).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "trainjob-multicluster"
CRDS = REPO / "crds"
PLUGIN = REPO / "plugin"
KREW_LAUNCHER = PLUGIN / "krew" / "kubectl-trainjob"
DEFAULT_IMAGE = "ghcr.io/trainjob-dev/trainjob-multicluster"
CRD = "CustomResourceDefinition"
ROLES = {
    "manager": "the manager cluster: the dispatcher, its webhooks and APIService",
    "worker": "a worker cluster: the worker controller and the manager's identity",
    "worker-identity": "a worker running Kubeflow Trainer: only the manager's identity",
}
Dict = dict[str, Any]


def tool(name: str) -> str:
    """kubectl or helm: $KUBECTL / $HELM, else the bed's build of it (the version `./run test`
    pins), else PATH (the release workflow's runner)."""
    from clusters import builds  # standard library only

    built = builds.binary(name)
    found = os.environ.get(name.upper()) or (str(built) if built.is_file() else shutil.which(name))
    if not found:
        raise SystemExit(f"{name} is not on PATH, nor built (python -m clusters build)")
    return found


def chart_version() -> str:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    if str(chart["version"]) != str(chart["appVersion"]):
        raise SystemExit(
            f"Chart.yaml: version {chart['version']} and appVersion {chart['appVersion']} differ"
        )
    return str(chart["version"])


def image_ref(image: str, version: str, digest: str | None) -> str:
    return f"{image}@{digest}" if digest else f"{image}:{version}"


def containers(obj: Dict) -> list[Dict]:
    """The containers of a Deployment's or a CronJob's pods (none for other kinds)."""
    spec: Dict = obj.get("spec") or {}
    if obj.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    pod: Dict = (spec.get("template") or {}).get("spec") or {}
    return [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]


def kustomized(directory: Path) -> list[Dict]:
    """The objects `kubectl kustomize <directory>` renders, in its order."""
    out = subprocess.run(
        [tool("kubectl"), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        name = directory.relative_to(REPO)
        raise SystemExit(f"kubectl kustomize {name} failed:\n{out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def crds_manifest(version: str) -> str:
    header = (
        f"# trainjob-multicluster {version}: the CRDs (TrainJob, TrainingRuntime,\n"
        "# ClusterTrainingRuntime), before manager.yaml or worker.yaml and on every upgrade:\n"
        "#   kubectl apply --server-side -f crds.yaml -f manager.yaml\n"
        "# Deleting them deletes every TrainJob and runtime of the cluster.\n"
    )
    return header + yaml.safe_dump_all(kustomized(CRDS), sort_keys=False)


def manifest(role: str, ref: str, version: str) -> str:
    """`kubectl kustomize deploy/<role>` without the CRDs (crds.yaml holds them), with our
    image as `ref`."""
    docs = [d for d in kustomized(REPO / "deploy" / role) if d["kind"] != CRD]
    for ctr in (ctr for doc in docs for ctr in containers(doc)):
        if str(ctr.get("image", "")).split("@")[0].rsplit(":", 1)[0] != DEFAULT_IMAGE:
            raise SystemExit(f"deploy/{role} runs an image that is not ours: {ctr.get('image')}")
        ctr["image"] = ref
    apply = f"-f {role}.yaml" if role == "worker-identity" else f"-f crds.yaml -f {role}.yaml"
    header = (
        f"# trainjob-multicluster {version}: {ROLES[role]}.\n"
        f"# Kueue first (docs/operators/install.md), then: kubectl apply --server-side {apply}\n"
        f"# kubectl delete -f {role}.yaml removes the product and keeps every TrainJob.\n"
    )
    return header + yaml.safe_dump_all(docs, sort_keys=False)


def crds_archive() -> bytes:
    """crds/ as files (gzip and tar headers without times or owners: the same bytes for the
    same CRDs)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(CRDS.iterdir()):
            if not path.is_file():
                continue
            data = path.read_bytes()
            info = tarfile.TarInfo(f"crds/{path.name}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), compresslevel=9, mtime=0)


def chart_package(out: Path, version: str) -> Path:
    done = subprocess.run(
        [tool("helm"), "package", str(CHART), "--destination", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    path = out / f"trainjob-multicluster-{version}.tgz"
    if done.returncode != 0 or not path.is_file():
        raise SystemExit(f"helm package failed:\n{done.stdout}{done.stderr}")
    return path


def source_date_epoch() -> str:
    """The time every built file carries (as the image's build takes it): $SOURCE_DATE_EPOCH,
    else the commit time of HEAD, else 1980-01-01 (the oldest a zip entry holds)."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return os.environ["SOURCE_DATE_EPOCH"]
    done = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%ct"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "315532800"


NOT_SOURCE = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".*cache")
# What the product's distribution is built from (pyproject.toml's packages, its readme).
PRODUCT = ("pyproject.toml", "README.md", "LICENSE", "dispatcher", "worker_controller",
           "trainjob", "kubecontrol")  # fmt: skip


def _wheel(out: Path, root: Path, parts: tuple[str, ...], distribution: str, version: str) -> Path:
    """`parts` of `root` as a wheel (pip wheel; its files' times fixed: the same bytes each
    build), built from a copy of what git would hold: a checkout's own build/ could carry
    stale modules."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source"
        source.mkdir()
        for part in parts:
            if (root / part).is_dir():
                shutil.copytree(root / part, source / part, ignore=NOT_SOURCE)
            else:
                shutil.copy2(root / part, source / part)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", tmp,
             str(source)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "SOURCE_DATE_EPOCH": source_date_epoch()},
        )  # fmt: skip
        wheels = list(Path(tmp).glob(f"{distribution}-{version}-*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            raise SystemExit(
                f"pip wheel {distribution} failed (version {version}?):\n{done.stderr}"
            )
        return Path(shutil.copy2(wheels[0], out))


def plugin_wheel(out: Path, version: str) -> Path:
    """plugin/ as a wheel: the kubectl plugin."""
    parts = tuple(sorted(p.name for p in PLUGIN.iterdir() if not NOT_SOURCE(str(PLUGIN), [p.name])))
    return _wheel(out, PLUGIN, parts, "kubectl_trainjob", version)


def product_wheel(out: Path, version: str) -> Path:
    """The product as a wheel: the controllers and the commands operators run
    (trainjob-fleet, trainjob-kueue-config, trainjob-worker-secret), for `pipx install`."""
    return _wheel(out, REPO, PRODUCT, "trainjob_dispatcher", version)


def krew_archive(wheel: Path) -> bytes:
    """The archive krew installs: the launcher, the wheel and the licence (no times, owners)."""
    members = [
        ("kubectl-trainjob", KREW_LAUNCHER.read_bytes(), 0o755),
        (wheel.name, wheel.read_bytes(), 0o644),
        ("LICENSE", (REPO / "LICENSE").read_bytes(), 0o644),
    ]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), compresslevel=9, mtime=0)


def krew_manifest(version: str, archive: Path) -> str:
    """The krew manifest of `archive` as the release serves it (krew-index's format)."""
    home = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["home"])
    plugin = {
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": "trainjob"},
        "spec": {
            "version": f"v{version}",
            "homepage": home,
            "shortDescription": "TrainJobs across a MultiKueue manager and its workers",
            "description": (
                "List, describe, follow the logs and progress of Kubeflow-style TrainJobs\n"
                "on a MultiKueue manager, and what their worker shows, through the\n"
                "manager's view.trainjob.dev API; a web view on a local port.\n"
            ),
            "caveats": (
                "Needs Python 3.10 or later: python3 on PATH (or KUBECTL_TRAINJOB_PYTHON).\n"
                "The first run installs its Python dependencies from PyPI into the\n"
                "plugin's own directory (pip's index settings apply).\n"
            ),
            "platforms": [
                {
                    "selector": {
                        "matchExpressions": [
                            {"key": "os", "operator": "In", "values": ["darwin", "linux"]}
                        ]
                    },
                    "uri": f"{home}/releases/download/v{version}/{archive.name}",
                    "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
                    "bin": "kubectl-trainjob",
                    "files": [{"from": "*", "to": "."}],
                }
            ],
        },
    }
    return yaml.dump(plugin, Dumper=_BlockDumper, sort_keys=False)


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks (`|`), as krew manifests are written by hand."""


_BlockDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def build(out: Path, image: str, digest: str | None = None) -> list[Path]:
    """Write every asset into `out`; returns them, SHA256SUMS last."""
    version = chart_version()
    ref = image_ref(image, version, digest)
    out.mkdir(parents=True, exist_ok=True)
    crds = out / "crds.yaml"
    crds.write_text(crds_manifest(version))
    assets = [crds]
    for role in ROLES:
        path = out / f"{role}.yaml"
        path.write_text(manifest(role, ref, version))
        assets.append(path)
    archive = out / "crds.tar.gz"
    archive.write_bytes(crds_archive())
    assets += [archive, chart_package(out, version)]
    wheel = plugin_wheel(out, version)
    krew = out / f"kubectl-trainjob-{version}.tar.gz"
    krew.write_bytes(krew_archive(wheel))
    manifest_file = out / "trainjob.yaml"
    manifest_file.write_text(krew_manifest(version, krew))
    assets += [wheel, krew, manifest_file, product_wheel(out, version)]
    sums = out / "SHA256SUMS"
    sums.write_text(
        "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in assets)
    )
    return [*assets, sums]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--image", default=DEFAULT_IMAGE, help="the image's repository")
    parser.add_argument("--digest", help="sha256:... to name the image by digest")
    parser.add_argument("--out", type=Path, default=REPO / "out")
    args = parser.parse_args(argv)
    for path in build(args.out, args.image, args.digest):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
