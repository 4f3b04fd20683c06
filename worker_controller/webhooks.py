"""The worker controller's admission webhooks for TrainJobs: on CREATE, suspend a queued
TrainJob (Kueue starts it) and stamp its runtimePatches' times, and refuse one whose queue
does not exist, naming it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import kopf

from trainjob import admission
from trainjob import constants as c
from worker_controller.memo import Memo


def on_trainjob_mutate(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    changes = admission.mutate_on_create(dict(body), dt.datetime.now(dt.UTC))
    for key, value in changes.items():
        patch.spec[key] = value


def on_trainjob_validate(body: kopf.Body, namespace: str, memo: Memo, **_: Any) -> None:
    queue = admission.queue_of(dict(body))
    if queue is None:
        return
    local_queue = memo.cluster.get_or_none(c.KUEUE_API, "LocalQueue", queue, namespace)
    error = admission.validate_queue(dict(body), local_queue)
    if error:
        raise kopf.AdmissionError(error, code=422)
