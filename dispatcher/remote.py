"""One worker cluster seen from the manager: its own client, watches, cache and connection state.

Each RemoteCluster runs one thread per watched kind (Workloads and TrainJobs carrying our
origin label). A failing watch marks the cluster disconnected and retries with exponential
backoff; it never blocks other clusters. Every change calls `on_change(namespace, name)` and
every change of the connection state `on_state(cluster)`; both must return quickly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client, watch

from trainjob import constants as c
from trainjob.kube import Cluster

Dict = dict[str, Any]
log = logging.getLogger("dispatcher.remote")

# What we keep of each worker (our copies only, by origin label), by kind name.
KINDS = {k.kind: k for k in (c.WORKLOAD, c.TRAINJOB)}


class RemoteCluster:
    def __init__(
        self,
        name: str,
        kubeconfig: Dict,
        origin: str,
        on_change: Callable[[str, str], None],
        field_manager: str,
        on_state: Callable[[str], None] = lambda name: None,
        down_since: float | None = None,
        may_write: Callable[[], bool] | None = None,
    ) -> None:
        """`down_since` (epoch seconds): since when the worker has been unreachable, as
        recorded before this process started (the MultiKueueCluster's Active=False transition);
        None when it was not known to be down."""
        self.name = name
        self.origin = origin
        self.cluster = Cluster.from_kubeconfig(name, kubeconfig, field_manager, timeout=10)
        self.cluster.may_write = may_write  # the manager's leader election gates ours too
        self._on_change, self._on_state = on_change, on_state
        self._cache: dict[str, dict[tuple[str, str], Dict]] = {k: {} for k in KINDS}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ok = {k: False for k in KINDS}
        self._tried = {k: False for k in KINDS}
        self.last_error = "connecting"
        # The worker-lost clock, in wall-clock time so that it can come from the cluster's
        # condition and survive restarts. None while connected, or while connecting after
        # start-up with no outage on record: a cluster we have not tried yet is never "lost".
        self.down_since = down_since
        self._threads = [
            threading.Thread(
                target=self._run, args=(kind,), daemon=True, name=f"watch-{name}-{kind}"
            )
            for kind in KINDS
        ]

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()

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
        elif self.down_since is None and (before or (was_connecting and not ok)):
            # Lost now: it went down, or the first attempt after start-up failed with no
            # earlier outage on record (an unknown lost time counts as lost now).
            self.down_since = time.time()
        if before != self.connected or (was_connecting and not self.connecting):
            log.info(
                "[%s] %s",
                self.name,
                "connected" if self.connected else f"disconnected: {self.last_error}",
            )
            self._on_state(self.name)

    # ---- cache -------------------------------------------------------------------------------

    def get(self, kind: str, namespace: str, name: str) -> Dict | None:
        with self._lock:
            return self._cache[kind].get((namespace, name))

    def items(self, kind: str) -> list[Dict]:
        with self._lock:
            return list(self._cache[kind].values())

    def _run(self, kind: str) -> None:
        group, version, plural = KINDS[kind].gvr
        api = client.CustomObjectsApi(self.cluster.api)
        selector = f"{c.KUEUE_MULTIKUEUE_ORIGIN_LABEL}={self.origin}"
        backoff = 1.0
        while not self._stop.is_set():
            try:
                listed = api.list_cluster_custom_object(
                    group, version, plural, label_selector=selector, _request_timeout=10
                )
                fresh = {
                    (o["metadata"]["namespace"], o["metadata"]["name"]): o for o in listed["items"]
                }
                with self._lock:
                    changed = set(self._cache[kind]) ^ set(fresh) | {
                        k for k in fresh if self._cache[kind].get(k) != fresh[k]
                    }
                    self._cache[kind] = fresh
                self._set_ok(kind, True)
                backoff = 1.0
                for key in changed:
                    self._on_change(*key)
                stream = watch.Watch().stream(
                    api.list_cluster_custom_object,
                    group,
                    version,
                    plural,
                    label_selector=selector,
                    resource_version=listed["metadata"]["resourceVersion"],
                    timeout_seconds=60,
                    _request_timeout=75,
                )
                for event in stream:
                    if self._stop.is_set():
                        return
                    obj = event["object"]
                    key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                    with self._lock:
                        if event["type"] == "DELETED":
                            self._cache[kind].pop(key, None)
                        else:
                            self._cache[kind][key] = obj
                    self._on_change(*key)
            except Exception as exc:  # any failure: mark down, back off, relist
                self._set_ok(kind, False, f"{type(exc).__name__}: {str(exc)[:200]}")
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
