"""One dispatcher pass's plan (dispatcher/decisions/plan.py): the manager TrainJob's status in one
write, the check's conditions decided over the intake's."""

from __future__ import annotations

from dispatcher.decisions.decide import DispatchPlan
from dispatcher.decisions.intake import IntakePlan
from dispatcher.decisions.plan import Dispatch, PassPlan, planned
from trainjob_api.views import TrainJobView, WorkloadView

FAILED = {"type": "Failed", "status": "True", "reason": "NoQueueName"}
DRIFT = {"type": "RuntimeDrift", "status": "True", "reason": "RuntimeDrift"}
TJ = TrainJobView(
    {"metadata": {"name": "tj"}, "status": {"conditions": [FAILED], "clusterName": None}}
)


def _with(status: dict[str, object] | None) -> PassPlan:
    plan = DispatchPlan(trainjob_status=status)
    return PassPlan(
        intake=IntakePlan(status={"conditions": []}),
        dispatch=Dispatch(plan, WorkloadView({"metadata": {"name": "wl"}}), "mk"),
    )


def test_nothing_to_write_is_none_and_the_intakes_alone_is_written_as_it_is() -> None:
    assert PassPlan().trainjob_status() is None
    assert PassPlan(intake=IntakePlan(status={"conditions": []})).trainjob_status() == {
        "conditions": []
    }


def test_the_checks_conditions_were_decided_over_the_intakes_and_win() -> None:
    merged = _with({"conditions": [DRIFT], "trainerStatus": None}).trainjob_status()
    assert merged == {"conditions": [DRIFT], "trainerStatus": None}
    assert _with(None).trainjob_status() == {"conditions": []}


def test_the_check_decides_over_the_trainjob_as_the_intake_leaves_it() -> None:
    after = planned(TJ, IntakePlan(status={"conditions": []}))
    assert after.conditions == [] and after.name == "tj"
    # what the intake does not write stays as the TrainJob has it
    assert after.raw["status"] == {"conditions": [], "clusterName": None}
    assert TJ.conditions == [FAILED]  # the cache's own is not changed
    assert planned(TJ, IntakePlan()) is TJ
