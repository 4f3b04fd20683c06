"""Runtime framework: TrainJob + runtime + runtimePatches -> RuntimeInfo (PodSets + policy)."""

from trainjob.runtime.framework import build_runtime_info, total_requests
from trainjob.runtime.info import PodSet, RuntimeInfo, RuntimePolicy, RuntimeSpecError

__all__ = [
    "PodSet",
    "RuntimeInfo",
    "RuntimePolicy",
    "RuntimeSpecError",
    "build_runtime_info",
    "total_requests",
]
