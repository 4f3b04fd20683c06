"""Which PodGroup APIs this worker's API server serves (trainjob/runtime/podgroups/),
asked of discovery (`GET /apis/GROUP/VERSION`, which every authenticated caller may read).

Asked only for a TrainJob whose runtime has a podGroupPolicy, and kept: "served" for
SERVED_SECONDS, "not served" for NOT_SERVED_SECONDS (a CRD installed later is used within
it). A create that finds the API gone (its CRD deleted) forgets the answer at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster
from trainjob.runtime.podgroups import BY_NAME

log = logging.getLogger("worker_controller")

SERVED_SECONDS = 300.0
NOT_SERVED_SECONDS = 10.0


class ServedApis:
    def __init__(self, cluster: Cluster, clock: Callable[[], float] = time.monotonic) -> None:
        self._cluster = cluster
        self._clock = clock
        self._lock = threading.Lock()
        self._answers: dict[str, tuple[bool, float]] = {}  # policy -> (served, asked at)

    def pod_group_apis(self) -> frozenset[str]:
        """The podGroupPolicy members whose PodGroup API is served (podgroups.BY_NAME keys)."""
        return frozenset(policy for policy in BY_NAME if self._served(policy))

    def forget(self) -> None:
        with self._lock:
            self._answers.clear()

    def _served(self, policy: str) -> bool:
        now = self._clock()
        with self._lock:
            known = self._answers.get(policy)
        if known is not None:
            served, asked = known
            if now - asked < (SERVED_SECONDS if served else NOT_SERVED_SECONDS):
                return served
        kind = BY_NAME[policy].kind
        try:
            found = self._cluster.send("GET", f"/apis/{kind.group}/{kind.version}")
            served = any(r.get("name") == kind.plural for r in (found or {}).get("resources", []))
        except ApiException as exc:
            if exc.status != 404:
                raise
            served = False
        with self._lock:
            before = self._answers.get(policy)
            self._answers[policy] = (served, now)
        if before is None or before[0] != served:
            log.info(
                "served" if served else "not served",
                extra={
                    "cluster": self._cluster.name,
                    "kind": kind.kind,
                    "groupVersion": f"{kind.group}/{kind.version}",
                },
            )
        return served
