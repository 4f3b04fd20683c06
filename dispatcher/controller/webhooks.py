"""The dispatcher's admission webhooks for TrainJobs on the manager: on CREATE, queue a
TrainJob without a queue to its namespace's default LocalQueue (Kueue's defaulting), route a
queued one to us (managedBy, suspended, our finalizer) when its queue leads to a MultiKueue
ClusterQueue, or when its queue does not exist yet on a manager that runs no TrainJobs (then
MultiKueue is the only way it can run, and it waits for its queue as Kueue's Workloads do),
stamp its runtimePatches' times, and refuse one whose choice of clusters (selection.py)
cannot be read, naming it."""

from __future__ import annotations

import datetime as dt
from functools import partial

from dispatcher.controller.admissionchecks import cq_has_our_check
from dispatcher.controller.context import Context
from dispatcher.decisions import checkpoints
from dispatcher.decisions.selection import SelectionError, selection_of
from kubebase.objects import Dict
from kubecontrol.admission import Getter, Verdict, rate_limited, refuse
from kubecontrol.deadline import Deadline
from kubecontrol.webhook_server import Route, in_thread
from trainjob import admission as rules
from trainjob.caches import Caches
from trainjob.jobframework_io import local_queue
from trainjob_api import constants as c


def routes(ctx: Context) -> dict[str, Route]:
    """The paths our webhook configurations call (deploy/manager/manifests.yaml). Kept while
    we are down, with failurePolicy Fail, as Kueue's are: a TrainJob created meanwhile is
    refused, not accepted without managedBy, which is immutable and would leave it on the
    manager with nobody to run it."""
    return {
        "/suspend-and-route": in_thread(partial(on_mutate, ctx)),
        "/queue-exists": in_thread(partial(on_validate, ctx)),
    }


# Both judge on one of the webhook server's judge threads, by the review's deadline: from the
# watch caches, and from the API server (within what is left of the deadline) for an object
# made moments ago that the caches do not hold yet.


def on_mutate(ctx: Context, admission: Dict, deadline: Deadline) -> Verdict:
    if ctx.crd_problem:  # the manager could not keep track of where the job runs
        return refuse(ctx.crd_problem)
    tj = rules.Admitted(admission)
    # Mutating admission comes before the API server checks the CRD's schema: bounded here.
    too_large = rules.object_problem(tj, ctx.trainjob_schema)
    if too_large is not None:
        return refuse(too_large)
    namespace, caches = tj.namespace, ctx.caches
    get = rate_limited(ctx.manager.within(deadline).get_or_none)
    queue = tj.queue_name
    defaulted = None
    if queue is None:
        default_lq = local_queue(caches, namespace, c.DEFAULT_LOCAL_QUEUE, get)
        queue = defaulted = rules.defaults_to_queue(tj, default_lq is not None)
    multikueue = bool(queue) and _routes_to_multikueue(ctx, namespace, str(queue), caches, get)
    now = dt.datetime.now(dt.UTC)
    changes = rules.mutate_on_create(tj, now, multikueue_queue=multikueue, queue=defaulted)
    finalizers = None
    # Ours from the start: no extra write, and no window in which a delete could skip us.
    ours = changes.get("managedBy", tj.managed_by) == c.MANAGED_BY_MULTIKUEUE
    if ours and c.DISPATCHER_FINALIZER not in tj.finalizers:
        finalizers = [*tj.finalizers, c.DISPATCHER_FINALIZER]
    return Verdict(patch=rules.trainjob_patch(tj, changes, finalizers, defaulted))


def on_validate(ctx: Context, admission: Dict, deadline: Deadline) -> Verdict:
    """Refuse a TrainJob whose choice of clusters cannot be read, or that cannot run on its
    runtime (trainjob/admission.py: runtime_refusal). A queue or runtime that does not exist
    (yet) is no reason to refuse: as with Kueue, the Workload waits for it, so manifests apply
    in any order. The runtime is judged only while `deadline` has time left."""
    tj = rules.Admitted(admission)
    too_large = rules.object_problem(tj, ctx.trainjob_schema)
    if too_large is not None:
        return refuse(too_large)
    try:
        selection_of(tj.annotations)
    except SelectionError as exc:
        return refuse(str(exc))
    runtime = ctx.caches.runtime_of(tj)
    try:
        place = checkpoints.place_for(tj, runtime)
    except checkpoints.CheckpointsError as exc:
        return refuse(str(exc))
    if place is not None:  # judged as its copies will be, with the checkpoint variables
        tj = rules.Admitted({**admission, "object": checkpoints.as_copied(tj, place)})
    deadline.check("judging the runtime")
    why = rules.runtime_refusal(tj, runtime)  # bounded work (trainjob/runtime/limits.py)
    return Verdict() if why is None else refuse(why)


def _routes_to_multikueue(
    ctx: Context, namespace: str, queue: str, caches: Caches, get: Getter
) -> bool:
    lq = local_queue(caches, namespace, queue, get)
    if lq is None:  # not there yet: on a manager that runs none, MultiKueue is the only way
        return not ctx.settings.manager_runs_trainjobs
    return cq_has_our_check(ctx, lq.cluster_queue, caches, get)
