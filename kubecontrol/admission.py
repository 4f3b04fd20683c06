"""An admission webhook's answer (pure): allowed, with JSON patch operations for a mutating
webhook, or refused with a message and a code; and the AdmissionReview that carries it."""

from __future__ import annotations

import base64
import contextvars
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from kubebase.kinds import (
    InvalidName,
    Kind,
    checked_namespace,
    checked_segment,
    is_label_key,
    is_label_value,
)
from kubebase.objects import Dict
from kubebase.shares import Rates, take_each

# Labels are checked as the API server checks them before a validating webhook sees them
# (plugin/kubebase/kinds.py); at most this many, far more than any object carries.
# How a review reads an object the watch caches do not hold yet (one made moments ago):
# (kind, name, namespace) -> the object, or None when there is none.
Getter = Callable[[Kind, str, str | None], Dict | None]
# Such reads, per review source (the address the review came from) and namespace (the
# review's): this many a second on average, UNCACHED_BURST at once; and per source,
# UNCACHED_PER_SOURCE a second (UNCACHED_SOURCE_BURST at once). Past either, a review that
# needs a read is refused with 429 (`Crowded`), to be sent again, never judged on a guess.
# Any pod may reach a webhook port: its reviews, naming objects no cache holds, spend its own
# address's allowance, never the API server's; a tenant's dry runs through the API server
# spend its namespace's share of it. A review refused by one spends nothing of the other. (No
# allowance of all sources together: a few pods would empty it, and the API server's reviews
# with it; pods are kept from the port by the chart's NetworkPolicy, networkPolicy.webhookFrom.)
UNCACHED_PER_SECOND = 5.0
UNCACHED_BURST = 20
UNCACHED_PER_SOURCE = 20.0
UNCACHED_SOURCE_BURST = 80
_uncached = Rates(UNCACHED_PER_SECOND, UNCACHED_BURST)
_uncached_sources = Rates(UNCACHED_PER_SOURCE, UNCACHED_SOURCE_BURST, callers=1024)
# (source address, namespace) of the review being judged: set by the webhook server
REVIEW_FROM: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar(
    "review_from", default=("", "")
)
RETRY_AFTER_SECONDS = 1


class Crowded(Exception):
    """A review needs a read its source's allowance has no room for now: refused with 429
    and RETRY_AFTER_SECONDS (the webhook server), which the API server passes on to its
    client as Retry-After."""


def rate_limited(get: Getter) -> Getter:
    """`get`, within the allowance of reads of what the caches do not hold of the review
    being judged (REVIEW_FROM; `Crowded` past it)."""

    def read(kind: Kind, name: str, namespace: str | None) -> Dict | None:
        source, _ = who = REVIEW_FROM.get()
        if not take_each((_uncached, who), (_uncached_sources, source)):
            where = f"{namespace}/{name}" if namespace else name
            raise Crowded(
                f"{kind.kind} {where} is not in this replica's watch yet, and its reads of "
                "the API server for such look-ups are spent for now; try again in a few seconds"
            )
        return get(kind, name, namespace)

    return read


MAX_LABELS = 1024  # far more than any object carries; a bound on the work below


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
        if verdict.code == 429:  # the API server's answer says when to try again (Retry-After)
            response["status"]["details"] = {"retryAfterSeconds": RETRY_AFTER_SECONDS}
    elif verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(list(verdict.patch))).decode("ascii")
    return {
        "apiVersion": review.get("apiVersion") or "admission.k8s.io/v1",
        "kind": review.get("kind") or "AdmissionReview",
        "response": response,
    }


def review_problem(request: Dict) -> str | None:
    """Why an AdmissionReview's `request` cannot have come from an API server, or None: its
    namespace, name and its object's labels as the API server would have checked them.
    Judged first, before any look-up: whatever reaches the webhook's port may be a forgery,
    and these strings become request paths and selectors."""
    if not isinstance(request.get("uid"), str) or not 0 < len(request["uid"]) <= 128:
        return "request.uid: not a UID"
    obj = request.get("object")
    if obj is not None and not isinstance(obj, dict):
        return "request.object: not an object"
    meta = (obj or {}).get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        return "request.object.metadata: not an object"
    for field, value, check in (
        ("request.namespace", request.get("namespace"), checked_namespace),
        ("request.object.metadata.namespace", meta.get("namespace"), checked_namespace),
        ("request.name", request.get("name"), checked_segment),
        ("request.object.metadata.name", meta.get("name"), checked_segment),
    ):
        try:
            if value not in (None, ""):
                check(value)
        except InvalidName as exc:
            return f"{field}: {exc}"
    return _labels_problem(meta.get("labels"))


def _labels_problem(labels: object) -> str | None:
    if labels is None:
        return None
    if not isinstance(labels, dict) or len(labels) > MAX_LABELS:
        return "request.object.metadata.labels: not a map of labels"
    for key, value in labels.items():
        if not is_label_key(key):
            return f"request.object.metadata.labels: {str(key)[:80]!r} is not a label key"
        if not is_label_value(value):
            return f"request.object.metadata.labels[{key}]: not a label value"
    return None
