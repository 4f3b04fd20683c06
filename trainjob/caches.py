"""Typed reads of the caches both controllers keep: one method per question, the caches named
once (`Index`, which the watch tables use too; kubecontrol/caches.py has the generic reads).
TrainJobs and Workloads come out as views (trainjob/views.py) over the cached JSON."""

from __future__ import annotations

from enum import StrEnum

from kubecontrol import caches
from kubecontrol.objects import Dict
from trainjob import constants as c
from trainjob.queues import (
    AdmissionCheckView,
    ClusterQueueView,
    LocalQueueView,
    MultiKueueClusterView,
    MultiKueueConfigView,
)
from trainjob.views import FailedCreateView, JobView, PodView, TrainJobView
from trainjob.workload import WorkloadView

Key = tuple[str, str]


class Index(StrEnum):
    """The name of each cache a watch table fills."""

    TRAINJOBS = "trainjob_index"
    WORKLOADS = "workload_index"
    RUNTIMES = "runtime_index"
    CLUSTER_RUNTIMES = "cluster_runtime_index"
    FLAVORS = "flavor_index"
    # the dispatcher's
    CLUSTERS = "cluster_index"  # MultiKueueClusters
    CHECKS = "check_index"  # AdmissionChecks
    CONFIGS = "config_index"  # MultiKueueConfigs
    LOCAL_QUEUES = "localqueue_index"
    CLUSTER_QUEUES = "clusterqueue_index"
    # the worker controller's, grouped by the TrainJob (or Job) they belong to
    TRAINJOB_BY_WORKLOAD = "owner_index"  # (namespace, its Workload's name) -> the TrainJob
    JOBS = "job_index"
    SERVICES = "service_index"
    PODS = "pod_index"
    FAILED_CREATES = "failed_create_index"  # FailedCreate Events, by Job


# The caches the watchdog compares with the API (kubecontrol/watchdog.py): the busiest, whose
# freezing would stop every TrainJob.
WATCHDOG_CACHES = {Index.TRAINJOBS.value: c.TRAINJOB, Index.WORKLOADS.value: c.WORKLOAD}


class Caches(caches.Caches):
    # ---- the kinds both controllers read ----------------------------------------------------

    def trainjob(self, namespace: str, name: str) -> TrainJobView | None:
        found = self.first(Index.TRAINJOBS, (namespace, name))
        return None if found is None else TrainJobView(found)

    def trainjob_keys(self) -> list[Key]:
        return self.keys(Index.TRAINJOBS)

    def workload(self, namespace: str, name: str) -> WorkloadView | None:
        found = self.first(Index.WORKLOADS, (namespace, name))
        return None if found is None else WorkloadView(found)

    def runtime_of(self, trainjob: TrainJobView) -> Dict | None:
        """The (Cluster)TrainingRuntime a TrainJob's spec.runtimeRef names, if it exists
        (parsed where it is used: trainjob/models.py)."""
        if trainjob.runtime_kind == c.TRAINING_RUNTIME_KIND:
            return self.first(Index.RUNTIMES, (trainjob.namespace, trainjob.runtime_name))
        return self.first(Index.CLUSTER_RUNTIMES, trainjob.runtime_name)

    def runtimes(self) -> list[Dict]:
        """Every TrainingRuntime, each with its kind."""
        return [{"kind": c.TRAINING_RUNTIME_KIND, **r} for r in self.all(Index.RUNTIMES)]

    def cluster_runtimes(self) -> list[Dict]:
        """Every ClusterTrainingRuntime, each with its kind."""
        return [
            {"kind": c.CLUSTER_TRAINING_RUNTIME_KIND, **r} for r in self.all(Index.CLUSTER_RUNTIMES)
        ]

    def flavors(self) -> dict[str, Dict]:
        """ResourceFlavors by name."""
        return {f["metadata"]["name"]: f for f in self.all(Index.FLAVORS)}

    # ---- the dispatcher's: Kueue's MultiKueue objects and queues on the manager ----------

    def cluster(self, name: str) -> MultiKueueClusterView | None:
        """A MultiKueueCluster."""
        found = self.first(Index.CLUSTERS, name)
        return None if found is None else MultiKueueClusterView(found)

    def clusters(self) -> list[MultiKueueClusterView]:
        return [MultiKueueClusterView(x) for x in self.all(Index.CLUSTERS)]

    def cluster_labels(self, name: str) -> dict[str, str]:
        """A MultiKueueCluster's labels ({} when there is no such cluster)."""
        found = self.cluster(name)
        return found.labels if found is not None else {}

    def check(self, name: str) -> AdmissionCheckView | None:
        """An AdmissionCheck."""
        found = self.first(Index.CHECKS, name)
        return None if found is None else AdmissionCheckView(found)

    def checks(self) -> list[AdmissionCheckView]:
        return [AdmissionCheckView(ac) for ac in self.all(Index.CHECKS)]

    def config(self, name: str) -> MultiKueueConfigView | None:
        """A MultiKueueConfig."""
        found = self.first(Index.CONFIGS, name)
        return None if found is None else MultiKueueConfigView(found)

    def local_queue(self, namespace: str, name: str) -> LocalQueueView | None:
        found = self.first(Index.LOCAL_QUEUES, (namespace, name))
        return None if found is None else LocalQueueView(found)

    def cluster_queue(self, name: str) -> ClusterQueueView | None:
        found = self.first(Index.CLUSTER_QUEUES, name)
        return None if found is None else ClusterQueueView(found)

    # ---- the worker controller's: what a TrainJob is made of here ------------------------

    def trainjob_by_workload(self, namespace: str, workload: str) -> TrainJobView | None:
        """The TrainJob whose Workload has this name."""
        found = self.first(Index.TRAINJOB_BY_WORKLOAD, (namespace, workload))
        return None if found is None else TrainJobView(found)

    def jobs_of(self, key: Key) -> list[JobView]:
        """The Jobs made for the TrainJob `key` names (by their controller's name)."""
        return [JobView(j) for j in self.every(Index.JOBS, key)]

    def services_of(self, key: Key) -> list[Dict]:
        return self.every(Index.SERVICES, key)

    def pods_of(self, key: Key) -> list[PodView]:
        """The TrainJob's pods, as digests (worker_controller/digests.py)."""
        return [PodView(p) for p in self.every(Index.PODS, key)]

    def failed_creates_of(self, namespace: str, job: str) -> list[FailedCreateView]:
        """The FailedCreate Events of a Job."""
        return [FailedCreateView(e) for e in self.every(Index.FAILED_CREATES, (namespace, job))]
