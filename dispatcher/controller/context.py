"""What every part of the dispatcher shares: settings, connections, caches, queue, clocks."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kubebase.objects import Dict
from kubecontrol import controller
from kubecontrol.cluster import Cluster
from kubecontrol.workqueue import WriteMemory
from trainjob.caches import Caches

if TYPE_CHECKING:
    from dispatcher.decisions.keys import QueueKey
    from dispatcher.settings import DispatcherSettings
    from dispatcher.workers.connections import WorkerConnections
    from kubecontrol.workqueue import WorkQueue


@dataclass(kw_only=True, eq=False)
class Context(controller.ControllerContext):
    settings: DispatcherSettings
    manager: Cluster
    workers: WorkerConnections = field(init=False)  # the workers: connections, watches, caches
    queue: WorkQueue[QueueKey] = field(init=False)
    memory: WriteMemory = field(default_factory=WriteMemory)  # versions we wrote from, refusals
    # Wakes the resync loop at once (a worker came or went).
    resync_now: threading.Event = field(default_factory=threading.Event)
    # TrainJobs sent no copy to some workers for want of room there, or for their runtime:
    # (namespace, name) -> those workers, looked at again when one of them may take it.
    withheld: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    # Why the installed TrainJob CRD cannot carry our status (trainjob/crd.py), if it cannot:
    # new TrainJobs are refused while it lasts.
    crd_problem: str | None = None
    # The installed TrainJob CRD's schema: reviews are held to its limits before judging.
    trainjob_schema: Dict | None = None

    def shut_down(self) -> None:
        """Wake the resync loop to end, stop as every controller does, then let the workers'
        connections go."""
        self.resync_now.set()
        super().shut_down()
        self.workers.stop()

    @property
    def caches(self) -> Caches:
        """Typed reads of the caches (trainjob/caches.py)."""
        return Caches(self.indexes)
