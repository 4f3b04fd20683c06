"""`python -m dispatcher`: the MultiKueue admission-check controller for TrainJobs (manager)."""

from __future__ import annotations

from dispatcher import webhooks
from dispatcher.clusters import Registry
from dispatcher.memo import Memo
from dispatcher.reconcile import sync
from dispatcher.settings import DispatcherSettings
from dispatcher.watches import (
    on_leading,
    on_remote_change,
    on_remote_event,
    on_remote_room,
    on_remote_state,
    on_synced,
    watches,
)
from kubecontrol import controller
from kubecontrol.workqueue import WorkQueue
from trainjob import constants as c


def main(argv: list[str] | None = None) -> int:
    settings, verbose = DispatcherSettings.from_argv(argv, "python -m dispatcher", __doc__)
    controller.setup_logging(verbose)
    manager = controller.connect(settings, c.DISPATCHER_FIELD_MANAGER)
    memo = Memo(settings=settings, manager=manager)
    manager.may_write = memo.leads
    memo.queue = WorkQueue(
        lambda key: sync(memo, key),
        workers=settings.workers,
        urgent_workers=settings.urgent_workers,
        name="dispatch",
    )
    memo.registry = Registry(
        settings,
        manager,
        lambda ns, name, urgent: on_remote_change(memo, ns, name, urgent),
        lambda cluster: on_remote_state(memo, cluster),
        lambda cluster: on_remote_room(memo, cluster),
        lambda cluster, event: on_remote_event(memo, cluster, event),
    )
    controller.elect(memo, manager, lambda: on_leading(memo))
    controller.run(
        memo,
        manager,
        watches(memo),
        webhooks.routes(memo),
        on_synced=lambda: on_synced(memo),
        webhook_resource=(c.TRAINJOB.group, c.TRAINJOB.plural),
    )
    return 0
