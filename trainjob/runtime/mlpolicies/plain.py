"""No framework: the trainer PodSet runs numNodes pods as they are."""

from __future__ import annotations

from trainjob.models import MLPolicy, TrainJob
from trainjob.runtime.info import RuntimeInfo


class PlainPolicy:
    """No framework: the trainer PodSet runs numNodes pods as they are."""

    name = "plain"

    def applies(self, ml: MLPolicy) -> bool:
        return not ml.named

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        return None
