"""The admission judges of both controllers, by the review's deadline."""

from __future__ import annotations

import contextvars
from types import SimpleNamespace
from typing import Any

import pytest

from dispatcher.controller import webhooks as dispatcher_webhooks
from kubebase.shares import Rates
from kubecontrol import admission
from kubecontrol.admission import (
    REVIEW_FROM,
    UNCACHED_BURST,
    UNCACHED_PER_SOURCE,
    UNCACHED_SOURCE_BURST,
    Crowded,
)
from kubecontrol.deadline import Deadline, DeadlinePassed
from trainjob import admission as rules
from trainjob.queues import LocalQueueView
from trainjob_api.constants import LOCAL_QUEUE
from worker_controller import webhooks


def no_runtime(tj: Any) -> None:
    return None


JUDGES = {
    "dispatcher": dispatcher_webhooks.on_validate,
    "worker controller": webhooks.on_trainjob_validate,
}


@pytest.mark.parametrize("judge", JUDGES)
@pytest.mark.parametrize("deadline", ["given up", "passed"])
def test_a_review_out_of_time_is_not_judged_against_its_runtime(
    judge: str, deadline: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both validating judges judge the runtime only while the review's deadline has time
    left: a review answered 503 (its deadline given up), or whose deadline passed, stops
    before that work."""
    judged: list[Any] = []

    def runtime_refusal(tj: Any, runtime: Any) -> None:
        judged.append(runtime)

    monkeypatch.setattr(rules, "runtime_refusal", runtime_refusal)
    ctx: Any = SimpleNamespace(trainjob_schema=None, caches=SimpleNamespace(runtime_of=no_runtime))
    review = {"uid": "u", "namespace": "team-a", "object": {"metadata": {"name": "tj"}}}
    assert JUDGES[judge](ctx, review, Deadline(10)).allowed  # in time: judged
    assert len(judged) == 1
    over = Deadline(0)
    if deadline == "given up":
        over = Deadline(10)
        over.give_up()
    with pytest.raises(DeadlinePassed, match="judging the runtime"):
        JUDGES[judge](ctx, review, over)
    assert len(judged) == 1  # the runtime was not judged once the time was over


class Reads:
    """Stands in for a controller's client: counts what a review reads of the API server."""

    def __init__(self) -> None:
        self.read: list[tuple[str, str | None, str]] = []

    def within(self, _deadline: Deadline) -> Reads:
        return self

    def get_or_none(self, kind: Any, name: str, namespace: str | None) -> None:
        self.read.append((kind.kind, namespace, name))


class Queues:
    """The watch cache of LocalQueues: `default` in namespace `cached` only."""

    def local_queue(self, namespace: str, name: str) -> LocalQueueView | None:
        if (namespace, name) != ("cached", "default"):
            return None
        return LocalQueueView({"metadata": {"name": name, "namespace": namespace}})


def mutate_on(controller: str, namespace: str, reads: Reads) -> Any:
    review = {"uid": "u", "namespace": namespace, "object": {"metadata": {"name": "tj"}}}
    settings = SimpleNamespace(manager_runs_trainjobs=True, manage_jobs_without_queue_name=False)
    ctx: Any = SimpleNamespace(
        crd_problem=None, trainjob_schema=None, caches=Queues(), settings=settings
    )
    if controller == "dispatcher":
        ctx.manager = reads
        return dispatcher_webhooks.on_mutate(ctx, review, Deadline(10))
    ctx.cluster = reads
    return webhooks.on_trainjob_mutate(ctx, review, Deadline(10))


@pytest.mark.parametrize("controller", ["dispatcher", "worker controller"])
def test_reviews_naming_queues_no_cache_holds_read_the_api_server_within_an_allowance(
    controller: str,
) -> None:
    """Any pod may post reviews to a webhook port: 200 forged ones, each of a namespace
    whose default queue no cache holds, cost the API server the process's burst of reads
    (20), not 200 under the controller's identity; past it a review that needs a read is
    refused to be sent again (429), never judged as if the queue were not there; a queue
    the watch holds costs none, and is judged as ever while the allowance is spent."""
    reads, crowded = Reads(), 0
    mutate_on(controller, "cached", reads)
    assert reads.read == []  # from the watch (the worker controller's: its new LocalQueues)
    for i in range(200):
        try:
            mutate_on(controller, f"ns-{i}", reads)
        except Crowded as exc:
            crowded += 1
            assert f"LocalQueue ns-{i}/default is not in this replica's watch yet" in str(exc)
    assert (len(reads.read), crowded) == (UNCACHED_BURST, 200 - UNCACHED_BURST)
    assert reads.read[0] == (LOCAL_QUEUE.kind, "ns-0", "default")
    assert mutate_on(controller, "cached", reads).allowed and len(reads.read) == UNCACHED_BURST


class NamedQueues:
    """The manager's caches: LocalQueue `q` of each namespace held (`cached`) or not; no
    ClusterQueue or AdmissionCheck held."""

    def __init__(self, cached: bool) -> None:
        self.cached = cached

    def local_queue(self, namespace: str, name: str) -> LocalQueueView | None:
        if not self.cached:
            return None
        meta = {"name": name, "namespace": namespace}
        return LocalQueueView({"metadata": meta, "spec": {"clusterQueue": f"cq-{namespace}"}})

    def cluster_queue(self, _name: str) -> None:
        return None

    def check(self, _name: str) -> None:
        return None


@pytest.mark.parametrize("cached", [True, False], ids=["queue-cached", "queue-not-cached"])
def test_reviews_naming_a_queue_read_what_no_cache_holds_within_the_allowance(
    cached: bool,
) -> None:
    """On the manager, a review naming its queue reads the LocalQueue, or its ClusterQueue,
    of the API server only within the allowance, however many namespaces reviews name."""
    reads, crowded = Reads(), 0
    settings = SimpleNamespace(manager_runs_trainjobs=True, controller_name="ours")
    for i in range(200):
        labels = {"kueue.x-k8s.io/queue-name": "q"}
        review = {"uid": "u", "namespace": f"ns-{i}", "object": {"metadata": {"labels": labels}}}
        ctx: Any = SimpleNamespace(
            crd_problem=None,
            trainjob_schema=None,
            caches=NamedQueues(cached),
            settings=settings,
            manager=reads,
        )
        try:
            dispatcher_webhooks.on_mutate(ctx, review, Deadline(10))
        except Crowded:
            crowded += 1
    assert (len(reads.read), crowded) == (UNCACHED_BURST, 200 - UNCACHED_BURST), reads.read[:3]
    kind = "ClusterQueue" if cached else "LocalQueue"
    assert {k for k, _, _ in reads.read} == {kind}


def test_the_allowance_is_each_sources_and_namespaces_own() -> None:
    """A pod spending its address's allowance leaves the API server's whole; a namespace
    spending its share of the API server's (dry runs) leaves another namespace's; an address
    may spend UNCACHED_SOURCE_BURST across namespaces, then none."""

    assert [asks_as("10.0.0.9", "mallory") for _ in range(25)].count(True) == UNCACHED_BURST
    # the 5 refused spent nothing of the address's allowance (nor would its namespaces')
    assert asks_as("10.0.0.1", "mallory")  # the API server's, for the same namespace
    assert [asks_as("10.0.0.1", "mallory") for _ in range(25)].count(True) == UNCACHED_BURST - 1
    assert asks_as("10.0.0.1", "alice")  # another namespace through the API server
    spread = [asks_as("10.0.0.9", f"ns-{i}") for i in range(UNCACHED_SOURCE_BURST)]
    assert spread.count(True) == UNCACHED_SOURCE_BURST - UNCACHED_BURST
    assert asks_as("10.0.0.1", "bob")


def asks_as(source: str, namespace: str) -> bool:
    """Whether a review from `source` of an object in `namespace` no cache holds is judged
    (not refused as crowded)."""

    def one() -> bool:
        REVIEW_FROM.set((source, namespace))
        try:
            mutate_on("worker controller", namespace, Reads())
        except Crowded:
            return False
        return True

    return contextvars.copy_context().run(one)


def test_a_refused_review_spends_no_other_allowance() -> None:
    """Refused by its address's allowance, a review spends nothing of its namespace's share
    (nor makes one for a namespace it names); refused by its namespace's, nothing of its
    address's."""
    spent = [asks_as("10.0.0.9", f"made-up-{i}") for i in range(UNCACHED_SOURCE_BURST + 50)]
    assert spent.count(True) == UNCACHED_SOURCE_BURST
    assert [asks_as("10.0.0.1", "made-up-0") for _ in range(30)].count(True) == UNCACHED_BURST
    # refused by its address's allowance, a namespace's reviews keep its share whole for when
    # the address's comes back
    assert not any(asks_as("10.0.0.9", "carol") for _ in range(10))
    admission._uncached_sources = Rates(UNCACHED_PER_SOURCE, UNCACHED_SOURCE_BURST)  # refilled
    assert [asks_as("10.0.0.9", "carol") for _ in range(30)].count(True) == UNCACHED_BURST
    # a namespace's share spent: its further reviews leave the address's allowance whole
    assert [asks_as("10.0.0.2", "alice") for _ in range(60)].count(True) == UNCACHED_BURST
    others = [asks_as("10.0.0.2", f"ns-{i}") for i in range(UNCACHED_SOURCE_BURST)]
    assert others.count(True) == UNCACHED_SOURCE_BURST - UNCACHED_BURST
