"""One worker cluster seen from the manager: its own client, watches, cache and connection state.

Each RemoteCluster runs one informer (kubecontrol/informer.py) per watched kind (Workloads and
TrainJobs carrying our origin label). A failing watch marks the cluster disconnected and lists
again with exponential backoff; it never blocks other clusters. Every change calls
`on_change(namespace, name, urgent)` and every change of the connection state `on_state(cluster)`;
both must return quickly.

More informers keep the worker's LocalQueues and ClusterQueues, for capacity-aware placement
(dispatcher/decisions/capacity.py), and its (Cluster)TrainingRuntimes, to send copies only where the
TrainJob's runtime is the manager's. They are optional: an identity that may not read them
(the worker role of Kueue's own MultiKueue grants none) leaves the room or the runtime unknown
and the cluster connected. `on_room(cluster)` is called when a copy held back from the worker
may go now: a ClusterQueue there may have more room (its reservation went down, or its spec
changed), or a queue or a runtime appeared or changed. Two more, also optional, bring the
worker's Events about TrainJobs and its pods' warnings to `on_event(cluster, event)`, to be
recorded again on the manager TrainJob (dispatcher/decisions/mirror.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import time
from collections.abc import Callable

from dispatcher.decisions import checkpoints, preemption
from dispatcher.decisions.capacity import Fit, cohort_of, fit, quota_summary, requests_of
from dispatcher.decisions.copies import COPY_KINDS, seen
from dispatcher.decisions.data import Claims
from kubebase.objects import Dict
from kubecontrol.cluster import Cluster
from kubecontrol.informer import PAGE, TENANT_SIZED_PAGE, Informer, slim
from trainjob.ownership import is_dependency_copy
from trainjob.queues import ClusterQueueView, LocalQueueView, Table
from trainjob.runtime.defaults import same_runtime_spec
from trainjob_api import conditions as cond
from trainjob_api import constants as c
from trainjob_api.story import ClusterQueueUse
from trainjob_api.views import TrainJobView, WorkloadView

log = logging.getLogger(__name__)

# What else we read of each worker (all of them, optional): its queues, for capacity-aware
# placement, and its runtimes, to check they are the manager's.
READ_KINDS = {
    k.kind: k
    for k in (
        c.LOCAL_QUEUE,
        c.CLUSTER_QUEUE,
        c.TRAINING_RUNTIME,
        c.CLUSTER_TRAINING_RUNTIME,
        c.PERSISTENT_VOLUME_CLAIM,
    )
}
CLAIM_KINDS = (c.PERSISTENT_VOLUME_CLAIM.kind,)
QUEUE_KINDS = (c.LOCAL_QUEUE.kind, c.CLUSTER_QUEUE.kind)
# How long after connecting an estimate may be pending at most (twice the held watch's list
# timeout): a worker whose lists never end holds no job waiting beyond it.
ESTIMATE_PENDING_MAX = 120.0
RUNTIME_KINDS = (c.TRAINING_RUNTIME.kind, c.CLUSTER_TRAINING_RUNTIME.kind)


def dial(name: str, kubeconfig: Dict, field_manager: str) -> Cluster:
    """A connection to a worker from its vetted kubeconfig (short timeouts: an unreachable
    worker is reported down soon)."""
    return Cluster.from_kubeconfig(name, kubeconfig, field_manager, timeout=10)


def _claim_seen(claim: Dict) -> Dict:
    """What the cache keeps of a worker's PersistentVolumeClaim: who it is and its phase
    (dispatcher/decisions/data.py)."""
    meta = claim.get("metadata") or {}
    return {
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta
        },
        "status": {"phase": (claim.get("status") or {}).get("phase")},
    }


# The longest name of an object (a DNS subdomain).
MAX_NAME = 253


def _cut(value: object, most: int) -> object:
    return value[:most] if isinstance(value, str) else value


def _event_seen(event: Dict) -> Dict:
    """What the cache keeps of a worker Event: what mirror.py reads, its message cut short
    (every pod warning of every worker is held while it lasts)."""
    meta = event.get("metadata") or {}
    involved = event.get("involvedObject") or {}
    return {
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta
        },
        # a pod's name is at most 253 characters; an Event's is anyone's to write
        "involvedObject": {
            k: _cut(involved[k], MAX_NAME) for k in ("kind", "name") if k in involved
        },
        "type": event.get("type"),
        "reason": event.get("reason"),
        "message": str(event.get("message") or "")[:1024],
        "count": event.get("count"),
    }


# What is remembered of a TrainJob copy's last checkpoint: (copy UID, its name and step, None
# while it named none, when it was first seen named; None: not known).
Noted = tuple[str, str | None, int | None, dt.datetime | None]


def _held_in(kept: Dict) -> str:
    """The ClusterQueue a kept Workload holds quota in (the held watch's index)."""
    found = preemption.held_of(kept)
    return found.cluster_queue if found is not None else ""


class RemoteCluster:
    def __init__(
        self,
        name: str,
        cluster: Cluster,
        origin: str,
        on_change: Callable[[str, str, bool], None],
        on_state: Callable[[str], None] = lambda name: None,
        down_since: float | None = None,
        gate: Cluster | None = None,
        on_room: Callable[[str], None] = lambda name: None,
        on_event: Callable[[str, Dict], None] | None = None,
        events: str = "Warning",
        held: bool = False,
        checkpoints_seen: dict[tuple[str, str], Noted] | None = None,
    ) -> None:
        """`down_since` (epoch seconds): since when the worker has been unreachable, as
        recorded before this process started (the MultiKueueCluster's Active=False transition);
        None when it was not known to be down. `held`: watch every Workload here that holds
        quota, and the checkpoints our copies report, to estimate what a preemption here
        would cost (`preemption_cost`), remembering checkpoints in `checkpoints_seen` (a
        reconnection keeps what was seen before it)."""
        self.name = name
        self.origin = origin
        self.cluster = cluster  # its own connection, from its own kubeconfig (`dial`)
        if gate is not None:  # the manager's leader election gates ours too
            self.cluster.follow_gate(gate)
        self._on_change, self._on_state = on_change, on_state
        self._ok = {k: False for k in COPY_KINDS}
        self._tried = {k: False for k in COPY_KINDS}
        self.last_error = "connecting"
        # The worker-lost clock, in wall-clock time so that it can come from the cluster's
        # condition and survive restarts. None while connected, or while connecting after
        # start-up with no outage on record: a cluster we have not tried yet is never "lost".
        self.down_since = down_since
        selector = f"{c.KUEUE_MULTIKUEUE_ORIGIN_LABEL}={origin}"
        self._informers = {
            kind: Informer(
                self.cluster.api,
                k,
                functools.partial(self._changed, kind),
                label_selector=selector,
                on_state=functools.partial(self._set_ok, kind),
                name=f"{name}-{kind}",
                list_timeout=10,  # an unreachable worker is reported down soon
                transform=functools.partial(seen, k),
                page=TENANT_SIZED_PAGE,  # the copies are as large as their TrainJobs
            )
            for kind, k in COPY_KINDS.items()
        }
        self._on_room = on_room
        # Per ClusterQueue: its reservation and generation when last seen.
        self._last_seen: dict[str, tuple[Table, object]] = {}
        self._read_ok = {k: False for k in READ_KINDS}
        on_read = {
            c.LOCAL_QUEUE.kind: self._appeared,
            c.CLUSTER_QUEUE.kind: self._cluster_queue_changed,
            c.TRAINING_RUNTIME.kind: self._runtime_changed,
            c.CLUSTER_TRAINING_RUNTIME.kind: self._runtime_changed,
            c.PERSISTENT_VOLUME_CLAIM.kind: self._claim_changed,
        }
        transforms = {c.PERSISTENT_VOLUME_CLAIM.kind: _claim_seen}
        pages = {c.TRAINING_RUNTIME.kind: TENANT_SIZED_PAGE}  # a tenant's may be a megabyte
        self._read = {
            kind: Informer(
                self.cluster.api,
                k,
                on_read[kind],
                on_state=functools.partial(self._set_read_ok, kind),
                name=f"{name}-{kind}",
                list_timeout=10,
                transform=transforms.get(kind, slim),
                page=pages.get(kind, PAGE),
            )
            for kind, k in READ_KINDS.items()
        }

        # The worker's Events about TrainJobs and its pods' warnings (mirror.py), for
        # `on_event(cluster, event)`; `events` says which: Warning, All, or None.
        warning = ",type=Warning" if events == "Warning" else ""
        self._events = [
            Informer(
                self.cluster.api,
                c.EVENT,
                lambda type_, obj: on_event(self.name, obj) if type_ != "DELETED" else None,
                field_selector=selector,
                name=f"{name}-Event-{what}",
                list_timeout=10,
                transform=_event_seen,
            )
            for what, selector in (
                ("TrainJob", f"involvedObject.kind=TrainJob{warning}"),
                ("Pod", "involvedObject.kind=Pod,type=Warning"),
            )
            if on_event is not None and events != "None"
        ]

        # Every Workload here holding quota (ours and the worker's own), and per TrainJob copy
        # of ours the last checkpoint its report named and when it was first seen named:
        # what a preemption here would evict, and the training each would lose.
        self._held_ok = False
        # The watches an estimate reads whose first list has not come in or failed yet: while
        # any has not, an estimate is pending (known soon), not unknown.
        self._estimate_unheard = {*QUEUE_KINDS, "held"} if held else set()
        self._made_at = time.monotonic()
        # (namespace, name) -> what is remembered of its last checkpoint (Noted), kept by the
        # caller across reconnections
        self._checkpoints: dict[tuple[str, str], Noted] = (
            checkpoints_seen if checkpoints_seen is not None else {}
        )
        self._held = (
            Informer(
                self.cluster.api,
                c.WORKLOAD,
                lambda type_, obj: None,
                on_state=self._set_held_ok,
                name=f"{name}-Workload-held",
                list_timeout=60,  # every Workload of the worker, in pages of tenant size
                transform=functools.partial(preemption.held_seen, origin=origin),
                page=TENANT_SIZED_PAGE,
                keep=lambda kept: preemption.held_of(kept) is not None,
                group_by=_held_in,
            )
            if held
            else None
        )

    def _changed(self, kind: str, _type: str, obj: Dict) -> None:
        """A copy changed: `on_change(namespace, name, urgent)`, urgent when it is a TrainJob
        whose run just ended (its end frees quota on the manager: ahead of other work)."""
        meta = obj["metadata"]
        ended = kind == c.TRAINJOB.kind and cond.trainjob_finished(
            list((obj.get("status") or {}).get("conditions") or [])
        )
        try:
            if kind == c.TRAINJOB.kind and self._held is not None:
                self._note_checkpoint(_type, obj)
        finally:  # the change is told whatever the memory made of it
            self._on_change(meta["namespace"], meta["name"], ended)

    def _note_checkpoint(self, type_: str, obj: Dict) -> None:
        """Remember when a TrainJob copy's report first named its latest checkpoint (name and
        step): the report's time (now when it has none we can read, or one ahead of ours).
        A copy first seen already naming one (this process started, or began watching the
        worker, after it did) has it with no time: when it was saved is not known, and it
        counts as none until the next is named. A copy is remembered from its first sighting,
        checkpoint or not, until it is deleted."""
        meta = obj["metadata"]
        key, uid = (meta["namespace"], meta["name"]), str(meta.get("uid", ""))
        if type_ == "DELETED":
            self._checkpoints.pop(key, None)
            return
        report = TrainJobView(obj).trainer_status
        found = checkpoints.reported(report)
        name, step = (found.name, found.step) if found is not None else (None, None)
        before = self._checkpoints.get(key)
        if before is not None and before[:3] == (uid, name, step):
            return
        when: dt.datetime | None = None
        if report is not None and found is not None and before is not None and before[0] == uid:
            now = when = dt.datetime.now(dt.UTC)
            try:
                told = cond.parse_time(str(report.reported_at))
                when = min(told.replace(tzinfo=told.tzinfo or dt.UTC).astimezone(dt.UTC), now)
            except (TypeError, ValueError, OverflowError):
                pass
        self._checkpoints[key] = (uid, name, step, when)

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def informers(self) -> list[Informer]:
        """Every watch of this worker: our copies, the kinds read for room and runtimes, the
        Events mirrored."""
        held = [self._held] if self._held is not None else []
        return [*self._informers.values(), *self._read.values(), *self._events, *held]

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    @property
    def connected(self) -> bool:
        return all(self._ok.values())

    @property
    def connecting(self) -> bool:
        """Started, and no attempt to list from the worker has finished yet."""
        return not all(self._tried.values())

    def disconnected_for(self) -> float:
        """Seconds the worker has been unreachable: 0 while connected or still connecting."""
        if self.connected or self.down_since is None:
            return 0.0
        return max(0.0, time.time() - self.down_since)

    def _set_ok(self, kind: str, ok: bool, error: str = "") -> None:
        before, was_connecting = self.connected, self.connecting
        self._ok[kind] = ok
        self._tried[kind] = True
        if error:
            self.last_error = error
        if self.connected:
            self.down_since = None
            if not before and self._held is not None:
                # connected again: an estimate is pending until the watches it reads that
                # failed meanwhile have listed the worker again
                self._estimate_unheard = {k for k in QUEUE_KINDS if not self._read_ok[k]}
                self._estimate_unheard |= set() if self._held_ok else {"held"}
                self._made_at = time.monotonic()
        elif self.down_since is None and (before or (was_connecting and not ok)):
            # Lost now: it went down, or the first attempt after start-up failed with no
            # earlier outage on record (an unknown lost time counts as lost now).
            self.down_since = time.time()
        if before != self.connected or (was_connecting and not self.connecting):
            log.info(
                "worker connected" if self.connected else "worker disconnected",
                extra={"cluster": self.name}
                if self.connected
                else {"cluster": self.name, "error": str(self.last_error)},
            )
            self._on_state(self.name)

    # ---- cache -------------------------------------------------------------------------------

    def get(self, kind: str, namespace: str, name: str) -> Dict | None:
        return self._informers[kind].get((namespace, name))

    def items(self, kind: str) -> list[Dict]:
        return self._informers[kind].items()

    def workload(self, namespace: str, name: str) -> WorkloadView | None:
        """Our copy of a Workload here, as the watch last saw it."""
        found = self.get(c.WORKLOAD.kind, namespace, name)
        return None if found is None else WorkloadView(found)

    def trainjob(self, namespace: str, name: str) -> TrainJobView | None:
        """Our TrainJob here, as the watch last saw it."""
        found = self.get(c.TRAINJOB.kind, namespace, name)
        return None if found is None else TrainJobView(found)

    # ---- capacity --------------------------------------------------------------------------

    def _set_read_ok(self, kind: str, ok: bool, error: str = "") -> None:
        self._read_ok[kind] = ok
        self._heard(kind)

    def _readable(self, kinds: tuple[str, ...]) -> bool:
        return self.connected and all(self._read_ok[k] for k in kinds)

    def _appeared(self, type_: str, obj: Dict) -> None:
        if type_ == "ADDED":  # a copy waiting for a missing LocalQueue may go now
            self._on_room(self.name)

    def _runtime_changed(self, type_: str, obj: Dict) -> None:
        if type_ != "DELETED":  # made, or changed: it may be the manager's now
            self._on_room(self.name)

    def _claim_changed(self, type_: str, obj: Dict) -> None:
        if type_ != "DELETED":  # made, or bound: a job waiting for its data may go there now
            self._on_room(self.name)

    def _cluster_queue_changed(self, type_: str, obj: Dict) -> None:
        """Room may have grown when a ClusterQueue's reservation went down for some flavour
        and resource, or its spec (quota, cohort) changed, or it appeared."""
        name = obj["metadata"]["name"]
        before = self._last_seen.pop(name, None)
        if type_ == "DELETED":
            return
        now = (ClusterQueueView(obj).reserved, obj["metadata"].get("generation"))
        self._last_seen[name] = now
        if (
            before is None
            or before[1] != now[1]
            or any(qty < before[0].get(key, qty) for key, qty in now[0].items())
            or any(key not in now[0] for key in before[0])
        ):
            self._on_room(self.name)

    def local_queue(self, namespace: str, name: str) -> LocalQueueView | None:
        found = self._read[c.LOCAL_QUEUE.kind].get((namespace, name))
        return None if found is None else LocalQueueView(found)

    def cluster_queue(self, name: str) -> ClusterQueueView | None:
        found = self._read[c.CLUSTER_QUEUE.kind].get(name) if name else None
        return None if found is None else ClusterQueueView(found)

    def cluster_queues(self) -> list[ClusterQueueView]:
        return [ClusterQueueView(cq) for cq in self._read[c.CLUSTER_QUEUE.kind].items()]

    def fit(self, workload: WorkloadView) -> Fit | None:
        """Whether a manager Workload's PodSets fit the ClusterQueue its copy would be queued
        in here (capacity.fit); None while that is unknown (queues not readable or not listed
        yet, or the cluster unreachable: its cache may be stale)."""
        if not self._readable(QUEUE_KINDS):
            return None
        queue = str(workload.queue_name or "")
        lq = self.local_queue(workload.namespace, queue)
        cq = self.cluster_queue(lq.cluster_queue) if lq is not None else None
        return fit(workload, cq, cohort_of(cq, self.cluster_queues()) if cq else [], queue)

    # ---- preemption ------------------------------------------------------------------------

    def _set_held_ok(self, ok: bool, error: str = "") -> None:
        self._held_ok = ok
        self._heard("held")

    def _heard(self, watch: str) -> None:
        """A watch an estimate reads has listed the worker, or failed to: once the last has,
        the jobs waiting for the estimate take another look (as for room: on_room)."""
        if watch in self._estimate_unheard:
            self._estimate_unheard.discard(watch)
            if not self._estimate_unheard:
                self._on_room(self.name)

    @property
    def estimate_pending(self) -> bool:
        """Whether what a preemption here would cost is not known only because the watches
        have not listed the worker yet (a replica just started, or the worker was connected
        again): the cost order waits for it rather than fall back on Kueue's."""
        if self._held is None or time.monotonic() - self._made_at > ESTIMATE_PENDING_MAX:
            return False  # a list that never ends (say, its pages expire) keeps none waiting
        return self.connecting or (self.connected and bool(self._estimate_unheard))

    def preemption_cost(
        self, workload: WorkloadView, copy: WorkloadView, now: dt.datetime
    ) -> preemption.Cost | None:
        """What letting this worker's Kueue preempt to admit `copy` (of the manager Workload
        `workload`) would cost: the Workloads it would evict and the training each would lose
        (preemption.py; none: it fits as it is); None when that is not known (not watched or
        not readable here, or not something the estimate simulates). An estimate that fails
        is unknown too, said in a warning: it never fails the pass."""
        if self._held is None or not self._held_ok or not self._readable(QUEUE_KINDS):
            return None
        try:
            return self._estimate(self._held, workload, copy, now)
        except Exception as exc:
            log.warning(
                "preemption cost not estimated",
                extra={"cluster": self.name, "workload": copy.name, "error": repr(exc)[:300]},
            )
            return None

    def _estimate(
        self, watch: Informer, workload: WorkloadView, copy: WorkloadView, now: dt.datetime
    ) -> preemption.Cost | None:
        lq = self.local_queue(workload.namespace, str(workload.queue_name or ""))
        cq = self.cluster_queue(lq.cluster_queue) if lq is not None else None
        if cq is None:
            return None
        held = []
        for kept in watch.group(cq.name):
            h = preemption.held_of(kept)
            if h is None:
                continue
            # our copy's checkpoint, when the copy of its TrainJob it names is the one noted
            # (a Workload anyone can label as ours borrows no other's checkpoint)
            owner = h.trainjob if h.ours else None
            noted = self._checkpoints.get((h.namespace, owner[0])) if owner else None
            if owner and noted is not None and noted[0] == owner[1] and noted[3] is not None:
                h = dataclasses.replace(h, checkpoint_at=noted[3])
            held.append(h)
        priority = copy.spec.get("priority", workload.spec.get("priority"))
        if not isinstance(priority, int) or isinstance(priority, bool):
            priority = 0
        created = str(copy.meta.get("creationTimestamp") or "")
        chosen = preemption.victims(requests_of(workload), priority, created, cq, held, now)
        return None if chosen is None else preemption.cost(chosen, now)

    def queue_counts(self, namespace: str, queue: str) -> Dict | None:
        """How busy the queue a copy waits in here is, as Kueue counts it in the queues'
        status: the LocalQueue `queue` of `namespace` and its ClusterQueue, their pending
        and admitted Workloads; None while the queues are not known."""
        if not self._readable(QUEUE_KINDS):
            return None
        lq = self.local_queue(namespace, queue)
        if lq is None:
            return {"localQueue": queue, "problem": f"LocalQueue {queue} does not exist"}
        cq = self.cluster_queue(lq.cluster_queue)
        cq_counts = cq.counts if cq is not None else None
        return {
            "localQueue": queue,
            "pendingInLocalQueue": lq.counts.pending,
            "clusterQueue": lq.cluster_queue,
            "pendingInClusterQueue": cq_counts.pending if cq_counts else None,
            "admittedInClusterQueue": cq_counts.admitted if cq_counts else None,
        }

    def queues(self) -> list[ClusterQueueUse] | None:
        """The worker's ClusterQueues, quota and use (capacity.quota_summary), by name; None
        while they are not known (not readable, or the worker unreachable)."""
        if not self._readable((c.CLUSTER_QUEUE.kind,)):
            return None
        return sorted(map(quota_summary, self.cluster_queues()), key=lambda q: q.name)

    # ---- runtimes --------------------------------------------------------------------------

    def _runtime(self, kind: str, namespace: str | None, name: str) -> Dict | None:
        key = (namespace, name) if kind == c.TRAINING_RUNTIME.kind else name
        return self._read[kind].get(key)

    def claims(self, namespace: str, require_bound: bool) -> Claims | None:
        """The worker's claims in `namespace` as its watch sees them; None while not known
        (an identity that may not list them: data placement then goes by labels only)."""
        if not self._readable(CLAIM_KINDS):
            return None
        informer = self._read[c.PERSISTENT_VOLUME_CLAIM.kind]

        def phase(name: str) -> str | None:
            found = informer.get((namespace, name))
            return None if found is None else str((found.get("status") or {}).get("phase") or "")

        return Claims(phase, require_bound)

    def runtime_here(self, kind: str, namespace: str | None, name: str) -> Dict | None:
        """The runtime `kind` `name` as this worker's watch sees it; None when it is missing
        or not known."""
        if not self._readable(RUNTIME_KINDS):
            return None
        return self._runtime(kind, namespace, name)

    def runtime_problem(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        spec: Dict,
        shown: str = "",
        copied_by: str | None = None,
    ) -> str | None:
        """Why the runtime `kind` `name` here is not the manager's (whose spec is `spec`):
        missing, or its spec differs (a field one side lacks and the other holds at Trainer's
        default does not count: a worker that runs Trainer stores its CRD's defaults); None
        when it is the same, or not known. A runtime that follows its job (`copied_by`: the
        origin its copies carry) is no problem when missing or a copy of ours: the copy is
        made, or brought to the manager's, before the job's TrainJob."""
        if not self._readable(RUNTIME_KINDS):
            return None
        found = self._runtime(kind, namespace, name)
        shown = shown or name
        if found is None:
            return None if copied_by else f"{kind} {shown} is missing there"
        if copied_by and is_dependency_copy(found, copied_by):
            return None
        if not same_runtime_spec(found.get("spec") or {}, spec):
            return f"{kind} {shown} there differs from the manager's"
        return None

    def runtime_drift(self, runtimes: list[Dict]) -> list[str] | None:
        """Problems of the manager's `runtimes` here (runtime_problem, each named); None while
        the worker's runtimes are not known."""
        if not self._readable(RUNTIME_KINDS):
            return None
        problems = []
        for rt in runtimes:
            meta = rt["metadata"]
            where = f"{meta['namespace']}/" if meta.get("namespace") else ""
            problem = self.runtime_problem(
                rt.get("kind", c.CLUSTER_TRAINING_RUNTIME.kind),
                meta.get("namespace"),
                meta["name"],
                rt.get("spec") or {},
                shown=f"{where}{meta['name']}",
            )
            if problem:
                problems.append(problem)
        return problems
