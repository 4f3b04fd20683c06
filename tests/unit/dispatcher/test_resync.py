"""What the resync loop gives the orphan sweep (dispatcher/controller/resync.py `_held`): each
worker's copies as its watch caches hold them, TrainJob copies before Workload copies, and none
of a worker not connected (its caches are stale: the sweep must send it nothing)."""

from __future__ import annotations

from types import SimpleNamespace

from dispatcher.controller import resync
from dispatcher.decisions.removal import Held


class Remote:
    """A worker connection whose watch caches hold `cached` by kind."""

    def __init__(self, connected: bool, **cached: list[dict]) -> None:
        self.connected, self.cached, self.read = connected, cached, False

    def items(self, kind: str) -> list[dict]:
        self.read = True
        return self.cached.get(kind, [])


def test_each_worker_copies_trainjobs_first_and_nothing_of_one_not_connected() -> None:
    tj, wl, stale = {"kind": "TrainJob"}, {"kind": "Workload"}, {"kind": "TrainJob", "old": 1}
    up = Remote(True, Workload=[wl], TrainJob=[tj])
    down = Remote(False, TrainJob=[stale])
    ctx = SimpleNamespace(workers=SimpleNamespace(remotes={"w1": up, "w2": down}))
    assert resync._held(ctx) == [Held("w1", True, (tj, wl)), Held("w2", False, ())]  # type: ignore[arg-type]
    assert not down.read  # a stale cache is not even copied
