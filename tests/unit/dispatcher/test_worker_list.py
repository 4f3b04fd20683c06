"""The list of workers the read API serves (dispatcher/readapi/worker_list.py): each worker's
connection, its problem, and what is known of its queues."""

from __future__ import annotations

import time

from dispatcher.readapi.worker_list import worker
from tests.support.kubeconfigs import remote_cluster


def test_a_worker_listed_while_connecting_has_no_queues_known() -> None:
    item = worker("w1", remote_cluster(), None).to_json()
    assert item["connection"] == "Connecting" and item["clusterQueues"] is None
    assert item["trainJobCopies"] == 0 and item["metadata"] == {"name": "w1"}
    lost = remote_cluster(down=time.time() - 60)
    for kind in ("Workload", "TrainJob"):
        lost._set_ok(kind, False, "connection refused")
    item = worker("w1", lost, None).to_json()
    assert item["connection"] == "Disconnected" and item["problem"] == "connection refused"
    assert item["downSince"] is not None and item["kind"] == "Worker"
    none = worker("w2", None, "no kubeconfig Secret")
    assert none.connection == "NoKubeconfig" and none.problem == "no kubeconfig Secret"
