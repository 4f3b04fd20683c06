"""`python -m worker_controller`: run the TrainJob controller against one cluster."""

from __future__ import annotations

from kubecontrol import controller
from kubecontrol.workqueue import WorkQueue
from trainjob_api import constants as c
from worker_controller import progress, webhooks
from worker_controller.ca_bundle import CaBundle
from worker_controller.context import Context
from worker_controller.reconcile import sync_trainjob
from worker_controller.settings import WorkerSettings
from worker_controller.watches import on_leading, on_synced, watches


def main(argv: list[str] | None = None) -> int:
    settings, verbose = WorkerSettings.from_argv(argv, "python -m worker_controller", __doc__)
    controller.setup_logging(settings, verbose)
    ctx = Context(settings=settings, cluster=controller.connect(settings, c.WORKER_FIELD_MANAGER))
    if settings.progress_reports:
        ctx.progress_url, ctx.progress_ca = progress.base_url(settings), CaBundle(settings)
    ctx.cluster.may_write = ctx.leads
    ctx.queue = WorkQueue(
        lambda key: sync_trainjob(ctx, key), workers=settings.workers, name="reconcile"
    )
    controller.elect(ctx, ctx.cluster, lambda: on_leading(ctx))
    controller.run(
        ctx,
        ctx.cluster,
        watches(ctx),
        webhooks.routes(ctx),
        on_synced=lambda: on_synced(ctx),
        webhook_resource=(c.TRAINJOB.group, c.TRAINJOB.plural),
        http_routes=progress.StatusServer(ctx).routes() if settings.progress_reports else (),
        http_port=settings.progress_port,
    )
    return 0
