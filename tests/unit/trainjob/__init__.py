"""Tests of the TrainJob core (trainjob/), and what its Kueue integration's tests share: a
queued TrainJob, its RuntimeInfo on the default runtime, and Kueue's names for it."""

from __future__ import annotations

from typing import Any

from kubebase.objects import Dict
from tests.support.builders import edit, make_runtime, make_trainjob
from trainjob import workload as wlmod
from trainjob.models import parse_runtime, parse_trainjob
from trainjob.runtime import RuntimeInfo, build_runtime_info

RUNTIME = make_runtime()
WL_NAME = "trainjob-tj-daaa5"  # Kueue's name for TrainJob tj with uid uid-tj
HIGH = wlmod.Priority("kueue.x-k8s.io", "WorkloadPriorityClass", "high", 100)


def queued_trainjob(*, queue: str | None = "q", suspend: bool = True, **spec: Any) -> Dict:
    """A TrainJob on Kueue's LocalQueue `queue` (None: on none)."""
    body = make_trainjob(suspend=suspend, **spec)
    if queue is not None:
        edit(body).labels({"kueue.x-k8s.io/queue-name": queue})
    return body


def info_of(body: Dict, runtime: Dict = RUNTIME) -> RuntimeInfo:
    spec = runtime["spec"]["template"]["spec"]
    return build_runtime_info(parse_trainjob(body), parse_runtime(runtime), spec)
