"""Runtime framework: TrainJob + runtime + runtimePatches -> RuntimeInfo (PodSets + policy)."""

from trainjob.runtime.framework import (
    RuntimeProblem,
    build_runtime_info,
    resolve_runtime_info,
)
from trainjob.runtime.info import (
    PodSet,
    PodSetShape,
    RuntimeInfo,
    RuntimePolicy,
    RuntimeSpecError,
)

__all__ = [
    "PodSet",
    "PodSetShape",
    "RuntimeInfo",
    "RuntimePolicy",
    "RuntimeProblem",
    "RuntimeSpecError",
    "build_runtime_info",
    "resolve_runtime_info",
]
