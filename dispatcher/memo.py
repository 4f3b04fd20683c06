"""What every part of the dispatcher shares: settings, connections, caches, queue, clocks."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from trainjob import operator
from trainjob.informer import Informer
from trainjob.kube import Cluster
from trainjob.workqueue import WriteMemory

if TYPE_CHECKING:
    from dispatcher.clusters import Registry
    from dispatcher.settings import DispatcherSettings


class Memo(operator.ControllerMemo):
    settings: DispatcherSettings
    manager: Cluster
    registry: Registry
    informers: list[Informer]  # the manager's TrainJobs and Workloads (handlers.py)
    memory: WriteMemory  # versions we wrote from, and Workloads the API refused
    resync_now: threading.Event  # wakes the resync loop at once (a worker came or went)
    # TrainJobs sent no copy to some workers for want of room there, or for their runtime:
    # (namespace, name) -> those workers, looked at again when one of them may take it.
    withheld: dict[tuple[str, str], frozenset[str]]
