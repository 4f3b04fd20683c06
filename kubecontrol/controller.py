"""What both controllers run on: their shared context, their watches (one table each), leader
election, probes, webhook serving, and the main loop.

A controller declares what it watches in a list of `Watch`es (kind, selectors, the cache it
fills, what an event does) and gives its work queue a `reconcile(key)`. `run` starts one
informer per watch (kubecontrol/informer.py), holds every event back until all of them have
listed, then replays each cached object once to its watch's handler, so no handler ever reads
a cache that is still filling; after that, events flow as they come. The process runs until
SIGTERM or SIGINT, then stops its loops and hands its Lease back.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from kubebase.kinds import Kind
from kubebase.objects import Dict
from kubecontrol import certs, metrics, web
from kubecontrol.aggregated import AggregatedApi, ApiGroup, FrontProxy
from kubecontrol.caches import Caches
from kubecontrol.certs import CertKeeper, service_names
from kubecontrol.cluster import Cluster
from kubecontrol.informer import PAGE, Informer, slim
from kubecontrol.leader import LeaderElector, LeaseTimings
from kubecontrol.metrics_auth import MetricsAuth
from kubecontrol.serving import serve_metrics, serve_probes
from kubecontrol.settings import ControllerSettings
from kubecontrol.watchdog import WatchDog
from kubecontrol.webhook_server import DRAIN_SECONDS, SHUTDOWN_SECONDS, Route, WebhookServer
from kubecontrol.workqueue import WorkQueue

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Watch:
    """One kind a controller watches: the cache it fills (`index`: key -> the object; `groups`,
    when `group_by` or `groups_of` is given: group key -> the objects in it, each object in one
    group or in several), the selectors the API server filters with, and what an event does
    (`on_event(type, obj)`, on the informer's thread: queue a key, set a flag)."""

    index: str
    kind: Kind
    on_event: Callable[[str, Dict], None] | None = None
    label_selector: str = ""
    field_selector: str = ""
    transform: Callable[[Dict], Dict] = slim
    # What the cache keeps of an object the transform fails on (kubecontrol/informer.py).
    fallback: Callable[[Dict], Dict] = slim
    group_by: Callable[[Dict], Hashable] | None = None
    groups_of: Callable[[Dict], Iterable[Hashable]] | None = None
    groups: str = ""
    # Optional: the caches count as synced without it (a kind the controller may not be
    # allowed to read; what reads it asks `ControllerContext.listed`). It lists and watches
    # all the same, and its failures are said as any watch's.
    optional: bool = False
    # Objects a list asks for at a time: TENANT_SIZED_PAGE for a kind whose objects a tenant
    # sizes (kubecontrol/informer.py).
    page: int = PAGE
    # Which objects the cache holds, where no selector can say it (kubecontrol/informer.py).
    keep: Callable[[Dict], bool] | None = None


# What every LogRecord holds of its own: the rest of its attributes are the fields a call passed.
_RECORD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",  # Python 3.12's, absent from an older record
}


def fields(record: logging.LogRecord) -> dict[str, object]:
    """The key-values a log call passed (`extra=`), in the order it gave them."""
    return {k: v for k, v in vars(record).items() if k not in _RECORD}


class KeyValueFormatter(logging.Formatter):
    """Text lines as Kueue writes them: a fixed message, then each field as key=value, quoted
    and escaped (JSON's string) when it holds a space, a quote, an equals sign or anything not
    printable (a newline, a carriage return, an escape sequence, a Unicode line separator: a
    tenant's string in a field must not forge a line; the message too, for a library's), the
    traceback last, each of its lines indented and anything not printable in it escaped (an
    exception's message can hold a tenant's string too: only a record's own line starts at
    the left)."""

    def format(self, record: logging.LogRecord) -> str:
        # The traceback this formatter writes, never one another handler cached on the record
        # (logging keeps the first handler's text in record.exc_text); a cached text with no
        # exception left to format again is written as ours would be.
        cached = record.exc_text
        record.exc_text = None if record.exc_info or not cached else _continuation(cached)
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatMessage(self, record: logging.LogRecord) -> str:
        # A message is ours, but a library's may hold what a client sent (a header's line
        # separator, say): nothing in it starts a line.
        line = _printable(super().formatMessage(record))
        for key, value in fields(record).items():
            text = str(value)
            if not text or not text.isprintable() or any(ch in text for ch in ' "='):
                text = json.dumps(text)
            line += f" {key}={text}"
        return line

    def formatException(self, ei: Any) -> str:
        return _continuation(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _continuation(super().formatStack(stack_info))


def _continuation(text: str) -> str:
    """`text` (a traceback) as continuation lines: each indented, its unprintable characters
    (a carriage return, an escape sequence, a Unicode line separator) as JSON escapes them."""
    return "\n".join("  " + _printable(line) for line in text.split("\n"))


def _printable(text: str) -> str:
    """`text` with what is not printable (a newline, a carriage return, an escape sequence, a
    Unicode line separator) as JSON escapes it."""
    return "".join(ch if ch.isprintable() else json.dumps(ch)[1:-1] for ch in text)


def setup_logging(ours: ControllerSettings, verbose: bool = False) -> None:
    """Log at `--log-level` (debug with --verbose), as text or as JSON lines (`--log-format`);
    the fields a call passes (`extra=`) are key=value on a text line, keys of the JSON object."""
    level = logging.DEBUG if verbose else getattr(logging, ours.log_level.upper())
    handler = logging.StreamHandler()
    if ours.log_format == "json":
        handler.setFormatter(
            JsonFormatter(
                "%(levelname)s %(name)s %(message)s",
                rename_fields={"levelname": "level", "name": "logger"},
                timestamp="time",
            )
        )
    else:
        handler.setFormatter(KeyValueFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


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


@dataclass(kw_only=True, eq=False)
class ControllerContext:
    """What every part of a controller shares: settings, caches, queue, leadership; each
    controller's context adds its own (connections, write memory ...), as explicit fields."""

    settings: ControllerSettings
    stop: threading.Event = field(default_factory=threading.Event)
    # The watch caches by name (`Watch.index`, `Watch.groups`), read through `caches`.
    indexes: dict[str, Mapping[Any, Any]] = field(default_factory=dict)
    informers: dict[str, Informer] = field(default_factory=dict)  # by `Watch.index`
    synced: threading.Event = field(default_factory=threading.Event)  # every watch listed
    optional: set[str] = field(default_factory=set)  # the indexes of optional watches
    elector: LeaderElector | None = None
    # The keys to reconcile: a TrainJob's (namespace, name), and what else a controller queues.
    queue: WorkQueue[Any] = field(init=False)
    # Why this replica must not reconcile now, whether it leads or not (None: nothing holds
    # it); /readyz says it. Set and cleared through `hold_work`.
    held: str | None = None
    # Each watch's last list or watch failure, while it lasts (by `Watch.index`): why the
    # caches are not synced, said by /readyz and the start-up log.
    watch_errors: dict[str, str] = field(default_factory=dict)

    @property
    def caches(self) -> Caches:
        """Typed reads of `indexes` (complete once `synced` is set)."""
        return Caches(self.indexes)

    def listed(self, index: str) -> bool:
        """Whether the watch filling `index` has listed (an optional one may not have)."""
        informer = self.informers.get(index)
        return informer is not None and informer.synced.is_set()

    def leads(self) -> bool:
        """May this replica write? Always without leader election."""
        return self.elector is None or self.elector.leading()

    def shut_down(self) -> None:
        """Stop the loops, the watches and the queue, then stop writing and hand the Lease
        back."""
        self.stop.set()
        for informer in self.informers.values():
            informer.stop()
        self.queue.stop()
        if self.elector is not None:
            self.elector.stop()

    def gate_queue(self) -> None:
        """The work queue runs only once the caches are synced, while we lead, and while
        nothing holds the work."""
        if self.synced.is_set() and self.leads() and self.held is None:
            self.queue.resume()
        else:
            self.queue.pause()

    def hold_work(self, reason: str | None) -> None:
        """Hold the work queue for `reason` (None: let it go again)."""
        self.held = reason
        self.gate_queue()

    def not_ready(self) -> str | None:
        """Why /readyz fails, if it does: caches not synced yet (a synced standby is ready
        to take over), what holds the work, or that it is stopping (its webhooks drain)."""
        if self.stop.is_set():
            return "stopping"
        if self.held is not None:
            return self.held
        if self.synced.is_set():
            return None
        return "caches not synced yet" + self.unsynced_errors()

    def unsynced_errors(self) -> str:
        """What the watches that have not listed yet last failed with, if anything."""
        failing = [
            f"{index}: {_hint(error)}"
            for index, error in sorted(self.watch_errors.items())
            if index in self.informers and not self.informers[index].synced.is_set()
        ]
        return f" ({'; '.join(failing)})" if failing else ""


def _hint(error: str) -> str:
    """A list that answers 404 is a kind the API server does not serve."""
    if "(404)" in error:
        return f"{error[:120]} (is its CustomResourceDefinition installed?)"
    return error[:200]


def elect(ctx: ControllerContext, cluster: Cluster, on_started: Callable[[], None]) -> None:
    """With --leader-elect, campaign for the Lease: the work queue runs only while we lead,
    and `ctx.leads` gates every write, each sent within the Lease's write budget
    (kubecontrol/leader.py). Without it, this replica leads alone. Either way the
    queue waits for the caches (`run`)."""
    ours = ctx.settings
    ctx.queue.pause()
    if not ours.leader_elect:
        ctx.elector = None
        return
    namespace = ours.leader_election_namespace or own_namespace()
    lease = f"{namespace}/{ours.leader_election_id}"
    identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4()}"

    def started() -> None:
        metrics.LEADER.labels(lease).set(1)
        ctx.gate_queue()
        on_started()

    def stopped() -> None:
        metrics.LEADER.labels(lease).set(0)
        ctx.gate_queue()

    ctx.elector = LeaderElector(
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
    cluster.write_budget = ctx.elector.write_budget
    metrics.LEADER.labels(lease).set(0)
    ctx.elector.start()


def own_namespace() -> str:
    """The namespace we run in: the downward API's POD_NAMESPACE, else the service account's,
    else `default`."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return IN_CLUSTER_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def start_watchdog(ctx: ControllerContext, cluster: Cluster, watched: Mapping[str, Kind]) -> None:
    """Compare the caches `watched` (index name -> kind) with the API every
    --watch-check-seconds (kubecontrol/watchdog.py); a frozen watch's informer lists again."""

    def cached(index: str) -> Callable[[], Iterable[tuple[Hashable, str]]]:
        def versions() -> list[tuple[Hashable, str]]:
            store = ctx.indexes[index]
            return [
                (key, str(body["metadata"]["resourceVersion"]))
                for key in list(store)
                if isinstance(key, tuple)
                for body in list(store.get(key, []))[:1]
            ]

        return versions

    checks = [(k, cached(index), ctx.informers[index].relist) for index, k in watched.items()]
    pages = {k.kind: ctx.informers[index].page for index, k in watched.items()}
    WatchDog(cluster.ungated(), checks, ctx.settings.watch_check_seconds, pages).start(
        ctx.stop, ctx.synced
    )


def _keep_certificate(ctx: ControllerContext, cluster: Cluster) -> None:
    """Start keeping our webhook certificate; wait until its files exist (a standby waits
    for the leader to create the Secret) so the webhook server can start."""
    ours = ctx.settings
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
        ctx.leads,
        ours.api_services,
    )
    keeper.start(ctx.stop)
    keeper.ready.wait()


def run(
    ctx: ControllerContext,
    cluster: Cluster,
    watches: Iterable[Watch],
    webhooks: Mapping[str, Route] | None = None,
    on_synced: Callable[[], None] = lambda: None,
    webhook_resource: tuple[str, str] = ("", ""),
    api: ApiGroup | None = None,
    http_routes: Sequence[web.RouteDef] = (),
    http_port: int | None = None,
) -> None:
    """Serve probes and metrics, and the admission `webhooks` (path -> handler) and the
    aggregated `api` beside them when a webhook port is set; start the watches; once all
    have listed, call `on_synced` (start the controller's own loops), open the work queue
    (when leading) and replay the caches to the watches' handlers. Return after SIGTERM or
    SIGINT, with everything stopped.
    `webhook_resource` (group, plural): the kind the webhooks judge (others pass unchanged).
    `http_routes`: more HTTP routes, served on the webhook port and, when `http_port` is
    given, on a listener of their own with the webhooks' certificate. Pods are told to call
    them there, so that admission is never on the port a pod is told to call; the webhook port
    keeps them for callers told its address before (pods made by an older version)."""
    ours = ctx.settings
    webhook_server: WebhookServer | None = None
    http_server: WebhookServer | None = None
    try:
        serve_probes(
            ours.bind_address, ours.health_port, ctx.not_ready, metrics=not ours.metrics_port
        )
        if ours.metrics_port:
            cert, key = _metrics_certificate()
            serve_metrics(
                ours.bind_address, ours.metrics_port, cert, key, MetricsAuth(cluster.ungated())
            )
        files = ours.webhook_files
        if files is not None and webhooks:
            if ours.webhook_cert_secret:
                _keep_certificate(ctx, cluster)
            # Every replica serves the webhooks (a Service spreads the calls); the webhook
            # configurations are the install's (deploy/).
            webhook_server = WebhookServer(
                ours.bind_address,
                int(ours.webhook_port or 0),
                files,
                webhooks,
                ctx.synced,
                resource=webhook_resource,
                api=AggregatedApi(api, FrontProxy(cluster.ungated())) if api else None,
                more=http_routes,
            )
            webhook_server.start(ctx.stop)
            if http_port and http_routes:  # the same bounds, no admission paths
                http_server = WebhookServer(
                    ours.bind_address, http_port, files, {}, ctx.synced, resource=("", ""),
                    more=http_routes,
                )  # fmt: skip
                http_server.start(ctx.stop)
    except OSError as exc:  # a port taken, a certificate that does not load (ssl.SSLError)
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    _stop_on_signals(ctx.stop)
    table = list(watches)
    start_watches(ctx, cluster, table)
    try:
        if _wait_synced(ctx):
            ctx.synced.set()
            on_synced()
            ctx.gate_queue()
            for watch in table:
                if watch.on_event is not None:
                    ctx.informers[watch.index].replay()
            log.info("caches synced", extra={"caches": ", ".join(sorted(ctx.informers))})
        ctx.stop.wait()
    finally:
        ctx.shut_down()
        for server in (webhook_server, http_server):  # answers under way given, then closed
            if server is not None:
                server.stopped.wait(DRAIN_SECONDS + SHUTDOWN_SECONDS + 2)


def _metrics_certificate() -> tuple[Path, Path]:
    """A self-signed certificate for the metrics server, made at start (as controller-runtime
    makes one when given none): scrapers check the caller, not this certificate (Kueue's
    ServiceMonitor skips its verification too)."""
    material = certs.issue(["localhost", socket.gethostname()], dt.datetime.now(dt.UTC))
    where = Path(tempfile.mkdtemp(prefix="trainjob-metrics-"))
    (where / "tls.crt").write_bytes(material.tls_crt + material.ca_crt)
    (where / "tls.key").write_bytes(material.tls_key)
    (where / "tls.key").chmod(0o600)
    return where / "tls.crt", where / "tls.key"


def start_watches(ctx: ControllerContext, cluster: Cluster, watches: list[Watch]) -> None:
    """Start `informers` for the watch table."""
    for informer in informers(ctx, cluster, watches):
        informer.start()


def informers(ctx: ControllerContext, cluster: Cluster, watches: list[Watch]) -> list[Informer]:
    """One informer per watch, not started, its caches in `ctx.indexes`; events reach the
    watch's handler only once `ctx.synced` is set (a handler's failure is the informer's to
    log)."""
    made = []
    for watch in watches:
        informer = Informer(
            cluster.api,
            watch.kind,
            _after_sync(ctx.synced, watch.on_event),
            label_selector=watch.label_selector,
            field_selector=watch.field_selector,
            name=f"{ctx.settings.cluster_name}-{watch.index}",
            transform=watch.transform,
            fallback=watch.fallback,
            group_by=watch.group_by,
            groups_of=watch.groups_of,
            on_state=functools.partial(_note_state, ctx, watch.index),
            page=watch.page,
            keep=watch.keep,
        )
        ctx.informers[watch.index] = informer
        if watch.optional:
            ctx.optional.add(watch.index)
        ctx.indexes[watch.index] = informer.view
        if watch.groups:
            ctx.indexes[watch.groups] = informer.groups
        made.append(informer)
    return made


def _note_state(ctx: ControllerContext, index: str, ok: bool, error: str) -> None:
    if ok:
        ctx.watch_errors.pop(index, None)
    else:
        ctx.watch_errors[index] = error


def _after_sync(
    synced: threading.Event, on_event: Callable[[str, Dict], None] | None
) -> Callable[[str, Dict], None]:
    def deliver(etype: str, obj: Dict) -> None:
        if on_event is not None and synced.is_set():
            on_event(etype, obj)

    return deliver


def _wait_synced(ctx: ControllerContext) -> bool:
    """Wait until every watch but the optional ones has listed (True), or the process is
    told to stop (False); say every 30 s which are still waiting."""
    waited = 0.0
    required = [i for index, i in ctx.informers.items() if index not in ctx.optional]
    for informer in required:
        while not informer.synced.wait(1.0):
            if ctx.stop.is_set():
                return False
            waited += 1.0
            if waited % 30 == 0:
                pending = [n for n, i in ctx.informers.items() if not i.synced.is_set()]
                log.warning(
                    "still listing",
                    extra={
                        "seconds": round(waited),
                        "pending": ", ".join(pending),
                        "errors": ctx.unsynced_errors().strip(),
                    },
                )
    return True


def _stop_on_signals(stop: threading.Event) -> None:
    """SIGTERM (the kubelet) and SIGINT (Ctrl-C) set `stop` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _signo, _frame: stop.set())
