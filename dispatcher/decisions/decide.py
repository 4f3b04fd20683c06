"""MultiKueue dispatch decisions for one manager Workload (pure): copy, pick, run, sync, retry.

Numbered guarded steps, in the spirit of Kueue's MultiKueue workload controller:
copies go to every nominated worker (strategy: AllAtOnce, Incremental a few at a time, either
of them CapacityAware: only where the PodSets fit now), the first copy a worker admits wins,
the others are deleted, the TrainJob is created on the winner with the prebuilt-workload
label, status flows back, and a lost or evicting worker turns the check to Retry so Kueue
dispatches again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, NamedTuple, Protocol

from dispatcher.decisions import checkpoints, dependencies, placements
from dispatcher.decisions.capacity import Fit
from dispatcher.decisions.copies import (
    MAX_MANAGER_BYTES,
    changes,
    fit,
    remote_trainjob,
    remote_workload,
    status_back,
)
from dispatcher.decisions.preemption import Cost
from kubebase.events import Event
from kubebase.objects import Dict
from trainjob.ownership import made_for
from trainjob.status_writes import hold
from trainjob_api import conditions as cond
from trainjob_api import constants as c
from trainjob_api.views import CheckState, CheckView, ObjectView, TrainJobView, WorkloadView


class Taken(NamedTuple):
    """Why a worker cannot hold a TrainJob's copy: `reason` is the Workload's check reason and
    the Warning's (REMOTE_NAME_TAKEN: an object of a copy's name there is not ours;
    REMOTE_DEPENDENCY_REFUSED: the worker refused the copy of a Secret or ConfigMap the job
    needs, a missing grant most often), `why` the sentence that names it."""

    reason: str
    why: str


REMOTE_NAME_TAKEN = "RemoteNameTaken"
REMOTE_DEPENDENCY_REFUSED = c.REASON_REMOTE_DEPENDENCY_REFUSED


@dataclass
class RemoteView:
    """What the manager knows of one nominated worker right now."""

    name: str
    connected: bool
    disconnected_for: float
    workload: WorkloadView | None  # our copy of the Workload there
    trainjob: TrainJobView | None  # our TrainJob there
    problem: str | None = None  # why a copy could not be made there (say, no such namespace)
    fit: Fit | None = None  # whether the PodSets fit its ClusterQueue (None: not known)
    selected: bool = True  # the TrainJob's own choice of clusters allows it (selection.py)
    # Why the TrainJob's runtime there is not the manager's (missing, or its spec differs): no
    # copy goes there. None when it is the same, or not known.
    runtime_problem: str | None = None
    # Why no copy goes there: a copy's name is taken there by an object that is not ours, or
    # the worker refused a copy of a dependency.
    taken: Taken | None = None
    # Why it cannot serve the job's data (claims, datasets: data.py); no copy goes there.
    data_problem: str | None = None
    # What letting its Kueue preempt for the job would cost (preemption.py; no victims: it
    # fits there as it is), while its copy is gated and holds no quota; None: not known.
    preemption: Cost | None = None
    # Whether that is not known only until the watches have listed the worker (a replica
    # just started, the worker still connecting): known soon.
    preemption_pending: bool = False
    # The TrainJob's dependencies known to be in place there for its Workload copy (Kind/name
    # -> the digest of what the copy holds: dependencies.py).
    copied: dict[str, str] = field(default_factory=dict)


@dataclass
class DispatchObserved:
    workload: WorkloadView  # the manager Workload
    trainjob: TrainJobView | None  # the manager TrainJob owning it
    check: str  # name of our AdmissionCheck on this Workload
    remotes: list[RemoteView]  # nominated clusters, in MultiKueueConfig order
    origin: str
    worker_lost_timeout: float
    now: dt.datetime
    retention: float = 0.0  # seconds finished remote objects are kept
    status_coalesce: float = 0.0  # how long a status change nothing acts on is held (seconds)
    status_held_for: float | None = None  # since such a change was first held (None: none is)
    give_up_never_fits: bool = True  # fail it at once when no worker's quota could ever hold it
    give_up_after: float = 0.0  # fail it when no worker admitted it this long (0: never)
    # Why the TrainJob's own choice of clusters leaves none active to send it to (None: it
    # chose none, or some chosen cluster is active).
    selection_problem: str | None = None
    # The Secrets and ConfigMaps its pods take to the worker, and why it cannot go yet (None:
    # its namespace does not copy them).
    needs: dependencies.Needs | None = None
    # Where the job keeps its checkpoints (checkpoints.py; None: it does not say)
    checkpoint_place: str | None = None
    # The last checkpoint its record of ended runs holds (placements.py), read when a TrainJob
    # copy may be sent this pass and its status names none (None: none, or not read)
    recorded_checkpoint: checkpoints.Checkpoint | None = None
    tails_kept: bool = False  # the manager keeps its copies' log tails (settings.log_tails_kept)
    # Kueue's orchestrated preemption: copies are made with MultiKueue's preemption gate, and
    # a gated copy's gate opened on one worker at a time, the next after `preemption_timeout`
    # seconds (settings.orchestrated_preemption, single_cluster_preemption_timeout).
    preemption_gated: bool = False
    preemption_timeout: float = 300.0
    # Which blocked worker opens first: the cheapest preemption, where every one's cost is
    # known (settings.preemption_order "Cost"), else the first to say it is blocked.
    preemption_by_cost: bool = False
    # How long the cost order waits for a worker whose Kueue has not judged the job's copy
    # while the estimate says it would admit it there as it is, or for less than the blocked
    # workers' best (settings.preemption_cost_wait); others are waited for COST_GRACE.
    preemption_cost_wait: float = 60.0
    # Where and when the dispatcher last opened a gate of this Workload's copies (None: not
    # lately, or not this replica): counted with the copies' own times, but for a worker
    # lost for good.
    gate_opened_last: tuple[str, str] | None = None


# What a RemoteAction does to its object; "ensure": a dependency's copy made, or brought up to
# date, from the manager object (dependencies_io.ensure); "open": a Workload copy's status
# written with its preemption gates as the object holds them (guarded by its
# resourceVersion: a gate its Kueue closed since stays closed).
Verb = Literal["create", "patch", "delete", "ensure", "open"]
# The verbs that act on an object the plan saw on the worker: each carries its Guard.
GUARDED: frozenset[Verb] = frozenset({"patch", "delete", "open"})


@dataclass(frozen=True)
class Guard:
    """A remote write's preconditions, sent with it: the worker's object must still be the one
    the plan was made from, by UID (a same-named object made since is never written or
    deleted), and, for a write made from the object as seen ("open"), by resourceVersion."""

    uid: str
    resource_version: str = ""

    @classmethod
    def of(cls, obj: ObjectView, *, as_seen: bool = False) -> Guard:
        version = str(obj.resource_version or "") if as_seen else ""
        return cls(str(obj.uid or ""), version)

    def preconditions(self) -> Dict:
        """The guard as a patch's metadata (the API server refuses it, 409, when it differs)."""
        held = {"uid": self.uid}
        if self.resource_version:
            held["resourceVersion"] = self.resource_version
        return held


@dataclass
class RemoteAction:
    """One write to a worker's object, as the plan decided it (the executor only carries it
    out). `guard`: what the object must still be, for the verbs in GUARDED (required)."""

    cluster: str
    verb: Verb
    obj: Dict
    event: Event | None = None  # posted on the manager TrainJob once done
    # A TrainJob copy whose pods' log tails are read before it goes (log_tails.py): deleted
    # while the manager keeps tails and its TrainJob has not opted out.
    capture_tails: bool = False
    guard: Guard | None = None

    def __post_init__(self) -> None:
        if self.verb in GUARDED and (self.guard is None or not self.guard.uid):
            raise ValueError(f"a {self.verb} of a worker's object needs a guard with its UID")


@dataclass
class DispatchPlan:
    remote: list[RemoteAction] = field(default_factory=list)
    check_state: tuple[CheckState, str] | None = None  # (state, message) when it must change
    cluster_name: str | None = None  # set status.clusterName on the manager Workload
    nominated: list[str] | None = None  # set status.nominatedClusterNames (copies sent)
    trainjob_status: Dict | None = None  # new manager TrainJob status, when it changed
    events: list[Event] = field(default_factory=list)  # once the writes are done
    requeue_after: float | None = None  # seconds until time alone changes the decision
    status_held: bool = False  # a status change is held back (status_writes.hold)
    withheld: list[str] = field(default_factory=list)  # sent no copy for want of room now
    # Workers whose preemption estimate the gate waits for (not listed yet): another look
    # once they are, as for `withheld`.
    awaited: list[str] = field(default_factory=list)
    deactivate: bool = False  # set spec.active false on the manager Workload (given up on it)
    # A run on a worker that ended before the job did, to add to its record (placements.py).
    placement_ended: placements.Ended | None = None
    # Clear status.clusterName on the manager Workload: the run it names has ended (evicted,
    # or its quota given back), and a new round must not take it for the winner.
    forget_cluster: bool = False

    def retry(self, reason: str, message: str) -> None:
        """Turn the check to Retry (Kueue dispatches the Workload again), saying why in a
        Warning Event."""
        self.check_state = ("Retry", message)
        self.events.append(Event("Warning", reason, message))

    @property
    def writes_workload(self) -> bool:
        return (
            self.check_state is not None
            or self.cluster_name is not None
            or self.nominated is not None
            or self.forget_cluster
        )


class Strategy(Protocol):
    """Which nominated clusters hold a copy while no cluster has admitted the Workload."""

    # Whether we write status.nominatedClusterNames (False: an external controller does).
    nominates: bool

    def targets(
        self, remotes: list[RemoteView], elapsed: float
    ) -> tuple[list[RemoteView], float | None]:
        """The clusters for `elapsed` seconds into this dispatch (since the manager reserved
        quota), and the seconds until that set grows (None: it never does)."""
        ...


class AllAtOnce:
    nominates = True

    def targets(
        self, remotes: list[RemoteView], elapsed: float
    ) -> tuple[list[RemoteView], float | None]:
        return remotes, None


class Incremental:
    """`batch` clusters at a time in MultiKueueConfig order; `batch` more each round that
    passes without an admission (Kueue's own: 3 clusters, 5-minute rounds)."""

    nominates = True

    def __init__(self, batch: int = 3, round_seconds: float = 300.0) -> None:
        self.batch, self.round_seconds = batch, round_seconds

    def targets(
        self, remotes: list[RemoteView], elapsed: float
    ) -> tuple[list[RemoteView], float | None]:
        rounds = 1 + int(elapsed // self.round_seconds)
        chosen = remotes[: self.batch * rounds]
        if len(chosen) == len(remotes):
            return chosen, None
        return chosen, rounds * self.round_seconds - elapsed


class CapacityAware:
    """Copies only to clusters where the PodSets fit now (capacity.fit: free quota, what the
    ClusterQueue may borrow, flavours in order), or whose room is not known; the `inner`
    strategy picks among those. When none fits, the inner strategy picks among all, as it would
    without this one: the first worker to free room admits the job."""

    nominates = True

    def __init__(self, inner: Strategy | None = None) -> None:
        self.inner = inner or AllAtOnce()

    def targets(
        self, remotes: list[RemoteView], elapsed: float
    ) -> tuple[list[RemoteView], float | None]:
        room = [r for r in remotes if r.fit is None or r.fit.now]
        return self.inner.targets(room or remotes, elapsed)


class External:
    """Kueue's external dispatch (its dispatcherName names neither of its own): another
    controller writes status.nominatedClusterNames on the manager Workload; copies go to the
    nominated clusters only (the caller passes just those), and leave the others."""

    nominates = False

    def targets(
        self, remotes: list[RemoteView], elapsed: float
    ) -> tuple[list[RemoteView], float | None]:
        return remotes, None


def admitted_message(cluster: str) -> str:
    """The check's message once a worker admitted the copy (Kueue v0.19's words)."""
    return f'The workload was admitted on "{cluster}"'


def _create_trainjob(
    plan: DispatchPlan, obs: DispatchObserved, cluster: str, event: Event | None = None
) -> None:
    assert obs.trainjob is not None
    tj = remote_trainjob(obs.trainjob, obs.workload.name, obs.origin)
    if obs.checkpoint_place is not None:
        # the checkpoint the run that ended last reported, while the status still holds it;
        # else the last its record of ended runs holds (none: it starts afresh)
        reported = checkpoints.reported(obs.trainjob.trainer_status)
        resume = reported or obs.recorded_checkpoint
        checkpoints.with_environment(tj, obs.checkpoint_place, resume)
    plan.remote.append(RemoteAction(cluster, "create", tj, event))


def _sync_status(obs: DispatchObserved, plan: DispatchPlan, winner: RemoteView) -> None:
    """The winner's status onto the manager TrainJob: at once when it changes what anyone
    acts on, otherwise held `status_coalesce` seconds and sent with what follows
    (`status_writes.hold`: pod counts of a job starting or ending change many times a second,
    each a write)."""
    if obs.trainjob is None or winner.trainjob is None:
        return
    patch = status_back(obs.trainjob, winner.trainjob, winner.name)
    if patch is None:
        return
    patch, left = fit(obs.trainjob, patch)
    if left and not changes(obs.trainjob, patch):
        return  # what is left to bring back is what cannot fit: said when it was left
    if left:
        fields = ", ".join(f"status.{key}" for key in left)
        plan.events.append(
            Event(
                "Warning",
                "StatusTooLarge",
                f"{fields} of the copy on {winner.name} not brought back: with it this TrainJob "
                f"would be past the {MAX_MANAGER_BYTES} bytes the API server stores; read it "
                "on the worker",
            )
        )
    wait = hold(obs.trainjob.status, patch, obs.status_coalesce, obs.status_held_for)
    if wait is not None:
        plan.status_held = True
        plan.requeue_after = min(plan.requeue_after or wait, wait)
        return
    plan.trainjob_status = patch


def _finished_on(trainjob: TrainJobView | None, cluster: str) -> bool:
    """The manager TrainJob's status (brought back from `cluster`) says its run there ended."""
    return trainjob is not None and trainjob.cluster_name == cluster and trainjob.finished


def _ended_on(trainjob: TrainJobView | None, remote: RemoteView) -> bool:
    """The run on `remote` ended: the manager TrainJob says so (brought back), or its copy
    there does (not brought back yet)."""
    copy = remote.trainjob
    return _finished_on(trainjob, remote.name) or (copy is not None and copy.finished)


def _tie_break(workload: str, cluster: str) -> str:
    return hashlib.sha1(f"{workload}/{cluster}".encode()).hexdigest()


def _admissible(wl: WorkloadView) -> bool:
    return wl.active and not wl.finished


def _delete(plan: DispatchPlan, remote: RemoteView, why: str | None = None) -> None:
    """Delete a worker's copies; `why`, when given, is said in an Event once they are gone."""
    for obj in (remote.trainjob, remote.workload):
        if obj is not None and remote.connected:
            event = Event("Normal", "RemoteRemoved", f"{why}; copy on {remote.name} removed")
            action = RemoteAction(
                remote.name, "delete", obj.raw, event if why else None, guard=Guard.of(obj)
            )
            plan.remote.append(action)
            why = None  # one Event a worker, with its first deletion


# Reasons a worker's Kueue gives a copy that it cannot admit whatever the quota (a missing
# LocalQueue or ClusterQueue, an inactive one); "Pending" (waiting for quota) is not among them.
STRUCTURAL_REASONS = frozenset({"Misconfigured", "Inadmissible"})


def _why_not_admitted(remote: RemoteView) -> str | None:
    """A note for the check's message when a worker cannot admit its copy as things stand."""
    if remote.problem:
        return f"{remote.name}: {remote.problem}"
    reserved = remote.workload.condition("QuotaReserved") if remote.workload else None
    if (
        reserved is not None
        and reserved.status == "False"
        and reserved.reason in STRUCTURAL_REASONS
    ):
        return f"{remote.name}: {reserved.message or reserved.reason}"
    return None


# Reasons of the manager TrainJob's Failed condition when the dispatcher gives up on it.


def _give_up(obs: DispatchObserved, elapsed: float) -> tuple[str, str] | None:
    """(reason, message) when this Workload is to be given up on: no chosen worker's quota
    could ever hold it (known for every one of them with its runtime), or none admitted it
    within `give_up_after` seconds of the manager's quota reservation."""
    chosen = [r for r in obs.remotes if r.selected]
    usable = [r for r in chosen if not r.runtime_problem]
    if (
        obs.give_up_never_fits
        and usable
        and all(r.fit is not None and not r.fit.ever for r in usable)
    ):
        whys = "; ".join(
            [f"{r.name}: {r.fit.why if r.fit else ''}" for r in usable]
            + [f"{r.name}: not sent: {r.runtime_problem}" for r in chosen if r.runtime_problem]
        )
        return c.REASON_NO_CLUSTER_FITS, f"no worker cluster can ever admit it ({whys})"
    if obs.give_up_after and elapsed >= obs.give_up_after:
        notes = []
        for r in chosen:
            note = (
                r.runtime_problem
                or (r.fit.why if r.fit and not r.fit.now else None)
                or _why_not_admitted(r)
                or (None if r.connected else "unreachable")
            )
            if note:
                notes.append(f"{r.name}: {note}")
        whys = "; ".join(notes) or "each had a copy waiting for quota"
        return (
            c.REASON_NOT_ADMITTED_IN_TIME,
            f"no worker cluster admitted it within {obs.give_up_after:.0f}s of the manager's "
            f"quota reservation ({', '.join(r.name for r in chosen) or 'none'} considered; "
            f"{whys})",
        )
    return None


def _failed_status(
    trainjob: TrainJobView | None, reason: str, message: str, now: dt.datetime
) -> Dict | None:
    """The manager TrainJob's status with a final Failed condition (None when it says so)."""
    if trainjob is None:
        return None
    conditions = cond.Conditions(trainjob.conditions, now, trainjob.generation)
    # Said once: its message (the workers' notes) is not rewritten each pass.
    if conditions.set(c.COND_FAILED, True, reason, message, keep_message=True) is cond.Change.NONE:
        return None
    return {"conditions": conditions.list}


def _waiting_conditions(
    obs: DispatchObserved, drift: str | None, data: str | None = None
) -> tuple[Dict | None, list[Event]]:
    """The manager TrainJob's conditions while it waits for a worker: ClustersSelected=False
    while its own choice of clusters leaves none active (selection.py), RuntimeDrift=True
    while some workers' runtime is missing or differs from the manager's, DependenciesMissing
    while a Secret or ConfigMap its pods need is missing on the manager or may not leave it,
    or (RemoteDependencyRefused) while a chosen worker refuses its copy; each gone once that
    is over. Returns the status patch (None when unchanged) and the Warning Events of
    conditions that appear or change."""
    if obs.trainjob is None:
        return None, []
    conditions = cond.Conditions(obs.trainjob.conditions, obs.now, obs.trainjob.generation)
    needs = obs.needs or dependencies.Needs()
    refused = "; ".join(
        f"{r.name}: {r.taken.why}"
        for r in obs.remotes
        if r.selected and r.taken and r.taken.reason == REMOTE_DEPENDENCY_REFUSED
    )
    dependency = (
        (needs.reason, needs.problem)
        if needs.problem
        else (REMOTE_DEPENDENCY_REFUSED, refused or None)
    )
    for ctype, status, reason, problem in (
        (c.COND_CLUSTERS_SELECTED, False, c.REASON_NO_CLUSTER_SELECTED, obs.selection_problem),
        (c.COND_RUNTIME_DRIFT, True, c.COND_RUNTIME_DRIFT, drift),
        (c.COND_DEPENDENCIES_MISSING, True, *dependency),
        (c.COND_DATA_UNAVAILABLE, True, c.REASON_NO_CLUSTER_HAS_DATA, data),
    ):
        if problem is None:
            conditions.remove(ctype)
        else:
            conditions.set(ctype, status, reason, problem, event="Warning")
    return ({"conditions": conditions.list} if conditions.changed else None), conditions.events


def decide(obs: DispatchObserved, strategy: Strategy | None = None) -> DispatchPlan:
    plan = _decide(obs, strategy)
    tj = obs.trainjob
    # The manager TrainJob's annotation decides (a worker's copy carries none of them); a
    # copy's tails are kept under the UID it names, so only a copy made for this TrainJob's
    # very UID is read (not one for an earlier TrainJob of its name, nor one that names another).
    keep = obs.tails_kept and tj is not None and tj.annotations.get(c.LOG_TAILS_ANNOTATION) != "off"
    for action in plan.remote:
        if keep and action.verb == "delete" and action.obj["kind"] == c.TRAINJOB.kind:
            action.capture_tails = tj is not None and made_for(action.obj, tj.uid)
    if obs.workload.check(obs.check) is None:
        # Kueue dropped our check from the Workload (no flavour assigned): there is no state
        # to write, only the work (status back, clean-up) to do.
        plan.check_state = None
    return plan


@dataclass
class _Pass:
    """What every step of a decision reads, and the plan they write."""

    obs: DispatchObserved
    strategy: Strategy
    plan: DispatchPlan = field(default_factory=DispatchPlan)

    @property
    def wl(self) -> WorkloadView:
        return self.obs.workload

    @cached_property
    def _check(self) -> CheckView | None:
        return self.wl.check(self.obs.check)

    @property
    def state(self) -> str:
        """Our admission check's state on the manager Workload ("" before the first)."""
        return self._check.state if self._check is not None else ""

    @property
    def state_message(self) -> str:
        return self._check.message if self._check is not None else ""

    @cached_property
    def nominated(self) -> list[str]:
        return self.wl.nominated_clusters

    def winner(self) -> RemoteView | None:
        """The worker the manager Workload says it was dispatched to, if any."""
        name = self.wl.cluster_name
        return next((r for r in self.obs.remotes if r.name == name), None) if name else None

    def eligible(self, remote: RemoteView) -> bool:
        """May this worker hold a copy: chosen by the TrainJob, its runtime in step, and
        nominated (by the strategy itself, or by an external dispatcher)."""
        if not remote.selected or remote.runtime_problem or remote.taken or remote.data_problem:
            return False
        return self.strategy.nominates or remote.name in self.nominated


def _decide(obs: DispatchObserved, strategy: Strategy | None) -> DispatchPlan:
    """One function per step, in order; the first that settles the pass ends it."""
    p = _Pass(obs, strategy or AllAtOnce())
    _priority_follows(p)
    if p.wl.finished:
        _step1_finished_on_the_manager(p)
    elif _step2a_ended_before_the_recall(p) or _step2_recalled(p):
        pass
    elif (winner := p.winner()) is not None:
        _step3_watch_the_winner(p, winner)
    elif obs.needs is not None and obs.needs.problem:
        _step3b_held_for_dependencies(p, obs.needs)
    elif not _step4_first_admitted_wins(p):
        reachable = _step5_leftovers_go(p)
        elapsed = p.wl.reserved_for(obs.now) or 0.0
        if not _step6_given_up(p, elapsed):
            _step7_copies_out(p, reachable, elapsed, _preemption_gate(p, reachable))
    return p.plan


def _priority_follows(p: _Pass) -> None:
    """The manager Workload's priority changed (its TrainJob's priority-class label did):
    every copy not finished takes it too, so each worker's Kueue orders it as the manager's
    does."""
    spec = p.wl.spec
    want = {"priorityClassRef": spec.get("priorityClassRef"), "priority": spec.get("priority")}
    for remote in p.obs.remotes:
        copy_ = remote.workload
        if copy_ is None or copy_.finished:
            continue
        have = copy_.spec
        if {k: have.get(k) for k in want} == want:
            continue
        patch = {
            "apiVersion": c.KUEUE_API,
            "kind": "Workload",
            "metadata": {"name": copy_.name, "namespace": copy_.namespace, "uid": copy_.uid},
            "spec": want,
        }
        p.plan.remote.append(
            RemoteAction(remote.name, "patch", patch, guard=Guard(copy_.uid or ""))
        )


def _step1_finished_on_the_manager(p: _Pass) -> None:
    """Finished on the manager: the work is done; the copies go after the retention."""
    obs, plan = p.obs, p.plan
    finished = p.wl.condition("Finished")
    since = finished.since if finished is not None else None
    age = (obs.now - cond.parse_time(since)).total_seconds() if since else obs.retention
    if age >= obs.retention:
        for remote in obs.remotes:
            _delete(plan, remote)
    elif any(r.workload or r.trainjob for r in obs.remotes):
        plan.requeue_after = obs.retention - age


def _recalled(p: _Pass) -> bool:
    """No quota on the manager, evicted there, or our Retry written: what runs must stop."""
    wl = p.wl
    return not wl.has_quota or wl.evicted or p.state == "Retry"


def _step2a_ended_before_the_recall(p: _Pass) -> bool:
    """Recalled (step 2's cases), but the run on the worker the job went to has ended there
    already: its outcome is brought back and its copy kept, never thrown away. A recall stops
    a run; one that ended before the manager heard of it (its status not back yet: the
    dispatcher's Lease moving, a PodsReady timeout on the manager, a preemption in that very
    second) has nothing left to stop, and sending it again would run it twice. The outcome
    finishes the manager Workload (the Kueue integration), and step 1 takes it from there."""
    tj = p.obs.trainjob
    if tj is None or not _recalled(p):
        return False
    where = p.wl.cluster_name or tj.cluster_name
    ran = next((r for r in p.obs.remotes if r.name == where), None) if where else None
    if ran is None or not _ended_on(tj, ran):
        return False
    for remote in p.obs.remotes:
        if remote is not ran and (remote.workload or remote.trainjob):
            _delete(p.plan, remote)
    _sync_status(p.obs, p.plan, ran)
    return True


def _step2_recalled(p: _Pass) -> bool:
    """No quota on the manager (waiting, or evicted: preempted, deactivated by its user,
    ...), or our Retry written and Kueue's eviction not come yet: nothing may exist remotely.
    Kueue's MultiKueue does the same, deactivating the copy first; deleting it stops its pods
    as surely, in one step. While our Retry waits, nothing else goes out either: a Pending
    written over it would cancel the eviction, leaving the Workload admitted and sent nowhere
    (and the TrainJob then failed as not dispatchable)."""
    wl = p.wl
    if not _recalled(p):
        return False
    why = f"evicted on the manager ({wl.eviction_message})" if wl.evicted else None
    for remote in p.obs.remotes:
        _delete(p.plan, remote, why)
    # Kueue leaves clusterName on an evicted Workload; once it reserves quota again the old
    # worker would pass for the winner of the new round, its copy gone (a needless Retry).
    p.plan.forget_cluster = bool(wl.cluster_name) and (wl.evicted or not wl.has_quota)
    tj = p.obs.trainjob
    evicted = wl.condition("Evicted")
    reason = evicted.reason if evicted is not None else ""
    ours = reason == c.KUEUE_EVICTED_BY_ADMISSION_CHECK  # our Retry: recorded
    copy = next(
        (r.trainjob for r in p.obs.remotes if tj is not None and r.name == tj.cluster_name), None
    )
    # the copy that ran there, made before the eviction (not one sent since, once admitted again)
    since = evicted.since if evicted is not None else None
    ran = copy is not None and str(copy.created or "") <= str(since)
    if wl.evicted and not ours and tj and tj.cluster_name and copy and ran and not tj.finished:
        # its run there ends with the eviction (preempted, deactivated, ...): told in the
        # pass that removes its copy
        p.plan.placement_ended = placements.ended(
            tj,
            tj.cluster_name,
            reason or "Evicted",
            f"evicted on the manager: {evicted.message if evicted is not None else ''}".strip(),
            p.obs.now,
            copy.created,
        )
    return True


def _step3_watch_the_winner(p: _Pass, winner: RemoteView) -> None:
    """Dispatched already: the other copies go; the winner's state decides the rest. A run
    sent back (the check turned Retry) is recorded as ended there."""
    _step3_decide(p, winner)
    plan = p.plan
    if plan.check_state is not None and plan.check_state[0] == "Retry" and plan.events:
        reason, message = plan.events[-1].reason, plan.events[-1].message
        since = p.wl.admitted_at  # the manager Workload: admitted when that worker's was
        plan.placement_ended = placements.ended(
            p.obs.trainjob, winner.name, reason, message, p.obs.now, since
        )


def _step3_decide(p: _Pass, winner: RemoteView) -> None:
    obs, plan = p.obs, p.plan
    for remote in obs.remotes:
        if remote is not winner and (remote.workload or remote.trainjob):
            _delete(plan, remote)
    if _ended_on(obs.trainjob, winner):
        # Its run there ended: the outcome comes back (or has), and the manager Workload
        # finishes from it (the Kueue integration). Whatever happens to the copies now
        # (evicted there as its last pod ended, removed by a person or a TTL, the worker
        # lost), it never runs again.
        _sync_status(obs, plan, winner)
        return
    if not winner.connected:
        if winner.disconnected_for >= obs.worker_lost_timeout:
            why = (
                f"lost for {winner.disconnected_for:.0f}s"
                if winner.disconnected_for != float("inf")
                else "no longer configured (no MultiKueueCluster)"
            )
            plan.retry("ClusterLost", f"cluster {winner.name} {why}; dispatching again")
        else:  # a brief disconnect changes nothing, unless it lasts
            plan.requeue_after = obs.worker_lost_timeout - winner.disconnected_for
        return
    if winner.workload is None:
        plan.retry("RemoteWorkloadGone", f"the Workload copy on {winner.name} is gone")
        return
    if winner.workload.finished_reason == c.KUEUE_FINISHED_OUT_OF_SYNC:
        # The worker's Kueue integration found the TrainJob there no longer matches its
        # Workload (changed on the worker): as Kueue does, send it again, once.
        if p.state == "Ready":
            plan.retry(
                "RemoteOutOfSync",
                f"Remote workload on worker cluster {winner.name!r} is out of sync with its "
                "user job, resetting for re-dispatch",
            )
        return
    if winner.workload.evicted and winner.trainjob is not None and not winner.workload.finished:
        plan.retry("RemoteEvicted", f"evicted on {winner.name}: {winner.workload.eviction_message}")
        return
    if winner.trainjob is None and winner.taken:
        # Its TrainJob cannot be made there: another worker (the quota there is freed too).
        plan.retry(winner.taken.reason, f"{winner.name}: {winner.taken.why}; dispatching again")
        return
    _take_along(p, winner)  # made with the decision (step 4); here kept up to date
    if winner.trainjob is None and obs.trainjob is not None:
        # Normally created with the decision (step 4); this is the retry after a failure.
        event = Event("Normal", "CreatedRemote", f"created TrainJob on cluster {winner.name}")
        _create_trainjob(plan, obs, winner.name, event)
    if p.state != "Ready":
        plan.check_state = ("Ready", admitted_message(winner.name))
    _sync_status(obs, plan, winner)


def _step3b_held_for_dependencies(p: _Pass, needs: dependencies.Needs) -> None:
    """Not dispatched, and a Secret or ConfigMap its pods need is missing (or may not leave
    the manager): no worker gets a copy (those out already go, freeing their quota), and the
    TrainJob and the check say which and where it is referenced. Sent as soon as it exists."""
    plan = p.plan
    for remote in p.obs.remotes:
        _delete(plan, remote)
    if p.strategy.nominates and p.nominated:
        plan.nominated = []
    plan.trainjob_status, events = _waiting_conditions(p.obs, None)
    plan.events += events
    message = f"not dispatched: {needs.problem}"
    if p.state != "Pending" or p.state_message != message:
        plan.check_state = ("Pending", message)


def _take_along(p: _Pass, remote: RemoteView) -> None:
    """The TrainJob's dependencies to the worker that admitted it, before its TrainJob (and
    so before its pods): each copy made, or brought up to the manager object's content, and
    owned by the Workload copy there."""
    needs = p.obs.needs
    if needs is None or remote.workload is None:
        return
    owner = dependencies.owner_of(remote.workload)
    for source in needs.sources:
        if remote.copied.get(source.key) != source.digest:
            copy = dependencies.skeleton(source, p.wl.namespace, p.obs.origin, owner)
            p.plan.remote.append(RemoteAction(remote.name, "ensure", copy))


def _step4_first_admitted_wins(p: _Pass) -> bool:
    """Not dispatched yet: the first copy admitted by a worker wins. Admission times have
    one-second resolution, so ties are common under load; they go to a cluster picked by a
    hash of the Workload's name: the same answer on every pass, spread across workers."""
    obs, plan, nominated = p.obs, p.plan, p.nominated
    admitted = sorted(
        (t, _tie_break(p.wl.name, r.name), r.name)
        for r in obs.remotes
        if r.connected and r.workload and p.eligible(r) and (t := r.workload.admitted_at)
    )
    if not admitted:
        return False
    name = admitted[0][2]
    if name not in nominated:  # Kueue takes clusterName only from the nominated ones
        plan.nominated = sorted({*nominated, name})
        return True
    # One Workload write says who won and turns the check Ready (as Kueue's MultiKueue does);
    # the TrainJob goes to the winner right after it, in the same pass. The Started Event of
    # the admission that follows names the cluster; only a TrainJob that is not suspended
    # (sent again while it still counted as running) gets no Started, so an Event of its own
    # says where it went.
    plan.cluster_name = name
    plan.check_state = ("Ready", admitted_message(name))
    if obs.trainjob is not None and not obs.trainjob.suspended:
        plan.events.append(Event("Normal", "Dispatched", f"dispatched to cluster {name}"))
    for remote in obs.remotes:
        if remote.name != name:
            _delete(plan, remote)
        elif remote.trainjob is None and obs.trainjob is not None:
            _take_along(p, remote)
            _create_trainjob(plan, obs, name)
    return True


def _step5_leftovers_go(p: _Pass) -> list[RemoteView]:
    """Leftovers of an earlier round go: a TrainJob (its run was given up), copies a worker
    deactivated or finished, which can never be admitted again (made anew later), and with an
    external dispatcher, copies on clusters it no longer nominates. Returns the reachable
    workers that may hold a copy."""
    reachable = []
    for remote in p.obs.remotes:
        if not remote.connected:
            continue
        if (
            remote.trainjob is not None
            or (remote.workload and not _admissible(remote.workload))
            or (remote.workload and not p.eligible(remote))
        ):
            _delete(p.plan, remote)
        elif p.eligible(remote):
            reachable.append(remote)
    return reachable


def _step6_given_up(p: _Pass, elapsed: float) -> bool:
    """Given up on: no worker could ever hold it, or none admitted it in time. The check
    turns Rejected and the Workload is deactivated (as Kueue itself does on a Rejected check,
    but at once: the TrainJob's failure finishes the Workload, and Kueue does not deactivate a
    finished one), which frees its quota and removes the copies (step 2); the TrainJob fails,
    saying why and which clusters were considered."""
    verdict = _give_up(p.obs, elapsed)
    if verdict is None:
        return False
    reason, message = verdict
    plan = p.plan
    if p.state != "Rejected":
        plan.check_state = ("Rejected", message)
        plan.events.append(Event("Warning", reason, message))
    plan.deactivate = p.wl.active
    plan.trainjob_status = _failed_status(p.obs.trainjob, reason, message, p.obs.now)
    return True


def _step7_copies_out(p: _Pass, reachable: list[RemoteView], elapsed: float, gates: Gates) -> None:
    """Copies to the clusters the strategy picks (reachable ones only), a preemption gate
    opened (`gates`), and the check's Pending message saying where they went, why not
    elsewhere, and which worker may preempt for it."""
    obs, plan, strategy, nominated = p.obs, p.plan, p.strategy, p.nominated
    targets, plan.requeue_after = strategy.targets(reachable, elapsed)
    _open(p, gates)
    drifted = [r for r in obs.remotes if r.selected and r.runtime_problem]
    no_data = [r for r in obs.remotes if r.selected and r.data_problem]
    plan.withheld = (
        [r.name for r in reachable if r not in targets and r.fit is not None and not r.fit.now]
        + [r.name for r in drifted if r.connected]
        + [r.name for r in no_data if r.connected]
    )
    for remote in targets:
        if remote.workload is None:
            copy = remote_workload(p.wl, obs.origin, obs.preemption_gated)
            plan.remote.append(RemoteAction(remote.name, "create", copy))
    if strategy.nominates:
        now_nominated = {r.name for r in targets} | {
            r.name for r in obs.remotes if r.workload and r.selected and not r.runtime_problem
        }
        if sorted(now_nominated) != sorted(nominated):
            plan.nominated = sorted(now_nominated)
    drift = "; ".join(f"{r.name}: {r.runtime_problem}" for r in drifted) or None
    chosen = [r for r in obs.remotes if r.selected]
    data = (
        "no chosen worker holds its data ("
        + "; ".join(f"{r.name}: {r.data_problem}" for r in chosen)
        + "); it waits until one does"
        if chosen and all(r.data_problem for r in chosen)
        else None
    )
    plan.trainjob_status, events = _waiting_conditions(obs, drift, data)
    plan.events += events
    if obs.selection_problem:
        names = f"no cluster ({obs.selection_problem})"
    elif not strategy.nominates and not nominated:
        names = "no cluster yet (an external dispatcher nominates them)"
    else:
        names = ", ".join(r.name for r in targets) or "no reachable cluster"
    message = f"dispatched to {names}; waiting for a cluster to admit it"
    notes = [note for r in targets if (note := _why_not_admitted(r))]
    notes += [
        f"not sent to {r.name}: {r.fit.why}"
        for r in reachable
        if r.name in plan.withheld and r.fit is not None
    ]
    notes += [f"not sent to {r.name}: {r.runtime_problem}" for r in drifted if r.connected]
    notes += [f"not sent to {r.name}: {r.data_problem}" for r in no_data if r.connected]
    notes += [f"not sent to {r.name}: {r.taken.why}" for r in obs.remotes if r.taken and r.selected]
    notes += [f"{name} may preempt to admit it" for name in gates.open]
    if notes:
        message += f" ({'; '.join(notes)})"
    if p.state != "Pending" or p.state_message != message:
        plan.check_state = ("Pending", message)


# ---- orchestrated preemption (Kueue's MultiKueueOrchestratedPreemption) ----------------------


@dataclass(frozen=True)
class Gates:
    """Where the copies' preemption gates stand: the workers whose gate is open (the one
    opened this pass included), the one opened this pass (None: none) with the time since
    which its Kueue wanted to preempt, the seconds until another may open (None: no worker
    waits for it), and when the choice went by cost, what each blocked worker's would
    have cost (the chosen one's first)."""

    open: tuple[str, ...] = ()
    opening: RemoteView | None = None
    wanted_since: str = ""
    wait: float | None = None
    costs: tuple[tuple[str, Cost], ...] = ()
    awaited: tuple[str, ...] = ()  # the workers whose estimate is pending


# How long the cost order waits, after the first copy said it is blocked, for another copy
# whose Kueue has not judged it yet and whose cost the estimate cannot tell (a copy's Kueue
# judges it within a scheduling cycle or two; one that never needs to preempt never says so,
# and costs the job this). One the estimate says is cheaper is waited for longer
# (DispatchObserved.preemption_cost_wait): its Kueue judges it only once a preemption under
# way in its queue has ended (Kueue v0.19 keeps the preempting Workload at the head of a
# BestEffortFIFO queue until then).
COST_GRACE = 10.0
# How soon a pass looks again at an estimate pending on its watches' first list, at the
# latest (the pass is woken when the worker is listed: DispatchPlan.awaited).
ESTIMATE_POLL = 5.0


def _preemption_gate(p: _Pass, reachable: list[RemoteView]) -> Gates:
    """Which copy's MultiKueue preemption gate opens. As Kueue v0.19 chooses
    (`workloadToOpenPreemptionGate`): among the reachable copies whose gate is closed and
    whose Kueue says it is blocked on it, the one that said so first (ties: the same hash as
    admissions'); but none while another worker's gate opened less than the timeout ago (a
    worker lost for good no longer holds it, and one whose copy was deleted still does, by
    the time the dispatcher remembers). The others wait: a worker that would have to
    preempt does so only once let, so one high-priority job evicts training on one worker,
    not on each it was sent to. Only copies made for this very Workload count (an orphan of
    an earlier one of its name is the garbage collector's).

    By cost (`preemption_by_cost`), when what each blocked worker's preemption would cost
    is known (preemption.py): the one that loses the least training first (whole minutes,
    then fewer victims; ties in Kueue's order), once the copies not judged yet have had time
    to say whether they are blocked too: `preemption_cost_wait` seconds for those the
    estimate says would be admitted as they are or for less than the best blocked one,
    COST_GRACE for those it cannot tell, none for those it says would cost as much or more."""
    obs = p.obs
    holding = _holding(p)
    names = tuple(holding)
    blocked = sorted(
        (since, _tie_break(p.wl.name, r.name), r.name)
        for r in reachable
        if (copy := _gated_copy(p, r)) is not None
        and r.name not in holding
        and (since := copy.blocked_on_gates_since) is not None
    )
    if not blocked:
        return Gates(names)
    wait = _timeout_left(p, holding)
    if wait is not None:
        return Gates(names, wait=wait)
    ranked: tuple[tuple[str, Cost], ...] = ()
    if obs.preemption_by_cost:
        wait, awaited, ranked = _by_cost(p, reachable, holding, blocked)
        if wait is not None:
            return Gates(names, wait=wait, awaited=awaited)
    first = ranked[0][0] if ranked else blocked[0][2]
    since = next(b[0] for b in blocked if b[2] == first)
    chosen = next(r for r in reachable if r.name == first)
    return Gates((*names, chosen.name), chosen, since, obs.preemption_timeout, ranked)


def _own_copy(p: _Pass, r: RemoteView) -> WorkloadView | None:
    """The worker's copy when it was made for this very Workload (its origin-uid)."""
    return r.workload if made_for(r.workload, p.wl.uid) else None


def _gated_copy(p: _Pass, r: RemoteView) -> WorkloadView | None:
    """The worker's own copy while its MultiKueue preemption gate is closed."""
    copy = _own_copy(p, r)
    return copy if copy is not None and copy.gated_by(c.KUEUE_MULTIKUEUE_PREEMPTION_GATE) else None


def _kept(obs: DispatchObserved, r: RemoteView) -> bool:
    """Not lost for good: connected, or not for the lost timeout."""
    return r.connected or r.disconnected_for < obs.worker_lost_timeout


def _holding(p: _Pass) -> dict[str, str]:
    """The workers not lost for good whose own copy's gate is open, and when it opened."""
    return {
        r.name: opened
        for r in p.obs.remotes
        if (copy := _own_copy(p, r)) is not None
        and _kept(p.obs, r)
        and (opened := copy.gate_opened_at(c.KUEUE_MULTIKUEUE_PREEMPTION_GATE)) is not None
    }


def _timeout_left(p: _Pass, holding: dict[str, str]) -> float | None:
    """Seconds until another gate may open, counted from the latest opening (the copies'
    own, and the one this replica remembers unless its worker is lost for good); None: it
    may now."""
    obs = p.obs
    times = list(holding.values())
    if obs.gate_opened_last is not None:
        where, when = obs.gate_opened_last
        if all(_kept(obs, r) for r in obs.remotes if r.name == where):
            times.append(when)
    if not times:
        return None
    # a time that cannot be read counts as Kueue's zero time (long ago); one ahead of our
    # clock as now
    latest = max(_time_or_epoch(t) for t in times)
    since_opened = max(0.0, (obs.now - latest).total_seconds())
    return obs.preemption_timeout - since_opened if since_opened < obs.preemption_timeout else None


def _by_cost(
    p: _Pass,
    reachable: list[RemoteView],
    holding: dict[str, str],
    blocked: list[tuple[str, str, str]],
) -> tuple[float | None, tuple[str, ...], tuple[tuple[str, Cost], ...]]:
    """The cost order: (seconds to wait for an estimate or a copy not judged yet, the
    workers whose estimate is pending, the blocked workers cheapest first); nothing ranked
    when a blocked worker's cost is not known (Kueue's order stands)."""
    obs = p.obs
    # a blocked worker's estimate without victims disagrees with its Kueue: not known
    costs = {r.name: r.preemption for r in reachable if r.preemption and r.preemption.victims}
    waited = max(0.0, (obs.now - min(_time_or_epoch(b[0]) for b in blocked)).total_seconds())
    awaited = tuple(r.name for r in obs.remotes if r.selected and r.preemption_pending)
    if awaited and waited < obs.preemption_cost_wait:
        # an estimate known once its watches have listed the worker
        return min(ESTIMATE_POLL, obs.preemption_cost_wait - waited), awaited, ()
    if not all(name in costs for _, _, name in blocked):
        return None, (), ()
    best = min(costs[name].rank for _, _, name in blocked)
    unjudged = [
        r
        for r in reachable
        if (copy := _gated_copy(p, r)) is not None
        and r.name not in holding
        and copy.blocked_on_gates_since is None
        and not copy.has_quota
    ]
    patience = max(
        (
            COST_GRACE
            if r.preemption is None
            else obs.preemption_cost_wait
            if r.preemption.rank < best  # no victims ranks below any
            else 0.0
            for r in unjudged
        ),
        default=0.0,
    )
    if waited < patience:
        return patience - waited, (), ()
    ranked = sorted(blocked, key=lambda b: (costs[b[2]].rank, b))
    return None, (), tuple((name, costs[name]) for _, _, name in ranked)


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _time_or_epoch(text: str) -> dt.datetime:
    """An RFC 3339 time a worker wrote (without a zone: UTC), or the epoch when there is none
    or it cannot be read."""
    try:
        when = cond.parse_time(text)
    except (TypeError, ValueError):
        return EPOCH
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _open(p: _Pass, gates: Gates) -> None:
    """The chosen copy's gate opened (its status written with the gate Open, as Kueue's
    MultiKueue writes it), said in an Event; a pass comes back when another may open."""
    plan = p.plan
    if gates.wait is not None:
        later = plan.requeue_after
        plan.requeue_after = gates.wait if later is None else min(later, gates.wait)
    plan.awaited = list(gates.awaited)
    remote = gates.opening
    if remote is None or remote.workload is None:
        return
    copy = remote.workload
    now = cond.now_rfc3339(p.obs.now)
    states = [s for s in copy.gate_states if s.get("name") != c.KUEUE_MULTIKUEUE_PREEMPTION_GATE]
    states.append(
        {"name": c.KUEUE_MULTIKUEUE_PREEMPTION_GATE, "position": "Open", "lastTransitionTime": now}
    )
    meta = {
        k: copy.meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in copy.meta
    }
    obj = {
        "apiVersion": c.KUEUE_API,
        "kind": "Workload",
        "metadata": meta,
        "status": {"preemptionGates": states},
    }
    if gates.costs:
        others = "; ".join(f"{name}: {cost}" for name, cost in gates.costs[1:])
        why = f"there it {gates.costs[0][1]}, the least of the workers that would have to" + (
            f" (instead of {others})" if others else ""
        )
    else:
        waited = f" since {gates.wanted_since}" if gates.wanted_since else ""
        why = f"its Kueue was the first to need to{waited}"
    event = Event(
        "Normal",
        "PreemptionAllowed",
        f"{remote.name} may preempt to admit it: {why}; another worker may only if it has "
        f"not admitted it within {p.obs.preemption_timeout:g}s",
    )
    plan.remote.append(
        RemoteAction(remote.name, "open", obj, event, guard=Guard.of(copy, as_seen=True))
    )
