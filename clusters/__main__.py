"""Command line of the bed: `python -m clusters build|up|down|status|env`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clusters import builds, images, install, replicas
from clusters.bed import Bed
from clusters.config import load_config
from clusters.errors import BedError
from clusters.processes import http_ok, resident_kib


def _print_status(bed: Bed) -> bool:
    rows = bed.status()
    print(
        f"{'CLUSTER':<10} {'COMPONENT':<24} {'PID':>7} {'PORTS':<18} {'HEALTH':<8} {'RSS':>8}  LOG"
    )
    total = 0
    for s in rows:
        health = "ok" if s.healthy else ("DOWN" if s.pid is None else "UNHEALTHY")
        total += s.rss_kib
        print(
            f"{s.cluster:<10} {s.name:<24} {s.pid or '-':>7} "
            f"{','.join(map(str, s.ports)):<18} {health:<8} {s.rss_kib / 1024:>6.0f}Mi  "
            f"{s.log if not s.healthy else ''}"
        )
    running = replicas.recorded(bed.state)
    healthy = True
    if running:
        print(f"\n{'CLUSTER':<10} {'REPLICA':<32} {'PID':>7} {'HEALTH':<8} {'LEADS':<6} {'RSS':>8}")
    for r in running:
        ok = http_ok(f"http://127.0.0.1:{r['health']}/readyz")
        healthy = healthy and ok
        leads = {None: "-", True: "yes", False: "no"}[install.leads(r)]
        pid = replicas.current_pid(r)
        rss = resident_kib(pid) if ok else 0
        total += rss
        print(
            f"{r['cluster']:<10} {r['identity']:<32} {pid:>7} "
            f"{'ready' if ok else 'DOWN':<8} {leads:<6} {rss / 1024:>6.0f}Mi"
        )
    print(f"total resident memory: {total / 1024 / 1024:.2f} GiB")
    return healthy and all(s.healthy for s in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusters", description=__doc__)
    parser.add_argument(
        "--config",
        type=Path,
        help="bed config YAML (default: built-in "
        "topology manager, worker1, worker2; or $TJ_BED_CONFIG)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build (or find cached) etcd, Kubernetes, kwok and Kueue")
    build.add_argument(
        "--peer",
        action="store_true",
        help="also Kubeflow Trainer's and JobSet's controllers (the upstream pipeline that "
        "benchmarks/compare.py runs; a bed with `pipeline: peer` builds them itself)",
    )
    build.add_argument(
        "--trainer",
        action="store_true",
        help="also Kubeflow Trainer v2.3's and JobSet's controllers, which a cluster with "
        "`trainer: true` runs (tests/e2e/test_mixed_fleet.py's bed)",
    )
    build.add_argument(
        "--typescript",
        action="store_true",
        help="also TypeScript from npm, which checks the web view's scripts against the job "
        "story's types (tests/local/test_story_contract.py)",
    )
    build.add_argument(
        "--release-tools",
        action="store_true",
        help="also krew and the CNCF Distribution registry, which install the release's krew "
        "manifest and take its chart as OCI (tests/local/test_release_assets.py)",
    )
    build.add_argument(
        "--real-nodes",
        action="store_true",
        help="also what real nodes need: kubelet, kube-proxy, containerd, CoreDNS, and the "
        "images (the product's, pause, CoreDNS, the training image)",
    )
    build.add_argument(
        "--node-binaries",
        action="store_true",
        help="also the real nodes' Go builds (--real-nodes without the images)",
    )
    up = sub.add_parser("up", help="bring the bed up (idempotent) and show its status")
    up.add_argument(
        "--install",
        action="store_true",
        help="then install the product from deploy/ (on kwok nodes our controllers run as "
        "processes; with --real-nodes as Pods from the product's image)",
    )
    up.add_argument(
        "--real-nodes",
        action="store_true",
        help="one real node per cluster (kubelet, containerd, kube-proxy, CoreDNS) instead of "
        "kwok nodes; needs root; the bed remembers it until `down`",
    )
    down = sub.add_parser("down", help="stop every process the bed started, remove its state")
    down.add_argument("--keep-state", action="store_true", help="keep etcd data and certs")
    sub.add_parser("status", help="every component with PID, ports, health and memory")
    sub.add_parser("env", help="print shell exports of the kubeconfig paths")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            real = args.real_nodes or args.node_binaries
            builds.build_all(peer=args.peer, real=real, trainer=args.trainer)
            if args.typescript:
                builds.typescript()
            if args.release_tools:
                for name in ("krew", "registry"):
                    builds.build_one(builds.BUILDS[name])
            if args.real_nodes:
                images.build_all()
            return 0
        config = load_config(args.config)
        if args.command == "up" and args.real_nodes:
            config = config.model_copy(update={"real_nodes": True})
        bed = Bed(config)
        if args.command == "up":
            bed.up()
            if args.install and not replicas.recorded(bed.state):
                install.install_product(bed)
            return 0 if _print_status(bed) else 1
        if args.command == "down":
            bed.down(keep_state=args.keep_state)
            return 0
        if args.command == "status":
            return 0 if _print_status(bed) else 1
        if args.command == "env":
            print("\n".join(bed.env_lines()))
            return 0
    except BedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
