"""Real nodes of the bed: one kubelet, containerd and kube-proxy per cluster, each node in a
network namespace and a cgroup of its own.

A node is a separate host as far as networking goes: the network namespace `tjbed-<cluster>`,
joined by a veth to the bed's host-only bridge. The API servers keep listening on 127.0.0.1:
the host rewrites connections from the nodes to the bridge's address (`HOST_IP`) onto
loopback (DNAT with `route_localnet`), so kubelets, pods and the product's controllers reach
every cluster of the bed at `https://HOST_IP:<its port>`, and nothing listens beyond the
machine. Each node has its own pod CIDR, routed from the host (the API servers call webhook
Pods and kubelets directly), its own iptables (kube-proxy's chains live in the namespace), its
own state directories and its own cgroup tree (`/tjbed-<cluster>`: the daemons in `daemons`,
the pods under kubelet's `cgroupRoot`), so `down` ends everything a node started, containers
included, by the PIDs in that tree.

The machine runs cgroup v1, which kubelet v1.35+ refuses unless `failCgroupV1: false`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from clusters import builds, images
from clusters.errors import BedError
from clusters.processes import Component, http_ok

if TYPE_CHECKING:
    from clusters.config import BedConfig

HOST_BRIDGE = "tjbed0"
HOST_IP = "10.200.0.1"
NODE_NET = "10.200.0.0/24"
SERVICE_CIDR = "10.96.0.0/16"
CLUSTER_DNS = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
NAT_CHAIN = "TJBED"  # the host's DNAT of node -> HOST_IP:<bed port> onto 127.0.0.1
CNI_BIN = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
RUN_DIR = Path("/run/tjbed")  # sockets and runtime state: short paths (sun_path is 108 bytes)
CGROUP_ROOT = Path("/sys/fs/cgroup")
KUBELET_PORT = 10250
KUBELET_HEALTH_PORT = 10248
PROXY_HEALTH_PORT = 10256
HOST_PACKAGES = {
    # command -> Debian package that brings it
    "iptables": "iptables",
    "pkg-config": "pkg-config",  # runc's build finds libseccomp with it
    "nsenter": "util-linux",
    "conntrack": "conntrack",
    "mmdebstrap": "mmdebstrap",
    "umoci": "umoci",
}


def _say(msg: str) -> None:
    print(f"[node {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and res.returncode != 0:
        raise BedError(f"`{' '.join(argv)}` failed (exit {res.returncode}): {res.stderr.strip()}")
    return res


def check_host() -> None:
    """Real nodes need root and a few Debian packages; say which are missing."""
    if os.geteuid() != 0:
        raise BedError("real nodes need root (network namespaces, iptables, cgroups, mounts)")
    missing = sorted({pkg for cmd, pkg in HOST_PACKAGES.items() if shutil.which(cmd) is None})
    if not (CNI_BIN / "bridge").is_file():
        missing.append("containernetworking-plugins")
    if not Path("/usr/include/seccomp.h").is_file():
        missing.append("libseccomp-dev")
    if missing:
        raise BedError(
            "real nodes need these Debian packages: "
            f"apt-get install {' '.join(missing)} (or ./run test, which installs them)"
        )
    if not Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists():
        raise BedError(
            "the kernel has no br_netfilter (kube-proxy needs it): modprobe br_netfilter"
        )


@dataclass(frozen=True)
class Node:
    """The one real node of one cluster of the bed."""

    cluster: str
    index: int  # the cluster's position in the bed config
    state: Path  # <bed state>/<cluster>/node: persistent state (kubelet, containerd root)

    @property
    def name(self) -> str:
        return f"{self.cluster}-real"

    @property
    def netns(self) -> str:
        return f"tjbed-{self.cluster}"

    @property
    def ip(self) -> str:
        return f"10.200.0.{10 + self.index}"

    @property
    def pod_cidr(self) -> str:
        return f"10.244.{self.index}.0/24"

    @property
    def veth(self) -> str:
        return f"tjbv{self.index}"  # host side; interface names are at most 15 bytes

    @property
    def run_dir(self) -> Path:
        return RUN_DIR / self.cluster

    @property
    def containerd_socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def cgroup(self) -> str:
        return f"tjbed-{self.cluster}"

    def wrap(self) -> list[str]:
        """The command prefix that puts a node daemon in the node's cgroup (every v1
        hierarchy) and network namespace; the daemon keeps the PID (sh and nsenter exec)."""
        procs = " ".join(
            f"{CGROUP_ROOT / h / self.cgroup / 'daemons' / 'cgroup.procs'}" for h in hierarchies()
        )
        return [
            "sh",
            "-c",
            f'for f in {procs}; do echo $$ > "$f"; done; exec "$@"',
            "sh",
            "nsenter",
            f"--net=/run/netns/{self.netns}",
            "--",
        ]


def hierarchies() -> list[str]:
    """The cgroup v1 hierarchies to place node processes in."""
    return sorted(
        p.name
        for p in CGROUP_ROOT.iterdir()
        if p.is_dir() and p.name != "unified" and (p / "cgroup.procs").exists()
    )


def nodes(config: BedConfig) -> list[Node]:
    if not config.real_nodes:
        return []
    return [
        Node(c.name, i, config.state_dir / c.name / "node") for i, c in enumerate(config.clusters)
    ]


# ---- one bed with real nodes at a time ---------------------------------------------------------

# The state directory of the bed whose real nodes are up: their names, addresses and the host
# bridge are the machine's, so a second bed with real nodes would take them over.
OWNER_FILE = RUN_DIR / "bed"


def _owner() -> str:
    return OWNER_FILE.read_text().strip() if OWNER_FILE.is_file() else ""


def claim(state: Path) -> None:
    """Make the bed at `state` the one with real nodes on this machine; refuse (BedError) while
    another bed's real nodes are up (a process alive in a node's cgroup tree). Nodes a bed
    left with no process alive (its run was killed, the machine restarted; this bed's own
    included) are taken down first: their mounts, network namespaces and cgroups outlive
    their processes, and nothing of them runs to be kept."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    owner = _owner()
    # Its nodes by their run directories (the index only names network parts: unused here).
    left = [Node(p.name, 0, Path(owner) / p.name / "node") for p in RUN_DIR.iterdir() if p.is_dir()]
    if owner and left and not any(_alive(node) for node in left):
        names = ", ".join(sorted(node.cluster for node in left))
        _say(
            f"the bed at {owner} left real nodes with no process alive ({names}): taking them down"
        )
        for node in left:
            _leftover_down(node)
        host_network_down()  # the bridge, and the routes to the old nodes' pods through it
    elif owner and left and owner != str(state.resolve()):
        raise BedError(
            f"the bed at {owner} has real nodes up (or coming up) on this machine (one bed "
            f"with real nodes at a time: they share the host bridge {HOST_BRIDGE} and its "
            f"addresses); take it down first: TJ_BED_STATE_DIR={owner} python -m clusters down"
        )
    OWNER_FILE.write_text(f"{state.resolve()}\n")


def release(state: Path) -> bool:
    """Whether the host side is the bed at `state`'s to take down (it claimed it, or nobody
    did); forgets the claim."""
    owner = _owner()
    if owner and owner != str(state.resolve()):
        return False
    OWNER_FILE.unlink(missing_ok=True)
    return True


# ---- the host side: bridge, NAT, routes -------------------------------------------------------


def host_network_up(config: BedConfig) -> None:
    """The host-only bridge and the DNAT of node -> HOST_IP:<bed ports> onto loopback."""
    if run("ip", "link", "show", HOST_BRIDGE, check=False).returncode != 0:
        run("ip", "link", "add", HOST_BRIDGE, "type", "bridge")
        run("ip", "addr", "add", f"{HOST_IP}/24", "dev", HOST_BRIDGE)
    run("ip", "link", "set", HOST_BRIDGE, "up")
    _sysctl(f"net/ipv4/conf/{HOST_BRIDGE}/route_localnet", "1")
    _sysctl("net/ipv4/ip_forward", "1")
    first = config.base_port
    last = config.base_port + config.port_stride * len(config.clusters) - 1
    ports = f"{first}:{last}"
    if run("iptables", "-t", "nat", "-L", NAT_CHAIN, "-n", check=False).returncode != 0:
        run("iptables", "-t", "nat", "-N", NAT_CHAIN)
    run("iptables", "-t", "nat", "-F", NAT_CHAIN)
    run(
        "iptables", "-t", "nat", "-A", NAT_CHAIN, "-d", HOST_IP, "-p", "tcp",
        "--dport", ports, "-j", "DNAT", "--to-destination", "127.0.0.1",
    )  # fmt: skip
    for hook, match in (("PREROUTING", ["-i", HOST_BRIDGE]), ("OUTPUT", ["-d", HOST_IP])):
        rule = [hook, "-t", "nat", *match, "-j", NAT_CHAIN]
        if run("iptables", "-C", *rule, check=False).returncode != 0:
            run("iptables", "-I", *rule)


def host_network_down() -> None:
    if not Path(f"/sys/class/net/{HOST_BRIDGE}").exists() or shutil.which("iptables") is None:
        return
    for hook, match in (("PREROUTING", ["-i", HOST_BRIDGE]), ("OUTPUT", ["-d", HOST_IP])):
        rule = [hook, "-t", "nat", *match, "-j", NAT_CHAIN]
        while run("iptables", "-C", *rule, check=False).returncode == 0:
            run("iptables", "-D", *rule)
    run("iptables", "-t", "nat", "-F", NAT_CHAIN, check=False)
    run("iptables", "-t", "nat", "-X", NAT_CHAIN, check=False)
    run("ip", "link", "del", HOST_BRIDGE, check=False)


def _sysctl(key: str, value: str, netns: str | None = None) -> None:
    if netns is None:
        Path("/proc/sys", key).write_text(value)
    else:
        run("ip", "netns", "exec", netns, "sh", "-c", f"echo {value} > /proc/sys/{key}")


def node_network_up(node: Node) -> None:
    """The node's namespace, its veth on the bridge, and the host's route to its pods."""
    if not Path(f"/run/netns/{node.netns}").exists():
        run("ip", "netns", "add", node.netns)
    ns = ["ip", "netns", "exec", node.netns]
    if run("ip", "link", "show", node.veth, check=False).returncode != 0:
        run("ip", "link", "add", node.veth, "type", "veth", "peer", "name", "eth0", "netns",
            node.netns)  # fmt: skip
        run("ip", "link", "set", node.veth, "master", HOST_BRIDGE)
        run(*ns, "ip", "addr", "add", f"{node.ip}/24", "dev", "eth0")
    run("ip", "link", "set", node.veth, "up")
    run(*ns, "ip", "link", "set", "lo", "up")
    run(*ns, "ip", "link", "set", "eth0", "up")
    run(*ns, "ip", "route", "replace", "default", "via", HOST_IP)
    run("ip", "route", "replace", node.pod_cidr, "via", node.ip, "dev", HOST_BRIDGE)
    _sysctl("net/ipv4/ip_forward", "1", node.netns)
    # Pod -> Service -> pod on the same bridge goes through kube-proxy's rules.
    _sysctl("net/bridge/bridge-nf-call-iptables", "1")
    for h in hierarchies():
        for d in (CGROUP_ROOT / h / node.cgroup, CGROUP_ROOT / h / node.cgroup / "daemons"):
            d.mkdir(exist_ok=True)
            if h == "cpuset":  # a new cpuset has no CPUs and no memory nodes: no task may join
                for key in ("cpuset.cpus", "cpuset.mems"):
                    if not (d / key).read_text().strip():
                        (d / key).write_text((d.parent / key).read_text())


def node_network_down(node: Node) -> None:
    run("ip", "route", "del", node.pod_cidr, check=False)
    run("ip", "link", "del", node.veth, check=False)
    run("ip", "netns", "del", node.netns, check=False)


# ---- configuration files -----------------------------------------------------------------------


def write_configs(
    node: Node,
    ca: Path,
    serving: tuple[Path, Path],
    kubelet_kubeconfig: Path,
    proxy_kubeconfig: Path,
) -> None:
    """containerd's, the CNI's, kubelet's and kube-proxy's configuration of one node."""
    for d in (node.state, node.run_dir, node.state / "cni", node.state / "pod-logs"):
        d.mkdir(parents=True, exist_ok=True)
    (node.state / "containerd.toml").write_text(containerd_config(node))
    (node.state / "cni" / "10-bridge.conflist").write_text(cni_config(node))
    (node.state / "resolv.conf").write_text("# the bed has no upstream DNS\n")
    (node.state / "kubelet.yaml").write_text(yaml.safe_dump(kubelet_config(node, ca, serving)))
    (node.state / "kube-proxy.yaml").write_text(
        yaml.safe_dump(proxy_config(node, proxy_kubeconfig))
    )


def containerd_config(node: Node) -> str:
    disabled = [
        # Neither the tools nor the kernel modules for these; the NRI socket path is fixed.
        "io.containerd.snapshotter.v1.btrfs",
        "io.containerd.snapshotter.v1.zfs",
        "io.containerd.snapshotter.v1.devmapper",
        "io.containerd.snapshotter.v1.erofs",
        "io.containerd.nri.v1.nri",
        "io.containerd.tracing.processor.v1.otlp",
    ]
    return f"""\
version = 4
root = '{node.state / "containerd"}'
state = '{node.run_dir / "state"}'
imports = []
disabled_plugins = {disabled!r}
[grpc]
  address = '{node.containerd_socket}'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '{images.PAUSE.name}'
[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  # No process may lower its OOM score without CAP_SYS_RESOURCE, which this machine's
  # bounding set lacks: pods get at least containerd's own score instead of, e.g., the
  # sandbox's -998 (else runc fails: "failed to update /proc/self/oom_score_adj").
  restrict_oom_score_adj = true
  enable_cdi = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    BinaryName = '{builds.binary("runc")}'
    Root = '{node.run_dir / "runc"}'
    SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['{CNI_BIN}']
    conf_dir = '{node.state / "cni"}'
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
"""


def cni_config(node: Node) -> str:
    return bridge_network("tjbed", node.pod_cidr, node.state / "ipam")


def bridge_network(name: str, subnet: str, ipam_dir: Path | None = None) -> str:
    """A CNI network of one bridge (cni0) on `subnet`, the node its gateway, traffic out
    masqueraded, ports mapped: a real node's, and a kind node's (clusters/kindnode.py)."""
    ipam: dict[str, Any] = {
        "type": "host-local",
        "ranges": [[{"subnet": subnet}]],
        "routes": [{"dst": "0.0.0.0/0"}],
    }
    if ipam_dir is not None:
        ipam["dataDir"] = str(ipam_dir)
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": name,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": True,
                    "hairpinMode": True,
                    "ipam": ipam,
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )


def kubelet_config(node: Node, ca: Path, serving: tuple[Path, Path]) -> dict[str, Any]:
    """As kubeadm configures a kubelet: clients by certificate or by a token the API server
    reviews, each request authorised by the API server; its serving certificate from the
    cluster CA, so that metrics-server can check it."""
    cert, key = serving
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # this machine runs cgroup v1
        "oomScoreAdj": 0,  # -999 needs CAP_SYS_RESOURCE (see containerd_config)
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{node.cgroup}",
        "address": node.ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": node.ip,
        "healthzPort": KUBELET_HEALTH_PORT,
        "tlsCertFile": str(cert),
        "tlsPrivateKeyFile": str(key),
        "authentication": {
            "anonymous": {"enabled": False},
            # metrics-server's ServiceAccount token (nodes/metrics)
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        # The API server's kubelet-client certificate (logs, exec) is in system:masters.
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [CLUSTER_DNS],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(node.state / "resolv.conf"),
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
        "podLogsDir": str(node.state / "pod-logs"),
        "failSwapOn": False,
        "staticPodPath": "",
        "registerNode": True,
        "serializeImagePulls": False,
        # Images come from imports, never from a registry: image GC must never remove one.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "maxPods": 110,
        "kubeAPIQPS": 50,
        "kubeAPIBurst": 100,
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
    }


def proxy_config(node: Node, kubeconfig: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node.name,
        "bindAddress": node.ip,
        "healthzBindAddress": f"{node.ip}:{PROXY_HEALTH_PORT}",
        "metricsBindAddress": "127.0.0.1:10249",  # inside the node's namespace
        "oomScoreAdj": 0,  # -999 needs CAP_SYS_RESOURCE (see containerd_config)
        "clusterCIDR": node.pod_cidr,
        # The conntrack table size is the host's, not the namespace's: leave it alone.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


# ---- the node's processes --------------------------------------------------------------------


def components(node: Node, kubelet_kubeconfig: Path, proxy_kubeconfig: Path) -> list[Component]:
    """containerd, kubelet and kube-proxy of one node, in start order."""
    d = node.state
    env = {
        "PATH": f"{builds.binary_dir(builds.BUILDS['containerd'])}:/usr/sbin:/usr/bin:/sbin:/bin"
    }
    return [
        Component(
            node.cluster,
            "containerd",
            [
                str(builds.binary("containerd")),
                f"--config={d / 'containerd.toml'}",
                f"--address={node.containerd_socket}",
            ],
            [],
            lambda: _unix_listens(node.containerd_socket),
            d,
            env=env,
            wrapper=node.wrap(),
        ),
        Component(
            node.cluster,
            "kubelet",
            [
                str(builds.binary("kubelet")),
                f"--config={d / 'kubelet.yaml'}",
                f"--kubeconfig={kubelet_kubeconfig}",
                f"--hostname-override={node.name}",
                f"--node-ip={node.ip}",
                f"--root-dir={d / 'kubelet'}",
                f"--cert-dir={d / 'kubelet-pki'}",
                "--node-labels=type=real,bed.trainjob.dev/pool=real",
                "--v=1",
            ],
            [],
            lambda: http_ok(f"http://{node.ip}:{KUBELET_HEALTH_PORT}/healthz"),
            d,
            env=env,
            wrapper=node.wrap(),
        ),
        Component(
            node.cluster,
            "kube-proxy",
            [str(builds.binary("kube-proxy")), f"--config={d / 'kube-proxy.yaml'}", "--v=1"],
            [],
            lambda: http_ok(f"http://{node.ip}:{PROXY_HEALTH_PORT}/livez"),
            d,
            env=env,
            wrapper=node.wrap(),
        ),
    ]


def _unix_listens(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def ctr(node: Node, *args: str) -> subprocess.CompletedProcess[str]:
    return run(
        str(builds.binary("ctr")), "--address", str(node.containerd_socket), "-n", "k8s.io", *args
    )


def import_images(node: Node) -> None:
    """Every image of the bed (images.ALL) into the node's containerd, unless it has it."""
    have = set(ctr(node, "images", "ls", "-q").stdout.split())
    for image in images.ALL:
        if image.name not in have:
            import_image(node, image)
    # The public images the examples and the runbook name, as the bed's own under their names
    # (no registry is reached): a manifest applied as written runs.
    for public, stand_in in images.STAND_INS.items():
        if public not in have:
            ctr(node, "images", "tag", stand_in, public)


def import_image(node: Node, image: images.Image) -> None:
    """One image into the node's containerd (it and its binary built first when the cache
    has none)."""
    if image.kind == "binary":
        builds.build_one(next(b for b in builds.BUILDS.values() if image.binary in b.packages))
    images.build(image)
    start = time.monotonic()
    ctr(node, "images", "import", "--no-unpack=false", str(images.archive(image)))
    _say(f"{node.cluster}: imported {image.name} ({time.monotonic() - start:.1f}s)")


# ---- taking a node down ----------------------------------------------------------------------


def kill_cgroup_tree(node: Node, timeout: float = 20.0) -> int:
    """SIGKILL every process in the node's cgroup tree (daemons, shims, containers) until it
    is empty, then remove the tree; returns how many processes there were."""
    base = _pids_cgroup(node)
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        pids = _cgroup_pids(base)
        if not pids:
            break
        seen |= pids
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise BedError(f"{node.cluster}: processes {sorted(pids)} survive SIGKILL")
        time.sleep(0.1)
    for h in hierarchies():
        root = CGROUP_ROOT / h / node.cgroup
        # os.walk skips a directory that goes while it walks (kubelet's pod cgroups may);
        # Path.rglob raised FileNotFoundError there and left the tree half removed.
        for here, _dirs, _files in os.walk(root, topdown=False):
            with contextlib.suppress(OSError):
                os.rmdir(here)
    return len(seen)


def _pids_cgroup(node: Node) -> Path:
    """The root of the node's cgroup tree in a hierarchy every process of it is in."""
    base = CGROUP_ROOT / "pids" / node.cgroup
    return base if base.exists() else CGROUP_ROOT / "memory" / node.cgroup


def _cgroup_pids(base: Path) -> set[int]:
    pids: set[int] = set()
    for here, _dirs, files in os.walk(base):  # nothing when it does not exist
        if "cgroup.procs" in files:
            with contextlib.suppress(OSError, ValueError):
                pids |= {int(p) for p in Path(here, "cgroup.procs").read_text().split()}
    return pids


def unmount_under(*roots: Path) -> int:
    """Unmount every mount below `roots` (container rootfs, volumes, netns), deepest first."""
    prefixes = [str(r.resolve()) + "/" for r in roots]
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        target = line.split()[4].replace("\\040", " ")
        if any(target.startswith(p) for p in prefixes):
            mounts.append(target)
    for target in sorted(set(mounts), key=lambda t: -t.count("/")):
        run("umount", "-l", target, check=False)
    return len(mounts)


def node_down(node: Node) -> None:
    """Everything of the node gone: processes, mounts, network, cgroups (state stays unless
    the caller removes it). Nothing to do on a bed without real nodes."""
    if not (
        Path(f"/run/netns/{node.netns}").exists()
        or node.run_dir.exists()
        or any((CGROUP_ROOT / h / node.cgroup).exists() for h in hierarchies())
    ):
        return
    killed = kill_cgroup_tree(node)
    unmounted = unmount_under(node.state, node.run_dir)
    node_network_down(node)
    shutil.rmtree(node.run_dir, ignore_errors=True)
    if killed or unmounted:
        _say(f"{node.cluster}: node down ({killed} processes, {unmounted} mounts)")


# A node's run directory is made just before its containerd starts: one younger than this
# with no process yet may be a bed coming up, not one left behind.
COMING_UP_SECONDS = 120.0


def _alive(node: Node) -> bool:
    """Whether a process runs in the node's cgroup tree, or it may be about to."""
    with contextlib.suppress(OSError):
        if time.time() - node.run_dir.stat().st_mtime < COMING_UP_SECONDS:
            return True
    return bool(_cgroup_pids(_pids_cgroup(node)))


def _leftover_down(node: Node) -> None:
    """What a node whose processes are all gone left behind, when its bed's config (so its
    index, veth and address) is not at hand: deleting its namespace takes its veth pair. Its
    state's mounts are unmounted only where that directory still is what the bed made: a
    symbolic link on its way (the directory is another bed's, since gone or made again)
    could point the unmounting anywhere on the host."""
    kill_cgroup_tree(node)  # no process left: removes the cgroup tree
    state = node.state if node.state.resolve() == node.state.absolute() else None
    if state is None:
        _say(f"{node.cluster}: {node.state} leads elsewhere by a symbolic link: left mounted")
    unmount_under(*(r for r in (state, node.run_dir) if r is not None))
    run("ip", "netns", "del", node.netns, check=False)
    shutil.rmtree(node.run_dir, ignore_errors=True)


# The socket every kubelet of this host binds for device plugins (kubelet's fixed path).
DEVICE_PLUGIN_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")


def wait_device_plugin_socket(since: float, timeout: float = 60.0) -> None:
    """Wait until a kubelet started at `since` (time.time()) has bound the device-plugin
    socket (it makes the file anew); past `timeout`, go on (the node's Ready wait says more)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError):
            # a file's times come from the kernel's coarse clock: a few ms behind time.time()
            if DEVICE_PLUGIN_SOCKET.stat().st_mtime >= since - 0.05:
                return
        time.sleep(0.2)
