"""`python -m worker_controller`: run the TrainJob controller against one cluster."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from pathlib import Path

from pydantic import ValidationError

from trainjob import constants as c
from trainjob import operator
from trainjob.kube import Cluster
from trainjob.workqueue import WorkQueue
from worker_controller.handlers import Memo, register, sync_trainjob
from worker_controller.settings import WorkerSettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker_controller", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, help="cluster to run on (default: in-cluster)")
    parser.add_argument("--cluster-name", default="worker", help="name shown in the logs")
    parser.add_argument(
        "--health-port",
        type=int,
        default=8080,
        help="liveness endpoint http://127.0.0.1:PORT/healthz",
    )
    parser.add_argument(
        "--resync-seconds",
        type=float,
        default=10.0,
        help="periodic reconcile of every TrainJob (drift, deadlines)",
    )
    parser.add_argument(
        "--webhook-port",
        type=int,
        help="serve the TrainJob admission webhooks "
        "on https://127.0.0.1:PORT (needs --webhook-cert/--webhook-key)",
    )
    parser.add_argument("--webhook-cert", type=Path, help="serving certificate (PEM)")
    parser.add_argument("--webhook-key", type=Path, help="its private key (PEM)")
    parser.add_argument("--webhook-ca", type=Path, help="CA that signed it (for caBundle)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = WorkerSettings(
            kubeconfig=args.kubeconfig,
            cluster_name=args.cluster_name,
            health_port=args.health_port,
            resync_seconds=args.resync_seconds,
            webhook_port=args.webhook_port,
            webhook_cert=args.webhook_cert,
            webhook_key=args.webhook_key,
            webhook_ca=args.webhook_ca,
        )
    except ValidationError as exc:
        print(f"error: invalid settings: {exc}", file=sys.stderr)
        return 2
    if settings.kubeconfig is not None and not settings.kubeconfig.is_file():
        print(f"error: --kubeconfig {settings.kubeconfig} does not exist", file=sys.stderr)
        return 2
    try:
        cluster = (
            Cluster.from_kubeconfig(settings.cluster_name, settings.kubeconfig, c.FIELD_MANAGER)
            if settings.kubeconfig
            else Cluster.in_cluster(settings.cluster_name, c.FIELD_MANAGER)
        )
    except Exception as exc:  # a broken kubeconfig or no in-cluster service account
        print(f"error: cannot load cluster credentials: {exc}", file=sys.stderr)
        return 2
    memo = Memo(
        settings=settings,
        cluster=cluster,
        stop=threading.Event(),
        indexes={},
    )
    memo.queue = WorkQueue(
        lambda key: sync_trainjob(memo, key), workers=settings.workers, name="reconcile"
    )
    operator.run(register(settings), memo, settings.health_port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
