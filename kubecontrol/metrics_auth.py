"""Who may read /metrics: the caller's bearer token, authenticated by the API server
(TokenReview) and authorized for `get` on the non-resource URL /metrics
(SubjectAccessReview), as controller-runtime's secure metrics server does for Kueue.

Verdicts are kept for a minute per token, refusals too (a scrape every 15-30 s costs two API
requests a minute at most), and new tokens are reviewed at a bounded rate
(kubecontrol/tokens.py): ServiceAccount tokens whose signature checks against the API
server's keys (kubecontrol/issuer_keys.py; Prometheus in the cluster holds one) from a budget
per ServiceAccount namespace, every other token from another, so neither a flood of forged
tokens nor tokens a tenant mints in its own namespace keep the scraper's new token from its
review.
"""

from __future__ import annotations

import logging

from kubebase.objects import Dict
from kubecontrol.cluster import Cluster
from kubecontrol.issuer_keys import IssuerKeys
from kubecontrol.tokens import TOO_MANY as TOO_MANY
from kubecontrol.tokens import Reviews, Verdict, bearer, token_review

log = logging.getLogger(__name__)
PATH = "/metrics"


class MetricsAuth:
    def __init__(
        self, cluster: Cluster, reviews: Reviews | None = None, keys: IssuerKeys | None = None
    ) -> None:
        self._cluster = cluster
        self._reviews = reviews or Reviews()
        self._keys = keys or IssuerKeys(cluster)

    def check(self, authorization: str | None) -> Verdict:
        """The verdict for an HTTP Authorization header."""
        token = bearer(authorization)
        if token is None:
            return Verdict(401, "a bearer token is required")
        return self._reviews.check(
            token, review=lambda: self._review(token), budget=lambda: self._budget(token)
        )

    def _budget(self, token: str) -> str:
        """Whose reviews a new token takes: its ServiceAccount's namespace's (from the
        verified `sub`: tokens a tenant mints in its namespace never use up the monitoring
        namespace's), or everyone else's (users of other authenticators, and forgeries)."""
        said = self._keys.verify(token)
        if not isinstance(said, dict):
            return "other"
        parts = str(said.get("sub") or "").split(":")
        if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
            return f"serviceaccount:{parts[2]}"
        return "serviceaccount"

    def _review(self, token: str) -> Verdict:
        try:
            status = token_review(self._cluster, token)
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
            log.warning("a /metrics caller not reviewed", extra={"error": str(exc)})
            return Verdict(503, "cannot review the token now")
        if not (access.get("status") or {}).get("allowed"):
            return Verdict(403, f"{user.get('username')} may not get {PATH}")
        return Verdict(200, "allowed")
