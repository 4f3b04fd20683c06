"""What every part of the worker controller shares: settings, connection, caches, queue."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainjob import operator
from trainjob.kube import Cluster
from trainjob.workqueue import WriteMemory
from worker_controller.settings import WorkerSettings


@dataclass(kw_only=True, eq=False)
class Memo(operator.ControllerMemo):
    settings: WorkerSettings
    cluster: Cluster
    # UIDs of TrainJobs the API says are gone while the watch cache still holds them (a watch
    # resumed after an API-server outage may never deliver their deletion).
    gone: set[str] = field(default_factory=set)
    # Workloads the API refused, so the same one is not sent again.
    memory: WriteMemory = field(default_factory=WriteMemory)
