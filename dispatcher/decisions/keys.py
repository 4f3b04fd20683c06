"""The keys of the dispatcher's work queue: a TrainJob's (namespace, name), or the status of
one of our AdmissionChecks or MultiKueueClusters (`StatusKey`, admissionchecks.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias


@dataclass(frozen=True, slots=True)
class StatusKey:
    """The status of one of Kueue's objects we report on."""

    kind: Literal["AdmissionCheck", "MultiKueueCluster"]
    name: str


QueueKey: TypeAlias = tuple[str, str] | StatusKey
