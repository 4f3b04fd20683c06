"""Flux: a policy Trainer v2.3 has and this controller does not run."""

from __future__ import annotations

from trainjob.models import MLPolicy, TrainJob
from trainjob.runtime.info import RuntimeInfo, RuntimeSpecError


class UnsupportedPolicy:
    """A policy Trainer v2.3 has and this controller does not run (flux): never a plain run
    in its place, a RuntimeInvalid condition naming it."""

    name = "unsupported"

    def applies(self, ml: MLPolicy) -> bool:
        return ml.flux is not None

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        raise RuntimeSpecError(
            "mlPolicy.flux is not supported by this controller (supported: torch, mpi, jax, "
            "xgboost, or none); run it with Kubeflow Trainer's controller, or pick another "
            "runtime"
        )
