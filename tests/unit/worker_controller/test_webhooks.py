"""The admission judges of both controllers, by the review's deadline."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dispatcher import webhooks as dispatcher_webhooks
from kubecontrol.deadline import Deadline, DeadlinePassed
from trainjob import admission as rules
from worker_controller import webhooks


def no_runtime(tj: Any) -> None:
    return None


JUDGES = {
    "dispatcher": dispatcher_webhooks.on_validate,
    "worker controller": webhooks.on_trainjob_validate,
}


@pytest.mark.parametrize("judge", JUDGES)
@pytest.mark.parametrize("deadline", ["given up", "passed"])
def test_a_review_out_of_time_is_not_judged_against_its_runtime(
    judge: str, deadline: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both validating judges judge the runtime only while the review's deadline has time
    left: a review answered 503 (its deadline given up), or whose deadline passed, stops
    before that work."""
    judged: list[Any] = []

    def runtime_refusal(tj: Any, runtime: Any) -> None:
        judged.append(runtime)

    monkeypatch.setattr(rules, "runtime_refusal", runtime_refusal)
    ctx: Any = SimpleNamespace(trainjob_schema=None, caches=SimpleNamespace(runtime_of=no_runtime))
    review = {"uid": "u", "namespace": "team-a", "object": {"metadata": {"name": "tj"}}}
    assert JUDGES[judge](ctx, review, Deadline(10)).allowed  # in time: judged
    assert len(judged) == 1
    over = Deadline(0)
    if deadline == "given up":
        over = Deadline(10)
        over.give_up()
    with pytest.raises(DeadlinePassed, match="judging the runtime"):
        JUDGES[judge](ctx, review, over)
    assert len(judged) == 1  # the runtime was not judged once the time was over
