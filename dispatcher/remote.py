"""One worker cluster seen from the manager: its own client, watches, cache and connection state.

Each RemoteCluster runs one informer (trainjob/informer.py) per watched kind (Workloads and
TrainJobs carrying our origin label). A failing watch marks the cluster disconnected and lists
again with exponential backoff; it never blocks other clusters. Every change calls
`on_change(namespace, name)` and every change of the connection state `on_state(cluster)`;
both must return quickly.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from trainjob import constants as c
from trainjob.informer import Informer
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
        self._ok = {k: False for k in KINDS}
        self._tried = {k: False for k in KINDS}
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
                lambda _type, obj: self._on_change(
                    obj["metadata"]["namespace"], obj["metadata"]["name"]
                ),
                label_selector=selector,
                on_state=functools.partial(self._set_ok, kind),
                name=f"{name}-{kind}",
                list_timeout=10,  # an unreachable worker is reported down soon
            )
            for kind, k in KINDS.items()
        }

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        for informer in self._informers.values():
            informer.start()

    def stop(self) -> None:
        for informer in self._informers.values():
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
        return self._informers[kind].get((namespace, name))

    def items(self, kind: str) -> list[Dict]:
        return self._informers[kind].items()
