"""Callers' bearer tokens, authenticated by the API server (TokenReview), with the verdicts
kept a while.

A verdict is kept `ttl` seconds per token (and whatever else the caller's check depends on),
refusals too, in a bounded cache. Reviews of tokens not in the cache are rate-limited by a
token bucket, one per budget the caller names (a namespace, say): a caller sending new
tokens gets 429, not one API request each, and empties its own bucket only.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kubebase.objects import Dict
from kubebase.shares import Rates
from kubecontrol.cluster import Cluster


@dataclass(frozen=True)
class Verdict:
    code: int  # 200 allowed, 401 not authenticated, 403 not authorized, 429 too many, 503
    reason: str


TOO_MANY = Verdict(429, "too many tokens to review; try again later")


def bearer(header: str | None) -> str | None:
    """The credential of an `Authorization: Bearer X` header (the scheme in any case)."""
    parts = (header or "").split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1]


def token_review(cluster: Cluster, token: str, audiences: Sequence[str] = ()) -> Dict:
    """The API server's TokenReview of `token` (its `status`: authenticated, user, audiences,
    error). With `audiences`, a token issued for none of them is not authenticated."""
    spec: Dict = {"token": token}
    if audiences:
        spec["audiences"] = list(audiences)
    review = cluster.send(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec},
    )
    status: Dict = review.get("status") or {}
    return status


class Reviews:
    """Verdicts by key, each made once per `ttl` by its review, at most `reviews_per_second`
    new reviews (with bursts of `burst`) per budget, and with `total_per_second`, at most
    that many (bursts of `total_burst`) in all: a caller that names a new budget each time
    (a namespace per request) still has a bound."""

    def __init__(
        self,
        ttl: float = 60.0,
        size: int = 1024,
        reviews_per_second: float = 2.0,
        burst: int = 10,
        total_per_second: float | None = None,
        total_burst: int = 0,
    ) -> None:
        self._ttl, self._size = ttl, size
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, tuple[float, Verdict]] = OrderedDict()
        self._budgets = Rates(reviews_per_second, burst)
        self._total = Rates(total_per_second, total_burst, 1) if total_per_second else None

    def check(
        self, *key: str, review: Callable[[], Verdict], budget: str | Callable[[], str] = ""
    ) -> Verdict:
        """The verdict kept for `key` (the token first, and what else the review depends on),
        else `review()`'s, taken from `budget`'s reviews (a function of it: asked only when a
        review is due) and kept unless it is 503 (the API could not answer: not remembered)."""
        digest = hashlib.sha256("\0".join(key).encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            cached = self._seen.get(digest)
            if cached is not None and cached[0] > now:
                self._seen.move_to_end(digest)  # a verdict in use stays
                return cached[1]
        if not self._budgets.take(budget() if callable(budget) else budget, now):
            return TOO_MANY
        if self._total is not None and not self._total.take("", now):
            return TOO_MANY
        verdict = review()
        if verdict.code != 503:
            with self._lock:
                self._seen[digest] = (now + self._ttl, verdict)
                self._seen.move_to_end(digest)
                while len(self._seen) > self._size:
                    self._seen.popitem(last=False)
        return verdict
