"""The job story API's capacity, shared per user and per namespace: one tenant holding every
read it may never keeps another tenant's read out, and a read with no free slot waits its
user's turn rather than being refused. And what it answers once a TrainJob's pods are gone:
the tails kept of them (dispatcher/workers/log_tails.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from dispatcher.readapi import job_story
from dispatcher.workers import log_tails
from kubecontrol.aggregated import ApiRequest, Caller
from kubecontrol.controller import own_namespace
from tests.support.builders import TrainJobBuilder, make_runtime
from tests.support.whole_pass import fleet
from trainjob_api import constants as c


def call(user: str, namespace: str, left: Callable[[], bool] = lambda: False) -> ApiRequest:
    """A request of `user` in `namespace` whose client is there until `left()` says not."""
    http = SimpleNamespace(transport=SimpleNamespace(is_closing=left))
    return ApiRequest(namespace, "tj", "story", Caller(user), {}, http=http)  # type: ignore[arg-type]


class Held:
    """Reads that say who they are when they start and then hold their slot until `free`."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self._go = threading.Semaphore(0)
        self._lock = threading.Lock()

    def read(self, who: str) -> Callable[[], str]:
        def fn() -> str:
            with self._lock:
                self.started.append(who)
            self._go.acquire(timeout=30)
            return "read"

        return fn

    def free(self, reads: int = 1) -> None:
        self._go.release(reads)

    async def until_started(self, count: int) -> None:
        await until(lambda: len(self.started) >= count)


async def until(what: Callable[[], bool]) -> None:
    while not what():
        await asyncio.sleep(0.01)


def queued(who: str, namespace: str) -> int:
    return job_story._reads_slots.queued(who, namespace)


@pytest.fixture
def held() -> Iterator[Held]:
    reads = Held()
    yield reads
    reads.free(64)  # no thread of the pool is left waiting


def ask(who: str, namespace: str, fn: Callable[[], Any], **kw: Any) -> asyncio.Task[Any]:
    return asyncio.create_task(job_story._read(call(who, namespace, **kw), fn))


def refusal(answer: Any) -> tuple[int, str, str]:
    return answer.status, answer.headers["Retry-After"], orjson.loads(answer.body)["message"]


def test_one_tenant_at_its_share_waits_and_others_still_read(held: Held) -> None:
    """Before: 8 reads per replica for everyone, so 8 of one tenant's left every other
    tenant 429; then one tenant's reads past its share were refused rather than queued."""

    async def scenario() -> dict[str, Any]:
        mallory = [
            ask(f"mallory-{i % 2}", "evil", held.read("mallory"))
            for i in range(job_story.READS_PER_NAMESPACE)
        ]
        await asyncio.wait_for(held.until_started(job_story.READS_PER_NAMESPACE), 10)
        more = [ask("mallory-0", "evil", held.read("mallory-0 again"))]
        more.append(ask("sa-9", "evil", held.read("a new user of her namespace")))
        alice = ask("alice", "team-a", lambda: "alice's")
        answers: dict[str, Any] = {"alice": await asyncio.wait_for(alice, 5)}
        answers["waiting"] = job_story._reads_slots.queued("mallory-0", "evil")
        held.free(64)
        answers["mallory's"] = await asyncio.gather(*mallory, *more)
        return answers

    answers = asyncio.run(scenario())
    assert answers["alice"] == "alice's"
    assert answers["waiting"] == 1  # her namespace's share held: she waits, not refused
    assert answers["mallory's"] == ["read"] * (job_story.READS_PER_NAMESPACE + 2)
    assert job_story._reads_slots.held("mallory-0") == 0  # every slot given back


def test_a_user_asking_once_is_served_at_the_next_freed_slot(held: Held) -> None:
    """Two namespaces' users loop reads and hold all 8 slots with more waiting; carol asks
    once: the next freed slot is hers (first come, it would be theirs)."""

    async def scenario() -> list[str]:
        loops = [
            ask(f"{namespace}:sa-{i}", namespace, held.read(namespace))
            for _ in range(4)
            for namespace in ("evil-1", "evil-2")
            for i in range(2)
        ]
        await asyncio.wait_for(held.until_started(job_story.MAX_READS), 10)
        carol = ask("carol", "team-c", held.read("carol"))
        await asyncio.wait_for(until(lambda: queued("carol", "team-c") == 1), 10)
        for count in range(job_story.MAX_READS + 1, len(loops) + 2):
            held.free()
            await asyncio.wait_for(held.until_started(count), 10)
        held.free(64)
        assert await asyncio.gather(carol, *loops) == ["read"] * (len(loops) + 1)
        return held.started[job_story.MAX_READS :]

    after = asyncio.run(scenario())
    assert after[0] == "carol"
    assert sorted(after[1:]) == ["evil-1"] * 4 + ["evil-2"] * 4


def test_a_read_past_a_full_queue_answers_429_at_once(
    held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked as soon as the user's queue is full, while the waits in it are far from over:
    a refusal for the full queue, not for a wait, whenever the holding reads' threads start."""
    monkeypatch.setattr(job_story, "WAIT_SECONDS", 60.0)

    async def scenario() -> list[Any]:
        busy = [
            ask("bob", "team-b", held.read("bob"))
            for _ in range(job_story.READS_EACH + job_story.QUEUED_EACH)
        ]
        await asyncio.wait_for(until(lambda: queued("bob", "team-b") == job_story.QUEUED_EACH), 10)
        answers = [await asyncio.wait_for(ask("bob", "team-b", held.read("bob: one too many")), 10)]
        held.free(64)
        return answers + await asyncio.gather(*busy)

    answers = asyncio.run(scenario())
    assert refusal(answers[0]) == (
        429,
        "1",
        "you have 4 story or log reads waiting on this replica, your share; try again",
    )
    assert answers[1:] == ["read"] * (job_story.READS_EACH + job_story.QUEUED_EACH)
    assert "bob: one too many" not in held.started


def test_a_read_that_waits_too_long_answers_429(
    held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(job_story, "WAIT_SECONDS", 0.05)

    async def scenario() -> list[Any]:
        holding = [ask("gus", "team-g", held.read("gus")) for _ in range(job_story.READS_EACH)]
        await asyncio.wait_for(
            until(lambda: job_story._reads_slots.held("gus") == job_story.READS_EACH), 10
        )
        answers = [await asyncio.wait_for(ask("gus", "team-g", held.read("gus, late")), 10)]
        held.free(64)
        return answers + await asyncio.gather(*holding)

    answers = asyncio.run(scenario())
    assert refusal(answers[0]) == (
        429,
        "1",
        "no slot within 0.05s: this replica's 8 story or log reads are under way; try again",
    )
    assert answers[1:] == ["read"] * job_story.READS_EACH
    assert "gus, late" not in held.started


def test_a_waiting_read_whose_client_leaves_frees_its_place(held: Held) -> None:
    async def scenario() -> tuple[Any, int, list[str]]:
        holding = [ask("dave", "team-d", held.read("dave")) for _ in range(job_story.READS_EACH)]
        await asyncio.wait_for(held.until_started(job_story.READS_EACH), 10)
        left = threading.Event()
        leaving = ask("dave", "team-d", held.read("dave, gone"), left=left.is_set)
        staying = ask("dave", "team-d", held.read("dave, staying"))
        await asyncio.wait_for(until(lambda: queued("dave", "team-d") == 2), 10)
        left.set()
        answer = await asyncio.wait_for(leaving, 10)
        waiting = queued("dave", "team-d")
        held.free(64)
        await asyncio.gather(*holding, staying)
        return answer, waiting, held.started

    answer, waiting, started = asyncio.run(scenario())
    assert refusal(answer)[0] == 429
    assert waiting == 1  # only the one still there waits
    assert started == ["dave", "dave", "dave, staying"]


def test_a_user_past_its_rate_is_refused_and_others_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(job_story._read_rates, "_clock", lambda: 0.0)  # no refill meanwhile

    async def scenario() -> list[Any]:
        answers = [
            await job_story._read(call("erin", "team-e"), lambda: "read")
            for _ in range(job_story.READS_BURST_EACH)
        ]
        answers += [  # her rate is hers wherever she reads: another namespace is no refill
            await job_story._read(call("erin", namespace), lambda: "read")
            for namespace in ("team-e2", "team-e3")
        ]
        return [*answers, await job_story._read(call("frank", "team-e"), lambda: "read")]

    answers = asyncio.run(scenario())
    assert answers[: job_story.READS_BURST_EACH] == ["read"] * job_story.READS_BURST_EACH
    for answer in answers[job_story.READS_BURST_EACH : -1]:
        assert refusal(answer) == (
            429,
            "1",
            "you asked for more than 60 story or log reads a minute on this replica, your rate; "
            "try again",
        )
    assert answers[-1] == "read"


def kept_tails(trainjob_uid: str, pod: str, said: str) -> dict[str, Any]:
    """The record of the tails of TrainJob ns/tj `trainjob_uid`, in log_tails.capture's form
    (what the story reads of it): one failed trainer pod of worker1, whose container `node`
    last said `said`."""
    seen = {
        "metadata": {
            "name": pod,
            "labels": {c.REPLICATED_JOB_NAME_LABEL: "node", c.JOB_COMPLETION_INDEX: "0"},
        },
        "spec": {"containers": [{"name": "node"}]},
        "status": {"phase": "Failed"},
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": log_tails.name_of(trainjob_uid),
            "namespace": own_namespace(),
            "labels": {log_tails.LABEL: trainjob_uid},
            "annotations": {log_tails.TRAINJOB_ANNOTATION: "ns/tj"},
        },
        "data": {
            log_tails.PODS_KEY: orjson.dumps([log_tails._entry(seen, "worker1")]).decode(),
            log_tails.key_of(pod, "node"): said,
        },
    }


def test_once_its_pods_are_gone_a_trainjob_is_told_by_the_tails_kept_under_its_uid() -> None:
    """TrainJob ns/tj ran on worker1, which has removed its copy and pods; the tails of an
    earlier TrainJob of the same name, deleted and made again, are still kept (until the
    resync sweeps them): its story and its log are this one's, not that one's."""
    runtime = make_runtime()
    tj = TrainJobBuilder().queue("q").multikueue().status(clusterName="worker1").obj()
    world, ctx = fleet([runtime, tj], {"worker1": [runtime]})
    try:
        manager = world.apis["manager"]
        uid = world.get("manager", c.TRAINJOB, "tj")["metadata"]["uid"]  # type: ignore[index]
        manager.put(kept_tails("uid-of-the-deleted-tj", "tj-node-0-0-old", "the old one\n"))
        manager.put(kept_tails(uid, "tj-node-0-0-new", "this one's last words\n"))
        told = job_story.story(ctx, "ns", "tj")
        assert told.worker == "worker1" and told.copy_on_worker is None
        assert [(p.name, p.phase, p.kept) for p in told.pods] == [
            ("tj-node-0-0-new", "Failed", True)
        ]
        asked = ApiRequest("ns", "tj", "log", Caller("alice"), {}, http=None)  # type: ignore[arg-type]
        assert job_story._prepare_log(ctx, asked) == "this one's last words\n"
    finally:
        world.close()
