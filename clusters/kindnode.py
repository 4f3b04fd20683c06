"""kind's node image, built offline the way the bed builds its images, for the kind path
(`./run kind`: clusters/kind/up.sh on three kind clusters, with podman as kind's engine).

kind builds its node image from a base image (Debian, systemd, containerd, runc, the CNI
plugins and kind's own files) and adds Kubernetes with its images preloaded, pulling from
registries at each step (`kind build node-image` cannot run offline). This is the same image,
assembled from what the bed has:

- a Debian 12 root made by mmdebstrap with the packages kind's base installs (Debian 12's
  systemd 252: the systemd of kind's Debian 13 base no longer boots on a cgroup v1 host);
- kind's files from its module (`images/base/files`: the entrypoint, the systemd units, the
  containerd and kubelet settings), set up as kind's base Dockerfile sets them up;
- the bed's builds of containerd, runc, kubelet, kubectl and kubeadm, Debian's CNI plugins;
- the images `kubeadm init` runs, imported into the node's containerd as kind's build does:
  one Debian 12 image with kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy
  (and iptables) and etcd, under each name kubeadm gives it; the bed's CoreDNS and pause.

What differs from kind's own image, each for this kind of host (no registry, cgroup v1, a
capability bounding set without CAP_SYS_RESOURCE):

- containerd's `restrict_oom_score_adj` is on (no process may lower its OOM score here), and
  its sandbox image is the bed's pause;
- the kubelet runs with `--fail-cgroupv1=false` (Kubernetes 1.35+ refuses cgroup v1 otherwise);
- the pod network is a static CNI configuration in the image (a bridge and host-local on
  kind's default pod subnet, which serves one-node clusters) instead of kindnetd, whose image
  no registry serves here; `/kind/manifests/default-cni.yaml` then only records that;
- etcd and CoreDNS are the bed's versions, so kind's configuration names their tags
  (`KIND_PATCHES`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusters import builds, images, nodes
from clusters.errors import BedError

K8S = builds.DEFAULT_K8S_VERSION
NODE_REPOSITORY = "localhost/trainjob-bed/kind-node"
ETCD_TAG = builds.ETCD_VERSION.lstrip("v") + "-0"  # kubeadm's form of an etcd image tag
POD_SUBNET = "10.244.0.0/16"  # kind's default
# What kind's base Dockerfile installs, less what serves only storage drivers (NFS, iSCSI,
# ext4 tools) and rootless nodes (fuse-overlayfs).
NODE_PACKAGES = ("systemd", "conntrack", "iptables", "nftables", "iproute2", "ethtool",
                 "util-linux", "mount", "kmod", "libseccomp2", "pigz", "bash",
                 "ca-certificates", "curl", "jq", "procps")  # fmt: skip
# Those of kind's base, and the bridge: the pod subnet is then on the node's own link, so
# that a packet for a pod gone does not leave the node (with ptp's routes of one address each,
# it follows the default route out).
CNI_PLUGINS = ("host-local", "loopback", "ptp", "portmap", "bridge")
CONTROL_PLANE_COMMANDS = {
    "kube-apiserver": "kube-apiserver",
    "kube-controller-manager": "kube-controller-manager",
    "kube-scheduler": "kube-scheduler",
    "kube-proxy": "kube-proxy",
    "etcd": "etcd",
}
# The names `kubeadm init` runs the control-plane image under (its default repository).
CONTROL_PLANE_NAMES = [
    *(f"registry.k8s.io/{name}:{K8S}" for name in
      ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")),
    f"registry.k8s.io/etcd:{ETCD_TAG}",
]  # fmt: skip
COREDNS_NAME = f"registry.k8s.io/coredns/coredns:{builds.COREDNS_VERSION}"
# kind's cluster configuration for these nodes: the tags of the bed's etcd and CoreDNS.
KIND_PATCHES = f"""\
kubeadmConfigPatches:
- |
  kind: ClusterConfiguration
  etcd:
    local:
      imageTag: "{ETCD_TAG}"
  dns:
    imageTag: "{builds.COREDNS_VERSION}"
"""
CONTROL_PLANE = images.Image(
    "debian",
    f"localhost/trainjob-bed/kind-control-plane:{K8S}",
    packages=("iptables", "conntrack", "ca-certificates"),
    suite="bookworm",
    env=("PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",),
)


def kind_source() -> Path:
    return builds.module_source_dir("kind", f"sigs.k8s.io/kind@{builds.KIND_VERSION}")


def _say(msg: str) -> None:
    print(f"[kind-node {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def key() -> str:
    """A hash of everything the node image is made of."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for name in ("kind", "kubeadm", "kubelet", "kubectl", "kubernetes", "etcd", "containerd",
                 "runc"):  # fmt: skip
        digest.update(builds.BUILDS[name].key().encode())
    for image in (images.COREDNS, images.PAUSE):
        digest.update(image.key().encode())
    return digest.hexdigest()[:12]


def archive() -> Path:
    return images.images_dir() / f"kind-node-{K8S}-{key()}.oci.tar"


def build() -> Path:
    """The node image's OCI archive, built unless the cache has it."""
    out = archive()
    if out.is_file():
        return out
    start = time.monotonic()
    for stale in out.parent.glob(f"kind-node-{K8S}-*.oci.tar"):
        stale.unlink()
    for name in ("kind", "kubeadm"):
        builds.build_one(builds.BUILDS[name])
    images.build(images.COREDNS)
    images.build(images.PAUSE)
    with tempfile.TemporaryDirectory(prefix="trainjob-kind-node.") as tmp:
        work = Path(tmp)
        control_plane = _control_plane_image(work)
        rootfs = work / "rootfs"
        _say("the node's root: Debian 12 and kind's files (mmdebstrap)")
        images.debian_rootfs(
            images.Image("debian", node_image(), packages=NODE_PACKAGES, suite="bookworm"), rootfs
        )
        _kind_files(rootfs)
        _binaries(rootfs)
        _settings(rootfs)
        _preload(rootfs, work, control_plane)
        _say("packing the node image")
        node = images.Image(
            "debian",
            node_image(),
            entrypoint=("/usr/local/bin/entrypoint", "/sbin/init"),
            env=("container=docker",),
        )
        tmp_out = out.with_suffix(".tmp")
        images.pack(rootfs, node, work, tmp_out)
        tmp_out.rename(out)
    _say(f"built {node_image()} in {time.monotonic() - start:.0f}s "
         f"({out.stat().st_size / 2**20:.0f} MiB): {out}")  # fmt: skip
    return out


def _control_plane_image(work: Path) -> Path:
    """One Debian 12 image with the control plane's commands in /usr/local/bin."""
    rootfs = work / "control-plane"
    _say("the control plane's image: Debian 12, iptables, the bed's Kubernetes and etcd")
    images.debian_rootfs(CONTROL_PLANE, rootfs)
    bin_dir = rootfs / "usr/local/bin"
    for name in CONTROL_PLANE_COMMANDS:
        shutil.copy2(builds.binary(name), bin_dir / name)
    out = work / "control-plane.oci.tar"
    (work / "cp-pack").mkdir()
    images.pack(rootfs, CONTROL_PLANE, work / "cp-pack", out)
    return out


def _kind_files(rootfs: Path) -> None:
    """kind's base files where its Dockerfile copies them, then its RUN steps."""
    files = kind_source() / "images" / "base" / "files"
    for src in sorted(p for p in files.rglob("*") if p.is_file()):
        rel = src.relative_to(files)
        if rel.parts[0] == "LICENSES":
            continue
        dest = rootfs / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        executable = rel.parts[:3] == ("usr", "local", "bin") or rel.parts[:2] == ("kind", "bin")
        dest.chmod(0o755 if executable else 0o644)
    lib = rootfs / "lib/systemd/system"
    for pattern in (
        "multi-user.target.wants/*",
        "local-fs.target.wants/*",
        "sockets.target.wants/*udev*",
        "sockets.target.wants/*initctl*",
        "basic.target.wants/*",
        "sysinit.target.wants/systemd-tmpfiles-setup.service",
    ):
        for path in lib.glob(pattern):
            path.unlink()
    for path in (rootfs / "etc/systemd/system").glob("*.wants/*"):
        path.unlink()
    with (rootfs / "etc/systemd/journald.conf").open("a") as conf:
        conf.write("ReadKMsg=no\n")
    init = rootfs / "sbin/init"
    if init.exists() or init.is_symlink():
        init.unlink()
    init.symlink_to("/usr/lib/systemd/systemd")
    systemctl = ["chroot", str(rootfs), "systemctl"]
    images.run([*systemctl, "enable", "kubelet.service", "containerd.service"])
    images.run([*systemctl, "enable", "undo-mount-hacks.service"])
    images.run([*systemctl, "mask", "systemd-binfmt.service"])
    (rootfs / "etc/kubernetes/manifests").mkdir(parents=True, exist_ok=True)


def _binaries(rootfs: Path) -> None:
    local_bin = rootfs / "usr/local/bin"
    for name in ("containerd", "containerd-shim-runc-v2", "ctr"):
        shutil.copy2(builds.binary(name), local_bin / name)
    (rootfs / "usr/local/sbin").mkdir(parents=True, exist_ok=True)
    shutil.copy2(builds.binary("runc"), rootfs / "usr/local/sbin/runc")
    for name in ("kubeadm", "kubelet", "kubectl"):
        shutil.copy2(builds.binary(name), rootfs / "usr/bin" / name)
    cni = rootfs / "opt/cni/bin"
    cni.mkdir(parents=True, exist_ok=True)
    for name in CNI_PLUGINS:
        shutil.copy2(Path("/usr/lib/cni") / name, cni / name)
    # containerd's base runtime spec, as kind's base makes it (`ctr oci spec`, kind's hook for
    # the product files, no rlimits).
    spec = json.loads(images.run([str(builds.binary("ctr")), "oci", "spec"]).stdout)
    spec.setdefault("hooks", {}).setdefault("createContainer", []).append(
        {"path": "/kind/bin/mount-product-files.sh"}
    )
    spec["process"].pop("rlimits", None)
    (rootfs / "etc/containerd/cri-base.json").write_text(json.dumps(spec, indent=2))
    (rootfs / "kind/version").write_text(K8S)


def _settings(rootfs: Path) -> None:
    config = rootfs / "etc/containerd/config.toml"
    text = config.read_text()
    for old, new in (
        ('sandbox_image = "registry.k8s.io/pause:3.10"', f'sandbox_image = "{images.PAUSE.name}"'),
        ("restrict_oom_score_adj = false", "restrict_oom_score_adj = true"),
    ):
        if old not in text:
            raise BedError(f"kind's containerd settings changed: no {old!r} in {config}")
        text = text.replace(old, new)
    config.write_text(text)
    kubelet = rootfs / "etc/default/kubelet"
    kubelet.write_text(kubelet.read_text().rstrip("\n") + " --fail-cgroupv1=false\n")
    net = rootfs / "etc/cni/net.d"
    net.mkdir(parents=True, exist_ok=True)
    (net / "10-kind-offline.conflist").write_text(nodes.bridge_network("kind-offline", POD_SUBNET))
    (rootfs / "kind/manifests").mkdir(parents=True, exist_ok=True)
    (rootfs / "kind/manifests/default-cni.yaml").write_text(
        "# The node image's pod network is a static CNI configuration\n"
        "# (/etc/cni/net.d/10-kind-offline.conflist): nothing to run.\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kind-offline-cni\n"
        f"  namespace: kube-system\ndata:\n  podSubnet: {POD_SUBNET}\n"
    )


def _preload(rootfs: Path, work: Path, control_plane: Path) -> None:
    """The images into the node's containerd store, as kind's build loads them: a containerd
    run on the image's /var/lib/containerd, `ctr images import --no-unpack`, pinned."""
    state = work / "containerd-state"
    state.mkdir()
    sock = state / "containerd.sock"
    (state / "config.toml").write_text(
        "version = 3\n"
        f"root = '{rootfs / 'var/lib/containerd'}'\n"
        f"state = '{state / 'run'}'\n"
        "disabled_plugins = ['io.containerd.grpc.v1.cri', 'io.containerd.cri.v1.runtime',"
        " 'io.containerd.cri.v1.images', 'io.containerd.nri.v1.nri',"
        " 'io.containerd.snapshotter.v1.btrfs', 'io.containerd.snapshotter.v1.zfs',"
        " 'io.containerd.snapshotter.v1.devmapper', 'io.containerd.snapshotter.v1.erofs']\n"
        f"[grpc]\n  address = '{sock}'\n"
    )
    log = (work / "containerd.log").open("w")
    proc = subprocess.Popen(
        [str(builds.binary("containerd")), "--config", str(state / "config.toml")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise BedError(f"the preload's containerd did not start: {work / 'containerd.log'}")
            time.sleep(0.2)
        ctr = (str(builds.binary("ctr")), "--address", str(sock), "-n", "k8s.io")
        loads = [
            (control_plane, CONTROL_PLANE.name, CONTROL_PLANE_NAMES),
            (images.archive(images.COREDNS), images.COREDNS.name, [COREDNS_NAME]),
            (images.archive(images.PAUSE), images.PAUSE.name, []),
        ]
        for path, name, aliases in loads:
            images.run([*ctr, "images", "import", "--label=io.cri-containerd.pinned=pinned",
                        "--all-platforms", "--no-unpack", "--digests", str(path)])  # fmt: skip
            for alias in aliases:
                images.run([*ctr, "images", "tag", "--force", name, alias])
        listed = images.run([*ctr, "images", "ls", "-q"]).stdout.split()
        _say("preloaded: " + ", ".join(sorted(n for n in listed if not n.startswith("sha256:"))))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    shutil.rmtree(rootfs / "var/lib/containerd/tmpmounts", ignore_errors=True)


def node_image() -> str:
    """The node image's name: its version and the key of what it is made of."""
    return f"{NODE_REPOSITORY}:{K8S}-{key()}"


def load_into_podman(path: Path) -> str:
    """The node image into podman's store (unless it is there); its name."""
    name = node_image()
    have = subprocess.run(["podman", "image", "exists", name], capture_output=True, check=False)
    if have.returncode != 0:
        image_id = images.run(["podman", "pull", "-q", f"oci-archive:{path}"]).stdout.split()[-1]
        images.run(["podman", "tag", image_id, name])
    return name


if __name__ == "__main__":
    print(load_into_podman(build()))
