"""`python -m worker_controller`: run the TrainJob controller against one cluster."""

from __future__ import annotations

import sys
import threading

from trainjob import constants as c
from trainjob import operator
from trainjob.workqueue import WorkQueue, WriteMemory
from worker_controller.handlers import Memo, register, sync_trainjob
from worker_controller.settings import WorkerSettings


def main(argv: list[str] | None = None) -> int:
    settings, verbose = WorkerSettings.from_argv(argv, "python -m worker_controller", __doc__)
    operator.setup_logging(verbose)
    memo = Memo(
        settings=settings,
        cluster=operator.connect(settings, c.FIELD_MANAGER),
        stop=threading.Event(),
        indexes={},
        gone=set(),
        memory=WriteMemory(),
    )
    memo.queue = WorkQueue(
        lambda key: sync_trainjob(memo, key), workers=settings.workers, name="reconcile"
    )
    operator.run(register(settings), memo, settings.health_port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
