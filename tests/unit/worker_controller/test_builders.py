"""What the worker controller makes for a TrainJob, as built (no cluster)."""

from __future__ import annotations

from trainjob.ownership import made_for_trainjob
from trainjob_api import constants as c
from worker_controller.builders import build_extra_object

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
