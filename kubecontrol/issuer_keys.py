"""The API server's ServiceAccount token signing keys, to check a token's signature here before
a TokenReview is spent on it.

The API server publishes the public keys it signs ServiceAccount tokens with at
`/openid/v1/jwks` (ServiceAccount issuer discovery; the RBAC is the ClusterRole
`system:service-account-issuer-discovery`, which Kubernetes binds to every ServiceAccount, and
our own roles grant it too). A forged token, or one signed by another cluster, is then refused
for the price of one signature check, as the API server itself refuses it, and never reaches
the shared budget of reviews. The keys are read again when a token names a key not seen
(keys rotate), at most once per `refetch_seconds`, so tokens naming made-up keys cost no
more than one read that often. A cluster that does not publish them (discovery off, or the
read refused) is said once in the log and its tokens go to the TokenReview as before.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import jwt
import orjson

from kubebase.objects import Dict
from kubecontrol.cluster import Cluster

log = logging.getLogger(__name__)

JWKS_PATH = "/openid/v1/jwks"
JWKS_TYPE = "application/jwk-set+json"
# The algorithms the API server signs with (RSA or ECDSA keys: RS256, ES256, ES384, ES512).
ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512"]


class IssuerKeys:
    def __init__(
        self, cluster: Cluster, refetch_seconds: float = 30.0, refresh_seconds: float = 600.0
    ) -> None:
        self._cluster = cluster
        self._refetch, self._refresh = refetch_seconds, refresh_seconds
        self._lock = threading.Lock()
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched = float("-inf")  # monotonic time of the last read, whatever its outcome
        self._published: bool | None = None  # unknown until the first read

    def verify(self, token: str) -> Dict | str | None:
        """The token's claims when its signature is one of the API server's keys and it has
        not expired; why not (for a 401) when it is not; None when this cluster's keys cannot
        be read here (the caller asks the API server instead)."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:  # a part that does not decode (its signature, say)
            return f"the token is not valid: {exc}"
        kid, alg = header.get("kid"), header.get("alg")
        if alg not in ALGORITHMS:
            return f"the token is signed with {str(alg)[:16]!r}, not a ServiceAccount key"
        key = self._key(str(kid or ""))
        if key is None:
            if not self._published:
                return None
            return "the token is not signed by this cluster's ServiceAccount issuer"
        try:
            claims: Dict = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                options={"verify_aud": False, "require": ["exp"]},
            )
        except jwt.ExpiredSignatureError:
            return "the token has expired; read the token file again"
        except jwt.PyJWTError as exc:
            return f"the token is not valid: {exc}"
        return claims

    def _key(self, kid: str) -> jwt.PyJWK | None:
        now = time.monotonic()
        with self._lock:
            found = self._keys.get(kid)
            stale = now - self._fetched >= self._refresh
            may_read = now - self._fetched >= self._refetch
            if (found is not None and not stale) or not may_read:
                return found
            self._fetched = now
        keys = self._read()
        with self._lock:
            if keys is not None:
                self._keys = keys
            return self._keys.get(kid)

    def _read(self) -> dict[str, jwt.PyJWK] | None:
        """The published keys by kid, or None when they cannot be read (said once)."""
        try:
            # the API server answers only in the JWK Set media type (406 to application/json)
            body = self._cluster.api.request("GET", JWKS_PATH, accept=JWKS_TYPE)
            document: Any = orjson.loads(body)
            keys = {}
            for entry in document.get("keys") or []:
                try:
                    keys[str(entry.get("kid") or "")] = jwt.PyJWK(entry)
                except jwt.PyJWTError as exc:
                    log.info("a ServiceAccount issuer key not used", extra={"error": str(exc)})
        except Exception as exc:  # the API away, 403, or discovery off (404)
            if self._published is not False:
                log.warning(
                    "the ServiceAccount issuer's keys not read: tokens are reviewed by the API "
                    "server without a local signature check",
                    extra={"path": JWKS_PATH, "error": str(exc)},
                )
            self._published = False
            return None
        if self._published is not True:
            log.info("ServiceAccount issuer keys read", extra={"keys": len(keys)})
        self._published = True
        return keys
