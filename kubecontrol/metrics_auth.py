"""Who may read /metrics: the caller's bearer token, authenticated by the API server
(TokenReview) and authorized for `get` on the non-resource URL /metrics
(SubjectAccessReview), as controller-runtime's secure metrics server does for Kueue.

Verdicts are kept for a minute per token, refusals too (a scrape every 15-30 s costs two API
requests a minute at most), and the cache is bounded. Reviews of tokens not in the cache are
rate-limited (a token bucket): a caller sending new tokens gets 429, not one API request each.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from kubecontrol.cluster import Cluster
from kubecontrol.objects import Dict

log = logging.getLogger(__name__)
PATH = "/metrics"


@dataclass(frozen=True)
class Verdict:
    code: int  # 200 allowed, 401 not authenticated, 403 not authorized, 429 too many, 503
    reason: str


TOO_MANY = Verdict(429, "too many tokens to review; try again later")


class MetricsAuth:
    def __init__(
        self,
        cluster: Cluster,
        ttl: float = 60.0,
        size: int = 1024,
        reviews_per_second: float = 2.0,
        burst: int = 10,
    ) -> None:
        self._cluster = cluster
        self._ttl = ttl
        self._size = size
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, tuple[float, Verdict]] = OrderedDict()
        self._rate, self._burst = reviews_per_second, float(burst)
        self._tokens, self._refilled = float(burst), time.monotonic()

    def _may_review(self, now: float) -> bool:
        """Take one review from the bucket (under the lock)."""
        self._tokens = min(self._burst, self._tokens + (now - self._refilled) * self._rate)
        self._refilled = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def check(self, authorization: str | None) -> Verdict:
        """The verdict for an HTTP Authorization header."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return Verdict(401, "a bearer token is required")
        key = hashlib.sha256(token.strip().encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            cached = self._seen.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
            if not self._may_review(now):
                return TOO_MANY
        verdict = self._review(token.strip())
        if verdict.code != 503:  # an API error is not remembered
            with self._lock:
                self._seen[key] = (now + self._ttl, verdict)
                self._seen.move_to_end(key)
                while len(self._seen) > self._size:
                    self._seen.popitem(last=False)
        return verdict

    def _review(self, token: str) -> Verdict:
        try:
            review = self._cluster.send(
                "POST",
                "/apis/authentication.k8s.io/v1/tokenreviews",
                body={
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenReview",
                    "spec": {"token": token},
                },
            )
            status = review.get("status") or {}
            if not status.get("authenticated"):
                return Verdict(401, status.get("error") or "the token is not valid")
            user: Dict = status.get("user") or {}
            access = self._cluster.send(
                "POST",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                body={
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": {
                        "user": user.get("username"),
                        "uid": user.get("uid"),
                        "groups": user.get("groups") or [],
                        "extra": user.get("extra") or {},
                        "nonResourceAttributes": {"path": PATH, "verb": "get"},
                    },
                },
            )
        except Exception as exc:  # the API cannot answer now: the scraper tries again
            log.warning("cannot review a /metrics caller: %s", exc)
            return Verdict(503, "cannot review the token now")
        if not (access.get("status") or {}).get("allowed"):
            return Verdict(403, f"{user.get('username')} may not get {PATH}")
        return Verdict(200, "allowed")
