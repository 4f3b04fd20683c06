"""`python -m dispatcher`: the MultiKueue admission-check controller for TrainJobs (manager)."""

from __future__ import annotations

from dispatcher.controller import webhooks
from dispatcher.controller.context import Context
from dispatcher.controller.reconcile import sync
from dispatcher.controller.watches import (
    on_leading,
    on_remote_change,
    on_remote_event,
    on_remote_room,
    on_remote_state,
    on_synced,
    watches,
)
from dispatcher.readapi import job_story
from dispatcher.settings import DispatcherSettings
from dispatcher.workers.connections import WorkerConnections
from kubecontrol import controller
from kubecontrol.workqueue import WorkQueue
from trainjob_api import constants as c


def main(argv: list[str] | None = None) -> int:
    settings, verbose = DispatcherSettings.from_argv(argv, "python -m dispatcher", __doc__)
    controller.setup_logging(settings, verbose)
    manager = controller.connect(settings, c.DISPATCHER_FIELD_MANAGER)
    ctx = Context(settings=settings, manager=manager)
    manager.may_write = ctx.leads
    ctx.queue = WorkQueue(
        lambda key: sync(ctx, key),
        workers=settings.workers,
        urgent_workers=settings.urgent_workers,
        name="dispatch",
    )
    ctx.workers = WorkerConnections(
        settings,
        manager,
        lambda ns, name, urgent: on_remote_change(ctx, ns, name, urgent),
        lambda cluster: on_remote_state(ctx, cluster),
        lambda cluster: on_remote_room(ctx, cluster),
        lambda cluster, event: on_remote_event(ctx, cluster, event),
    )
    controller.elect(ctx, manager, lambda: on_leading(ctx))
    controller.run(
        ctx,
        manager,
        watches(ctx),
        webhooks.routes(ctx),
        on_synced=lambda: on_synced(ctx),
        webhook_resource=(c.TRAINJOB.group, c.TRAINJOB.plural),
        api=job_story.api(ctx) if settings.job_story_api else None,
    )
    return 0
