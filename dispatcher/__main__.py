"""`python -m dispatcher`: the MultiKueue admission-check controller for TrainJobs (manager)."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from pathlib import Path

from pydantic import ValidationError

from dispatcher.clusters import FIELD_MANAGER, Registry
from dispatcher.handlers import Memo, on_remote_change, on_remote_state, register, sync_trainjob
from dispatcher.settings import DispatcherSettings
from trainjob import operator
from trainjob.kube import Cluster
from trainjob.workqueue import WorkQueue, WriteMemory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dispatcher", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, help="manager cluster (default: in-cluster)")
    parser.add_argument(
        "--namespace",
        default="kueue-system",
        help="namespace of the MultiKueueCluster kubeconfig Secrets",
    )
    parser.add_argument("--controller-name", default="kueue.x-k8s.io/multikueue")
    parser.add_argument("--origin", default="multikueue")
    parser.add_argument("--strategy", choices=["AllAtOnce", "Incremental"], default="AllAtOnce")
    parser.add_argument(
        "--incremental-batch", type=int, default=3, help="Incremental: clusters per round"
    )
    parser.add_argument(
        "--incremental-round-seconds",
        type=float,
        default=300.0,
        help="Incremental: how long a round waits for an admission before adding clusters",
    )
    parser.add_argument("--worker-lost-timeout", type=float, default=900.0)
    parser.add_argument(
        "--resync-seconds",
        type=float,
        default=30.0,
        help="safety-net pass over TrainJobs in flight (changes are handled as they happen)",
    )
    parser.add_argument("--workers", type=int, default=8, help="threads reconciling TrainJobs")
    parser.add_argument("--gc-interval", type=float, default=60.0)
    parser.add_argument(
        "--retention-seconds",
        type=float,
        default=0.0,
        help="keep finished remote objects this long on the worker",
    )
    parser.add_argument("--health-port", type=int, default=8081)
    parser.add_argument("--webhook-port", type=int)
    parser.add_argument("--webhook-cert", type=Path)
    parser.add_argument("--webhook-key", type=Path)
    parser.add_argument("--webhook-ca", type=Path)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("kopf.objects").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    try:
        settings = DispatcherSettings(
            kubeconfig=args.kubeconfig,
            namespace=args.namespace,
            controller_name=args.controller_name,
            origin=args.origin,
            strategy=args.strategy,
            incremental_batch=args.incremental_batch,
            incremental_round_seconds=args.incremental_round_seconds,
            worker_lost_timeout=args.worker_lost_timeout,
            resync_seconds=args.resync_seconds,
            workers=args.workers,
            gc_interval=args.gc_interval,
            retention_seconds=args.retention_seconds,
            health_port=args.health_port,
            webhook_port=args.webhook_port,
            webhook_cert=args.webhook_cert,
            webhook_key=args.webhook_key,
            webhook_ca=args.webhook_ca,
        )
        manager = (
            Cluster.from_kubeconfig("manager", settings.kubeconfig, FIELD_MANAGER)
            if settings.kubeconfig
            else Cluster.in_cluster("manager", FIELD_MANAGER)
        )
    except ValidationError as exc:
        print(f"error: invalid settings: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"error: cannot load the manager's credentials: {exc}", file=sys.stderr)
        return 2
    memo = Memo(
        settings=settings,
        manager=manager,
        indexes={},
        memory=WriteMemory(),
        stop=threading.Event(),
        resync_now=threading.Event(),
    )
    memo.queue = WorkQueue(
        lambda key: sync_trainjob(memo, key), workers=settings.workers, name="dispatch"
    )
    memo.registry = Registry(
        settings,
        manager,
        lambda ns, name: on_remote_change(memo, ns, name),
        lambda cluster: on_remote_state(memo, cluster),
    )
    operator.run(register(settings), memo, settings.health_port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
