"""The conditions the dispatcher writes on Kueue's objects (dispatcher/workers/kueue_status.py),
over an API server in memory: one guarded write when a condition changed, none otherwise."""

from __future__ import annotations

from typing import Any

from dispatcher.workers.kueue_status import set_active_condition, set_conditions
from tests.support.memory_api import MemoryApi
from tests.support.whole_pass import MemoryCluster
from trainjob_api import constants as c

Dict = dict[str, Any]


def cluster_with_check() -> tuple[MemoryApi, MemoryCluster, Dict]:
    api = MemoryApi(
        "manager",
        [
            {
                "apiVersion": c.KUEUE_API,
                "kind": "AdmissionCheck",
                "metadata": {"name": "mk"},
                "spec": {"controllerName": "kueue.x-k8s.io/multikueue"},
            }
        ],
    )
    cluster = MemoryCluster(api, c.DISPATCHER_FIELD_MANAGER)
    found = api.get_json(c.ADMISSION_CHECK.path(None, "mk"))
    return api, cluster, found


def status_writes(api: MemoryApi) -> int:
    return sum(1 for method, path in api.requests if method == "PATCH" and path.endswith("/status"))


def test_a_changed_condition_is_written_once_and_an_unchanged_one_not_at_all() -> None:
    api, cluster, check = cluster_with_check()
    set_active_condition(cluster, check, True, "Active", "The admission check is active")
    assert status_writes(api) == 1
    now = api.get_json(c.ADMISSION_CHECK.path(None, "mk"))
    [active] = now["status"]["conditions"]
    assert (active["type"], active["status"], active["reason"]) == ("Active", "True", "Active")
    set_active_condition(cluster, now, True, "Active", "The admission check is active")
    assert status_writes(api) == 1


def test_a_write_planned_from_an_old_version_is_refused_and_undoes_nothing() -> None:
    api, cluster, stale = cluster_with_check()
    set_active_condition(cluster, stale, True, "Active", "newer")
    set_conditions(cluster, stale, [("Active", False, "NoUsableClusters", "older")])  # 409
    [active] = api.get_json(c.ADMISSION_CHECK.path(None, "mk"))["status"]["conditions"]
    assert (active["status"], active["message"]) == ("True", "newer")


def test_a_standby_writes_nothing() -> None:
    api, cluster, check = cluster_with_check()
    cluster.may_write = lambda: False
    set_active_condition(cluster, check, True, "Active", "The admission check is active")
    assert status_writes(api) == 0
