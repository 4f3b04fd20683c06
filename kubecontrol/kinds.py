"""The coordinates of a kind of object in the API."""

from __future__ import annotations

from typing import NamedTuple


class Kind(NamedTuple):
    group: str  # "" for the core API
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version
