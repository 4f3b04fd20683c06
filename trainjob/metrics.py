"""The Prometheus series both controllers export on /metrics.

Work-queue series carry client-go's workqueue names, so dashboards built for controller-runtime
controllers read ours too; the dispatcher's remote-Workload counters carry Kueue's MultiKueue
names where they mean the same. Collectors live on one registry of the process, as is usual
with prometheus_client; they only count and never steer behaviour.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)
_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

# ---- client-go workqueue names ----------------------------------------------------------------
WORKQUEUE_DEPTH = Gauge(
    "workqueue_depth", "Current depth of the work queue.", ["name"], registry=REGISTRY
)
WORKQUEUE_ADDS = Counter(
    "workqueue_adds", "Keys added to the work queue.", ["name"], registry=REGISTRY
)
WORKQUEUE_RETRIES = Counter(
    "workqueue_retries", "Keys queued again after a failed pass.", ["name"], registry=REGISTRY
)
WORKQUEUE_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long a key waits in the queue before a worker takes it.",
    ["name"],
    buckets=_LATENCY,
    registry=REGISTRY,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long one pass over a key takes.",
    ["name"],
    buckets=_LATENCY,
    registry=REGISTRY,
)

# ---- API calls ----------------------------------------------------------------------------------
API_REQUESTS = Counter(
    "trainjob_api_requests",
    "API requests sent by our clients (watches excluded), per cluster and HTTP verb.",
    ["cluster", "verb"],
    registry=REGISTRY,
)
API_ERRORS = Counter(
    "trainjob_api_errors",
    "Failed API calls per cluster and HTTP code (0: no answer).",
    ["cluster", "code"],
    registry=REGISTRY,
)

# ---- leader election ----------------------------------------------------------------------------
LEADER = Gauge(
    "trainjob_leader", "1 while this replica holds the leader Lease.", ["lease"], registry=REGISTRY
)

# ---- the dispatcher (Kueue's MultiKueue names where the meaning is the same) ------------------
MULTIKUEUE_DISPATCHED = Counter(
    "multikueue_workloads_dispatched",
    "Remote Workloads created on a worker cluster, per cluster_queue and cluster.",
    ["cluster_queue", "cluster"],
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
    buckets=_LATENCY,
    registry=REGISTRY,
)
REMOTE_CLUSTER_ACTIVE = Gauge(
    "trainjob_remote_cluster_active",
    "1 while the worker cluster is reachable, 0 while not.",
    ["cluster"],
    registry=REGISTRY,
)
