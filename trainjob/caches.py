"""Typed reads of the caches both controllers keep: one method per question, the caches named
once (`Index`, which the watch tables use too; kubecontrol/caches.py has the generic reads).
TrainJobs and Workloads come out as views (plugin/trainjob_api/views.py) over the cached JSON."""

from __future__ import annotations

from collections.abc import Hashable
from enum import StrEnum
from typing import TypeVar

from kubebase.objects import Dict
from kubecontrol import caches
from trainjob.queues import (
    AdmissionCheckView,
    ClusterQueueView,
    LocalQueueView,
    MultiKueueClusterView,
    MultiKueueConfigView,
    ResourceFlavorView,
)
from trainjob_api import constants as c
from trainjob_api.views import (
    FailedCreateView,
    JobView,
    ObjectView,
    PodView,
    RuntimeView,
    TrainJobView,
    WorkloadView,
)

V = TypeVar("V", bound=ObjectView)

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
    # A TrainJob's dependencies (dispatcher/decisions/dependencies.py): who they are and a digest of
    # their content, never the content; the namespaces' labels say whose follow their jobs.
    SECRETS = "secret_index"
    CONFIG_MAPS = "configmap_index"
    NAMESPACES = "namespace_index"
    # Manager Workloads by each Secret and ConfigMap their pods reference: (namespace, Kind,
    # name) -> the Workloads (dispatcher/decisions/dependencies.py `named_by`).
    DEPENDENTS = "dependent_index"
    # TrainJobs by the TrainingRuntime of their namespace they name: (namespace, name) -> the
    # TrainJobs (the runtime follows them as their Secrets do).
    RUNTIME_USERS = "runtime_user_index"
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

    def _one(self, index: Index, key: Hashable, view: type[V]) -> V | None:
        """The object under `key` in `index`, read through `view`, if any."""
        found = self.first(index, key)
        return None if found is None else view(found)

    def trainjob(self, namespace: str, name: str) -> TrainJobView | None:
        return self._one(Index.TRAINJOBS, (namespace, name), TrainJobView)

    def trainjob_keys(self) -> list[Key]:
        return self.keys(Index.TRAINJOBS)

    def workload(self, namespace: str, name: str) -> WorkloadView | None:
        return self._one(Index.WORKLOADS, (namespace, name), WorkloadView)

    def runtime_of(self, trainjob: TrainJobView) -> RuntimeView | None:
        """The (Cluster)TrainingRuntime a TrainJob's spec.runtimeRef names, if it exists
        (parsed where a job is built from it: trainjob/models.py)."""
        if trainjob.runtime_kind == c.TRAINING_RUNTIME_KIND:
            key: Hashable = (trainjob.namespace, trainjob.runtime_name)
            return self._one(Index.RUNTIMES, key, RuntimeView)
        return self._one(Index.CLUSTER_RUNTIMES, trainjob.runtime_name, RuntimeView)

    def runtimes(self) -> list[Dict]:
        """Every TrainingRuntime, each with its kind."""
        return [{"kind": c.TRAINING_RUNTIME_KIND, **r} for r in self.all(Index.RUNTIMES)]

    def cluster_runtimes(self) -> list[Dict]:
        """Every ClusterTrainingRuntime, each with its kind."""
        return [
            {"kind": c.CLUSTER_TRAINING_RUNTIME_KIND, **r} for r in self.all(Index.CLUSTER_RUNTIMES)
        ]

    def flavors(self) -> dict[str, ResourceFlavorView]:
        """ResourceFlavors by name."""
        return {f.name: f for f in map(ResourceFlavorView, self.all(Index.FLAVORS))}

    # ---- the dispatcher's: Kueue's MultiKueue objects and queues on the manager ----------

    def dependency(self, kind: str, namespace: str, name: str) -> Dict | None:
        """A Secret or ConfigMap as dependencies.source_seen keeps it (None when it does not
        exist, or dependencies are not watched)."""
        index = Index.SECRETS if kind == "Secret" else Index.CONFIG_MAPS
        if index.value not in self._indexes:
            return None
        return self.first(index, (namespace, name))

    def dependents(self, namespace: str, kind: str, name: str) -> list[Dict]:
        """The manager Workloads whose pods reference a Secret or ConfigMap (none when
        dependencies are not watched)."""
        if Index.DEPENDENTS.value not in self._indexes:
            return []
        return self.every(Index.DEPENDENTS, (namespace, kind, name))

    def runtime_users(self, namespace: str, name: str) -> list[Dict]:
        """The TrainJobs that name the TrainingRuntime `name` of their namespace (none when
        dependencies are not watched)."""
        if Index.RUNTIME_USERS.value not in self._indexes:
            return []
        return self.every(Index.RUNTIME_USERS, (namespace, name))

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        """A namespace's labels (none when namespaces are not watched)."""
        if Index.NAMESPACES.value not in self._indexes:
            return {}
        found = self.first(Index.NAMESPACES, namespace)
        return dict(((found or {}).get("metadata") or {}).get("labels") or {})

    def cluster(self, name: str) -> MultiKueueClusterView | None:
        """A MultiKueueCluster."""
        return self._one(Index.CLUSTERS, name, MultiKueueClusterView)

    def clusters(self) -> list[MultiKueueClusterView]:
        return [MultiKueueClusterView(x) for x in self.all(Index.CLUSTERS)]

    def cluster_labels(self, name: str) -> dict[str, str]:
        """A MultiKueueCluster's labels ({} when there is no such cluster)."""
        found = self.cluster(name)
        return found.labels if found is not None else {}

    def check(self, name: str) -> AdmissionCheckView | None:
        """An AdmissionCheck."""
        return self._one(Index.CHECKS, name, AdmissionCheckView)

    def checks(self) -> list[AdmissionCheckView]:
        return [AdmissionCheckView(ac) for ac in self.all(Index.CHECKS)]

    def config(self, name: str) -> MultiKueueConfigView | None:
        """A MultiKueueConfig."""
        return self._one(Index.CONFIGS, name, MultiKueueConfigView)

    def local_queue(self, namespace: str, name: str) -> LocalQueueView | None:
        return self._one(Index.LOCAL_QUEUES, (namespace, name), LocalQueueView)

    def cluster_queue(self, name: str) -> ClusterQueueView | None:
        return self._one(Index.CLUSTER_QUEUES, name, ClusterQueueView)

    # ---- the worker controller's: what a TrainJob is made of here ------------------------

    def trainjob_by_workload(self, namespace: str, workload: str) -> TrainJobView | None:
        """The TrainJob whose Workload has this name."""
        return self._one(Index.TRAINJOB_BY_WORKLOAD, (namespace, workload), TrainJobView)

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
