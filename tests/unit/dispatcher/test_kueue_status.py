"""What the dispatcher reads back from Kueue's objects (dispatcher/kueue_status.py)."""

from __future__ import annotations

from typing import Any

from dispatcher.kueue_status import down_since
from tests.support.dispatch import NOW

Dict = dict[str, Any]


def test_down_since_comes_from_the_active_condition() -> None:
    def mkc(status: str) -> Dict:
        cond = {"type": "Active", "status": status, "lastTransitionTime": "2026-11-22T12:00:00Z"}
        return {"metadata": {"name": "w1"}, "status": {"conditions": [cond]}}

    assert down_since(mkc("False")) == NOW.timestamp()
    assert down_since(mkc("True")) is None
    assert down_since({"metadata": {"name": "w1"}}) is None
