"""A TrainJob's logs and story, read on the manager through its API (an aggregated API).

`GET /apis/view.trainjob.dev/v1alpha1/namespaces/NS/trainjobs/NAME/log` streams the log of one
of the TrainJob's pods from the worker that runs it; `.../story` says where it runs, its pods
there and the Events about it on the manager and on that worker. The API server has already
authenticated the caller and checked RBAC on `trainjobs/log` or `trainjobs/story` in NS
(kubecontrol/aggregated.py); the reads on the worker are made with the dispatcher's own
identity there, and only ever of the objects of our copy of that TrainJob, in NS: the copy the
dispatcher made (origin label and the manager TrainJob's UID), the Jobs that copy owns, and the
pods those Jobs own. No credential leaves the dispatcher.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from dispatcher.controller import placements_io
from dispatcher.readapi import worker_list
from dispatcher.workers import copy_pods, log_tails
from dispatcher.workers.copy_pods import Refusal, log_pods, log_query, pick_pod
from kubebase.kinds import EVENT, POD
from kubebase.objects import Dict
from kubebase.shares import FairQueue, Rates, Shares, take_each
from kubecontrol import web
from kubecontrol.aggregated import (
    ApiGroup,
    ApiRequest,
    ClusterList,
    ReadOnly,
    Subresource,
    status,
)
from kubecontrol.client import ApiClient, ApiException, TransportError
from trainjob import jobframework
from trainjob.ownership import made_for
from trainjob_api import constants as c
from trainjob_api import story as types
from trainjob_api.story import TrainJobStory, about, by_time, event_of, event_seen, pod_of
from trainjob_api.views import TrainJobView, WorkloadView

if TYPE_CHECKING:
    from dispatcher.controller.context import Context
    from dispatcher.workers.remote import RemoteCluster

log = logging.getLogger(__name__)

GROUP = types.GROUP
VERSION = types.VERSION
KIND = TrainJobStory.__name__
# Log streams served at once by one replica (each holds a thread while it lasts), of which
# one user holds at most STREAMS_EACH and one namespace's users STREAMS_PER_NAMESPACE (a
# tenant with `edit` can make ServiceAccounts, so users alone are not a bound); more are
# refused with 429 and a Retry-After.
MAX_STREAMS = 64
STREAMS_EACH = 8
STREAMS_PER_NAMESPACE = 16
MAX_EVENTS = 500  # Events read per object for one story
MAX_EVENT_OBJECTS = 34  # objects whose Events one story reads on the worker
# Events one story reads in all, the manager's and the worker's, in this order: the TrainJob,
# its Workload, the copy, its Jobs, its pods (without it, 36 objects of 500 each).
MAX_STORY_EVENTS = 1_000
STORY_SECONDS = 30.0  # all of one story's reads (or a log's look for its pod), manager and worker
WHOLE_LOG_SECONDS = 300.0  # a log read without follow ends within this
# A followed log that has said nothing for this long is ended (the reader may follow it
# again): a forgotten follow does not hold its slot for ever.
FOLLOW_IDLE_SECONDS = 3600.0
_streams = Shares(MAX_STREAMS, STREAMS_EACH, "log streams", STREAMS_PER_NAMESPACE)
# Reads that answer a request (the story, finding a log's pod): on threads of their own, at
# most this many at once, shared the same way. A read with no slot it may take waits in its
# user's queue (QUEUED_EACH of a user, QUEUED_PER_NAMESPACE of a namespace, MAX_QUEUED in
# all), and each freed slot goes to the namespace, then the user, served least recently
# (plugin/kubebase/shares.py FairQueue): a user who asks once is served at the next freed slot
# however many reads others loop. A read that waits WAIT_SECONDS, or finds its queue full,
# gets 429 and a Retry-After. WAIT_SECONDS is half of one worker read's deadline (10 s): a
# read that waited that long finds the replica's reads held by workers slow to answer, which
# is better said (Retry-After) than waited on, and while it waits it holds a seat of the API
# server's own Priority and Fairness, which proxies it here.
MAX_READS = 8
READS_EACH = 2
READS_PER_NAMESPACE = 4
QUEUED_EACH = 4
QUEUED_PER_NAMESPACE = 8
MAX_QUEUED = 64
WAIT_SECONDS = 5.0
# One user's reads on average and at once, so that a user looping reads does not make the
# dispatcher's reads of a worker run back to back under its identity there; more get 429.
READS_PER_MINUTE_EACH = 60
READS_BURST_EACH = 10
# A namespace's users together (a tenant with `edit` can make ServiceAccounts, so a user's
# rate alone is not a bound on what one namespace asks of the workers).
READS_PER_MINUTE_PER_NAMESPACE = 120
READS_BURST_PER_NAMESPACE = 20
_reads = ThreadPoolExecutor(max_workers=MAX_READS, thread_name_prefix="job-story")
_reads_slots = FairQueue(
    MAX_READS,
    READS_EACH,
    "story or log reads",
    READS_PER_NAMESPACE,
    queued_each=QUEUED_EACH,
    queued_group=QUEUED_PER_NAMESPACE,
    queued_total=MAX_QUEUED,
)
_read_rates = Rates(READS_PER_MINUTE_EACH / 60, READS_BURST_EACH)
_namespace_rates = Rates(READS_PER_MINUTE_PER_NAMESPACE / 60, READS_BURST_PER_NAMESPACE)


# ---- reads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Running:
    """Where a TrainJob of the manager runs: the worker, its connection, our copy there."""

    trainjob: TrainJobView
    worker: str | None
    remote: RemoteCluster | None
    copy: TrainJobView | None  # as the worker's watch last saw it
    problem: str | None  # why its worker cannot be read, when it cannot

    @property
    def copy_uid(self) -> str | None:
        return self.copy.uid if self.copy is not None else None


def running(ctx: Context, namespace: str, name: str) -> Running:
    """Refusal 404 when the manager has no such TrainJob."""
    tj = ctx.caches.trainjob(namespace, name)
    if tj is None:
        raise Refusal(404, f'trainjobs.{c.TRAINER_GROUP} "{name}" not found in {namespace}')
    wl = ctx.caches.workload(namespace, jobframework.expected_workload_name(tj))
    worker = tj.cluster_name or (wl.cluster_name if wl is not None else None)
    if not worker:
        why = "it is not dispatched to any worker" + (
            "" if tj.multikueue else " (it is not managed by MultiKueue)"
        )
        return Running(tj, None, None, None, why)
    remote = ctx.workers.get(worker)
    if remote is None:
        return Running(tj, worker, None, None, f"worker {worker} is not connected")
    # The watch keeps only copies with our origin label; ours of this TrainJob, not of one
    # deleted and made again under its name, carries its UID.
    copy = remote.trainjob(namespace, name)
    if not made_for(copy, tj.uid):
        copy = None  # not made yet, or removed once it ended: nothing to read there
    return Running(tj, worker, remote, copy, None)


def _worker_error(worker: str, exc: Exception) -> Refusal:
    if isinstance(exc, ApiException):
        return Refusal(503 if exc.status >= 500 else 502, f"worker {worker}: {exc}")
    return Refusal(503, f"worker {worker} is unreachable: {exc}")


def pods_of(
    at: Running,
    namespace: str,
    name: str,
    narrow: Mapping[str, str] | None = None,
    most: int = copy_pods.MAX_PODS,
    until: float | None = None,
) -> tuple[list[Dict], list[Dict], bool]:
    """Our copy's Jobs and its first `most` pods on its worker (those `narrow` selects), and
    whether it has more, by `until` (a time.monotonic()); Refusal naming the worker when
    unreadable."""
    assert at.remote is not None and at.copy_uid is not None and at.worker is not None
    try:
        return copy_pods.read_some(at.remote, namespace, name, at.copy_uid, narrow, most, until)
    except (ApiException, TransportError) as exc:
        raise _worker_error(at.worker, exc) from None


# ---- the handlers --------------------------------------------------------------------------


class _Events:
    """A story's Events as they are read, object by object, MAX_STORY_EVENTS in all: each
    object's are read only while some are left to read."""

    def __init__(self, namespace: str, until: float) -> None:
        self.namespace, self.until = namespace, until
        self.left = MAX_STORY_EVENTS
        self.told: list[types.Event] = []

    def read(self, api: ApiClient, uid: str | None, source: str) -> None:
        """The Events about the object of `uid` (the API server filters by it: a busy
        namespace's others never come), at most MAX_EVENTS and what is left, each cut down as
        its page comes (event_seen)."""
        if self.left <= 0:
            return
        found, _ = copy_pods.list_pages(
            api,
            EVENT.path(self.namespace, None),
            min(MAX_EVENTS, self.left),
            keep=event_seen,
            until=self.until,
            fieldSelector=f"involvedObject.uid={uid}",
        )
        self.left -= len(found)  # what was read, the object's or not
        self.told += [event_of(e, source) for e in about(found, {uid})]


def story(ctx: Context, namespace: str, name: str) -> TrainJobStory:
    at = running(ctx, namespace, name)
    tj = at.trainjob
    workload = ctx.caches.workload(namespace, jobframework.expected_workload_name(tj))
    # One deadline for all of the story's reads: a slow worker holds a read slot this long
    # at most, however many objects its Events are read for.
    until = time.monotonic() + STORY_SECONDS
    events = _Events(namespace, until)
    for obj in (tj, workload):
        if obj is not None:
            events.read(ctx.manager.api, obj.uid, "manager")
    pods: list[types.Pod] = []
    more_pods = False
    usage_problem: str | None = None
    problem = at.problem
    if problem is None and at.copy is not None:
        assert at.worker is not None and at.remote is not None
        try:
            jobs, found, more_pods = pods_of(at, namespace, name, until=until)
            # Each object's Events: the copy and its Jobs first, then at most this many pods.
            owned = [at.copy_uid, *(o["metadata"].get("uid") for o in (*jobs, *found))]
            for uid in owned[:MAX_EVENT_OBJECTS]:
                events.read(at.remote.cluster.api, uid, at.worker)
            used, usage_problem = copy_pods.usage(at.remote, namespace, name, found, until)
            pods = [pod_of(p, at.worker, used) for p in found]
        except Refusal as exc:
            problem = str(exc)
        except (ApiException, TransportError) as exc:
            problem = str(_worker_error(at.worker, exc))
    if not pods:  # its pods are gone: how they ended, as kept with their log tails
        kept = log_tails.read(ctx.manager, str(tj.uid))
        pods = [pod_of(p, str(p.get("worker")), kept=True) for p in (kept or ([], {}))[0]]
    admitted_at = workload.admitted_at if workload is not None else None
    return TrainJobStory(
        metadata=types.StoryMeta(name=name, namespace=namespace, uid=tj.uid),
        worker=at.worker,
        worker_problem=problem,
        conditions=tj.conditions,
        # where it ran before and why each run ended, then where it runs (placements.py)
        placements=placements_io.story(ctx.manager, tj, admitted_at),
        # while it waits: the workers it is sent to, and how busy its queue is on each
        queues=[] if admitted_at or workload is None else waiting_in(ctx, workload),
        # our TrainJob on that worker: its status (conditions, jobsStatus) as last watched
        copy_on_worker=None if at.copy is None else types.Copy(status=at.copy.status),
        pods=sorted(pods, key=lambda p: (str(p.replicated_job), str(p.index))),
        more_pods=more_pods,
        usage_problem=usage_problem,
        events=by_time(events.told),
    )


def waiting_in(ctx: Context, workload: WorkloadView) -> list[types.QueueWait]:
    """For each worker a waiting Workload is sent to (its nominated clusters): the state of
    its copy there and the counts of the queue it waits in, as that worker's Kueue keeps them
    (exact positions are for Kueue's visibility API, which is not asked)."""
    namespace, name = workload.key
    out = []
    for worker in workload.nominated_clusters:
        remote = ctx.workers.get(worker)
        if remote is None or not remote.connected:
            out.append(types.QueueWait(worker=worker, problem=f"worker {worker} is not connected"))
            continue
        copy = remote.workload(namespace, name)
        state = "no copy yet"
        if copy is not None:
            state = "admitted" if copy.admitted else "waiting"
        counts = remote.queue_counts(namespace, str(workload.queue_name or ""))
        out.append(
            types.QueueWait.model_validate({"worker": worker, "copy": state, **(counts or {})})
        )
    return out


async def _read(call: ApiRequest, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` on the API's own threads, or the answer to give instead: 429 when the
    caller or its namespace is past its rate, or waited `WAIT_SECONDS` for a slot, or its
    queue is full (a caller who floods the API waits behind everyone else's turn, and the
    webhooks' threads are never theirs), the Refusal's code, 400 for a wrong parameter, 503
    when the manager's API cannot say."""
    user, namespace = call.caller.user, call.namespace
    if not take_each((_read_rates, user), (_namespace_rates, namespace)):
        if not _read_rates.has(user):
            return _too_many(
                f"you asked for more than {READS_PER_MINUTE_EACH} story or log reads a minute "
                "on this replica, your rate; try again"
            )
        return _too_many(
            f"namespace {namespace}'s users asked for more than "
            f"{READS_PER_MINUTE_PER_NAMESPACE} story or log reads a minute on this replica, "
            "its rate; try again"
        )
    async with _reads_slots.slot(
        user, namespace, wait=WAIT_SECONDS, gone=lambda: _gone(call.http)
    ) as refused:
        if refused is not None:
            return _too_many(refused)
        try:
            return await asyncio.get_running_loop().run_in_executor(_reads, fn, *args)
        except Refusal as exc:
            return status(exc.code, str(exc))
        except ValueError as exc:
            return status(400, str(exc))
        except (ApiException, TransportError) as exc:
            return status(503, f"the manager's API: {exc}")


def _too_many(message: str) -> web.Response:
    answer = status(429, message)
    answer.headers["Retry-After"] = "1"
    return answer


def _gone(request: web.Request) -> bool:
    """Whether the client of `request` went away."""
    transport = request.transport
    return transport is None or transport.is_closing()


async def _story(ctx: Context, call: ApiRequest) -> web.StreamResponse:
    found = await _read(call, story, ctx, call.namespace, call.name)
    if isinstance(found, web.StreamResponse):
        return found
    return web.Response(body=orjson.dumps(found.to_json()), content_type="application/json")


def _prepare_log(ctx: Context, call: ApiRequest) -> tuple[Running, str, dict[str, Any]] | str:
    """What to stream (where, which pod, what to ask), or the kept tail of a pod that is
    gone (dispatcher/workers/log_tails.py), or Refusal saying why neither."""
    at = running(ctx, call.namespace, call.name)
    pods: list[Dict] = []
    if at.problem is None and at.copy is not None:
        # only the pods the request can mean: by name, or by role and index
        until = time.monotonic() + STORY_SECONDS  # both looks within one deadline
        _, pods, _ = pods_of(at, call.namespace, call.name, log_pods(call.query), until=until)
        if not pods and pods_of(at, call.namespace, call.name, most=1, until=until)[1]:
            pick_pod([], call.query)  # it has pods, none of them this one: 404 naming it
    if pods:
        pod = pick_pod(pods, call.query)
        return at, pod["metadata"]["name"], log_query(pod, call.query)
    kept = log_tails.read(ctx.manager, str(at.trainjob.uid))
    if kept is not None:
        kept_pods, tails = kept
        pod = pick_pod(kept_pods, call.query)
        asked = log_query(pod, call.query)
        return tails.get(log_tails.key_of(pod["metadata"]["name"], asked["container"]), "")
    if at.problem is not None:
        raise Refusal(404 if at.worker is None else 503, f"no logs: {at.problem}")
    raise Refusal(
        404,
        f"no logs: worker {at.worker} has no pods of TrainJob {call.name} (not made yet, or "
        "removed after it ended, and no tail of theirs kept)",
    )


async def _log(ctx: Context, call: ApiRequest) -> web.StreamResponse:
    found = await _read(call, _prepare_log, ctx, call)
    if isinstance(found, web.StreamResponse):
        return found
    if isinstance(found, str):  # its pods are gone: what was kept of them
        return web.Response(text=found, content_type="text/plain", charset="utf-8")
    at, pod, query = found
    with _streams.slot(call.caller.user, call.namespace) as refused:
        if refused is not None:
            answer = status(429, refused)
            answer.headers["Retry-After"] = "5"
            return answer
        return await _relay(at, pod, call, query)


async def _relay(
    at: Running, pod: str, call: ApiRequest, query: dict[str, Any]
) -> web.StreamResponse:
    """Hand the worker's answer on as it comes. The worker is read on a thread of its own;
    the pieces come over a small queue, so a slow reader slows the read (no buffering
    without bound); a reader that leaves ends the read within a second."""
    remote, worker = at.remote, at.worker
    assert remote is not None and worker is not None
    loop = asyncio.get_running_loop()
    pieces: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(maxsize=16)
    abort = threading.Event()
    opened = asyncio.Event()
    path = POD.object_path(call.namespace, pod, "log")

    def put(item: bytes | BaseException | None) -> None:
        if abort.is_set():  # the request has ended: no one takes it
            return
        future = asyncio.run_coroutine_threadsafe(pieces.put(item), loop)
        while not abort.is_set():
            try:
                future.result(timeout=1.0)
                return
            except TimeoutError:
                continue
        future.cancel()

    def hand_on(data: bytes) -> bool:
        put(data)
        return not abort.is_set()

    def answered() -> None:  # the worker said 200: the reader gets its headers now
        loop.call_soon_threadsafe(opened.set)

    def read() -> None:
        try:
            remote.cluster.api.stream(
                path,
                query,
                hand_on,
                timeout=None if query.get("follow") else WHOLE_LOG_SECONDS,
                on_open=answered,
                abort=abort,
                accept="*/*",
                own_connection=True,  # paced by the tenant's reader: see `stream`
            )
            put(None)
        except BaseException as exc:  # handed to the request, which answers with it
            put(exc)

    thread = threading.Thread(target=read, name=f"log-{call.namespace}/{pod}", daemon=True)
    thread.start()
    response: web.StreamResponse | None = None
    heard = loop.time()  # the last piece
    try:
        while True:
            try:
                item = await asyncio.wait_for(pieces.get(), 1.0)
            except TimeoutError:
                if _gone(call.http):
                    return response or web.Response()
                if opened.is_set() and response is None:
                    response = await _open(call.http)  # headers now, lines when they come
                if response is not None and loop.time() - heard > FOLLOW_IDLE_SECONDS:
                    log.info(
                        "log stream ended", extra={"pod": f"{call.namespace}/{pod}", "why": "idle"}
                    )
                    await response.write_eof()
                    return response
                continue
            heard = loop.time()
            if isinstance(item, BaseException):
                if response is not None:  # mid-stream: nothing more to say but the end
                    log.info(
                        "log stream ended",
                        extra={"pod": f"{call.namespace}/{pod}", "why": str(item)},
                    )
                    return response
                if isinstance(item, (ApiException, TransportError)):
                    return _worker_status(f"{worker}, pod {pod}", item)
                raise item
            if response is None:
                response = await _open(call.http)
            if item is None:
                await response.write_eof()
                return response
            await response.write(item)
    finally:
        abort.set()


def _worker_status(where: str, exc: Exception) -> web.Response:
    if isinstance(exc, ApiException) and exc.status < 500:
        # The worker's own refusal (a container not started yet, a bad parameter): its words.
        return status(exc.status if exc.status in (400, 404) else 502, f"worker {where}: {exc}")
    refusal = _worker_error(where, exc)
    return status(refusal.code, str(refusal))


async def _open(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"}
    )
    await response.prepare(request)
    return response


def api(ctx: Context) -> ApiGroup:
    """The group the dispatcher serves beside its webhooks: a TrainJob's log and story (also
    readable as `trainjobstories/NAME`, which `kubectl get` and `kubectl explain` know), and
    the list of workers (dispatcher/readapi/worker_list.py)."""

    async def log_handler(call: ApiRequest) -> web.StreamResponse:
        return await _log(ctx, call)

    async def story_handler(call: ApiRequest) -> web.StreamResponse:
        return await _story(ctx, call)

    return ApiGroup(
        GROUP,
        VERSION,
        c.TRAINJOB_PLURAL,
        (
            Subresource("log", "TrainJobLog", log_handler),
            Subresource("story", KIND, story_handler, TrainJobStory),
        ),
        (ClusterList("workers", worker_list.KIND, worker_list.handler(ctx), types.WorkerList),),
        (
            ReadOnly(
                "trainjobstories", "trainjobstory", "TrainJobStory", story_handler, TrainJobStory
            ),
        ),
    )
