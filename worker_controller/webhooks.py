"""The worker controller's admission webhook for TrainJobs: on CREATE, queue a TrainJob
without a queue to its namespace's default LocalQueue (Kueue's defaulting), suspend a queued
TrainJob (Kueue starts it) and stamp its runtimePatches' times. A queue that does not exist
(yet) is accepted, as Kueue does: the Workload waits for it."""

from __future__ import annotations

import datetime as dt
from functools import partial

from kubebase.objects import Dict
from kubecontrol.admission import Verdict, rate_limited, refuse
from kubecontrol.deadline import Deadline
from kubecontrol.webhook_server import Route, in_thread
from trainjob import admission as rules
from trainjob.jobframework_io import local_queue
from trainjob_api import constants as c
from worker_controller.context import Context


def routes(ctx: Context) -> dict[str, Route]:
    """The paths our webhook configurations call (deploy/worker/manifests.yaml)."""
    return {
        "/suspend-queued": in_thread(partial(on_trainjob_mutate, ctx)),
        "/validate-trainjob": in_thread(partial(on_trainjob_validate, ctx)),
        # Older versions installed a validating webhook here that refused a missing queue;
        # one left behind by an upgrade keeps being answered (everything is allowed).
        "/queue-exists": allow,
    }


def on_trainjob_mutate(ctx: Context, admission: Dict, deadline: Deadline) -> Verdict:
    """Judged by `deadline`: its look-up (of a default queue the watch does not hold yet,
    within the process's allowance) waits no longer than is left of it."""
    tj = rules.Admitted(admission)
    # Mutating admission comes before the API server checks the CRD's schema: bounded here.
    too_large = rules.object_problem(tj, ctx.trainjob_schema)
    if too_large is not None:
        return refuse(too_large)
    defaulted = None
    if tj.queue_name is None and tj.namespace not in rules.UNMANAGED_NAMESPACES:
        get = rate_limited(ctx.cluster.within(deadline).get_or_none)
        default_lq = local_queue(ctx.caches, tj.namespace, c.DEFAULT_LOCAL_QUEUE, get)
        defaulted = rules.defaults_to_queue(tj, default_lq is not None)
    hold = defaulted is None and rules.held_without_queue(
        tj, ctx.settings.manage_jobs_without_queue_name
    )
    changes = rules.mutate_on_create(tj, dt.datetime.now(dt.UTC), queue=defaulted, hold=hold)
    return Verdict(patch=rules.trainjob_patch(tj, changes, queue=defaulted))


def on_trainjob_validate(ctx: Context, admission: Dict, deadline: Deadline) -> Verdict:
    """Refuse a TrainJob that cannot run on its runtime (trainjob/admission.py). A MultiKueue
    copy was judged on its manager; a runtime that differs here is said as a condition that
    reaches the manager, never as a refused copy. Each step begins only while `deadline`
    has time left."""
    tj = rules.Admitted(admission)
    if tj.prebuilt_workload:
        return Verdict()
    why = rules.object_problem(tj, ctx.trainjob_schema)
    if why is None:
        deadline.check("judging the runtime")
        why = rules.runtime_refusal(tj, ctx.caches.runtime_of(tj))
    return Verdict() if why is None else refuse(why)


async def allow(admission: Dict) -> Verdict:
    return Verdict()
