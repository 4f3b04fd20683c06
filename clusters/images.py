"""The container images of the bed's real nodes, their names in one place, built offline
(no registry is reachable) and cached by a hash of their inputs.

- the product's image, from the repository's Dockerfile by deploy/image/build.sh (buildah,
  a Debian base made offline; its name is the chart's);
- the pause image and CoreDNS's, each one static binary of ours or theirs (clusters/gomod);
- Kueue's, under the name its release manifests give it, for Kueue installed as users install
  it (tests/real/test_runbook.py); metrics-server's likewise, on the workers;
- a Debian 12 image with its python3, standing in for the public python:3.11-slim-bookworm;
- the training image: Debian 13 with Python 3, PyTorch 2.6 for CPU (Debian's python3-torch,
  built with gloo; Debian 12's 1.13 has a torchrun that fails on its Python 3.11), Open MPI 5
  with mpi4py and OpenSSH, set up as Kubeflow Trainer's MPI runtime images are (a user
  `mpiuser`, uid 1000, whose own sshd listens on port 2222: clusters/training_image/mpiuser/
  and ssh/). Debian builds PyTorch without libuv, which torchrun's TCPStore asks for: the image
  sets USE_LIBUV=0 and loads clusters/training_image/python/ so that TCPStore follows it.

Each is an OCI image layout archive whose index names the image (the
`io.containerd.image.name` annotation), which `ctr images import` reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusters import builds, chart
from clusters.config import REPO_ROOT
from clusters.errors import BedError

DEBIAN_MIRROR = "http://deb.debian.org/debian"
TRAINING_FILES = Path(__file__).resolve().parent / "training_image"
# What the product's image holds: a change to any of these rebuilds it.
# (what the Dockerfile copies and builds it with; the bed's own code is not in it)
PRODUCT_SOURCES = ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "LICENSE",
                   "kubecontrol", "trainjob", "dispatcher", "worker_controller", "plugin",
                   "deploy/image")  # fmt: skip


def product_image_name() -> str:
    """The product's image as the chart names it (values.yaml), fully qualified."""
    name = chart.image_reference()
    first = name.split("/")[0]
    if "/" not in name:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name


@dataclass(frozen=True)
class Image:
    kind: str  # product | binary | debian
    name: str  # fully qualified, as containerd stores it
    binary: str = ""  # binary: the command from builds.BUILDS
    path: str = ""  # binary: where the image holds it (default: /<binary>)
    user: str = ""  # the image's user (default: root)
    entrypoint: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()  # debian: what mmdebstrap includes
    suite: str = ""  # debian: the release
    files: dict[str, Path] = field(default_factory=dict)  # debian: image path -> source dir
    env: tuple[str, ...] = ()
    customize: tuple[str, ...] = ()  # debian: shell commands run on the root ($1) at the end

    def key(self) -> str:
        digest = hashlib.sha256(
            json.dumps(
                [self.kind, self.name, self.packages, self.suite, self.env, self.customize]
                + ([self.path, self.user] if self.path or self.user else [])
            ).encode()
        )
        if self.kind == "binary":
            build = next(b for b in builds.BUILDS.values() if self.binary in b.packages)
            digest.update(build.key().encode())
        for src in self._sources():
            for path in sorted(p for p in src.rglob("*") if p.is_file()) if src.is_dir() else [src]:
                if "__pycache__" in path.parts:
                    continue
                digest.update(str(path.relative_to(REPO_ROOT)).encode())
                digest.update(path.read_bytes())
        return digest.hexdigest()[:12]

    def _sources(self) -> list[Path]:
        if self.kind == "product":
            return [REPO_ROOT / s for s in PRODUCT_SOURCES]
        return list(self.files.values())


def release_binary(name: str, binary: str, path: str, user: str) -> Image:
    """An upstream release image under the name its manifests give it: the one static binary
    its release holds (built from its module, builds.BUILDS), run as `user`."""
    return Image("binary", name, binary=binary, path=path, user=user, entrypoint=(path,))


PAUSE = Image("binary", f"localhost/trainjob-bed/pause:{builds.PAUSE_VERSION}", binary="pause",
              entrypoint=("/pause",))  # fmt: skip
COREDNS = Image(
    "binary",
    f"localhost/trainjob-bed/coredns:{builds.COREDNS_VERSION}",
    binary="coredns",
    entrypoint=("/coredns",),
)
TRAINING = Image(
    "debian",
    "localhost/trainjob-bed/torch-cpu:2.6.0",
    packages=(
        "python3",
        "python3-torch",
        "openmpi-bin",
        "python3-mpi4py",
        "openssh-client",
        "openssh-server",
    ),
    suite="trixie",
    files={
        "/usr/lib/python3/dist-packages": TRAINING_FILES / "python",
        "/etc/ssh": TRAINING_FILES / "ssh",
        "/home/mpiuser": TRAINING_FILES / "mpiuser",
    },
    # mpiuser as the MPI runtime images have it (mpi-operator's base image: `useradd -m`, the
    # first user, uid 1000); its sshd's host key is the TrainJob's mounted key.
    customize=("chroot $1 useradd --create-home --uid 1000 mpiuser",),
    env=("PATH=/usr/local/bin:/usr/bin:/bin", "USE_LIBUV=0", "PYTHONDONTWRITEBYTECODE=1"),
)
PRODUCT = Image("product", product_image_name())
# Kueue as its release manifests name it (registry.k8s.io/kueue/kueue:<version>), built from its
# module as its own release builds it: the static manager binary at /manager, user 65532, no
# other file (its release image is distroless/static with that binary).
KUEUE = release_binary(
    f"registry.k8s.io/kueue/kueue:{builds.KUEUE_VERSION}", "kueue", "/manager", "65532:65532"
)
# metrics-server as its release manifests name it, built from its module as its release builds
# it: the static binary at /metrics-server, user 65534 (its release image is distroless/static).
METRICS_SERVER = release_binary(
    f"registry.k8s.io/metrics-server/metrics-server:{builds.METRICS_SERVER_VERSION}",
    "metrics-server",
    "/metrics-server",
    "65534:65534",
)
# Kubeflow Trainer's controller and JobSet's as their Helm charts name them, each built from its
# module as its release builds it: the static manager binary at /manager, user 65532 (their
# release images are distroless with that binary). Not in ALL: only a worker that runs Trainer
# needs them (nodes.import_image).
TRAINER = release_binary(
    f"ghcr.io/kubeflow/trainer/trainer-controller-manager:{builds.TRAINER_API_VERSION}",
    "trainer-controller-manager-v2.3",
    "/manager",
    "65532:65532",
)
JOBSET = release_binary(
    f"registry.k8s.io/jobset/jobset:{builds.JOBSET_VERSION}",
    "jobset-controller-manager",
    "/manager",
    "65532:65532",
)
# Debian 12's Python 3.11, as the public python:3.11-slim-bookworm the runbook's check runtime
# names: an image of its own, so that no other image answers to two names (the kubelet reports
# a container's image by the first name its image has).
PYTHON = Image(
    "debian",
    "localhost/trainjob-bed/python:3.11-bookworm",
    packages=("python3",),
    suite="bookworm",
    env=("PATH=/usr/local/bin:/usr/bin:/bin",),
)
ALL = (PAUSE, COREDNS, TRAINING, PRODUCT, PYTHON, KUEUE, METRICS_SERVER)
# Public images the examples name, and the bed's own with the same tools in their place (the
# bed reaches no registry; real nodes also hold them under the public names): PyTorch with
# torchrun, python3 and bash; Trainer's DeepSpeed runtime (Open MPI, mpi4py, NumPy, mpiuser's
# sshd on port 2222); Debian 12's Python 3.11.
STAND_INS = {
    "docker.io/pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime": TRAINING.name,
    "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0": TRAINING.name,
    "docker.io/library/python:3.11-slim-bookworm": PYTHON.name,
}


def names_of(image: Image) -> set[str]:
    """Every name a real node holds `image` under: its own and the public ones it stands in for."""
    return {image.name} | {public for public, own in STAND_INS.items() if own == image.name}


def for_the_bed(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`docs` with each container image the bed has a stand-in for replaced by it."""

    def swap(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: STAND_INS.get(v, v) if k == "image" and isinstance(v, str) else swap(v)
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [swap(v) for v in node]
        return node

    return [swap(d) for d in docs]


def images_dir() -> Path:
    return builds.cache_root() / "images"


def archive(image: Image) -> Path:
    slug = image.name.rsplit("/", 1)[-1].replace(":", "-")
    return images_dir() / f"{slug}-{image.key()}.oci.tar"


def _say(msg: str) -> None:
    print(f"[image {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build_all() -> dict[str, float]:
    """Build every image that is not in the cache; return seconds per image (0: cached)."""
    times = {}
    for image in ALL:
        times[image.name] = build(image)
    return times


def build(image: Image) -> float:
    out = archive(image)
    if out.is_file():
        return 0.0
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    _say(f"building {image.name} (cache: {out})")
    for stale in out.parent.glob(out.name.rsplit("-", 1)[0] + "-*.oci.tar"):
        stale.unlink()  # the same image from older inputs
    tmp = out.with_suffix(".tmp")
    if image.kind == "product":
        run(
            ["bash", str(REPO_ROOT / "deploy/image/build.sh")],
            env={"OUT": str(tmp), "IMAGE": image.name},
        )
    else:
        with tempfile.TemporaryDirectory(prefix="trainjob-image.") as work:
            rootfs = Path(work) / "rootfs"
            if image.kind == "binary":
                rootfs.mkdir()
                target = rootfs / (image.path or image.binary).lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(builds.binary(image.binary), target)
            else:
                debian_rootfs(image, rootfs)
            pack(rootfs, image, Path(work), tmp)
    tmp.rename(out)
    took = time.monotonic() - start
    _say(f"built {image.name} in {took:.0f}s ({out.stat().st_size / 2**20:.0f} MiB)")
    return took


def debian_rootfs(image: Image, rootfs: Path) -> None:
    run(
        [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            f"--include={','.join(image.packages)}",
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-exclude=/usr/share/man/*",
            "--dpkgopt=path-exclude=/usr/share/locale/*",
            "--customize-hook=rm -rf $1/var/lib/apt/lists/* $1/var/cache/apt/*",
            *(f"--customize-hook={hook}" for hook in image.customize),
            image.suite,
            str(rootfs),
            DEBIAN_MIRROR,
        ]
    )
    for target, source in image.files.items():
        dest = rootfs / target.lstrip("/")
        shutil.copytree(
            source, dest, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True
        )


def pack(rootfs: Path, image: Image, work: Path, out: Path) -> None:
    """`rootfs` as a one-layer OCI image named `image.name`, archived at `out`."""
    layout = work / "oci"
    tag = image.name.rsplit(":", 1)[1]
    ref = f"{layout}:{tag}"
    run(["umoci", "init", "--layout", str(layout)])
    run(["umoci", "new", "--image", ref])
    bundle = work / "bundle"
    run(["umoci", "unpack", "--image", ref, str(bundle)])
    shutil.rmtree(bundle / "rootfs")
    rootfs.rename(bundle / "rootfs")
    run(["umoci", "repack", "--image", ref, str(bundle)])
    config = ["umoci", "config", "--image", ref]
    for arg in image.entrypoint:
        config.append(f"--config.entrypoint={arg}")
    for env in image.env:
        config.append(f"--config.env={env}")
    if image.user:
        config.append(f"--config.user={image.user}")
    run(config)
    run(["umoci", "gc", "--layout", str(layout)])
    index_path = layout / "index.json"
    index = json.loads(index_path.read_text())
    for manifest in index["manifests"]:
        manifest.setdefault("annotations", {})["io.containerd.image.name"] = image.name
    index_path.write_text(json.dumps(index))
    run(["tar", "-C", str(layout), "-cf", str(out), "."])


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a build step; a failure is a `BedError` with the step's last lines."""
    res = subprocess.run(
        argv, capture_output=True, text=True, check=False, env={**os.environ, **(env or {})}
    )
    if res.returncode != 0:
        tail = "\n".join((res.stdout + res.stderr).splitlines()[-20:])
        raise BedError(f"`{' '.join(argv[:3])} ...` failed (exit {res.returncode}):\n{tail}")
    return res
