"""`python -m worker_controller`: run the TrainJob controller against one cluster."""

from __future__ import annotations

from kubecontrol import controller
from kubecontrol.workqueue import WorkQueue
from trainjob import constants as c
from worker_controller import webhooks
from worker_controller.memo import Memo
from worker_controller.reconcile import sync_trainjob
from worker_controller.settings import WorkerSettings
from worker_controller.watches import on_leading, on_synced, watches


def main(argv: list[str] | None = None) -> int:
    settings, verbose = WorkerSettings.from_argv(argv, "python -m worker_controller", __doc__)
    controller.setup_logging(verbose)
    memo = Memo(settings=settings, cluster=controller.connect(settings, c.WORKER_FIELD_MANAGER))
    memo.cluster.may_write = memo.leads
    memo.queue = WorkQueue(
        lambda key: sync_trainjob(memo, key), workers=settings.workers, name="reconcile"
    )
    controller.elect(memo, memo.cluster, lambda: on_leading(memo))
    controller.run(
        memo,
        memo.cluster,
        watches(memo),
        webhooks.routes(memo),
        on_synced=lambda: on_synced(memo),
        webhook_resource=(c.TRAINJOB.group, c.TRAINJOB.plural),
    )
    return 0
