"""Leader election's bounds on the bed's API server (and a loopback port that never answers):
a Lease request is one try within the retry period, a renewal counts from when it was sent,
and a gated write never waits past the Lease's write budget."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from clusters.bed import Bed
from clusters.helpers.waiting import loopback_client
from kubebase.kinds import CONFIG_MAP, LEASE
from kubecontrol.client import ApiClient, TransportError
from kubecontrol.cluster import Cluster, NotLeader
from kubecontrol.leader import CLOCK_MARGIN, LeaderElector, LeaseTimings

pytestmark = pytest.mark.bed
TIMINGS = LeaseTimings(lease_duration=6, renew_deadline=4, retry_period=1)


def _silent_cluster(port: int) -> Cluster:
    return Cluster("silent", loopback_client(port), "tests")


def _within(seconds: float, call: Any) -> BaseException | None:
    """Run `call` in a thread; fail unless it ends within `seconds`; what it raised, if any."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds}s"
    return raised[0] if raised else None


def test_a_lease_request_is_one_try_within_the_retry_period(silent_server: int) -> None:
    """Not five tries of 15 s each (a standby's campaign or a leader's renewal held up far past
    its renew deadline by a server that does not answer)."""
    elector = LeaderElector(_silent_cluster(silent_server), "ns", "lease", "me", TIMINGS)
    raised = _within(14, elector._try_acquire_or_renew)  # under one try's own 15 s
    assert isinstance(raised, TransportError)


def test_a_write_never_waits_past_the_write_budget(silent_server: int) -> None:
    """The write's own timeout is 15 s; with 1 s of budget left it gives up at 1 s, and the
    retry that follows is refused, the budget spent."""
    cluster = _silent_cluster(silent_server)
    deadline = time.monotonic() + 1.0
    cluster.write_budget = lambda: deadline - time.monotonic()
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "y"}}
    raised = _within(14, lambda: cluster.create(CONFIG_MAP, body))  # under the write's 15 s
    assert isinstance(raised, NotLeader)


class _SlowAnswers:
    """The real client, each answer handed over a second late (a slow network or server)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def request(self, *args: Any, **kwargs: Any) -> bytes:
        answer = self.api.request(*args, **kwargs)
        time.sleep(1.0)
        return answer


def test_a_renewal_counts_from_when_it_was_sent(bed: Bed) -> None:
    manager = bed.config.managers[0].name
    cluster = Cluster.from_kubeconfig(manager, bed.kubeconfig(manager), "tests")
    name = f"test-{uuid.uuid4().hex[:8]}"
    elector = LeaderElector(cluster, "default", name, "me", LeaseTimings(15, 10, 5))
    cluster.api = _SlowAnswers(cluster.api)  # type: ignore[assignment]
    try:
        for _ in range(2):  # the create, then a renewal
            assert elector._try_acquire_or_renew()
            answered = time.monotonic()
            # The write was sent after the GET's answer and answered a second later: the
            # renewal counts from the send, not from the answer.
            assert answered - elector._renewed >= 0.9
        elector._leading = True
        budget = elector.write_budget()
        assert budget <= 15 * (1 - CLOCK_MARGIN) - 0.9
        elector._leading = False
        assert elector.write_budget() == 0.0  # not leading: nothing may be written
    finally:
        cluster.delete(LEASE, name, "default")
