"""The worker connections: MultiKueueClusters -> one RemoteCluster each, and their conditions."""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from dispatcher import metrics
from dispatcher.decisions.decide import REMOTE_NAME_TAKEN, Taken
from dispatcher.settings import DispatcherSettings
from dispatcher.workers import cluster_profiles, log_tails
from dispatcher.workers.copy_ledger import CopyLedger
from dispatcher.workers.kubeconfigs import (
    check_kubeconfig,
    check_kubeconfig_file,
    kubeconfig_path_problem,
)
from dispatcher.workers.kueue_status import set_conditions
from dispatcher.workers.remote import Noted, RemoteCluster, dial
from kubebase.kinds import Kind
from kubebase.objects import Dict
from kubecontrol.cluster import Cluster
from kubecontrol.informer import Informer, slim
from trainjob.caches import Caches
from trainjob.queues import MultiKueueClusterView
from trainjob_api import constants as c

log = logging.getLogger(__name__)


# How long a name found taken on a worker keeps copies away from it before it is tried again.
TAKEN_SECONDS = 60.0


class WorkerConnections:
    """Live RemoteClusters by MultiKueueCluster name; replaced when their kubeconfig changes."""

    def __init__(
        self,
        settings: DispatcherSettings,
        manager: Cluster,
        on_change: Callable[[str, str, bool], None],
        on_state: Callable[[str], None] = lambda name: None,
        on_room: Callable[[str], None] = lambda name: None,
        on_event: Callable[[str, Dict], None] | None = None,
    ) -> None:
        self.settings, self.manager = settings, manager
        self._on_change, self._on_state, self._on_room = on_change, on_state, on_room
        self._on_event = on_event
        self.remotes: dict[str, RemoteCluster] = {}
        # How a worker's connection is made from its kubeconfig (a test dials clusters in
        # memory: tests/support/whole_pass.py).
        self.dial: Callable[[str, Dict, str], Cluster] = dial
        # Remote writes recently sent, so passes that run before the watch catches up do not
        # repeat them: (cluster, verb, kind, namespace, name) -> monotonic time.
        self._recent: dict[tuple[str, ...], float] = {}
        self._fingerprints: dict[str, str] = {}
        self._namespace_problems: dict[tuple[str, str], str] = {}
        # Dependencies' copies on the workers: what each holds, for whom (dependencies.py).
        self.copies = CopyLedger(
            settings.dependency_copies_per_second, settings.dependency_copies_burst
        )
        # Names our copies cannot take on a worker (an object there that is not ours, or a
        # copy the worker refuses): (cluster, namespace, name) -> (why, monotonic time noted).
        self._taken: dict[tuple[str, str, str], tuple[Taken, float]] = {}
        # Where and when this replica last opened a preemption gate for a manager Workload
        # (its UID -> monotonic time, (worker, RFC 3339 time)), while that keeps the next
        # worker waiting: a copy deleted since (its worker deselected by the TrainJob) takes
        # its own record with it.
        self._gates: dict[str, tuple[float, tuple[str, str]]] = {}
        # Per worker, its TrainJob copies' last checkpoints as first seen named (remote.py),
        # kept while the worker is reconnected
        self._checkpoints: dict[str, dict[tuple[str, str], Noted]] = {}
        self._reported: dict[str, str] = {}  # Coexist: the problem last logged per cluster
        # Why a MultiKueueCluster has no usable kubeconfig, as its last `connect` found:
        # name -> (reason, message) of its Active=False condition.
        self._problems: dict[str, tuple[str, str]] = {}
        self._labels: dict[str, dict[str, str]] = {}  # each MultiKueueCluster's, last seen
        self._path_warned: set[str] = set()  # MultiKueueCluster UIDs told DeprecatedPathUsage
        # The Secrets of our namespace, kept by watch_secrets: a resync reads kubeconfigs from
        # here rather than GET each Secret every pass.
        self._secrets: Informer | None = None
        # The ClusterProfiles of our namespace, with --cluster-profiles (kept whole: a profile
        # holds no secret, only how to reach a cluster).
        self._profiles: Informer | None = None
        self._lock = threading.Lock()
        # Remote writes of one plan run side by side, one thread a worker (execute.py).
        self.pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="remote-write")
        # The log tails read before a copy is deleted, on threads of their own (log_tails.py).
        self.captures = log_tails.Captures()

    def stop(self) -> None:
        """Stop every worker's watches and the remote-write threads (at shut-down)."""
        for remote in list(self.remotes.values()):
            remote.stop()
        for informer in (self._secrets, self._profiles):
            if informer is not None:
                informer.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.captures.close()

    def watch_secrets(self, on_change: Callable[[str], None]) -> None:
        """Watch the Secrets of our namespace only (the kubeconfigs of MultiKueueClusters):
        `on_change(name)` for each change. Namespaced on purpose: the dispatcher may read
        Secrets of its own namespace and of no other. The cache keeps each Secret's
        'kubeconfig' key and nothing else of it."""
        self._secrets = self._watch(c.SECRET, "Secrets", on_change, _kubeconfig_only)

    def watch_cluster_profiles(self, on_change: Callable[[str], None]) -> None:
        """With --cluster-profiles: watch the ClusterProfiles of our namespace (Kueue reads
        them there), `on_change(name)` for each change."""
        self._profiles = self._watch(c.CLUSTER_PROFILE, "ClusterProfiles", on_change)

    def _watch(
        self,
        kind: Kind,
        name: str,
        on_change: Callable[[str], None],
        transform: Callable[[Dict], Dict] = slim,
    ) -> Informer:
        """A started watch of `kind` in our namespace, `on_change(name)` for each change."""
        informer = Informer(
            self.manager.api,
            kind,
            lambda _type, obj: on_change(obj["metadata"]["name"]),
            namespace=self.settings.namespace,
            name=name,
            transform=transform,
        )
        informer.start()
        return informer

    def _in_our_namespace(self, kind: Kind, informer: Informer | None, name: str) -> Dict | None:
        """An object of our namespace: from its watch once it has listed, else read at once."""
        if informer is not None and informer.synced.is_set():
            return informer.get((self.settings.namespace, name))
        return self.manager.get_or_none(kind, name, self.settings.namespace)

    def first_time(self, key: tuple[str, ...], window: float = 5.0) -> bool:
        """True unless the same remote write was sent less than `window` seconds ago."""
        now = time.monotonic()
        with self._lock:
            if now - self._recent.get(key, -window) < window:
                return False
            self._recent[key] = now
            if len(self._recent) > 10000:  # forget old entries
                self._recent = {k: t for k, t in self._recent.items() if now - t < window}
            return True

    def note_namespace_problem(self, cluster: str, namespace: str, problem: str | None) -> None:
        """Remember (or, with None, forget) why copies cannot be made in a worker's namespace."""
        with self._lock:
            if problem is None:
                self._namespace_problems.pop((cluster, namespace), None)
            else:
                self._namespace_problems[(cluster, namespace)] = problem

    def namespace_problem(self, cluster: str, namespace: str) -> str | None:
        with self._lock:
            return self._namespace_problems.get((cluster, namespace))

    def note_taken(
        self,
        cluster: str,
        namespace: str,
        name: str,
        why: str | None,
        reason: str = REMOTE_NAME_TAKEN,
    ) -> None:
        """Remember (or, with None, forget) that a copy of `name` cannot be made on a worker:
        its name taken by an object that is not ours, or (`reason`) the copy refused there;
        remembered for TAKEN_SECONDS, then tried again."""
        now = time.monotonic()
        with self._lock:
            if why is None:
                self._taken.pop((cluster, namespace, name), None)
                return
            # Names no pass asked about again (their TrainJob gone) go once they expire.
            for key in [k for k, (_, noted) in self._taken.items() if now - noted >= TAKEN_SECONDS]:
                del self._taken[key]
            self._taken[(cluster, namespace, name)] = (Taken(reason, why), now)

    def taken(self, cluster: str, namespace: str, *names: str) -> Taken | None:
        """Why a copy of one of `names` cannot be made on the worker, if it was found taken
        lately."""
        now = time.monotonic()
        with self._lock:
            for name in names:
                found = self._taken.get((cluster, namespace, name))
                if found is not None and now - found[1] < TAKEN_SECONDS:
                    return found[0]
                self._taken.pop((cluster, namespace, name), None)
        return None

    def note_gate_opened(self, workload_uid: str, worker: str, when: str) -> None:
        """A copy's preemption gate opened on `worker` for the manager Workload
        `workload_uid` at `when` (RFC 3339); older notes that keep nobody waiting any more
        go."""
        now = time.monotonic()
        keep = self.settings.single_cluster_preemption_timeout
        with self._lock:
            for uid in [u for u, (noted, _) in self._gates.items() if now - noted >= keep]:
                del self._gates[uid]
            self._gates[workload_uid] = (now, (worker, when))

    def gate_opened(self, workload_uid: str) -> tuple[str, str] | None:
        """The worker a gate was last opened on for the manager Workload, and when, while
        that still counts."""
        with self._lock:
            found = self._gates.get(workload_uid)
        keep = self.settings.single_cluster_preemption_timeout
        return found[1] if found and time.monotonic() - found[0] < keep else None

    def forget_write(self, key: tuple[str, ...]) -> None:
        """A remote write that failed: the next pass may send it again at once."""
        with self._lock:
            self._recent.pop(key, None)

    def labels_changed(self, name: str, labels: dict[str, str]) -> bool:
        """Whether a MultiKueueCluster's labels differ from those last seen (not at first
        sight: the first resync pass looks at everything anyway)."""
        before = self._labels.get(name)
        self._labels[name] = labels
        return before is not None and before != labels

    def get(self, name: str) -> RemoteCluster | None:
        with self._lock:
            return self.remotes.get(name)

    def problem(self, name: str) -> str | None:
        """Why this replica has no connection to the worker `name` (None: it has one, or is
        making it)."""
        with self._lock:
            found = self._problems.get(name)
        return found[1] if found is not None else None

    def known(self) -> list[tuple[str, RemoteCluster | None, str | None]]:
        """Every worker this replica knows of, by name: its connection (None when it has no
        usable kubeconfig) and why it has none."""
        with self._lock:
            remotes = dict(self.remotes)
        problems = {name: message for name, (_, message) in dict(self._problems).items()}
        return [
            (name, remotes.get(name), problems.get(name))
            for name in sorted(remotes.keys() | problems.keys())
        ]

    def connect(self, mkc: MultiKueueClusterView) -> None:
        """Connect to a MultiKueueCluster's worker with its vetted kubeconfig (again when that
        changed), or let the worker go when it has none: what every replica does, leading or
        not (a standby keeps its caches warm). Why it has none is kept for `report`."""
        name = mkc.name
        kubeconfig, reason, message = self._kubeconfig_of(mkc)
        if kubeconfig is None:
            self._disconnect(name)
            self._problems[name] = (reason, message)
            metrics.REMOTE_CLUSTER_ACTIVE.labels(name).set(0)
            return
        self._problems.pop(name, None)
        fingerprint = hashlib.sha256(repr(kubeconfig).encode()).hexdigest()
        self._connect(name, kubeconfig, fingerprint, mkc.down_since)

    def report(self, mkc: MultiKueueClusterView, runtimes: list[Dict] | None = None) -> None:
        """A MultiKueueCluster's Active condition as its last `connect` left it, and, given the
        manager's `runtimes`, its RuntimesInSync condition (the worker's are the same)."""
        name = mkc.name
        extra: list[tuple[str, bool, str, str]] = []
        problem, remote = self._problems.get(name), self.get(name)
        if problem is not None:
            active, (reason, message) = False, problem
        elif remote is None or remote.connecting:
            return  # its first attempt ends with on_state, which has it reported again
        elif remote.connected:
            active, reason, message = True, "Active", "Connected"
            drift = None if runtimes is None else remote.runtime_drift(runtimes)
            if drift is not None:
                extra.append(_runtimes_condition(drift))
        else:
            active, reason = False, "ClientConnectionFailed"
            message = f"cannot reach the worker: {remote.last_error}"
        self._set_active(mkc.raw, active, reason, message, extra)

    def _kubeconfig_of(self, mkc: MultiKueueClusterView) -> tuple[Dict | None, str, str]:
        """A MultiKueueCluster's worker kubeconfig, vetted: (kubeconfig, "", "") or (None,
        reason, message) for its Active=False condition."""
        if mkc.profile_ref:
            return self._profile_kubeconfig(mkc.profile_ref)
        location, kind = mkc.kubeconfig_location, mkc.kubeconfig_location_type
        if kind == "Path":
            if self.settings.kubeconfig_path_validation:
                prefix = str(self.settings.kubeconfig_path_prefix)
                path, why = kubeconfig_path_problem(str(location or ""), prefix)
                if path is None:
                    return None, "BadKubeConfig", f"spec.clusterSource.kubeConfig.location: {why}"
            else:  # Kueue's default: any path, and a Warning that this use is deprecated
                path = str(location or "")
                self._warn_path_usage(mkc)
            try:
                with open(path, "rb") as f:
                    raw = f.read()
            except OSError as exc:
                return None, "BadKubeConfig", f"cannot read {path!r}: {exc.strerror}"
            kubeconfig, problem = check_kubeconfig_file(raw, path)
        elif kind != "Secret" or not location:
            return (
                None,
                "BadKubeConfig",
                (
                    "spec.clusterSource.kubeConfig must name a Secret (locationType: Secret) in "
                    f"namespace {self.settings.namespace}, or a file (locationType: Path)"
                ),
            )
        else:
            encoded = self._secret_kubeconfig(location)
            if encoded is None:
                return (
                    None,
                    "BadKubeConfig",
                    (f"Secret {location!r} not found in {self.settings.namespace}"),
                )
            raw = base64.b64decode(encoded)
            kubeconfig, problem = check_kubeconfig(raw, location)
        if problem is not None:
            return None, problem.reason, problem.message
        return kubeconfig, "", ""

    def _warn_path_usage(self, mkc: MultiKueueClusterView) -> None:
        """Kueue's DeprecatedPathUsage Warning on a MultiKueueCluster that names a file while
        path validation is off; once per cluster (Kueue's own writes it in Coexist mode)."""
        uid = str(mkc.uid or "")
        if self.settings.mode != "Replace" or uid in self._path_warned:
            return
        self._path_warned.add(uid)
        self.manager.post_event(
            mkc.raw,
            "Warning",
            "DeprecatedPathUsage",
            "Using locationType=Path without path validation (--kubeconfig-path-validation, "
            "Kueue's MultiKueueKubeConfigPathValidation gate) is deprecated in Kueue; enable it "
            f"and place kubeconfig files under {self.settings.kubeconfig_path_prefix}",
            name=f"{mkc.name}.deprecated-path-usage.{uid[:8]}",
        )

    def _profile_kubeconfig(self, ref: object) -> tuple[Dict | None, str, str]:
        """The kubeconfig a ClusterProfile gives (Kueue's gate and reasons)."""
        if not self.settings.cluster_profiles:
            return (
                None,
                "MultiKueueClusterProfileFeatureDisabled",
                "MultiKueueClusterProfile feature gate is disabled (the dispatcher's "
                "--cluster-profiles, or featureGates.MultiKueueClusterProfile in --kueue-config)",
            )
        name = str((ref or {}).get("name") or "") if isinstance(ref, dict) else ""
        if not name:
            return None, "BadClusterProfile", "spec.clusterSource.clusterProfileRef.name is empty"
        profile = self._in_our_namespace(c.CLUSTER_PROFILE, self._profiles, name)
        providers = [(p.name, p.exec_config) for p in self.settings.cluster_profile_providers]
        made = cluster_profiles.kubeconfig_for(profile, name, self.settings.namespace, providers)
        if isinstance(made, cluster_profiles.Problem):
            return None, made.reason, made.message
        return made, "", ""

    def _secret_kubeconfig(self, name: str) -> str | None:
        """The base64 'kubeconfig' key of a Secret of our namespace ("" without one; None when
        there is no such Secret): from the watch once it has listed, else read at once."""
        secret = self._in_our_namespace(c.SECRET, self._secrets, name)
        return None if secret is None else _kubeconfig_key(secret)

    def _connect(
        self, name: str, kubeconfig: Dict, fingerprint: str, down: float | None = None
    ) -> None:
        with self._lock:
            if self._fingerprints.get(name) == fingerprint and name in self.remotes:
                return
            old = self.remotes.pop(name, None)
            remote = RemoteCluster(
                name,
                self.dial(name, kubeconfig, c.DISPATCHER_FIELD_MANAGER),
                self.settings.origin,
                self._on_change,
                on_state=self._state_changed,
                down_since=down,
                gate=self.manager,
                on_room=self._on_room,
                on_event=self._on_event,
                events=self.settings.mirror_events,
                held=self.settings.prices_preemption,
                checkpoints_seen=self._checkpoints.setdefault(name, {}),
            )
            self.remotes[name] = remote
            self._fingerprints[name] = fingerprint
        if old is not None:
            old.stop()
            log.info("kubeconfig changed: reconnecting", extra={"cluster": name})
        remote.start()

    def _disconnect(self, name: str) -> None:
        with self._lock:
            old = self.remotes.pop(name, None)
            self._fingerprints.pop(name, None)
        if old is not None:
            old.stop()

    def forget(self, name: str) -> None:
        self._disconnect(name)
        self._checkpoints.pop(name, None)
        self._labels.pop(name, None)
        self._problems.pop(name, None)

    def _state_changed(self, name: str) -> None:
        """A worker connected or went away: our view of it in the metric (every replica's
        own), then `on_state`."""
        remote = self.get(name)
        up = remote is not None and remote.connected
        metrics.REMOTE_CLUSTER_ACTIVE.labels(name).set(1 if up else 0)
        self._on_state(name)

    def _set_active(
        self,
        obj: Dict,
        active: bool,
        reason: str,
        message: str,
        extra: list[tuple[str, bool, str, str]] | None = None,
    ) -> None:
        """The MultiKueueCluster's Active condition (and the `extra` ones), only in Replace mode
        (in Coexist mode Kueue's own MultiKueue writes its status, and a second writer would
        make it flap: a problem is logged instead)."""
        name = obj["metadata"]["name"]
        if self.settings.mode == "Replace":
            set_conditions(self.manager, obj, [("Active", active, reason, message), *(extra or [])])
        elif not active and self._reported.get(name) != message:
            log.warning(
                "MultiKueueCluster not active",
                extra={
                    "cluster": self.manager.name,
                    "worker": name,
                    "reason": reason,
                    "why": message,
                },
            )
        self._reported[name] = message if not active else ""


RUNTIMES_IN_SYNC = "RuntimesInSync"


def _runtimes_condition(drift: list[str]) -> tuple[str, bool, str, str]:
    """The MultiKueueCluster's RuntimesInSync condition from its runtime drift (remote.py)."""
    if not drift:
        return RUNTIMES_IN_SYNC, True, "InSync", "every runtime of the manager is here, the same"
    shown = "; ".join(drift[:10]) + (f"; and {len(drift) - 10} more" if len(drift) > 10 else "")
    return RUNTIMES_IN_SYNC, False, "RuntimeDrift", shown


def manager_runtimes(caches: Caches) -> list[Dict]:
    """The manager's ClusterTrainingRuntimes and TrainingRuntimes, each with its kind."""
    return [*caches.cluster_runtimes(), *caches.runtimes()]


def _kubeconfig_key(secret: Dict) -> str:
    return str((secret.get("data") or {}).get("kubeconfig", ""))


def _kubeconfig_only(secret: Dict) -> Dict:
    """What the Secrets' cache keeps: name, namespace, version and the 'kubeconfig' key."""
    meta = secret["metadata"]
    kept = {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}
    return {"metadata": kept, "data": {"kubeconfig": _kubeconfig_key(secret)}}
