"""Fixtures of the worker controller's bed tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from clusters.bed import Bed
from clusters.helpers.kube import TrainJobs


@pytest.fixture
def tjs(
    bed: Bed, worker_names: list[str], namespace_factory: Callable[..., str]
) -> Iterator[TrainJobs]:
    worker = worker_names[0]
    yield TrainJobs(bed.api(worker), namespace_factory(worker, "wc"))
