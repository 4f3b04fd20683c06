"""The real-node bed: one real node per cluster (kubelet, containerd, kube-proxy, CoreDNS), the
product installed from deploy/ as Pods from its image, the MultiKueue set-up of the demo."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from decimal import ROUND_DOWN, Decimal

import pytest
from kubernetes import client
from kubernetes.utils import parse_quantity

from clusters import setup
from clusters.bed import Bed
from clusters.config import real_bed_config
from clusters.helpers.examples import RUNTIME_FILE
from clusters.install import install_product

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
            # A lost worker's jobs move after 30 s (Kueue's default: 15 min).
            manager_args=[
                "--resync-seconds",
                "2",
                "--gc-interval",
                "10",
                "--worker-lost-timeout",
                "30",
                *RETAIN,
            ],
        )
    return real_bed


# The bed's own pods run in these namespaces; what they request is not a TrainJob's to use.
BED_NAMESPACES = ("kube-system", "trainjob-system")
# A worker's quota is never under this, so a 2-node DDP job of 500m a node fits on one worker.
MIN_WORKER_CPU = Decimal(1)


def node_room(bed: Bed, cluster: str) -> Decimal:
    """The CPU a cluster's node holds for TrainJobs: its allocatable less what the bed's own
    pods request."""
    core = client.CoreV1Api(bed.api(cluster))
    (node,) = core.list_node().items
    room = parse_quantity(node.status.allocatable["cpu"])
    for ns in BED_NAMESPACES:
        for pod in core.list_namespaced_pod(ns).items:
            done = pod.status.phase in ("Succeeded", "Failed")
            if done or pod.spec.node_name != node.metadata.name:
                continue
            for container in pod.spec.containers:
                requests = (container.resources and container.resources.requests) or {}
                room -= parse_quantity(requests.get("cpu", "0"))
    return Decimal(room)


@pytest.fixture
def real_namespace(installed: Bed) -> Iterator[str]:
    """A namespace with the MultiKueue queue `q` on the manager and queue `q` on every worker,
    and the CPU training runtime everywhere. A worker's quota is what its node holds, as a
    platform sets it: a quota past the node would admit pods that stay Pending (Insufficient
    cpu) until waitForPodsReady evicts them, and a burst of TrainJobs would then be sent from
    worker to worker instead of waiting in the worker's queue."""
    name = f"r-{uuid.uuid4().hex[:8]}"
    tenth = Decimal("0.1")
    cpu = {
        w.name: str(max(node_room(installed, w.name), MIN_WORKER_CPU).quantize(tenth, ROUND_DOWN))
        for w in installed.config.workers
    }
    setup.install(installed, name, cpu_by_worker=cpu, runtime=RUNTIME_FILE)
    yield name
    for c in installed.config.clusters:
        try:
            client.CoreV1Api(installed.api(c.name)).delete_namespace(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
