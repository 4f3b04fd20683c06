"""Copies left on the workers whose manager object is gone, swept (dispatcher/decisions/copies.py
says what a copy is; those of a TrainJob being deleted go in its pass:
dispatcher/decisions/removal.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

from dispatcher.decisions.copies import orphan
from kubebase.objects import Dict
from kubecontrol.cluster import Cluster
from trainjob.caches import Caches
from trainjob_api import constants as c
from trainjob_api.views import ObjectView

log = logging.getLogger("dispatcher")


class Worker(Protocol):
    """What the sweep needs of a worker (remote.RemoteCluster): its connection and its
    watch caches of our copies."""

    cluster: Cluster

    @property
    def connected(self) -> bool: ...

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
                    log.info(
                        "orphan copy deleted",
                        extra={"cluster": name, "kind": kind, "object": "/".join(key)},
                    )
                except Exception as exc:
                    log.warning(
                        "orphan copy not deleted",
                        extra={
                            "cluster": name,
                            "kind": kind,
                            "object": "/".join(key),
                            "error": str(exc),
                        },
                    )
