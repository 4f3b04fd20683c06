"""Where the trainer pods are told to report their progress (worker_controller/progress.py)."""

from __future__ import annotations

import base64
import time

import orjson
import pytest

from trainjob import progress
from worker_controller.progress import _precheck, base_url
from worker_controller.settings import WorkerSettings


def test_the_pods_are_given_the_progress_port_never_the_admission_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "trainjob-system")
    hooks = {"webhook_port": 9443, "webhook_service": "wc-webhook", "webhook_cert_secret": "s"}
    own_port = WorkerSettings(**hooks, progress_port=9444)
    assert base_url(own_port) == "https://wc-webhook.trainjob-system.svc:9444"
    shared = WorkerSettings(**hooks)  # an install without a progress port: as before
    assert base_url(shared) == "https://wc-webhook.trainjob-system.svc:443"
    told = WorkerSettings(**hooks, progress_port=9444, progress_url="https://progress.example/")
    assert base_url(told) == "https://progress.example"


def _bearer(claims: dict[str, object]) -> str:
    part = base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()
    return f"Bearer e30.{part}.sig"


def test_a_token_is_turned_away_before_a_review_when_it_says_it_expired_or_is_for_another() -> None:
    """What the token says of itself, read unchecked: enough to refuse without asking the API
    server; a token that passes goes on to its signature and the TokenReview (None)."""
    mine = progress.audience("ns", "tj")
    later, before = time.time() + 600, time.time() - 600
    assert _precheck(_bearer({"aud": [mine], "exp": later}), "ns", "tj") is None
    assert _precheck(_bearer({"aud": mine}), "ns", "tj") is None  # no exp: the review says
    expired = _precheck(_bearer({"aud": [mine], "exp": before}), "ns", "tj")
    assert expired is not None and expired.code == 401 and "expired" in expired.reason
    other = _precheck(_bearer({"aud": [progress.audience("ns", "x")], "exp": later}), "ns", "tj")
    assert other is not None and other.code == 403
    assert _precheck(None, "ns", "tj") is not None
    assert _precheck("Bearer not-a-jwt", "ns", "tj") is not None
