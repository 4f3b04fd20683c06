"""What every part of the worker controller shares: settings, connection, caches, queue."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubebase.objects import Dict
from kubecontrol import controller
from kubecontrol.cluster import Cluster
from kubecontrol.workqueue import WriteMemory
from trainjob.caches import Caches
from trainjob.progress import Wiring
from worker_controller.ca_bundle import CaBundle
from worker_controller.decide import Blocked
from worker_controller.served import ServedApis
from worker_controller.settings import WorkerSettings


@dataclass(kw_only=True, eq=False)
class Context(controller.ControllerContext):
    settings: WorkerSettings
    cluster: Cluster
    # UIDs of TrainJobs the API says are gone while the watch cache still holds them (a watch
    # resumed after an API-server outage may never deliver their deletion).
    gone: set[str] = field(default_factory=set)
    # Workloads the API refused, so the same one is not sent again.
    memory: WriteMemory = field(default_factory=WriteMemory)
    # UIDs of TrainJobs told once why they are held without a queue (manageJobsWithoutQueueName).
    held_told: set[str] = field(default_factory=set)
    # By TrainJob UID: why the last pass could not make an object it needs (decide.Blocked).
    blocked: dict[str, Blocked] = field(default_factory=dict)
    # By TrainJob UID: the (kind, name) of the objects made for it, or found made for it, so
    # a TrainJob waiting (for quota, for its dependencies) does not ask for them every pass.
    made: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    # Where the pods report progress, and the CA they trust (worker_controller/progress.py).
    progress_url: str | None = None
    progress_ca: CaBundle | None = None
    # The installed TrainJob CRD's schema: reviews are held to its limits before judging.
    trainjob_schema: Dict | None = None
    # Which PodGroup APIs the worker serves, asked when a runtime wants gang scheduling.
    _served: ServedApis | None = None

    @property
    def served(self) -> ServedApis:
        if self._served is None:
            self._served = ServedApis(self.cluster)
        return self._served

    def progress_wiring(self) -> Wiring | None:
        """What the trainer pods are given to report progress, when they are to."""
        if self.progress_url is None or self.progress_ca is None:
            return None
        pem = self.progress_ca.pem()
        return None if pem is None else Wiring(self.progress_url, pem)

    def forget_all_but(self, live: set[str]) -> None:
        """Drop what is kept by UID for TrainJobs no longer in the cache (none grows for ever)."""
        self.gone &= live
        self.held_told &= live
        for kept in (self.blocked, self.made):
            for uid in set(kept) - live:
                kept.pop(uid, None)

    @property
    def caches(self) -> Caches:
        """Typed reads of the caches (trainjob/caches.py)."""
        return Caches(self.indexes)
