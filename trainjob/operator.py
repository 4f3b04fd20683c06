"""kopf set-up both controllers share: our domain for kopf's bookkeeping, tuning, login."""

from __future__ import annotations

import itertools
import logging
import os
import socket
import sys
import threading
import uuid
from collections import ChainMap
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import kopf

from trainjob import constants as c
from trainjob import metrics
from trainjob.caches import Caches
from trainjob.certs import CertKeeper, service_names
from trainjob.kube import Cluster, connection_from_kubeconfig
from trainjob.leader import LeaderElector, LeaseTimings
from trainjob.serving import serve_probes
from trainjob.settings import ControllerSettings
from trainjob.watchdog import WatchDog
from trainjob.webhook_server import Handler, WebhookServer
from trainjob.workqueue import WorkQueue


class NoDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf builds a diff base (a deep copy of the object, cleaned) on every watch event, for
    change-detecting handlers (on.create, on.update, ...). We register none, only event
    handlers and indexes, so nothing reads it: build an empty one, and never read one back."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None


def configure(settings: kopf.OperatorSettings, name: str) -> None:
    """Tune kopf for the controller `name`: our domain for its bookkeeping, our timings."""
    # Our own domain for kopf's bookkeeping, so nothing on user objects says "zalando". Our
    # handlers are all event handlers, so kopf never actually puts this finalizer anywhere.
    settings.persistence.finalizer = f"{c.DOMAIN}/{name}"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=c.DOMAIN)
    settings.persistence.diffbase_storage = NoDiffBase(
        prefix=c.DOMAIN, key="last-handled-configuration"
    )
    # We record our own Events for each transition; kopf's per-log-line Events would flood.
    settings.posting.level = logging.WARNING
    # kopf's handlers only update indexes and queue keys; our WorkQueue does the work.
    settings.execution.max_workers = 4
    # kopf gives up a watch after its last error backoff (about a minute of failures), and a
    # watch given up is never restarted: its cache stays stale for good. Ours never give up.
    settings.networking.error_backoffs = RetryForever()
    # Re-establish watches regularly so a silently dead connection is noticed.
    # Resources are named by our handlers; kopf need not list CRDs to find them (and may not).
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 30


class RetryForever:
    """kopf's error backoffs that never run out: 1, 1, 2, 3, 5, then 10 s for as long as it
    takes (re-iterable: kopf starts from the top for every request)."""

    def __iter__(self) -> Iterator[float]:
        return itertools.chain((1.0, 1.0, 2.0, 3.0, 5.0), itertools.repeat(10.0))


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # kopf logs every handler call of every object at INFO: kept for --verbose.
    logging.getLogger("kopf.objects").setLevel(logging.DEBUG if verbose else logging.WARNING)
    # aiohttp logs every admission call it serves (and formats the line first): --verbose only.
    logging.getLogger("aiohttp.access").setLevel(logging.DEBUG if verbose else logging.WARNING)


IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def credentials(ours: ControllerSettings) -> Path | None:
    """Where our credentials come from, in controller-runtime's order: --kubeconfig, then
    $KUBECONFIG, then the pod's service account (None), then ~/.kube/config."""
    if ours.kubeconfig is not None:
        return ours.kubeconfig
    if os.environ.get("KUBECONFIG"):
        return Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    home = Path.home() / ".kube" / "config"
    if home.is_file():
        return home
    return None


def connect(ours: ControllerSettings, field_manager: str) -> Cluster:
    """The client for our own cluster; exits 2 with the reason when its credentials are bad."""
    source = credentials(ours)
    try:
        if source is not None:
            return Cluster.from_kubeconfig(ours.cluster_name, source, field_manager)
        return Cluster.in_cluster(ours.cluster_name, field_manager)
    except Exception as exc:  # a broken kubeconfig, or no in-cluster service account
        where = f"kubeconfig {source}" if source else "in-cluster config"
        print(
            f"error: cannot load credentials from {where} (tried --kubeconfig, $KUBECONFIG, "
            f"in-cluster, ~/.kube/config): {exc}",
            file=sys.stderr,
        )
        raise SystemExit(2) from None


def login(ours: ControllerSettings, **kwargs: Any) -> kopf.ConnectionInfo:
    """kopf's credentials from the same source as `connect` (never the process-global one)."""
    source = credentials(ours)
    if source is None:
        info = kopf.login_with_service_account(**kwargs)
        if info is None:
            raise kopf.LoginError("no kubeconfig found and not running in a cluster")
        return info
    return kopf.ConnectionInfo(**connection_from_kubeconfig(source))


class ControllerMemo(kopf.Memo):
    """What every handler of a controller shares (kopf gives each object a shallow copy, so
    the mutable parts are shared by reference)."""

    settings: ControllerSettings
    queue: WorkQueue[tuple[str, str]]  # TrainJobs (namespace, name) to reconcile
    stop: threading.Event
    # The watch caches, kept once kopf has listed everything (kopf hands indexes to handlers
    # only, and calls none before every index is filled).
    indexes: dict[str, Mapping[Any, Any]]  # kopf's indexes, and informers' views of theirs
    synced: threading.Event
    elector: LeaderElector | None

    @property
    def caches(self) -> Caches:
        """Typed reads of `indexes` (for the controller's own threads, once synced)."""
        return Caches(self.indexes)

    def caches_of(self, kwargs: Mapping[str, Any]) -> Caches:
        """A kopf handler's caches: kopf's indexes from its kwargs, then the informers' views
        kept in `indexes`."""
        return Caches(ChainMap(dict(kwargs), self.indexes))

    def leads(self) -> bool:
        """May this replica write? Always without leader election."""
        return self.elector is None or self.elector.leading()

    def shut_down(self) -> None:
        """Stop the loops and the queue, then stop writing and hand the Lease back."""
        self.stop.set()
        self.queue.stop()
        if self.elector is not None:
            self.elector.stop()

    def gate_queue(self) -> None:
        """The work queue runs only once the caches are synced, and only while we lead."""
        if self.synced.is_set() and self.leads():
            self.queue.resume()
        else:
            self.queue.pause()

    def not_ready(self) -> str | None:
        """Why /readyz fails, if it does: caches not synced yet (a synced standby is ready
        to take over)."""
        return None if self.synced.is_set() else "caches not synced yet"


def elect(memo: ControllerMemo, cluster: Cluster, on_started: Callable[[], None]) -> None:
    """With --leader-elect, campaign for the Lease: the work queue runs only while we lead,
    and `memo.leads` gates every write. Without it, this replica leads alone. Either way the
    queue waits for the caches (`watch_synced`)."""
    ours = memo.settings
    memo.queue.pause()
    if not ours.leader_elect:
        memo.elector = None
        return
    namespace = ours.leader_election_namespace or own_namespace()
    lease = f"{namespace}/{ours.leader_election_id}"
    identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4()}"

    def started() -> None:
        metrics.LEADER.labels(lease).set(1)
        memo.gate_queue()
        on_started()

    def stopped() -> None:
        metrics.LEADER.labels(lease).set(0)
        memo.gate_queue()

    memo.elector = LeaderElector(
        cluster.ungated(),
        namespace,
        ours.leader_election_id,
        identity,
        LeaseTimings(
            ours.lease_duration_seconds, ours.renew_deadline_seconds, ours.retry_period_seconds
        ),
        on_started=started,
        on_stopped=stopped,
    )
    metrics.LEADER.labels(lease).set(0)
    memo.elector.start()


def own_namespace() -> str:
    """The namespace we run in: the downward API's POD_NAMESPACE, else the service account's,
    else `default`."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return IN_CLUSTER_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


# Watch caches the watchdog compares with the API: index name -> kind.
WATCHED = {"trainjob_index": c.TRAINJOB, "workload_index": c.WORKLOAD}


def start_watchdog(memo: ControllerMemo, cluster: Cluster) -> None:
    """Compare the TrainJob and Workload caches with the API every --watch-check-seconds
    (trainjob/watchdog.py); a frozen watch restarts the process."""

    def cached(index: str) -> Callable[[], Iterable[tuple[Hashable, str]]]:
        def versions() -> list[tuple[Hashable, str]]:
            store = memo.indexes[index]
            return [
                (key, str(body["metadata"]["resourceVersion"]))
                for key in list(store)
                if isinstance(key, tuple)
                for body in list(store.get(key, []))[:1]
            ]

        return versions

    checks = [(k.api_version, k.kind, cached(index)) for index, k in WATCHED.items()]
    WatchDog(cluster.ungated(), checks, memo.settings.watch_check_seconds).start(
        memo.stop, memo.synced
    )


def watch_synced(registry: kopf.OperatorRegistry, index_names: tuple[str, ...]) -> None:
    """Learn when the caches are filled: kopf calls no handler before every index is, and
    there is always a namespace to call this one for."""

    async def on_namespace_event(memo: ControllerMemo, **kwargs: Any) -> None:
        if not memo.synced.is_set():
            memo.indexes.update({n: kwargs[n] for n in index_names})
            memo.synced.set()
            memo.gate_queue()

    kopf.on.event("v1", "namespaces", registry=registry)(on_namespace_event)


def owner_name(obj: dict[str, Any] | None, kind: str = "TrainJob") -> str | None:
    """Name of the first owner of `kind` in an object's ownerReferences."""
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return next((str(r["name"]) for r in refs if r.get("kind") == kind), None)


# Index functions and handlers that only read caches and queue a key are coroutines: kopf runs
# a plain function in a thread pool for every watch event (a thread hop, a future and a task
# each): 12% of a standby dispatcher's CPU samples went to that hand-off (py-spy, 2026-11-23).


async def index_by_name(name: str, body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """A kopf index of cluster-scoped objects: name -> body."""
    return {name: dict(body)}


async def index_by_namespaced_name(
    namespace: str, name: str, body: kopf.Body, **_: Any
) -> dict[Any, Any]:
    """A kopf index of namespaced objects: (namespace, name) -> body."""
    return {(namespace, name): dict(body)}


# Watch caches, by index id: what each controller keeps is the list it registers.
INDEXES: dict[str, c.Kind] = {
    "trainjob_index": c.TRAINJOB,
    "runtime_index": c.TRAINING_RUNTIME,
    "cluster_runtime_index": c.CLUSTER_TRAINING_RUNTIME,
    "workload_index": c.WORKLOAD,
    "flavor_index": c.RESOURCE_FLAVOR,
    "check_index": c.ADMISSION_CHECK,
    "config_index": c.MULTIKUEUE_CONFIG,
    "cluster_index": c.MULTIKUEUE_CLUSTER,
    "localqueue_index": c.LOCAL_QUEUE,
    "clusterqueue_index": c.CLUSTER_QUEUE,
}


def add_indexes(registry: kopf.OperatorRegistry, *names: str) -> None:
    """Register the named watch caches (by name, or by (namespace, name) when namespaced)."""
    for name in names:
        kind = INDEXES[name]
        fn: Any = index_by_namespaced_name if kind.namespaced else index_by_name
        kopf.index(*kind.gvr, registry=registry, id=name)(fn)


def _keep_certificate(memo: ControllerMemo, cluster: Cluster) -> None:
    """Start keeping our webhook certificate; wait until its files exist (a standby waits
    for the leader to create the Secret) so the webhook server can start."""
    ours = memo.settings
    namespace = own_namespace()
    hosts = [
        *(service_names(ours.webhook_service, namespace) if ours.webhook_service else []),
        *ours.webhook_cert_hosts,
    ]
    keeper = CertKeeper(
        cluster.ungated(),
        namespace,
        str(ours.webhook_cert_secret),
        hosts,
        ours.webhook_configurations,
        ours.webhook_cert_dir,
        memo.leads,
    )
    keeper.start(memo.stop)
    keeper.ready.wait()


def run(
    registry: kopf.OperatorRegistry,
    memo: ControllerMemo,
    cluster: Cluster,
    webhooks: Mapping[str, Handler] | None = None,
) -> None:
    """Serve probes and metrics, and the admission `webhooks` (path -> handler) when a
    webhook port is set, then run the operator cluster-wide (kopf's own peering off: leader
    election is ours, on a Lease)."""
    ours = memo.settings
    try:
        serve_probes(ours.bind_address, ours.health_port, memo.not_ready)
        files = ours.webhook_files
        if files is not None and webhooks:
            if ours.webhook_cert_secret:
                _keep_certificate(memo, cluster)
            # Every replica serves the webhooks (a Service spreads the calls); the webhook
            # configurations are the install's (deploy/).
            WebhookServer(
                ours.bind_address,
                int(ours.webhook_port or 0),
                files,
                webhooks,
                memo.synced,
                resource=(c.TRAINJOB.group, c.TRAINJOB.plural),
            ).start(memo.stop)
    except OSError as exc:  # a port taken, a certificate that does not load (ssl.SSLError)
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    kopf.run(registry=registry, clusterwide=True, standalone=True, memo=memo)
