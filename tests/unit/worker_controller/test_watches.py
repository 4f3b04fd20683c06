"""The worker controller's watch table (worker_controller/watches.py): which TrainJob a
Workload's change queues, by the Workload's name each TrainJob expects; what its caches keep."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import pytest

from tests.support.pods import RICH_POD
from trainjob.naming import owner_reference
from trainjob.workload import workload_name
from trainjob_api import constants as c
from worker_controller import digests
from worker_controller.watches import _controller, _workload_key, watches


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


def test_jobs_and_workloads_are_kept_as_their_digests() -> None:
    """The cache keeps a Job and a Workload without their pods' image, command and env
    (worker_controller/digests.py), and without managedFields."""
    ctx = SimpleNamespace(settings=SimpleNamespace(pod_summary=True), queue=None)
    table = {w.kind: w for w in watches(ctx)}  # type: ignore[arg-type]
    template = {"metadata": {"labels": {"a": "b"}}, "spec": copy.deepcopy(RICH_POD)}
    meta = {"name": "x", "namespace": "ns", "managedFields": [{"manager": "kubectl"}]}
    job = {"metadata": copy.deepcopy(meta), "spec": {"template": template}}
    workload = {
        "metadata": copy.deepcopy(meta),
        "spec": {"podSets": [{"name": "n", "template": template}]},
    }
    kept = {c.JOB: table[c.JOB].transform(job), c.WORKLOAD: table[c.WORKLOAD].transform(workload)}
    assert kept[c.JOB]["spec"]["template"] == digests.template_digest(template)
    assert kept[c.WORKLOAD]["spec"]["podSets"][0]["template"] == digests.template_digest(template)
    for obj in kept.values():
        assert "managedFields" not in obj["metadata"]
        assert "pytorch:2.6" not in json.dumps(obj)


def test_a_job_is_filed_under_the_trainjob_that_controls_it_only() -> None:
    def job(*refs: object) -> dict[str, object]:
        return {"metadata": {"namespace": "ns", "name": "j", "ownerReferences": list(refs)}}

    assert _controller(job(owner_reference("tj", "u"))) == ("ns", "tj")
    assert _controller(job(owner_reference("tj", "u", controller=False))) == ("ns", "")
    assert _controller(job({"kind": "JobSet", "name": "js", "controller": True})) == ("ns", "")
