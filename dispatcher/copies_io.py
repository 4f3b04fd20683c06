"""How a TrainJob's copies go from the workers (dispatcher/copies.py says what a copy is):
with their TrainJob (`delete_remotes`), or as orphans whose manager object is gone
(`collect_garbage`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

from dispatcher.copies import orphan
from kubecontrol.cluster import Cluster
from kubecontrol.objects import Dict
from trainjob import constants as c
from trainjob import jobframework
from trainjob.caches import Caches
from trainjob.views import ObjectView

log = logging.getLogger("dispatcher")


class Worker(Protocol):
    """What the clean-up needs of a worker (remote.RemoteCluster): its connection and its
    watch caches of our copies."""

    cluster: Cluster

    @property
    def connected(self) -> bool: ...

    def get(self, kind: str, namespace: str, name: str) -> Dict | None: ...

    def items(self, kind: str) -> list[Dict]: ...


def collect_garbage(workers: Mapping[str, Worker], caches: Caches) -> None:
    """Remote Workloads and TrainJobs with our origin whose manager object is gone (or is a
    new one of the same name)."""
    for name, remote in list(workers.items()):
        if not remote.connected:
            continue
        for kind, on_manager in (("TrainJob", caches.trainjob), ("Workload", caches.workload)):
            for obj in remote.items(kind):
                key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                found = on_manager(*key)
                if not orphan(ObjectView(obj), found):
                    continue
                try:
                    uid = obj["metadata"].get("uid")
                    remote.cluster.delete(c.KINDS[kind], key[1], key[0], uid=uid)
                    log.info("[%s] garbage-collected orphan %s %s/%s", name, kind, *key)
                except Exception as exc:
                    log.warning("[%s] cannot collect %s %s/%s: %s", name, kind, *key, exc)


def delete_remotes(workers: Mapping[str, Worker], trainjob: Dict, holders: set[str]) -> list[str]:
    """Delete a manager TrainJob's remote TrainJob and Workload on every reachable worker (our
    copies only: those the worker's watch shows with our origin, each by its UID; a same-named
    object someone made on the worker stays); the `holders` (clusters that may hold a copy)
    that could not be reached are returned (their copies are left to the garbage
    collector)."""
    meta = trainjob["metadata"]
    ns = meta["namespace"]
    wl_name = jobframework.expected_workload_name_of(trainjob)
    pending = []
    for name, remote in list(workers.items()):
        if not remote.connected:
            if name in holders:
                pending.append(name)
            continue
        try:
            for kind, obj_name in (("TrainJob", meta["name"]), ("Workload", wl_name)):
                ours = remote.get(kind, ns, obj_name)
                if ours is not None:
                    uid = ours["metadata"].get("uid")
                    remote.cluster.delete(c.KINDS[kind], obj_name, ns, uid=uid)
        except Exception as exc:  # treat as unreachable: retried later
            where = f"{meta['namespace']}/{meta['name']}"
            log.warning("[%s] cannot delete remote objects of %s: %s", name, where, exc)
            if name in holders:
                pending.append(name)
    return pending
