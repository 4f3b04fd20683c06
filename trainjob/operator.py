"""kopf set-up both controllers share: our domain for kopf's bookkeeping, tuning, login."""

from __future__ import annotations

import itertools
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kopf

from trainjob import constants as c
from trainjob.kube import Cluster, connection_from_kubeconfig, read_kubeconfig
from trainjob.settings import ControllerSettings


def configure(settings: kopf.OperatorSettings, ours: ControllerSettings, name: str) -> None:
    """Tune kopf for the controller `name`: our domain for its bookkeeping, and the admission
    webhooks `<name>.trainjob.dev` served on 127.0.0.1 when `ours` sets a webhook port."""
    # Our own domain for kopf's bookkeeping, so nothing on user objects says "zalando". Our
    # handlers are all event handlers, so kopf never actually puts this finalizer anywhere.
    settings.persistence.finalizer = f"{c.DOMAIN}/{name}"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=c.DOMAIN)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
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
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 30
    if ours.webhook is not None:
        port, cert, key, ca = ours.webhook
        # Served on loopback with our certificate; kopf keeps the webhook configurations
        # (named after our domain) pointing at it, caBundle included.
        settings.admission.server = kopf.WebhookServer(
            addr="127.0.0.1", host="127.0.0.1", port=port, certfile=cert, pkeyfile=key, cafile=ca
        )
        settings.admission.managed = f"{name}.{c.DOMAIN}"


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


def connect(ours: ControllerSettings, field_manager: str) -> Cluster:
    """The client for our own cluster; exits 2 with the reason when its credentials are bad."""
    try:
        if ours.kubeconfig is not None:
            return Cluster.from_kubeconfig(ours.cluster_name, ours.kubeconfig, field_manager)
        return Cluster.in_cluster(ours.cluster_name, field_manager)
    except Exception as exc:  # a broken kubeconfig, or no in-cluster service account
        where = f"--kubeconfig {ours.kubeconfig}" if ours.kubeconfig else "in-cluster config"
        print(f"error: cannot load credentials from {where}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def login(kubeconfig: Path | None, **kwargs: Any) -> kopf.ConnectionInfo:
    """Credentials from our own kubeconfig (never the process-global one), else in-cluster."""
    if kubeconfig is None:
        info = kopf.login_with_service_account(**kwargs)
        if info is None:
            raise kopf.LoginError("no --kubeconfig given and not running in a cluster")
        return info
    return kopf.ConnectionInfo(**connection_from_kubeconfig(read_kubeconfig(kubeconfig)))


def owner_name(obj: dict[str, Any] | None, kind: str = "TrainJob") -> str | None:
    """Name of the first owner of `kind` in an object's ownerReferences."""
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return next((str(r["name"]) for r in refs if r.get("kind") == kind), None)


def index_by_name(name: str, body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """A kopf index of cluster-scoped objects: name -> body."""
    return {name: dict(body)}


def index_by_namespaced_name(
    namespace: str, name: str, body: kopf.Body, **_: Any
) -> dict[Any, Any]:
    """A kopf index of namespaced objects: (namespace, name) -> body."""
    return {(namespace, name): dict(body)}


# Watch caches both controllers keep: index id -> (group, version, plural, namespaced).
INDEXES: dict[str, tuple[str, str, str, bool]] = {
    "trainjob_index": (c.TRAINER_GROUP, c.TRAINER_VERSION, "trainjobs", True),
    "runtime_index": (c.TRAINER_GROUP, c.TRAINER_VERSION, "trainingruntimes", True),
    "cluster_runtime_index": (c.TRAINER_GROUP, c.TRAINER_VERSION, "clustertrainingruntimes", False),
    "workload_index": ("kueue.x-k8s.io", "v1beta2", "workloads", True),
    "flavor_index": ("kueue.x-k8s.io", "v1beta2", "resourceflavors", False),
    "check_index": ("kueue.x-k8s.io", "v1beta2", "admissionchecks", False),
    "config_index": ("kueue.x-k8s.io", "v1beta2", "multikueueconfigs", False),
    "cluster_index": ("kueue.x-k8s.io", "v1beta2", "multikueueclusters", False),
    "localqueue_index": ("kueue.x-k8s.io", "v1beta2", "localqueues", True),
    "clusterqueue_index": ("kueue.x-k8s.io", "v1beta2", "clusterqueues", False),
}


def add_indexes(registry: kopf.OperatorRegistry, *names: str) -> None:
    """Register the named watch caches (by name, or by (namespace, name) when namespaced)."""
    for name in names:
        group, version, plural, namespaced = INDEXES[name]
        fn: Any = index_by_namespaced_name if namespaced else index_by_name
        kopf.index(group, version, plural, registry=registry, id=name)(fn)


def run(registry: kopf.OperatorRegistry, memo: kopf.Memo, health_port: int) -> None:
    """Run the operator cluster-wide, alone (no peering), with a loopback liveness endpoint."""
    kopf.run(
        registry=registry,
        clusterwide=True,
        standalone=True,
        memo=memo,
        liveness_endpoint=f"http://127.0.0.1:{health_port}/healthz",
    )
