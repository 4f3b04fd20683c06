"""Pinned Go builds of the bed's binaries, cached outside the repo and keyed by version."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from clusters.errors import BedError

GOMOD_DIR = Path(__file__).resolve().parent / "gomod"
MIN_GO = (1, 26)

# The Kubernetes the bed runs. TJ_K8S_VERSION picks another control plane for the version
# matrix (`./run matrix`, docs/operators/compatibility.md): one that has a wrapper module
# clusters/gomod/kubernetes-<version>; kubectl and the real nodes' kubelet stay at the default.
DEFAULT_K8S_VERSION = "v1.36.3"
K8S_VERSION = os.environ.get("TJ_K8S_VERSION") or DEFAULT_K8S_VERSION
K8S_MODULE = "kubernetes" if K8S_VERSION == DEFAULT_K8S_VERSION else f"kubernetes-{K8S_VERSION}"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"
KUEUE_VERSION = "v0.19.2"
# The upstream pipeline the comparison benchmark runs: the versions Kueue v0.19.2's
# go.mod names.
TRAINER_VERSION = "v2.2.1"
# The Trainer release whose API and stock runtimes the product follows: the tests take its
# ClusterTrainingRuntimes from this module's manifests (tests/support/stock_runtimes.py).
TRAINER_API_VERSION = "v2.3.0"
JOBSET_VERSION = "v0.12.0"
# Real nodes (`python -m clusters up --real-nodes`): kubelet and kube-proxy come from the
# Kubernetes module above; containerd 2 (kubelet v1.36 needs it) and CoreDNS from theirs.
CONTAINERD_VERSION = "v2.3.7"
COREDNS_VERSION = "v1.14.7"
# Debian 12's runc 1.1 cannot start what containerd 2 asks for ("can't get final child's PID
# from pipe"), nor can its crun 1.8 ("unknown version specified").
RUNC_VERSION = "v1.3.6"
# The workers of the real-node bed serve the metrics API (pods' CPU and memory in the web view).
METRICS_SERVER_VERSION = "v0.8.0"
# helm lints and renders the chart (charts/), and installs it on the bed.
HELM_VERSION = "v3.22.0"
PAUSE_VERSION = "1.0"  # our own (clusters/gomod/pause)
# actionlint checks the release workflow (.github/workflows) in `./run test`.
ACTIONLINT_VERSION = "v1.7.12"
KIND_VERSION = "v0.33.0"
# tsc checks the web view's scripts against the story's types
# (plugin/kubectl_trainjob/ui/story.d.ts) in `./run test`; installed from npm, not built.
TYPESCRIPT_VERSION = "5.9.3"
TRAINER_PACKAGE = "github.com/kubeflow/trainer/v2"
# Gang scheduling's PodGroup CRDs for a bed worker (clusters/podgroups.py): the scheduler-plugins'
# from its module, Volcano's written by controller-gen from the API types Trainer v2.3 builds
# against (clusters/gomod/crdgen pins both).
SCHEDULER_PLUGINS_VERSION = "v0.33.5"
CONTROLLER_TOOLS_VERSION = "v0.19.0"
# krew installs the release's krew manifest with its archive (tests/local/test_release_assets.py).
KREW_VERSION = "v0.4.3"
# The CNCF Distribution registry: the release's chart pushed to it and installed from it as OCI
# (tests/local/test_release_assets.py), on loopback.
REGISTRY_VERSION = "v3.1.2"


def _k8s_version_ldflags(version: str) -> list[str]:
    """Without these the servers report v0.0.0-master and Kueue refuses to start."""
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            # Fixed so the link step is reproducible and Go's cache serves warm rebuilds.
            f"-X {pkg}.buildDate=2026-01-01T00:00:00Z",
        ]
    return flags


@dataclass(frozen=True)
class Build:
    """One `go build` of one wrapper module, producing one or more commands."""

    name: str
    version: str
    packages: dict[str, str]  # output binary name -> Go package path
    ldflags: list[str] = field(default_factory=list)
    module: str = ""  # wrapper module directory, when not the build's name
    peer: bool = False  # only the upstream peer pipeline needs it (built on demand)
    trainer: bool = False  # a cluster with `trainer: true` needs it (built on demand)
    real: bool = False  # only real nodes need it (built on demand)
    kind: bool = False  # only the kind path needs it (`./run kind`, built on demand)
    on_demand: bool = False  # built when first asked for (build_one), never by build_all
    tags: list[str] = field(default_factory=list)
    static: bool = False  # CGO_ENABLED=0: the binary goes into an image without a libc
    # Unified diffs (files in the wrapper module) applied to a copy of `patched`'s source (a
    # module path@version) that the build uses instead: the module cache stays as downloaded.
    patches: list[str] = field(default_factory=list)
    patched: str = ""

    @property
    def module_dir(self) -> Path:
        return GOMOD_DIR / (self.module or self.name)

    def key(self) -> str:
        """Cache key: name, version and a hash of everything that pins the build."""
        digest = hashlib.sha256()
        for fname in ("go.mod", "go.sum"):
            digest.update((self.module_dir / fname).read_bytes())
        # The wrapper's own commands (pause's, CoreDNS's main.go); tools.go only pins modules.
        for source in sorted(self.module_dir.glob("*.go")):
            if source.name != "tools.go":
                digest.update(source.read_bytes())
        digest.update(json.dumps([self.packages, self.ldflags, self.tags, self.static]).encode())
        for patch in self.patches:
            digest.update((self.module_dir / patch).read_bytes())
        return f"{self.name}-{self.version}-{digest.hexdigest()[:10]}"


BUILDS: dict[str, Build] = {
    b.name: b
    for b in (
        Build("etcd", ETCD_VERSION, {"etcd": "."}),
        Build("kwok", KWOK_VERSION, {"kwok": "sigs.k8s.io/kwok/cmd/kwok"}),
        # Static, as Kueue's own release builds it (CGO_ENABLED=0): the same binary runs as
        # the bed's process and in the image of Kueue that its release manifests name.
        Build(
            "kueue",
            KUEUE_VERSION,
            {"kueue": "sigs.k8s.io/kueue/cmd/kueue"},
            [f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}"],
            static=True,
        ),
        # The peer pipeline's manager Kueue with its MultiKueue worker clients' rate limit lifted
        # (client-go's default 5 requests/s, burst 10, per resource type): a patched build,
        # named as such, for benchmarks/compare.py's "peer-lifted" variant only.
        Build(
            "kueue-lifted",
            KUEUE_VERSION,
            {"kueue-lifted": "sigs.k8s.io/kueue/cmd/kueue"},
            [f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}"],
            module="kueue",
            peer=True,
            patches=["worker-client-limit-lifted.patch"],
            patched=f"sigs.k8s.io/kueue@{KUEUE_VERSION}",
        ),
        Build(
            "kubernetes",
            K8S_VERSION,
            {
                "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
                "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
                "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
            },
            _k8s_version_ldflags(K8S_VERSION),
            module=K8S_MODULE,
        ),
        # kubectl from the same pinned module, so `kubectl apply -k deploy/...` and `kubectl
        # kustomize` work on machines without one (a build of its own: adding it to the one
        # above would rebuild the control plane).
        Build(
            "kubectl",
            DEFAULT_K8S_VERSION,
            {"kubectl": "k8s.io/kubernetes/cmd/kubectl"},
            _k8s_version_ldflags(DEFAULT_K8S_VERSION),
            module="kubernetes",
        ),
        Build(
            "kubelet",
            DEFAULT_K8S_VERSION,
            {
                "kubelet": "k8s.io/kubernetes/cmd/kubelet",
                "kube-proxy": "k8s.io/kubernetes/cmd/kube-proxy",
            },
            _k8s_version_ldflags(DEFAULT_K8S_VERSION),
            module="kubernetes",
            real=True,
        ),
        Build(
            "containerd",
            CONTAINERD_VERSION,
            {
                "containerd": "github.com/containerd/containerd/v2/cmd/containerd",
                "containerd-shim-runc-v2": "github.com/containerd/containerd/v2/cmd/"
                "containerd-shim-runc-v2",
                "ctr": "github.com/containerd/containerd/v2/cmd/ctr",
            },
            [f"-X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}"],
            real=True,
            tags=["no_btrfs"],  # its cgo snapshotter needs btrfs headers; overlayfs is used
        ),
        # libseccomp through cgo: pods ask for the RuntimeDefault seccomp profile.
        Build(
            "runc",
            RUNC_VERSION,
            {"runc": "github.com/opencontainers/runc"},
            real=True,
            tags=["seccomp"],
        ),
        # Static, as its release builds it (CGO_ENABLED=0, the version in client-go's package).
        Build(
            "metrics-server",
            METRICS_SERVER_VERSION,
            {"metrics-server": "sigs.k8s.io/metrics-server/cmd/metrics-server"},
            [f"-X k8s.io/client-go/pkg/version.gitVersion={METRICS_SERVER_VERSION}"],
            real=True,
            static=True,
        ),
        Build(
            "helm",
            HELM_VERSION,
            {"helm": "helm.sh/helm/v3/cmd/helm"},
            [f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}"],
        ),
        Build(
            "actionlint",
            ACTIONLINT_VERSION,
            {"actionlint": "github.com/rhysd/actionlint/cmd/actionlint"},
        ),
        Build("coredns", COREDNS_VERSION, {"coredns": "."}, real=True, static=True),
        # The kind path: kind itself, and kubeadm for its node image (clusters/kindnode.py).
        Build("kind", KIND_VERSION, {"kind": "sigs.k8s.io/kind"}, kind=True),
        Build(
            "kubeadm",
            DEFAULT_K8S_VERSION,
            {"kubeadm": "k8s.io/kubernetes/cmd/kubeadm"},
            _k8s_version_ldflags(DEFAULT_K8S_VERSION),
            kind=True,
        ),
        Build("pause", PAUSE_VERSION, {"pause": "."}, real=True, static=True),
        Build(
            "trainer",
            TRAINER_VERSION,
            {"trainer-controller-manager": f"{TRAINER_PACKAGE}/cmd/trainer-controller-manager"},
            peer=True,
        ),
        Build(
            "trainer-v2.3",
            TRAINER_API_VERSION,
            {
                "trainer-controller-manager-v2.3": (
                    f"{TRAINER_PACKAGE}/cmd/trainer-controller-manager"
                )
            },
            trainer=True,
            static=True,  # as its release image holds it (and the bed's image of it)
        ),
        Build(
            "crdgen",
            CONTROLLER_TOOLS_VERSION,
            {"controller-gen": "sigs.k8s.io/controller-tools/cmd/controller-gen"},
            on_demand=True,
        ),
        Build(
            "krew",
            KREW_VERSION,
            {"krew": "sigs.k8s.io/krew/cmd/krew"},
            [f"-X sigs.k8s.io/krew/internal/version.gitTag={KREW_VERSION}"],
            on_demand=True,
        ),
        Build(
            "registry",
            REGISTRY_VERSION,
            {"registry": "github.com/distribution/distribution/v3/cmd/registry"},
            [f"-X github.com/distribution/distribution/v3/version.version={REGISTRY_VERSION}"],
            on_demand=True,
        ),
        Build(
            "jobset",
            JOBSET_VERSION,
            {"jobset-controller-manager": "sigs.k8s.io/jobset"},
            peer=True,
            trainer=True,
            static=True,  # as its release image holds it (and the bed's image of it)
        ),
    )
}


def cache_root() -> Path:
    env = os.environ.get("TJ_BED_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "trainjob-bed"


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GOTOOLCHAIN"] = "local"  # never let go download a toolchain behind our back
    env.setdefault("GOFLAGS", "-buildvcs=false")
    return env


def check_go() -> str:
    """Return `go version` output, or raise a clear error if go is missing or too old."""
    go = shutil.which("go")
    if go is None:
        raise BedError(
            f"the `go` command is not on PATH; install Go >= {MIN_GO[0]}.{MIN_GO[1]} "
            "(the bed builds etcd, Kubernetes, kwok and Kueue from their Go modules)"
        )
    out = subprocess.run([go, "version"], capture_output=True, text=True, env=go_env()).stdout
    match = re.search(r"go(\d+)\.(\d+)", out)
    if not match or (int(match[1]), int(match[2])) < MIN_GO:
        raise BedError(
            f"Go >= {MIN_GO[0]}.{MIN_GO[1]} is needed (Kubernetes {K8S_VERSION} and "
            f"Kueue {KUEUE_VERSION} require it); found: {out.strip() or 'no version'}"
        )
    return out.strip()


def binary_dir(build: Build) -> Path:
    return cache_root() / "bin" / build.key()


def is_built(build: Build) -> bool:
    d = binary_dir(build)
    return all((d / name).is_file() for name in build.packages)


def typescript() -> Path:
    """The pinned `tsc`, installed from npm into the cache the first time it is asked for."""
    home = cache_root() / "node" / f"typescript-{TYPESCRIPT_VERSION}"
    tsc = home / "node_modules" / ".bin" / "tsc"
    if tsc.is_file():
        return tsc
    if shutil.which("npm") is None:
        raise BedError("npm is needed to install TypeScript (Debian: apt-get install npm)")
    tmp = home.with_name(home.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    _say(f"npm install typescript@{TYPESCRIPT_VERSION}")
    npm = ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(tmp)]
    done = subprocess.run(
        [*npm, f"typescript@{TYPESCRIPT_VERSION}"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise BedError(f"npm install typescript failed: {done.stderr[-2000:]}")
    shutil.rmtree(home, ignore_errors=True)
    tmp.rename(home)
    return tsc


def binary(name: str) -> Path:
    """Path of a command (e.g. `kube-apiserver`) in the build cache (built or not)."""
    for build in BUILDS.values():
        if name in build.packages:
            return binary_dir(build) / name
    raise KeyError(name)


def _say(msg: str) -> None:
    print(f"[build] {msg}", file=sys.stderr, flush=True)


def build_one(build: Build) -> float:
    """Build `build` into the cache unless it is there; return seconds spent (0 if cached).
    One process builds it at a time (a lock file beside it): another that asks meanwhile
    waits, then finds it built."""
    if is_built(build):
        return 0.0
    lock_path = binary_dir(build).with_name(binary_dir(build).name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_built(build):
            return 0.0
        return _build_locked(build)


def _build_locked(build: Build) -> float:
    out_dir = binary_dir(build)
    tmp_dir = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp_dir, ignore_errors=True)
    tmp_dir.mkdir(parents=True)
    log_path = cache_root() / "logs" / f"{build.key()}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        "go",
        "build",
        *([f"-tags={','.join(build.tags)}"] if build.tags else []),
        "-ldflags",
        " ".join(["-s", "-w", *build.ldflags]),
        "-o",
        str(tmp_dir) + "/",
        *build.packages.values(),
    ]
    if len(build.packages) == 1:  # `-o dir/` with one package names the binary after the dir
        cmd[cmd.index("-o") + 1] = str(tmp_dir / next(iter(build.packages)))
    if build.patches:
        where = cache_root() / "patched" / build.key()
        cmd.insert(2, f"-modfile={_patched_modfile(build, where)}")
    _say(f"building {build.name} {build.version} (log: {log_path})")
    start = time.monotonic()
    with log_path.open("w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        env = go_env()
        if build.static:
            env["CGO_ENABLED"] = "0"
        proc = subprocess.Popen(
            cmd, cwd=build.module_dir, stdout=log, stderr=subprocess.STDOUT, env=env
        )
        done = threading.Event()

        def heartbeat() -> None:
            while not done.wait(30):
                _say(f"  still building {build.name}: {time.monotonic() - start:.0f}s")

        threading.Thread(target=heartbeat, daemon=True).start()
        code = proc.wait()
        done.set()
    took = time.monotonic() - start
    if code != 0:
        tail = "\n".join(log_path.read_text().splitlines()[-25:])
        raise BedError(
            f"building {build.name} failed (exit {code}) after {took:.0f}s; "
            f"log: {log_path}\n--- last lines ---\n{tail}"
        )
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp_dir.rename(out_dir)
    _say(f"built {build.name} in {took:.1f}s -> {out_dir}")
    return took


def _patched_modfile(build: Build, where: Path) -> Path:
    """A copy of `build.patched`'s source under `where` with `build.patches` applied, and a
    go.mod for `go build -modfile` that replaces the module with it (Go refuses overlays of
    files in its module cache, and the wrapper module's own go.mod stays as committed)."""
    source = module_source_dir(build.module or build.name, build.patched)
    shutil.rmtree(where, ignore_errors=True)
    src = where / "src"
    shutil.copytree(source, src)
    for path in [src, *src.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    for patch in build.patches:
        out = subprocess.run(
            ["patch", "-p1", "--forward", "-d", str(src)],
            input=(build.module_dir / patch).read_text(),
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            raise BedError(f"{patch} does not apply to {build.patched}: {out.stdout}{out.stderr}")
    modfile = where / "go.mod"
    shutil.copyfile(build.module_dir / "go.mod", modfile)
    shutil.copyfile(build.module_dir / "go.sum", where / "go.sum")
    module = build.patched.split("@")[0]
    with modfile.open("a") as f:
        f.write(f"\nreplace {module} => {src}\n")
    return modfile


def build_all(peer: bool = False, real: bool = False, trainer: bool = False) -> dict[str, float]:
    """Build every binary the bed needs (with `peer`, the upstream pipeline's too; with
    `trainer`, Trainer's and JobSet's controllers; with `real`, the real nodes'); return
    seconds per build (0 for cached ones)."""
    check_go()
    times = {}
    for build in BUILDS.values():
        optional = build.peer or build.trainer
        wanted = not optional or (peer and build.peer) or (trainer and build.trainer)
        if wanted and (real or not build.real) and not build.kind and not build.on_demand:
            times[build.name] = build_one(build)
    total = sum(times.values())
    if total:
        _say(
            "build times: "
            + ", ".join(f"{k} {v:.0f}s" for k, v in times.items())
            + f"; total {total:.0f}s"
        )
    return times


def module_source_dir(build_name: str, module: str) -> Path:
    """Directory of a downloaded Go module (e.g. Kueue's, for its manifests)."""
    res = subprocess.run(
        ["go", "mod", "download", "-json", module],
        cwd=GOMOD_DIR / build_name,
        capture_output=True,
        text=True,
        env=go_env(),
    )
    if res.returncode != 0:
        raise BedError(f"cannot download Go module {module}: {res.stderr.strip() or res.stdout}")
    return Path(json.loads(res.stdout)["Dir"])
