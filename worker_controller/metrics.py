"""The worker controller's own Prometheus series, on the process's registry
(kubecontrol/metrics.py)."""

from __future__ import annotations

from prometheus_client import Counter

from kubecontrol.metrics import REGISTRY

PROGRESS_REPORTS = Counter(
    "trainjob_progress_reports",
    "Progress reports from trainer pods answered, per HTTP code (200 taken; 401/403 a token "
    "refused; 404 no such TrainJob; 400/413/422 the payload; 429 too many).",
    ["code"],
    registry=REGISTRY,
)
PROGRESS_WRITES = Counter(
    "trainjob_progress_writes",
    "status.trainerStatus writes made from progress reports (at most one per TrainJob per "
    "progressIntervalSeconds on each replica).",
    registry=REGISTRY,
)
