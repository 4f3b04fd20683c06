"""Typed reads of the caches both controllers keep, by the names their watch tables give
them (`trainjob_index`, `workload_index`, ...; kubecontrol/caches.py has the generic reads)."""

from __future__ import annotations

from typing import Any

from kubecontrol import caches
from trainjob import constants as c

Dict = dict[str, Any]
# The caches the watchdog compares with the API (kubecontrol/watchdog.py): the busiest, whose
# freezing would stop every TrainJob.
WATCHDOG_CACHES = {"trainjob_index": c.TRAINJOB, "workload_index": c.WORKLOAD}


class Caches(caches.Caches):
    # ---- the kinds both controllers read ----------------------------------------------------

    def trainjob(self, namespace: str, name: str) -> Dict | None:
        return self.first("trainjob_index", (namespace, name))

    def workload(self, namespace: str, name: str) -> Dict | None:
        return self.first("workload_index", (namespace, name))

    def runtime_of(self, trainjob: Dict) -> Dict | None:
        """The (Cluster)TrainingRuntime a TrainJob's spec.runtimeRef names, if it exists."""
        ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
        if ref.get("kind") == c.TRAINING_RUNTIME_KIND:
            namespace = (trainjob.get("metadata") or {}).get("namespace")
            return self.first("runtime_index", (namespace, ref.get("name")))
        return self.first("cluster_runtime_index", ref.get("name"))

    def flavors(self) -> dict[str, Dict]:
        """ResourceFlavors by name."""
        return {f["metadata"]["name"]: f for f in self.all("flavor_index")}
