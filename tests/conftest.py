"""Session fixtures: the local multi-cluster bed, per-test namespaces, API clients."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from clusters.bed import Bed
from clusters.config import Port, load_config
from clusters.pki import ensure_cert
from clusters.processes import http_ok, log_tail, port_in_use
from tests.helpers import wait_for

WEBHOOK_CONFIG = "worker-controller.trainjob.dev"


def wait_webhooks(bed: Bed, cluster: str) -> None:
    """kopf registers its webhook configurations shortly after start; wait for both."""
    admission = client.AdmissionregistrationV1Api(bed.api(cluster))

    def registered() -> bool:
        names = {w.metadata.name for w in admission.list_mutating_webhook_configuration().items}
        names &= {w.metadata.name for w in admission.list_validating_webhook_configuration().items}
        return WEBHOOK_CONFIG in names

    wait_for(registered, 30, what=f"webhook configurations on {cluster}")


@pytest.fixture(scope="session")
def bed() -> Iterator[Bed]:
    """The bed, brought up once per session, or the running one $TJ_BED_STATE_DIR names.

    A bed this session started is taken down at the end (set TJ_BED_KEEP=1 to keep it).
    """
    the_bed = Bed(load_config())
    reuse = bool(os.environ.get("TJ_BED_STATE_DIR")) and the_bed.is_up()
    if not reuse:
        the_bed.up()
    yield the_bed
    if not reuse and not os.environ.get("TJ_BED_KEEP"):
        the_bed.down()


@pytest.fixture(scope="session")
def worker_names(bed: Bed) -> list[str]:
    return [c.name for c in bed.config.workers]


@pytest.fixture
def namespace_factory(bed: Bed) -> Iterator[object]:
    """Creates fresh namespaces on any cluster and deletes them after the test."""
    created: list[tuple[str, str]] = []

    def make(cluster: str, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        client.CoreV1Api(bed.api(cluster)).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
        )
        created.append((cluster, name))
        return name

    yield make
    for cluster, name in created:
        try:
            client.CoreV1Api(bed.api(cluster)).delete_namespace(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture(scope="session")
def worker_controllers(bed: Bed) -> Iterator[dict[str, int]]:
    """`python -m worker_controller` on every worker, as a user would run it; PIDs by cluster."""
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for spec in bed.config.workers:
        port = bed.config.port(spec.name, Port.CONTROLLER_BASE)
        for taken in (port, port + 1):
            if port_in_use(taken):
                raise RuntimeError(
                    f"port {taken} for the worker controller on {spec.name} is "
                    "in use; is an earlier controller still running?"
                )
        cert = ensure_cert(
            bed.ca(),
            bed.pki_dir / spec.name,
            "worker-controller-webhook",
            "worker-controller",
            hosts=("127.0.0.1",),
            server=True,
        )
        log = (bed.cluster_dir(spec.name) / "worker-controller.log").open("ab")
        procs[spec.name] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "worker_controller",
                "--kubeconfig",
                str(bed.kubeconfig(spec.name)),
                "--cluster-name",
                spec.name,
                "--health-port",
                str(port),
                "--resync-seconds",
                "2",
                "--webhook-port",
                str(port + 1),
                "--webhook-cert",
                str(cert.cert),
                "--webhook-key",
                str(cert.key),
                "--webhook-ca",
                str(bed.ca().cert),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    for name, proc in procs.items():
        port = bed.config.port(name, Port.CONTROLLER_BASE)
        deadline = time.monotonic() + 60
        while not http_ok(f"http://127.0.0.1:{port}/healthz"):
            log_path = bed.cluster_dir(name) / "worker-controller.log"
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"worker controller on {name} did not start:\n{log_tail(log_path)}"
                )
            time.sleep(0.2)
        wait_webhooks(bed, name)
    yield {name: proc.pid for name, proc in procs.items()}
    for proc in procs.values():
        proc.terminate()
    for name in procs:  # a webhook whose server is gone would block every TrainJob create
        admission = client.AdmissionregistrationV1Api(bed.api(name))
        for delete in (
            admission.delete_mutating_webhook_configuration,
            admission.delete_validating_webhook_configuration,
        ):
            try:
                delete(WEBHOOK_CONFIG)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
    for proc in procs.values():
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
