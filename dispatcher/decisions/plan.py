"""One dispatcher pass's plan: everything the pass writes, decided before anything is written
and carried out by `execute.execute_pass` alone, in order: our finalizer, the Kueue
integration's writes (trainjob/jobframework.py), the MultiKueue check's (the manager Workload,
then the workers: decide.py) or a deleted TrainJob's copies (removal.py), then the manager
TrainJob's status in one write (the intake's conditions and the check's, merged) and the
Events. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from dispatcher.decisions.decide import DispatchPlan
from dispatcher.decisions.intake import IntakePlan
from dispatcher.decisions.removal import Removal
from kubebase.objects import Dict
from trainjob.jobframework import QueuePlan
from trainjob_api.views import TrainJobView, WorkloadView


@dataclass
class Dispatch:
    """The MultiKueue check's part: its plan and what it was made from."""

    plan: DispatchPlan
    workload: WorkloadView  # the manager Workload, as the plan saw it
    check: str  # our AdmissionCheck on it


@dataclass
class PassPlan:
    finalizer: Literal["add", "drop"] | None = None
    queue: QueuePlan | None = None
    intake: IntakePlan = field(default_factory=IntakePlan)
    dispatch: Dispatch | None = None
    # A deleted TrainJob's: its copies deleted on the workers before our finalizer goes
    removal: Removal | None = None

    def trainjob_status(self) -> Dict | None:
        """The manager TrainJob's status patch: the intake's conditions, or the check's, which
        were decided over the intake's (`planned`); None when neither changes it."""
        merged = {**(self.intake.status or {})}
        if self.dispatch is not None and self.dispatch.plan.trainjob_status is not None:
            merged.update(self.dispatch.plan.trainjob_status)
        return merged or None


def planned(trainjob: TrainJobView, intake: IntakePlan) -> TrainJobView:
    """The TrainJob as it will be once the intake's status is written: what the check decides
    over, so that both go in one status write."""
    if intake.status is None:
        return trainjob
    status = {**(trainjob.raw.get("status") or {}), **intake.status}
    return TrainJobView({**trainjob.raw, "status": status})
