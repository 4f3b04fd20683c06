"""A token's signature checked against the keys the API server publishes, before any
TokenReview: forged tokens refused for one signature check, keys read again when a token
names a new one (not more often than allowed), and a cluster without them left to the
review. The API server's /openid/v1/jwks is played by our own `send` stand-in."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kubecontrol.issuer_keys import JWKS_PATH, JWKS_TYPE, IssuerKeys

AUDIENCE = "trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/tj/status"
SUB = "system:serviceaccount:team-a:default"


class Issuer:
    """The API server's side: its signing keys, published at JWKS_PATH; `send` counts reads."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {"rsa-1": rsa.generate_private_key(65537, 2048)}
        self.reads = 0
        self.refuse = False

    @property
    def api(self) -> Issuer:  # the Cluster's client: `cluster.api.request`
        return self

    def request(self, verb: str, path: str, accept: str = "", **_: Any) -> bytes:
        assert (verb, path) == ("GET", JWKS_PATH)
        # the API server answers 406 to application/json (seen on kube-apiserver 1.36)
        assert accept == JWKS_TYPE
        self.reads += 1
        if self.refuse:
            raise RuntimeError("403 Forbidden")
        return json.dumps({"keys": [self.jwk(k, key) for k, key in self.keys.items()]}).encode()

    @staticmethod
    def jwk(kid: str, key: Any) -> dict[str, Any]:
        algorithm: Any = (
            jwt.algorithms.RSAAlgorithm if kid.startswith("rsa") else jwt.algorithms.ECAlgorithm
        )
        found: dict[str, Any] = algorithm.to_jwk(key.public_key(), as_dict=True)
        return {**found, "kid": kid, "use": "sig"}

    def token(self, kid: str = "rsa-1", key: Any = None, **claims: Any) -> str:
        body = {"aud": [AUDIENCE], "sub": SUB, "exp": int(time.time()) + 600, **claims}
        alg = "RS256" if kid.startswith("rsa") else "ES256"
        return jwt.encode(body, key or self.keys[kid], algorithm=alg, headers={"kid": kid})


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


def test_a_token_the_api_server_signed_gives_its_claims(issuer: Issuer) -> None:
    keys = IssuerKeys(issuer)  # type: ignore[arg-type]
    claims = keys.verify(issuer.token())
    assert isinstance(claims, dict) and claims["sub"] == SUB
    issuer.keys["ec-1"] = ec.generate_private_key(ec.SECP256R1())  # ES256 too, once read again
    assert isinstance(IssuerKeys(issuer).verify(issuer.token("ec-1")), dict)  # type: ignore[arg-type]


def test_a_forged_token_is_refused_without_a_review(issuer: Issuer) -> None:
    """Before: a forged token passed the pre-check and cost a TokenReview each; ~21 a second
    emptied the shared budget and real pods' reports got 429."""
    keys = IssuerKeys(issuer)  # type: ignore[arg-type]
    mallory = rsa.generate_private_key(65537, 2048)
    forged = issuer.token(key=mallory)  # the real kid, another key
    assert keys.verify(forged) == "the token is not valid: Signature verification failed"
    unsigned = jwt.encode({"aud": [AUDIENCE], "exp": time.time() + 60}, "", algorithm="none")
    assert "not a ServiceAccount key" in str(keys.verify(unsigned))
    assert keys.verify("not.a.jwt") == "the token is not valid: Invalid header padding"
    head, claims, _ = issuer.token().split(".")  # a signature that does not even decode
    assert (
        keys.verify(f"{head}.{claims}.forged") == "the token is not valid: Invalid crypto padding"
    )
    expired = issuer.token(exp=int(time.time()) - 5)
    assert keys.verify(expired) == "the token has expired; read the token file again"


def test_made_up_key_ids_cost_one_read_per_interval(issuer: Issuer) -> None:
    keys = IssuerKeys(issuer, refetch_seconds=3600)  # type: ignore[arg-type]
    mallory = rsa.generate_private_key(65537, 2048)
    for i in range(50):
        said = keys.verify(issuer.token(f"rsa-made-up-{i}", key=mallory))
        assert said == "the token is not signed by this cluster's ServiceAccount issuer"
    assert issuer.reads == 1


def test_a_new_key_is_read_when_a_token_names_it(issuer: Issuer) -> None:
    """Keys rotate: a token signed by a key published since the last read is taken."""
    keys = IssuerKeys(issuer, refetch_seconds=0)  # type: ignore[arg-type]
    assert isinstance(keys.verify(issuer.token()), dict)
    issuer.keys["rsa-2"] = rsa.generate_private_key(65537, 2048)
    assert isinstance(keys.verify(issuer.token("rsa-2")), dict)
    assert issuer.reads == 2


def test_a_cluster_whose_keys_cannot_be_read_leaves_the_token_to_the_review(
    issuer: Issuer,
) -> None:
    issuer.refuse = True
    assert IssuerKeys(issuer).verify(issuer.token()) is None  # type: ignore[arg-type]
