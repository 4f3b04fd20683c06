"""The real-node bed: one real node per cluster (kubelet, containerd, kube-proxy, CoreDNS), the
product installed from deploy/ as Pods from its image, the MultiKueue set-up of the demo."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.config import real_bed_config
from clusters.install import install_product
from tests.support.examples import RUNTIME_FILE

RETAIN = ["--retention-seconds", "600"]


@pytest.fixture(scope="session")
def real_bed() -> Iterator[Bed]:
    """Brought up once per session (or the running one $TJ_REAL_BED_STATE_DIR names) and
    taken down at the end unless TJ_BED_KEEP=1."""
    the_bed = Bed(real_bed_config())
    reuse = bool(os.environ.get("TJ_REAL_BED_STATE_DIR")) and the_bed.is_up()
    if not reuse:
        the_bed.up()
    yield the_bed
    if not reuse and not os.environ.get("TJ_BED_KEEP"):
        the_bed.down()


@pytest.fixture(scope="session")
def installed(real_bed: Bed) -> Bed:
    """The product from deploy/ on every cluster, as Pods (timers shortened as for the kwok
    tests), unless it is there already."""
    manager = real_bed.config.managers[0].name
    apps = client.AppsV1Api(real_bed.api(manager))
    try:
        apps.read_namespaced_deployment("trainjob-dispatcher", "trainjob-system")
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        install_product(
            real_bed,
            worker_args=["--resync-seconds", "2"],
            # Finished copies stay on the workers a while, for the tests to look at them.
            manager_args=["--resync-seconds", "2", "--gc-interval", "10", *RETAIN],
        )
    return real_bed


@pytest.fixture
def real_namespace(installed: Bed) -> Iterator[str]:
    """A namespace with the MultiKueue queue `q` on the manager and queue `q` on every worker,
    and the CPU training runtime everywhere."""
    name = f"r-{uuid.uuid4().hex[:8]}"
    setup.install(installed, name, worker_cpu="4", runtime=RUNTIME_FILE)
    yield name
    for c in installed.config.clusters:
        try:
            client.CoreV1Api(installed.api(c.name)).delete_namespace(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
