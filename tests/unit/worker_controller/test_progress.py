"""Where the trainer pods are told to report their progress (worker_controller/progress.py)."""

from __future__ import annotations

import pytest

from worker_controller.progress import base_url
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
