"""Benchmark: the CPU a progress report's token costs before any TokenReview: the signature
check against the API server's published keys (kubecontrol/issuer_keys.py), for a good token
and for a forged one, with an RSA-2048 key as kube-apiserver's and an ECDSA P-256 key. No
cluster: the published keys are this script's own. Figures: median and p99 over `--tokens`
checks, `--repeat` times.

    .venv/bin/python benchmarks/token_check.py [--tokens 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import jwt
import orjson
from cryptography.hazmat.primitives.asymmetric import ec, rsa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubecontrol.issuer_keys import IssuerKeys


class Published:
    def __init__(self, keys: dict[str, Any]) -> None:
        self.keys = keys

    @property
    def api(self) -> Published:
        return self

    def request(self, _verb: str, _path: str, **_: Any) -> bytes:
        out = []
        for kid, key in self.keys.items():
            algorithm: Any = (
                jwt.algorithms.RSAAlgorithm if kid == "rsa" else jwt.algorithms.ECAlgorithm
            )
            out.append({**algorithm.to_jwk(key.public_key(), as_dict=True), "kid": kid})
        return orjson.dumps({"keys": out})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    keys: dict[str, Any] = {
        "rsa": rsa.generate_private_key(65537, 2048),
        "ec": ec.generate_private_key(ec.SECP256R1()),
    }
    checker = IssuerKeys(Published(keys))  # type: ignore[arg-type]
    claims = {"aud": ["a"], "sub": "system:serviceaccount:ns:default", "exp": time.time() + 3600}
    for kid, alg in (("rsa", "RS256"), ("ec", "ES256")):
        good = jwt.encode(claims, keys[kid], algorithm=alg, headers={"kid": kid})
        head, body, sig = good.split(".")
        forged = f"{head}.{body}.{sig[::-1]}"
        for name, token in (("good", good), ("forged", forged)):
            checker.verify(token)  # keys read
            for run in range(args.repeat):
                times = []
                for _ in range(args.tokens):
                    started = time.perf_counter()
                    checker.verify(token)
                    times.append((time.perf_counter() - started) * 1e6)
                times.sort()
                print(
                    f"{alg} {name:<6} run {run + 1}: median {statistics.median(times):.0f} us, "
                    f"p99 {times[int(len(times) * 0.99)]:.0f} us"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
