"""What every unit test starts from."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubecontrol import admission
from kubecontrol.shares import Rates


@pytest.fixture(autouse=True)
def uncached_reads() -> Iterator[Rates]:
    """The admission judges' allowance of reads of what the caches do not hold is the
    process's: each test starts with it whole, and a clock that stands still (none refills)."""
    fresh = Rates(admission.UNCACHED_PER_SECOND, admission.UNCACHED_BURST, 1, clock=lambda: 0.0)
    saved, admission._uncached = admission._uncached, fresh
    yield fresh
    admission._uncached = saved
