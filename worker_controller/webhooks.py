"""The worker controller's admission webhooks for TrainJobs: on CREATE, suspend a queued
TrainJob (Kueue starts it) and stamp its runtimePatches' times, and refuse one whose queue
does not exist, naming it."""

from __future__ import annotations

import datetime as dt
from functools import partial
from typing import Any

from kubecontrol.admission import Verdict, refuse
from kubecontrol.webhook_server import Handler, in_thread
from trainjob import admission as rules
from trainjob import constants as c
from worker_controller.memo import Memo

Dict = dict[str, Any]


def routes(memo: Memo) -> dict[str, Handler]:
    """The paths our webhook configurations call (deploy/worker/webhooks.yaml)."""
    return {
        "/suspend-queued": on_trainjob_mutate,
        "/queue-exists": in_thread(partial(on_trainjob_validate, memo)),
    }


async def on_trainjob_mutate(admission: Dict) -> Verdict:
    body: Dict = admission.get("object") or {}
    changes = rules.mutate_on_create(body, dt.datetime.now(dt.UTC))
    return Verdict(patch=rules.trainjob_patch(body, changes))


def on_trainjob_validate(memo: Memo, admission: Dict) -> Verdict:
    body: Dict = admission.get("object") or {}
    queue = rules.queue_of(body)
    if queue is None:
        return Verdict()
    namespace = admission.get("namespace") or (body.get("metadata") or {}).get("namespace")
    local_queue = memo.cluster.get_or_none(c.KUEUE_API, "LocalQueue", queue, namespace)
    error = rules.validate_queue(body, local_queue)
    return refuse(error) if error else Verdict()
