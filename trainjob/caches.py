"""Typed reads of the watch caches a controller keeps (`ControllerMemo.indexes`, filled by
the informers of its `Watch` table, trainjob/operator.py). Every cache maps a key to the
objects under it: a name for cluster-scoped kinds, (namespace, name) for namespaced ones, and
for a grouped cache (`Watch.groups`) the group's key, e.g. the TrainJob a Job belongs to.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from typing import Any

from trainjob import constants as c

Dict = dict[str, Any]


class Caches:
    def __init__(self, indexes: Mapping[str, Any]) -> None:
        self._indexes = indexes

    def index(self, name: str) -> Mapping[Any, Collection[Dict]]:
        found: Mapping[Any, Collection[Dict]] = self._indexes[name]
        return found

    def first(self, name: str, key: Hashable) -> Dict | None:
        """The object under `key` in the index `name`, if any."""
        store = self.index(name).get(key)
        return next(iter(store), None) if store else None

    def every(self, name: str, key: Hashable) -> list[Dict]:
        """Every object under `key` (indexes keyed by an owner hold several)."""
        return list(self.index(name).get(key, []))

    def all(self, name: str) -> list[Dict]:
        index = self.index(name)
        return [obj for key in list(index) for obj in index.get(key, [])]

    def keys(self, name: str) -> list[tuple[str, str]]:
        """The (namespace, name) keys of a namespaced index."""
        return [k for k in list(self.index(name)) if isinstance(k, tuple)]

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
