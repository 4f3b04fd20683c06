"""What every part of the worker controller shares: settings, connection, caches, queue."""

from __future__ import annotations

from trainjob import operator
from trainjob.informer import Informer
from trainjob.kube import Cluster
from trainjob.workqueue import WriteMemory
from worker_controller.settings import WorkerSettings


class Memo(operator.ControllerMemo):
    settings: WorkerSettings
    cluster: Cluster
    # UIDs of TrainJobs the API says are gone while the watch cache still holds them (a watch
    # resumed after an API-server outage may never deliver their deletion).
    gone: set[str]
    memory: WriteMemory  # Workloads the API refused, so the same one is not sent again
    pods: Informer | None  # our pods, when settings.pod_summary
    failed_creates: Informer | None  # Jobs' FailedCreate Events, when settings.pod_summary
