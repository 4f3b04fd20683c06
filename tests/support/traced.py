"""Two helpers for tests of what a reader holds: an API client that answers with the bytes
given, and the peak of the Python heap while a call runs (tracemalloc)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable


class BytesApi:
    """An API client (as kubecontrol.client.ApiClient is called) that answers every request
    with the bytes given."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def request(self, method: str, path: str, **_: object) -> bytes:
        return self.data


def traced_peak(run: Callable[[], object]) -> int:
    """The most the Python heap held, in bytes, while `run()` ran."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
