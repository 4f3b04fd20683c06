"""The workers as the dispatcher sees them, listed by its aggregated API (`workers`).

`GET /apis/view.trainjob.dev/v1alpha1/workers`: for each MultiKueueCluster this replica knows,
whether it reaches the worker (and since when it does not), how many of our TrainJob copies
are there, and the worker's ClusterQueues with their quota and use by flavour, as its watches
last saw them. Nothing is read for the request: it answers from the caches the dispatcher keeps
for placement. The API server has already checked RBAC on `list workers` (cluster-scoped).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Literal

import orjson

from kubecontrol import web
from kubecontrol.aggregated import ListHandler, ListRequest
from trainjob_api import constants as c
from trainjob_api.story import Worker, WorkerList, WorkerMeta

if TYPE_CHECKING:
    from dispatcher.controller.context import Context
    from dispatcher.workers.remote import RemoteCluster

KIND = Worker.__name__


def _connection(
    remote: RemoteCluster | None,
) -> Literal["Connected", "Connecting", "Disconnected", "NoKubeconfig"]:
    if remote is None:
        return "NoKubeconfig"
    if remote.connecting:
        return "Connecting"
    return "Connected" if remote.connected else "Disconnected"


def _since(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def worker(name: str, remote: RemoteCluster | None, problem: str | None) -> Worker:
    """One worker's item (pure over what the RemoteCluster holds)."""
    state = _connection(remote)
    if remote is not None and state == "Disconnected":
        problem = remote.last_error
    return Worker(
        metadata=WorkerMeta(name=name),
        connection=state,
        problem=problem,
        down_since=_since(remote.down_since) if remote is not None else None,
        train_job_copies=len(remote.items(c.TRAINJOB.kind)) if remote is not None else None,
        # None: not known (unreachable, or the worker's ClusterQueues are not readable)
        cluster_queues=remote.queues() if remote is not None else None,
    )


def workers(ctx: Context) -> WorkerList:
    return WorkerList(
        items=[worker(name, remote, problem) for name, remote, problem in ctx.workers.known()]
    )


def handler(ctx: Context) -> ListHandler:
    async def list_workers(call: ListRequest) -> web.StreamResponse:
        body = orjson.dumps(workers(ctx).to_json())
        return web.Response(body=body, content_type="application/json")

    return list_workers
