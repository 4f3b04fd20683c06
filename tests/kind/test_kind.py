"""The kind path, really: clusters/kind/up.sh makes three kind clusters with podman as kind's
engine and sets them up as the install runbook says, then the runbook's TrainJob runs to
Complete on the manager.

Only up.sh's offline overrides are given: the node image built offline
(clusters/kindnode.py), a kind configuration of one node per cluster with the tags of the
bed's etcd and CoreDNS, Kueue's release manifests rendered from its module (with the image of
Kueue built from it, `imagePullPolicy: IfNotPresent`), and the image archives of the product,
Kueue and the Python image the runbook's runtime names. `./run kind` runs it; `./run test`
does not (it costs about as much as the real-node suite). It skips where kind cannot run:
not root, or no podman.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from clusters import builds, images, kindnode
from clusters.config import REPO_ROOT
from clusters.kueue import release_manifests

pytestmark = [pytest.mark.kind, pytest.mark.timeout(3600)]

CLUSTERS = ("manager", "worker1", "worker2")
KIND = REPO_ROOT / "clusters" / "kind"


def _say(msg: str) -> None:
    print(f"[kind {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _run(argv: list[str], env: dict[str, str], timeout: float = 1800) -> str:
    start = time.monotonic()
    done = subprocess.run(
        argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )
    _say(f"{' '.join(argv[:3])}: {time.monotonic() - start:.0f} s\n{done.stderr[-6000:]}")
    assert done.returncode == 0, f"{argv} failed (exit {done.returncode}):\n{done.stderr[-6000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def host() -> None:
    if os.geteuid() != 0:
        pytest.skip("kind with podman runs rootful here: run as root")
    if shutil.which("podman") is None:
        pytest.skip("no podman (apt-get install podman)")
    modules = Path("/lib/modules")
    if not modules.is_dir():  # kind mounts it into every node; a kernel may have none
        _say(f"{modules} does not exist: made empty, for kind's node containers to mount")
        modules.mkdir(parents=True)


def test_kubeadm_finds_every_image_it_runs_in_the_node_image(host: None, tmp_path: Path) -> None:
    """What `kubeadm init` runs, asked of kubeadm itself with kind's configuration for these
    nodes (KIND_PATCHES): each image is one the node image preloads (the sandbox image
    aside: containerd's is the bed's pause)."""
    builds.build_one(builds.BUILDS["kubeadm"])
    (patch,) = yaml.safe_load(kindnode.KIND_PATCHES)["kubeadmConfigPatches"]
    config = {
        **yaml.safe_load(patch),
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kubernetesVersion": kindnode.K8S,
    }
    path = tmp_path / "kubeadm.yaml"
    path.write_text(yaml.safe_dump(config))
    listed = _run(
        [str(builds.binary("kubeadm")), "config", "images", "list", "--config", str(path)],
        dict(os.environ),
    ).split()
    runs = {name for name in listed if "/pause:" not in name}
    assert len(runs) == len(listed) - 1, listed
    assert runs <= {*kindnode.CONTROL_PLANE_NAMES, kindnode.COREDNS_NAME}, listed


def test_up_sh_makes_three_kind_clusters_where_the_runbook_trainjob_completes(
    host: None, tmp_path: Path
) -> None:
    figures: dict[str, object] = {}
    start = time.monotonic()
    builds.build_all(real=True)
    for name in ("kind", "kubeadm"):
        builds.build_one(builds.BUILDS[name])
    for image in (images.PRODUCT, images.KUEUE, images.PYTHON):
        images.build(image)
    node_image = kindnode.load_into_podman(kindnode.build())
    figures["builds_s"] = round(time.monotonic() - start)

    kueue = release_manifests(images.KUEUE.name)
    manifests = tmp_path / "kueue-manifests.yaml"
    manifests.write_text(kueue.replace("imagePullPolicy: Always", "imagePullPolicy: IfNotPresent"))
    config = tmp_path / "kind.yaml"
    config.write_text(
        "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n"
        + kindnode.KIND_PATCHES
    )
    out = REPO_ROOT / ".bed-kind"  # up.sh's default (down.sh removes it)
    conf = builds.cache_root() / "kind" / "containers.conf"
    env = {
        **os.environ,
        "PATH": os.pathsep.join(
            [
                str(builds.binary("kind").parent),
                str(builds.binary("kubectl").parent),
                str(Path(sys.executable).parent),
                os.environ["PATH"],
            ]
        ),
        "KIND_EXPERIMENTAL_PROVIDER": "podman",
        "NODE_IMAGE": node_image,
        "KIND_CONFIG": str(config),
        "KUEUE_MANIFESTS": str(manifests),
        "IMAGE_ARCHIVE": str(images.archive(images.PRODUCT)),
        "EXTRA_IMAGE_ARCHIVES": " ".join(
            str(images.archive(i)) for i in (images.KUEUE, images.PYTHON)
        ),
        "OUT": str(out),
        "CONTAINERS_CONF": str(_containers_conf(conf)),
    }
    _down(env)
    # kind's podman network without IPv6, as kind makes it where IPv6 is off: on the
    # dual-stack network kind makes here, podman 4.3's DNS (aardvark-dns 1.4) at times answered
    # a worker's name with its IPv6 address only, which the manager's IPv4 pods cannot reach.
    subprocess.run(["podman", "network", "rm", "kind"], env=env, capture_output=True, check=False)
    _run(["podman", "network", "create", "kind"], env)
    try:
        start = time.monotonic()
        _run(["bash", str(KIND / "up.sh")], env)
        figures["up_sh_s"] = round(time.monotonic() - start)
        for cluster in CLUSTERS:  # the public name the runbook's runtime gives the bed's Python
            for public in images.names_of(images.PYTHON) - {images.PYTHON.name}:
                _run(["podman", "exec", f"{cluster}-control-plane", "ctr", "-n", "k8s.io",
                      "images", "tag", images.PYTHON.name, public], env)  # fmt: skip

        kubectl = [str(builds.binary("kubectl")), "--kubeconfig", str(out / "manager")]
        start = time.monotonic()
        _run([*kubectl, "apply", "-f", "examples/install/trainjob.yaml"], env)
        _run([*kubectl, "-n", "team-a", "wait", "--for=condition=Complete",
              "trainjob/install-check", "--timeout=10m"], env, timeout=660)  # fmt: skip
        figures["trainjob_complete_s"] = round(time.monotonic() - start)
        trainjob = json.loads(
            _run([*kubectl, "-n", "team-a", "get", "trainjob", "install-check", "-o", "json"], env)
        )
        assert trainjob["status"]["clusterName"] in {"worker1", "worker2"}
        figures["ran_on"] = trainjob["status"]["clusterName"]
        figures["memory_mib"] = _memory(env)
    finally:
        if not os.environ.get("TJ_KIND_KEEP"):
            _down(env)
        _say("figures: " + json.dumps(figures))


def _containers_conf(path: Path) -> Path:
    """podman's settings for kind's node containers on this kind of host, in the file that
    CONTAINERS_CONF names (every podman and kind command of the run is given it):
    - the OCI runtime is the bed's runc: Debian 12's crun refuses a host that mounts the
      cgroup v2 hierarchy beside v1 ("cgroups in hybrid mode not supported");
    - the containers' open files and processes limits are this process's own, the latter at
      most the kernel's pid_max (which podman gives conmon): podman raises both for rootful
      containers by default, which needs CAP_SYS_RESOURCE, missing from this host's bounding
      set ("setrlimit RLIMIT_NOFILE: Operation not permitted")."""
    _, nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    _, nproc = resource.getrlimit(resource.RLIMIT_NPROC)
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    if nproc == resource.RLIM_INFINITY or nproc > pid_max:
        nproc = pid_max
    path.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
        '[engine]\nruntime = "runc"\n'
        f'[engine.runtimes]\nrunc = ["{builds.binary("runc")}"]\n'
    )
    return path


def _memory(env: dict[str, str]) -> dict[str, dict[str, int]]:
    """Each node container's memory in MiB, from its memory cgroup: what its processes hold
    (rss) and the page cache charged to it (cache: mostly image layers read)."""
    used = {}
    for cluster in CLUSTERS:
        stat = _run(
            ["podman", "exec", f"{cluster}-control-plane", "sh", "-c",
             "cat /sys/fs/cgroup/memory/memory.stat 2>/dev/null || cat /sys/fs/cgroup/memory.stat"],
            env,
        )  # fmt: skip
        fields = dict(line.split() for line in stat.splitlines() if line.count(" ") == 1)
        rss = int(fields.get("total_rss", fields.get("anon", 0)))
        cache = int(fields.get("total_cache", fields.get("file", 0)))
        used[cluster] = {"rss": rss // 2**20, "cache": cache // 2**20}
    return used


def _down(env: dict[str, str]) -> None:
    subprocess.run(["bash", str(KIND / "down.sh")], env=env, capture_output=True, check=False)
