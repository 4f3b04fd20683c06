"""Fixtures: the local multi-cluster bed (one per test run), per-test namespaces, clients."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from kubebase.shares import Rates
from kubecontrol import admission

if TYPE_CHECKING:  # the bed is loaded by the fixtures that bring it up: a unit test needs none
    from clusters import setup
    from clusters.bed import Bed


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `first` (they need the bed as it comes up) run first; tests that stop
    parts of the bed run last, so a slow recovery cannot spill over; those marked `last`
    (they look back over the whole run) after them."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker("first") is None,
            item.get_closest_marker("last") is not None,
            item.get_closest_marker("disruptive") is not None,
        )
    )


@pytest.fixture(autouse=True)
def uncached_reads() -> Iterator[Rates]:
    """The admission judges' allowance of reads of what the caches do not hold is the
    process's: each test starts with it whole, and a clock that stands still (none refills)."""
    still = lambda: 0.0  # noqa: E731
    fresh = Rates(admission.UNCACHED_PER_SECOND, admission.UNCACHED_BURST, clock=still)
    sources = Rates(admission.UNCACHED_PER_SOURCE, admission.UNCACHED_SOURCE_BURST, clock=still)
    saved = admission._uncached, admission._uncached_sources
    admission._uncached, admission._uncached_sources = fresh, sources
    yield fresh
    admission._uncached, admission._uncached_sources = saved


@pytest.fixture(scope="session")
def bed() -> Iterator[Bed]:
    """The bed, brought up once per test run, or the running one $TJ_BED_STATE_DIR names.

    A bed this test run started is taken down at the end (set TJ_BED_KEEP=1 to keep it).
    """
    from clusters.bed import Bed
    from clusters.config import load_config

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
    from kubernetes import client

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
def controllers(bed: Bed) -> Iterator[list[setup.Controller]]:
    """Our controllers as a user runs them: `python -m worker_controller` on every worker and
    `python -m dispatcher` on the manager (worker-lost timeout shortened for the tests)."""
    from clusters import setup
    from tests.support.multikueue import LOST_TIMEOUT

    ctrls = setup.start_controllers(bed, worker_lost_timeout=LOST_TIMEOUT)
    yield ctrls
    setup.stop_controllers(bed, ctrls)


@pytest.fixture(scope="session")
def worker_controllers(controllers: list[setup.Controller]) -> list[setup.Controller]:
    return controllers


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


_LEFT_OUT: list[str] = []  # tests skipped or xfailed in this pytest run


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped or hasattr(report, "wasxfail"):
        _LEFT_OUT.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under CI nothing may be skipped or expected to fail: a skip is a check not made,
    whatever its reason (the kind path, which may skip, is not part of `./run test`)."""
    if os.environ.get("CI") and _LEFT_OUT:
        print(f"\nCI: skipped or xfailed, which CI does not allow: {sorted(set(_LEFT_OUT))}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
