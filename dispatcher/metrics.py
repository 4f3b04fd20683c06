"""The dispatcher's own Prometheus series (Kueue's MultiKueue names where the meaning is the
same), on the process's registry (kubecontrol/metrics.py)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from kubecontrol.metrics import LATENCY_BUCKETS, REGISTRY

MULTIKUEUE_DISPATCHED = Counter(
    "multikueue_workloads_dispatched",
    "Remote Workloads created on a worker cluster, per cluster_queue and cluster.",
    ["cluster_queue", "cluster"],
    registry=REGISTRY,
)
DEPENDENCY_COPIES = Counter(
    "trainjob_dependency_copies",
    "Copies of a TrainJob's Secrets and ConfigMaps on a worker, per cluster and result: "
    "created, updated (content or a new owner), unchanged (ours already, as it must be), "
    "refused (a foreign object of that name, or the worker's refusal), held (its namespace's "
    "copy refreshes spent for now: tried again shortly).",
    ["cluster", "result"],
    registry=REGISTRY,
)
MULTIKUEUE_ADMITTED = Counter(
    "multikueue_workloads_admitted",
    "Remote Workload admissions on a worker cluster that won, per cluster_queue and cluster.",
    ["cluster_queue", "cluster"],
    registry=REGISTRY,
)
DISPATCH_LATENCY = Histogram(
    "trainjob_dispatch_latency_seconds",
    "From quota reserved on the manager to admitted on a worker.",
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
REMOTE_CLUSTER_ACTIVE = Gauge(
    "trainjob_remote_cluster_active",
    "1 while the worker cluster is reachable, 0 while not.",
    ["cluster"],
    registry=REGISTRY,
)
