"""`python -m worker_controller`: run the TrainJob controller against one cluster."""

from __future__ import annotations

import threading

from trainjob import constants as c
from trainjob import operator
from trainjob.workqueue import WorkQueue, WriteMemory
from worker_controller import webhooks
from worker_controller.handlers import (
    failed_create_informer,
    on_leading,
    pod_informer,
    register,
)
from worker_controller.memo import Memo
from worker_controller.reconcile import sync_trainjob
from worker_controller.settings import WorkerSettings


def main(argv: list[str] | None = None) -> int:
    settings, verbose = WorkerSettings.from_argv(argv, "python -m worker_controller", __doc__)
    operator.setup_logging(verbose)
    memo = Memo(
        settings=settings,
        cluster=operator.connect(settings, c.WORKER_FIELD_MANAGER),
        stop=threading.Event(),
        indexes={},
        synced=threading.Event(),
        elector=None,
        gone=set(),
        memory=WriteMemory(),
        pods=None,
        failed_creates=None,
    )
    memo.cluster.may_write = memo.leads
    memo.queue = WorkQueue(
        lambda key: sync_trainjob(memo, key), workers=settings.workers, name="reconcile"
    )
    if settings.pod_summary:
        memo.pods = pod_informer(memo)
        memo.failed_creates = failed_create_informer(memo)
    operator.elect(memo, memo.cluster, lambda: on_leading(memo))
    operator.run(register(), memo, memo.cluster, webhooks.routes(memo))
    return 0
