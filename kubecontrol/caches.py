"""Reads of the watch caches a controller keeps (`ControllerContext.indexes`, filled by the
informers of its `Watch` table, kubecontrol/controller.py). Every cache maps a key to the
objects under it: a name for cluster-scoped kinds, (namespace, name) for namespaced ones, and
for a grouped cache (`Watch.groups`) the group's key, e.g. the owner of a set of objects.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from typing import Any

from kubebase.objects import Dict

# One cache: its objects under each key.
Index = Mapping[Any, Collection[Dict]]


class Caches:
    def __init__(self, indexes: Mapping[str, Index]) -> None:
        self._indexes = indexes

    def index(self, name: str) -> Index:
        return self._indexes[name]

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
