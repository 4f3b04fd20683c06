"""What the worker controller makes for a TrainJob, as built (no cluster)."""

from __future__ import annotations

import pytest

from trainjob.ownership import made_for_trainjob
from trainjob_api import constants as c
from trainjob_api.views import JobView
from worker_controller.builders import attempt_of, build_extra_object

OWNER = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "a-b",
         "uid": "uid-a-b", "controller": True}  # fmt: skip


def claim(annotations: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "x-a-b", "namespace": "ns", "annotations": annotations},
        "spec": {},
    }


def test_a_claim_made_for_one_trainjob_cannot_be_marked_for_another_by_its_template() -> None:
    """Before: a runtime's claim template carrying `claim-made-for: ns/b` kept the marker on
    the claim TrainJob a-b owned, and TrainJob b (whose template x-a gives the same name)
    took that claim as its own and mounted it."""
    forged = {c.CLAIM_MADE_FOR_ANNOTATION: "ns/b", "team": "ml"}
    owned = build_extra_object(claim(forged), OWNER, "a-b")
    assert owned["metadata"]["annotations"] == {"team": "ml"}
    assert not made_for_trainjob(
        owned, {"metadata": {"uid": "uid-b", "namespace": "ns", "name": "b"}}
    )
    kept = build_extra_object(claim(forged), None, "a-b")  # kept after its job: ours to mark
    assert kept["metadata"]["annotations"][c.CLAIM_MADE_FOR_ANNOTATION] == "ns/a-b"


def job_labelled(template: object, own: str | None) -> JobView:
    """A Job whose pod template carries the restart-attempt label `template` (None: none) and
    whose own labels carry `own`."""
    pod_labels = {} if template is None else {c.RESTART_ATTEMPT_LABEL: template}
    labels = {} if own is None else {c.RESTART_ATTEMPT_LABEL: own}
    return JobView(
        {
            "metadata": {"name": "j", "labels": labels},
            "spec": {"template": {"metadata": {"labels": pod_labels}}},
        }
    )


@pytest.mark.parametrize(
    ("template", "own", "attempt"),
    [
        ("1", "0", 1),  # the pod template's word: the Job's own labels can be edited later
        ("1", None, 1),
        (None, "2", 2),  # made before the pod template said it: the Job's own
        (5, "2", 2),  # not a label value: as if absent
        ("", "2", 0),  # said, and no number: the first run
        ("x", "2", 0),
        ("-1", "2", 0),
        ("\u00b2", "2", 0),  # a digit to str.isdigit that int() refuses
        (None, None, 0),
    ],
)
def test_a_jobs_restart_attempt_is_its_pod_templates_word_first(
    template: object, own: str | None, attempt: int
) -> None:
    assert attempt_of(job_labelled(template, own)) == attempt
