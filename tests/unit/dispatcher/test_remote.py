"""A worker's connection bookkeeping: the worker-lost clock (dispatcher/workers/remote.py; no
threads started)."""

from __future__ import annotations

import time
from typing import Any

from tests.support.kubeconfigs import remote_cluster

Dict = dict[str, Any]


def test_a_cluster_still_connecting_after_start_up_is_never_lost() -> None:
    rc = remote_cluster()
    assert rc.connecting and not rc.connected and rc.disconnected_for() == 0.0
    rc._set_ok("Workload", True)
    assert rc.connecting and rc.disconnected_for() == 0.0  # the TrainJob watch has not listed yet
    rc._set_ok("TrainJob", True)
    assert rc.connected and not rc.connecting and rc.down_since is None


def test_first_failure_after_start_up_starts_the_clock_now_unless_an_outage_is_on_record() -> None:
    fresh = remote_cluster()
    before = time.time()
    fresh._set_ok("Workload", False, "ConnectionRefused")
    assert fresh.down_since is not None and before <= fresh.down_since <= time.time()
    down = time.time() - 100
    on_record = remote_cluster(down=down)
    on_record._set_ok("Workload", False, "ConnectionRefused")
    on_record._set_ok("TrainJob", False, "ConnectionRefused")
    assert on_record.down_since == down  # the clock survived the restart
    assert on_record.disconnected_for() >= 100


def test_the_clock_stops_on_reconnect_and_restarts_on_the_next_outage() -> None:
    rc = remote_cluster(down=time.time() - 500)
    rc._set_ok("Workload", True)
    rc._set_ok("TrainJob", True)
    assert rc.disconnected_for() == 0.0 and rc.down_since is None
    before = time.time()
    rc._set_ok("TrainJob", False, "timeout")
    assert rc.down_since is not None and before <= rc.down_since <= time.time()  # from now


def test_a_workers_runtimes_are_listed_in_small_pages() -> None:
    """A worker's TrainingRuntimes are a tenant's to size (a megabyte each): its read lists
    them TENANT_SIZED_PAGE at a time, as the worker controller does; the platform's kinds
    keep client-go's 500."""
    from kubecontrol.informer import PAGE, TENANT_SIZED_PAGE
    from trainjob_api import constants as c

    remote = remote_cluster()
    pages = {kind: informer._page for kind, informer in remote._read.items()}
    assert pages[c.TRAINING_RUNTIME.kind] == TENANT_SIZED_PAGE
    assert pages[c.CLUSTER_TRAINING_RUNTIME.kind] == PAGE
