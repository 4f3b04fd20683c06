"""Kubeflow Trainer's controller on the same cluster: both would run every TrainJob, so the
worker controller holds its work, says why (log and /readyz), and goes on once it is gone."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.helpers.kube import TrainJobs
from clusters.helpers.waiting import stays_false, wait_for
from clusters.install import WORKER_CONTROLLER
from tests.support.builders import torch_runtime
from tests.support.worker import trainjob, worker_controller_with

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("worker_controllers")]

# As Kubeflow Trainer v2.3's manifests name its webhooks; its rules match nothing here, so the
# stand-in changes no request.
TRAINER_LIKE = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "validating-webhook-configuration"},
    "webhooks": [
        {
            "name": "validator.trainjob.trainer.kubeflow.org",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "clientConfig": {"url": "https://127.0.0.1:1/validate"},
            "rules": [
                {
                    "apiGroups": ["example.invalid"],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["nothing"],
                }
            ],
        }
    ],
}


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def trainer_installed(bed: Bed, worker_names: list[str]) -> Iterator[None]:
    admission = client.AdmissionregistrationV1Api(bed.api(worker_names[0]))
    admission.create_validating_webhook_configuration(TRAINER_LIKE)
    try:
        yield
    finally:
        try:
            admission.delete_validating_webhook_configuration(TRAINER_LIKE["metadata"]["name"])
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def test_the_worker_controller_holds_its_work_while_trainers_controller_is_here(
    bed: Bed,
    tjs: TrainJobs,
    controllers: list[setup.Controller],
    worker_names: list[str],
    trainer_installed: None,
) -> None:
    worker = worker_names[0]
    replicas = [c for c in controllers if c.name == WORKER_CONTROLLER and c.cluster == worker]
    tjs.create_runtime(torch_runtime(run="2s"))
    with worker_controller_with(controllers, worker, "--trainer-check-seconds", "1"):
        for replica in replicas:
            _, why = wait_for(
                lambda r=replica: (
                    (got := _readyz(r.health))[0] == 503 and "Kubeflow Trainer" in got[1] and got
                ),
                30,
                what=f"{replica.identity} not ready, naming Trainer",
            )
            assert "validator.trainjob.trainer.kubeflow.org" in why
        tjs.create(trainjob("held"))
        stays_false(lambda: tjs.jobs("held"), 5, what="a Job made while Trainer is here")
        log = "\n".join(r.log.read_text() for r in replicas)
        assert "Kubeflow Trainer's controller is installed on this cluster" in log

        client.AdmissionregistrationV1Api(bed.api(worker)).delete_validating_webhook_configuration(
            TRAINER_LIKE["metadata"]["name"]
        )
        for replica in replicas:
            wait_for(lambda r=replica: _readyz(r.health)[0] == 200, 30, what="ready again")
        tjs.wait_condition("held", "Complete", timeout=60)
