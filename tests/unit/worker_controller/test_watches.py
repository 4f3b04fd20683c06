"""The worker controller's watch table (worker_controller/watches.py): which TrainJob a
Workload's change queues, by the Workload's name each TrainJob expects."""

from __future__ import annotations

import pytest

from trainjob.workload import workload_name
from trainjob_api import constants as c
from worker_controller.watches import _workload_key


@pytest.mark.parametrize(
    ("labels", "annotations", "expected"),
    [
        ({}, {}, workload_name("tj", "u1")),  # Kueue's deterministic name
        ({c.KUEUE_PREBUILT_WORKLOAD_LABEL: "wl-label"}, {}, "wl-label"),  # a copy, Kueue < 0.18
        # a MultiKueue copy of Kueue 0.19: its annotation over its label
        (
            {c.KUEUE_PREBUILT_WORKLOAD_LABEL: "wl-label"},
            {c.KUEUE_PREBUILT_WORKLOAD_ANNOTATION: "wl"},
            "wl",
        ),
    ],
)
def test_a_trainjob_is_found_by_the_name_of_its_workload(
    labels: dict[str, str], annotations: dict[str, str], expected: str
) -> None:
    meta = {"name": "tj", "namespace": "ns", "uid": "u1", "labels": labels}
    trainjob = {"metadata": {**meta, "annotations": annotations}}
    assert _workload_key(trainjob) == ("ns", expected)
