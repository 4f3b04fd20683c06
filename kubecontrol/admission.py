"""An admission webhook's answer (pure): allowed, with JSON patch operations for a mutating
webhook, or refused with a message and a code; and the AdmissionReview that carries it."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import orjson

from kubecontrol.objects import Dict


@dataclass(frozen=True)
class Verdict:
    """A webhook's answer to one admission request: allowed (with JSON patch operations for
    a mutating webhook) or refused with a message and an HTTP code, which the API server
    hands to the user."""

    allowed: bool = True
    message: str = ""
    code: int = 0
    patch: tuple[Dict, ...] = ()


def refuse(message: str, code: int = 422) -> Verdict:
    return Verdict(allowed=False, message=message, code=code)


def review_response(review: Dict, verdict: Verdict) -> Dict:
    """The AdmissionReview sent back for `review` (its request's uid echoed, as the API
    server requires)."""
    response: Dict = {
        "uid": (review.get("request") or {}).get("uid", ""),
        "allowed": verdict.allowed,
    }
    if not verdict.allowed:
        response["status"] = {"code": verdict.code or 500, "message": verdict.message}
    elif verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(list(verdict.patch))).decode("ascii")
    return {
        "apiVersion": review.get("apiVersion") or "admission.k8s.io/v1",
        "kind": review.get("kind") or "AdmissionReview",
        "response": response,
    }
