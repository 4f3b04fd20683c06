"""The Prometheus series of the runtime, on the registry every series of the process lives
on (served at /metrics, kubecontrol/serving.py): the work queue's, with client-go's workqueue
names so that dashboards built for controller-runtime controllers read ours too; API calls;
leadership. They only count and never steer behaviour. (Their `trainjob_` prefix is the
product's, kept so its dashboards and alerts keep working.)
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kubecontrol.version import PYTHON, VERSION

REGISTRY = CollectorRegistry(auto_describe=True)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

# ---- what runs ---------------------------------------------------------------------------------
BUILD_INFO = Gauge(
    "trainjob_build_info",
    "1, labelled with the product's version and the Python that runs it.",
    ["version", "python"],
    registry=REGISTRY,
)
BUILD_INFO.labels(VERSION, PYTHON).set(1)

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
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long one pass over a key takes.",
    ["name"],
    buckets=LATENCY_BUCKETS,
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
