"""The AdmissionReview answer and the JSON patch our mutating webhooks send (pure)."""

from __future__ import annotations

import base64
import json
from typing import Any

from kubecontrol.admission import Verdict, refuse, review_response

Dict = dict[str, Any]
REVIEW = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}


def test_an_allowed_answer_with_a_patch() -> None:
    ops = ({"op": "add", "path": "/spec/suspend", "value": True},)
    answer = review_response(REVIEW, Verdict(patch=ops))
    patch = answer["response"].pop("patch")
    assert answer == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": True, "patchType": "JSONPatch"},
    }
    assert json.loads(base64.b64decode(patch)) == list(ops)


def test_an_allowed_answer_without_changes_has_no_patch() -> None:
    assert review_response(REVIEW, Verdict())["response"] == {"uid": "u", "allowed": True}


def test_a_refusal_carries_code_and_message_and_no_patch() -> None:
    verdict = Verdict(allowed=False, message="no", code=422, patch=({"op": "remove"},))
    assert review_response(REVIEW, verdict)["response"] == {
        "uid": "u",
        "allowed": False,
        "status": {"code": 422, "message": "no"},
    }
    assert refuse("gone") == Verdict(allowed=False, message="gone", code=422)


def test_a_refusal_without_a_code_is_an_internal_error() -> None:
    answer = review_response({"request": {"uid": "u"}}, Verdict(allowed=False, message="m"))
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"]["status"] == {"code": 500, "message": "m"}
