"""The job story's types: what `view.trainjob.dev` answers about a TrainJob and its workers.

Defined once here. The dispatcher builds them (dispatcher/readapi/job_story.py,
dispatcher/readapi/worker_list.py), its aggregated API serves their OpenAPI schema from them
(`kubectl explain trainjobstories`), `kubectl trainjob` parses the answer into them, the web
view's type declarations (plugin/kubectl_trainjob/ui/story.d.ts) and the field table in
docs/users/usage.md are written from them (`./run manifests`). A field's docstring is its
description in all of those.

On the wire the names are camelCase, as Kubernetes writes them; unknown fields are ignored
when read, so an older plugin reads a newer dispatcher's answer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from kubebase.objects import Dict
from trainjob_api import constants as c
from trainjob_api.quantity import parse_quantity
from trainjob_api.views import EventView, PodMetricsView, PodSeen

GROUP = f"view.{c.DOMAIN}"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
MAX_EVENT_MESSAGE = 1024  # characters of an Event's message the story keeps
# Characters kept of an Event's other strings: a core/v1 Event's are not bounded by the API
# server (events.k8s.io's are: a reason of 128, a note of 1 KiB), and anyone who may create
# Events in a namespace writes them.
MAX_EVENT_FIELD = 253


class StoryType(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
        use_attribute_docstrings=True,
        # every field is sent, defaults too: the schema of what is sent says so
        json_schema_serialization_defaults_required=True,
    )

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class Condition(StoryType):
    """A condition of the TrainJob's status, as its controllers wrote it."""

    type: str
    """The condition's type: Created, Suspended, Complete, Failed, ...
    (docs/users/user-guide.md)."""
    status: str
    """True, False or Unknown."""
    reason: str | None = None
    """Why, in one CamelCase word."""
    message: str | None = None
    """Why, for a person."""
    last_transition_time: str | None = None
    """When the status last changed (RFC 3339)."""


class JobCounts(StoryType):
    """One replicated job's Jobs on the worker, as its copy's status counts them."""

    name: str
    """The replicated job (a role of the runtime: node, launcher, ...)."""
    active: int = 0
    """Its Jobs running."""
    ready: int = 0
    """Its Jobs whose pods are ready."""
    succeeded: int = 0
    """Its Jobs done."""
    failed: int = 0
    """Its Jobs failed."""
    suspended: int = 0
    """Its Jobs suspended."""


class CopyStatus(StoryType):
    """The status of our copy of the TrainJob on its worker, as the dispatcher last watched it.
    Fields other than these are kept as the worker wrote them."""

    model_config = ConfigDict(extra="allow")

    conditions: list[Condition] = []
    """The copy's conditions on the worker."""
    jobs_status: list[JobCounts] = []
    """Its Jobs by replicated job."""


class Copy(StoryType):
    """Our copy of the TrainJob on the worker that runs it."""

    status: CopyStatus = CopyStatus()
    """Its status there."""


class PodUsage(StoryType):
    """A pod's CPU and memory use, summed over its containers, as the worker's metrics API
    (metrics.k8s.io) last measured them: what `kubectl top pod` shows there."""

    cpu_millicores: int
    """CPU in thousandths of a core."""
    memory_bytes: int
    """Memory (working set) in bytes."""
    timestamp: str | None = None
    """When it was measured."""
    window: str | None = None
    """Over how long (a duration: 15s)."""


class Pod(StoryType):
    """One of the TrainJob's pods on its worker, or, once they are gone, as kept with its log
    tail."""

    name: str
    """The pod's name on the worker."""
    worker: str
    """The worker it runs on (its MultiKueueCluster)."""
    replicated_job: str | None = None
    """Its role: the runtime's replicated job (node, launcher, ...)."""
    index: str | None = None
    """Its completion index in that role."""
    phase: str | None = None
    """Pending, Running, Succeeded, Failed or Unknown."""
    node: str | None = None
    """The node it was scheduled to."""
    creation_timestamp: str | None = None
    """When it was made."""
    ready: bool = False
    """Whether all its containers are ready."""
    restarts: int = 0
    """Its containers' restarts, summed."""
    containers: list[str] = []
    """Its containers' names (the log reads one of them)."""
    usage: PodUsage | None = None
    """Its CPU and memory use while it runs; null when not measured (see usageProblem)."""
    kept: bool = False
    """True when the pod is gone and this is how it ended, kept with its log tail."""


class Event(StoryType):
    """An Event about the TrainJob, its Workload, or (on the worker) its copy, Jobs and pods."""

    source: str
    """Where it was recorded: `manager`, or the worker's name."""
    type: str | None = None
    """Normal or Warning."""
    reason: str | None = None
    """Why, in one CamelCase word."""
    message: str = ""
    """What happened (its first 1,024 characters)."""
    object: str = ""
    """The object it is about, as KIND/NAME."""
    count: int = 1
    """How many times it happened."""
    first_timestamp: str | None = None
    """When it first happened."""
    last_timestamp: str | None = None
    """When it last happened."""


class Run(StoryType):
    """One run of the TrainJob on a worker: those that ended before the job did, then the
    current one."""

    worker: str
    """Where it ran."""
    started: str | None = None
    """When its pods were started there, as the worker said (null when it never said)."""
    ended: str | None = None
    """When the run ended (null while it goes on)."""
    reason: str | None = None
    """Why it ended: the dispatcher's reason for sending it back (ClusterLost,
    RemoteEvicted, ...), Kueue's eviction reason, or Complete / `Failed: REASON`."""
    message: str | None = None
    """Why it ended, for a person."""
    current: bool = False
    """True for the run the TrainJob's status names."""
    resumed_from: str | None = None
    """The checkpoint it was started from (its name under the job's checkpoint place), when
    it was sent there after a move; null when it started afresh."""
    start_step: int | None = None
    """The step it started from: the checkpoint's step, 0 for a run of a job that keeps
    checkpoints started afresh (null: not known)."""
    checkpoint: str | None = None
    """The last checkpoint it reported (the `checkpoint` metric of its progress reports)."""
    checkpoint_step: int | None = None
    """The step that checkpoint holds (the `checkpoint_step` metric)."""
    restarts: int | None = None
    """How many times its Jobs were made again there by the runtime's failurePolicy (the
    worker's Events say why each time); null when none was."""


class QueueWait(StoryType):
    """While the job waits: one worker it is sent to, its copy's state there and how busy
    the queue it waits in is, as that worker's Kueue counts in the queues' status."""

    worker: str
    """The worker (a nominated cluster of its Workload)."""
    copy_state: str | None = Field(default=None, alias="copy")
    """The copy's Workload there: `waiting`, `admitted` or `no copy yet`."""
    problem: str | None = None
    """Why there is nothing to say: the worker not connected, a queue that does not exist."""
    local_queue: str | None = None
    """The LocalQueue it waits in there."""
    pending_in_local_queue: int | None = None
    """Workloads pending in that LocalQueue."""
    cluster_queue: str | None = None
    """That LocalQueue's ClusterQueue."""
    pending_in_cluster_queue: int | None = None
    """Workloads pending in that ClusterQueue."""
    admitted_in_cluster_queue: int | None = None
    """Workloads admitted in that ClusterQueue."""


class StoryMeta(StoryType):
    """Which TrainJob of the manager the story is of."""

    name: str
    """The TrainJob's name."""
    namespace: str
    """Its namespace."""
    uid: str | None = None
    """Its UID on the manager."""


class TrainJobStory(StoryType):
    """Where a TrainJob of the manager runs and ran, its pods there, its Events on the
    manager and on that worker, and while it waits, the queues it waits in."""

    api_version: Literal["view.trainjob.dev/v1alpha1"] = "view.trainjob.dev/v1alpha1"
    """view.trainjob.dev/v1alpha1."""
    kind: Literal["TrainJobStory"] = "TrainJobStory"
    """TrainJobStory."""
    metadata: StoryMeta
    """The TrainJob the story is of."""
    worker: str | None = None
    """The worker that runs it (null while it runs nowhere)."""
    worker_problem: str | None = None
    """Why its worker could not be read, when it could not."""
    conditions: list[Condition] = []
    """The manager TrainJob's conditions."""
    placements: list[Run] = []
    """Where it ran, oldest first, then where it runs."""
    queues: list[QueueWait] = []
    """While its Workload is not admitted: each worker it is sent to."""
    copy_on_worker: Copy | None = Field(default=None, alias="copy")
    """Our copy on that worker (null when there is none: not made yet, or removed once it
    ended)."""
    pods: list[Pod] = []
    """Its pods on that worker (at most 500), by role and index."""
    more_pods: bool = False
    """True when the worker has more of its pods than the story lists."""
    usage_problem: str | None = None
    """Why the running pods carry no CPU and memory use, when the worker cannot say."""
    events: list[Event] = []
    """Events about it on the manager and on its worker, oldest first (at most 500 an
    object)."""


class ResourceUse(StoryType):
    """One resource of a flavour in a worker's ClusterQueue."""

    name: str
    """The resource (cpu, memory, nvidia.com/gpu, ...)."""
    nominal_quota: str
    """Its quota in the ClusterQueue."""
    reserved: str
    """Reserved by admitted Workloads."""
    used: str
    """In use by running Workloads."""
    share: float
    """The reserved share of the quota, 0 to 1."""


class FlavorUse(StoryType):
    """A ResourceFlavor of a worker's ClusterQueue and its resources."""

    name: str
    """The ResourceFlavor."""
    resources: list[ResourceUse] = []
    """Its resources."""


class ClusterQueueUse(StoryType):
    """One of a worker's ClusterQueues, its quota and use as the dispatcher last watched."""

    name: str
    """The ClusterQueue."""
    cohort: str | None = None
    """Its cohort, if any."""
    active: bool
    """Whether Kueue says it is active."""
    pending_workloads: int
    """Workloads pending in it."""
    reserving_workloads: int
    """Workloads holding a quota reservation in it."""
    admitted_workloads: int
    """Workloads admitted in it."""
    flavors: list[FlavorUse] = []
    """Its quota and use by flavour."""


class WorkerMeta(StoryType):
    """The worker's name."""

    name: str
    """The worker's MultiKueueCluster."""


class Worker(StoryType):
    """A worker as the dispatcher replica that answers sees it, from the caches it keeps for
    placement."""

    api_version: Literal["view.trainjob.dev/v1alpha1"] = "view.trainjob.dev/v1alpha1"
    """view.trainjob.dev/v1alpha1."""
    kind: Literal["Worker"] = "Worker"
    """Worker."""
    metadata: WorkerMeta
    """Named after its MultiKueueCluster."""
    connection: Literal["Connected", "Connecting", "Disconnected", "NoKubeconfig"]
    """Whether the dispatcher reaches it."""
    problem: str | None = None
    """Why it is not connected."""
    down_since: str | None = None
    """Since when it has not been reached."""
    train_job_copies: int | None = None
    """Our TrainJob copies there."""
    cluster_queues: list[ClusterQueueUse] | None = None
    """Its ClusterQueues; null while not known (the worker unreachable, or its
    ClusterQueues not readable with the manager's identity there)."""


class WorkerList(StoryType):
    """The workers."""

    api_version: Literal["view.trainjob.dev/v1alpha1"] = "view.trainjob.dev/v1alpha1"
    """view.trainjob.dev/v1alpha1."""
    kind: Literal["WorkerList"] = "WorkerList"
    """WorkerList."""
    metadata: dict[str, Any] = {}
    """Empty."""
    items: list[Worker] = []
    """One per MultiKueueCluster."""


# ---- from Kubernetes objects -------------------------------------------------------------


def pod_usage(metrics: Dict) -> PodUsage | None:
    """One PodMetrics in short, summed over its containers; None when it holds no figure."""
    view = PodMetricsView(metrics)
    cpu = memory = 0
    try:
        usages = view.usages
        for used_cpu, used_memory in usages:
            cpu += math.ceil(parse_quantity(used_cpu) * 1000)
            memory += math.ceil(parse_quantity(used_memory))
    except (ValueError, AttributeError, TypeError):
        return None
    if not usages:
        return None
    return PodUsage(
        cpu_millicores=cpu, memory_bytes=memory, timestamp=view.timestamp, window=view.window
    )


def pod_of(
    pod: Dict, worker: str, usage: Mapping[str, PodUsage] | None = None, *, kept: bool = False
) -> Pod:
    """A pod of the worker in short; with its use from `usage` (by pod name) when known."""
    view = PodSeen(pod)
    return Pod(
        name=view.name,
        worker=worker,
        replicated_job=view.labels.get(c.REPLICATED_JOB_NAME_LABEL),
        index=view.labels.get(c.JOB_COMPLETION_INDEX),
        phase=view.phase,
        node=view.node_name,
        creation_timestamp=view.created,
        ready=view.ready,
        restarts=view.restarts,
        containers=view.container_names,
        usage=(usage or {}).get(view.name),
        kept=kept,
    )


def event_seen(event: Dict) -> Dict:
    """What a story reads of an Event (`event_of`, `about`), each string cut to its bound: a
    list of Events is cut down to this as its page comes, so a read holds one page of whole
    Events at a time (each up to the 1.5 MiB etcd stores), never all it reads."""

    def cut(value: object, most: int = MAX_EVENT_FIELD) -> object:
        return value[:most] if isinstance(value, str) else None

    involved = event.get("involvedObject")
    involved = involved if isinstance(involved, dict) else {}
    seen: Dict = {
        "type": cut(event.get("type")),
        "reason": cut(event.get("reason")),
        "message": cut(event.get("message"), MAX_EVENT_MESSAGE),
        "involvedObject": {k: cut(involved.get(k)) for k in ("kind", "name", "uid")},
        **{k: cut(event.get(k)) for k in ("firstTimestamp", "lastTimestamp", "eventTime")},
    }
    count = event.get("count")
    if isinstance(count, int) and not isinstance(count, bool):
        seen["count"] = count
    return seen


def event_of(event: Dict, source: str) -> Event:
    """An Event in short; `source` says where it was recorded."""
    view = EventView(event)
    return Event(
        source=source,
        type=view.event_type,
        reason=view.reason,
        message=view.message[:MAX_EVENT_MESSAGE],
        object=view.about,
        count=view.count,
        first_timestamp=view.first_seen,
        last_timestamp=view.last_seen,
    )


def about(events: Iterable[Dict], uids: set[str | None]) -> list[Dict]:
    """The Events about one of the objects `uids`."""
    return [e for e in events if EventView(e).about_uid in uids]


def by_time(events: Iterable[Event]) -> list[Event]:
    return sorted(events, key=lambda e: e.last_timestamp or "")


# The kinds the API serves, by the resource that answers with them.
KINDS: tuple[type[StoryType], ...] = (TrainJobStory, Worker)
