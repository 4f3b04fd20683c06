"""The job story API's capacity, shared per user and per namespace: one tenant holding every
read it may never keeps another tenant's read out, and a read with no free slot waits its
user's turn rather than being refused. And what it answers once a TrainJob's pods are gone:
the tails kept of them (dispatcher/workers/log_tails.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from dispatcher.readapi import job_story
from dispatcher.workers import copy_pods, log_tails
from kubebase.kinds import POD
from kubecontrol.aggregated import ApiRequest, Caller
from kubecontrol.controller import own_namespace
from tests.support.builders import TrainJobBuilder, make_runtime
from tests.support.whole_pass import fleet, reserve
from trainjob_api import constants as c
from trainjob_api import story


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

    refused_past(
        asyncio.run(scenario()),
        job_story.READS_BURST_EACH,
        "you asked for more than 60 story or log reads a minute on this replica, your rate; "
        "try again",
    )


def refused_past(answers: list[Any], allowed: int, said: str) -> None:
    """The first `allowed` read, the rest but the last refused with 429 saying `said`, the
    last (another's) read."""
    assert answers[:allowed] == ["read"] * allowed
    for answer in answers[allowed:-1]:
        assert refusal(answer) == (429, "1", said)
    assert answers[-1] == "read"


def test_a_namespace_past_its_rate_is_refused_whichever_of_its_users_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tenant may make ServiceAccounts: each a user of its own, with a rate of its own. (The
    namespaces are this test's alone: the rates' clock stands still in it.)"""
    for rates in (job_story._read_rates, job_story._namespace_rates):
        monkeypatch.setattr(rates, "_clock", lambda: 0.0)  # no refill meanwhile
    burst = job_story.READS_BURST_PER_NAMESPACE

    async def scenario() -> list[Any]:
        answers = [
            await job_story._read(
                call(f"system:serviceaccount:team-n:sa{i}", "team-n"), lambda: "read"
            )
            for i in range(burst + 2)
        ]
        return [*answers, await job_story._read(call("hal", "team-m"), lambda: "read")]

    refused_past(
        asyncio.run(scenario()),
        burst,
        "namespace team-n's users asked for more than 120 story or log reads a minute on this "
        "replica, its rate; try again",
    )


def test_a_refusal_by_one_rate_spends_nothing_of_the_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user refused by its namespace's rate keeps its own allowance, and a namespace keeps
    its own while one of its users is refused for its rate; past both, the user is told of
    its own."""
    clock = [0.0]  # the namespaces' clock; the users' stands still: no user's bucket refills
    monkeypatch.setattr(job_story._read_rates, "_clock", lambda: 0.0)
    monkeypatch.setattr(job_story._namespace_rates, "_clock", lambda: clock[0])
    each, shared = job_story.READS_BURST_EACH, job_story.READS_BURST_PER_NAMESPACE

    async def ask(user: str, namespace: str) -> Any:
        return await job_story._read(call(user, namespace), lambda: "read")

    async def scenario() -> dict[str, Any]:
        # ivy spends her own; refused twenty times more, team-q's rate is not touched
        mine = [await ask("ivy", "team-q") for _ in range(each + 20)]
        others = [await ask(f"sa{i}", "team-q") for i in range(shared - each)]
        # team-q is spent now: jo is refused for it, and keeps his own
        refused_jo = await ask("jo", "team-q")
        both = await ask("ivy", "team-q")  # past both rates: told of her own
        clock[0] += 60 * shared / job_story.READS_PER_MINUTE_PER_NAMESPACE  # team-q refills
        jo = [await ask("jo", "team-q") for _ in range(each)]
        return {"mine": mine, "others": others, "refused_jo": refused_jo, "both": both, "jo": jo}

    told = asyncio.run(scenario())
    assert told["mine"][:each] == ["read"] * each
    assert {refusal(a)[2].split(",")[0] for a in told["mine"][each:]} == {
        "you asked for more than 60 story or log reads a minute on this replica"
    }
    assert told["others"] == ["read"] * (shared - each)
    assert refusal(told["refused_jo"])[2].startswith("namespace team-q's users asked")
    assert refusal(told["both"])[2].startswith("you asked for more than 60")
    assert told["jo"] == ["read"] * each


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


def an_event(name: str, about: str, message: str = "", reason: str = "Noted") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "ns"},
        "involvedObject": {"kind": "TrainJob", "name": "tj", "uid": about},
        "type": "Warning",
        "reason": reason,
        "message": message,
        "count": 2,
    }


def test_a_storys_events_are_read_in_pages_each_cut_down_as_it_comes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Anyone who may create Events in the namespace writes their strings, unbounded in core/v1
    (up to the 1.5 MiB etcd stores): a story reads them in pages, each Event cut to what the
    story shows as its page comes, not 500 of them whole in one answer."""
    runtime = make_runtime()
    world, ctx = fleet([runtime, TrainJobBuilder().queue("q").obj()], {"worker1": [runtime]})
    try:
        manager = world.apis["manager"]
        uid = world.get("manager", c.TRAINJOB, "tj")["metadata"]["uid"]  # type: ignore[index]
        for i in range(120):
            manager.put(an_event(f"e{i}", uid, "m" * 65_536, "r" * 1_000))
        for i in range(40):  # another object's: the API server filters them out by UID
            manager.put(an_event(f"another{i}", "uid-of-another", "not this one's"))
        keeps: list[Any] = []
        real = copy_pods.list_pages

        def kept(*args: Any, **kwargs: Any) -> Any:
            keeps.append(kwargs.get("keep"))
            return real(*args, **kwargs)

        monkeypatch.setattr(copy_pods, "list_pages", kept)
        asked = len(manager.requests)
        told = job_story.story(ctx, "ns", "tj")
        events = [e for e in told.events if e.source == "manager"]
        assert len(events) == 120
        assert {(len(e.message), len(e.reason or ""), e.count) for e in events} == {
            (story.MAX_EVENT_MESSAGE, story.MAX_EVENT_FIELD, 2)
        }
        pages = [p for m, p in manager.requests[asked:] if p == "/api/v1/namespaces/ns/events"]
        # 50, 50 and 20, asked by UID (the TrainJob's Workload is not made yet); each Event
        # cut as its page comes, not after
        assert len(pages) == 3
        assert keeps == [story.event_seen]
    finally:
        world.close()


def test_a_storys_events_are_at_most_max_events_an_object_and_only_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API server filters by the object's UID; what it sends of another's (a server that
    does not filter) is left out all the same, and no more than MAX_EVENTS are read."""
    monkeypatch.setattr(job_story, "MAX_EVENTS", 60)
    real = copy_pods.list_pages

    def unfiltered(*args: Any, **kwargs: Any) -> Any:
        found, more = real(*args, **kwargs)
        return [*found, an_event("stray", "uid-of-another", "not this one's")], more

    monkeypatch.setattr(copy_pods, "list_pages", unfiltered)
    runtime = make_runtime()
    world, ctx = fleet([runtime, TrainJobBuilder().queue("q").obj()], {"worker1": [runtime]})
    try:
        manager = world.apis["manager"]
        uid = world.get("manager", c.TRAINJOB, "tj")["metadata"]["uid"]  # type: ignore[index]
        for i in range(120):
            manager.put(an_event(f"e{i}", uid, "said"))
        told = job_story.story(ctx, "ns", "tj")
        assert [e.message for e in told.events] == ["said"] * 60
    finally:
        world.close()


def test_a_story_reads_max_story_events_in_all_its_objects_in_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each object's Events are bounded, and so are all of a story's: anyone who may create
    Events writes 500 about each of the 36 objects a story reads them for. The TrainJob's
    are read first, its Workload's with what is left, then none once none is."""
    monkeypatch.setattr(job_story, "MAX_EVENTS", 60)
    monkeypatch.setattr(job_story, "MAX_STORY_EVENTS", 100)
    runtime = make_runtime()
    world, ctx = fleet(
        [runtime, TrainJobBuilder().queue("q").multikueue().obj()], {"worker1": [runtime]}
    )
    try:
        world.settle(("ns", "tj"))  # its Workload made
        manager = world.apis["manager"]
        uid = world.get("manager", c.TRAINJOB, "tj")["metadata"]["uid"]  # type: ignore[index]
        (workload,) = manager.objects(c.WORKLOAD, "ns")
        for i in range(120):
            manager.put(an_event(f"tj{i}", uid, "about the TrainJob"))
            manager.put(an_event(f"wl{i}", workload["metadata"]["uid"], "about its Workload"))
        told = job_story.story(ctx, "ns", "tj")
        said = [e.message for e in told.events]  # the TrainJob's: ours, and the dispatcher's
        assert (len(said), said.count("about its Workload")) == (100, 40)
        monkeypatch.setattr(job_story, "MAX_STORY_EVENTS", 60)
        asked = len(manager.requests)
        told = job_story.story(ctx, "ns", "tj")
        said = [e.message for e in told.events]
        assert len(said) == 60 and "about its Workload" not in said
        pages = [p for m, p in manager.requests[asked:] if p == "/api/v1/namespaces/ns/events"]
        assert len(pages) == 2  # 50 and 10 about the TrainJob; none asked about the Workload
    finally:
        world.close()


def test_event_seen_keeps_what_a_story_shows_of_an_event_and_cuts_the_rest() -> None:
    event = {
        **an_event("e", "u", "x" * 5_000, "y" * 200),
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:01:00Z",
        "source": {"component": "z" * 100_000},
        "metadata": {"name": "e", "namespace": "ns", "annotations": {"a": "b" * 100_000}},
    }
    seen = story.event_seen(event)
    assert story.event_of(seen, "w") == story.event_of(event, "w")
    assert story.about([seen], {"u"}) == [seen]
    assert len(orjson.dumps(seen)) < 2_000
    long = "z" * 10_000
    cut = story.event_seen(
        {
            "type": long,
            "reason": long,
            "involvedObject": {"kind": long, "name": long, "uid": long},
            "firstTimestamp": long,
            "lastTimestamp": long,
            "eventTime": long,
        }
    )
    strings = [cut["type"], cut["reason"], *cut["involvedObject"].values()]
    strings += [cut[k] for k in ("firstTimestamp", "lastTimestamp", "eventTime")]
    assert [len(v) for v in strings] == [story.MAX_EVENT_FIELD] * 8
    # an events.k8s.io writer leaves the older timestamps empty: its time is eventTime
    newer = {**an_event("e", "u"), "eventTime": "2026-01-01T00:02:00.000000Z"}
    assert story.event_of(story.event_seen(newer), "w") == story.event_of(newer, "w")
    assert story.event_of(story.event_seen(newer), "w").first_timestamp is not None
    weird = story.event_seen({"involvedObject": "x", "count": True, "reason": 7})
    assert weird["involvedObject"] == {"kind": None, "name": None, "uid": None}
    assert "count" not in weird and weird["reason"] is None
    assert story.event_of(weird, "w").count == 1


def pod_uid(world: Any) -> str:
    pod = world.get("worker1", POD, "tj-node-0-0-a")
    assert pod is not None
    return str(pod["metadata"]["uid"])


def controller_of(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }


def running_on_worker1() -> tuple[Any, Any]:
    """A multikueue TrainJob ns/tj admitted on the manager and on worker1, its copy there."""
    runtime = make_runtime()
    world, ctx = fleet(
        [runtime, TrainJobBuilder().queue("q").multikueue().obj()], {"worker1": [runtime]}
    )
    try:
        world.settle(("ns", "tj"))
        reserve(world, "manager")
        world.settle(("ns", "tj"))
        reserve(world, "worker1", admitted=True)
        world.settle(("ns", "tj"))
    except BaseException:
        world.close()
        raise
    return world, ctx


def test_every_read_of_one_story_keeps_to_one_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow worker holds a read slot for STORY_SECONDS at most, not READ_SECONDS for each of
    its many reads (the Jobs, the pods, each object's Events, the metrics)."""
    deadlines: list[float | None] = []
    real = copy_pods.list_pages

    def recorded(*args: Any, **kwargs: Any) -> Any:
        deadlines.append(kwargs.get("until", args[4] if len(args) > 4 else None))
        return real(*args, **kwargs)

    monkeypatch.setattr(copy_pods, "list_pages", recorded)
    world, ctx = running_on_worker1()
    try:
        copy = world.get("worker1", c.TRAINJOB, "tj")
        assert copy is not None
        worker = world.apis["worker1"]
        labels = {c.JOBSET_NAME_LABEL: "tj"}
        worker.put(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "tj-node-0",
                    "namespace": "ns",
                    "labels": labels,
                    "ownerReferences": [controller_of(copy)],
                },
            }
        )
        job = world.get("worker1", c.JOB, "tj-node-0")
        assert job is not None
        worker.put(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "tj-node-0-0-a",
                    "namespace": "ns",
                    "labels": labels,
                    "ownerReferences": [controller_of(job)],
                },
                "spec": {"containers": [{"name": "node"}]},
                "status": {"phase": "Running"},
            }
        )
        about_the_pod = {
            **an_event("big", "", "m" * 65_536, "r" * 1_000),
            "involvedObject": {"kind": "Pod", "name": "tj-node-0-0-a", "uid": pod_uid(world)},
        }
        worker.put(about_the_pod)
        started = time.monotonic()
        told = job_story.story(ctx, "ns", "tj")
        assert told.worker == "worker1" and [p.name for p in told.pods] == ["tj-node-0-0-a"]
        (said,) = [e for e in told.events if e.source == "worker1"]  # cut as the manager's
        assert (len(said.message), len(said.reason or "")) == (
            story.MAX_EVENT_MESSAGE,
            story.MAX_EVENT_FIELD,
        )
        # the Events of the manager's TrainJob and Workload; on the worker the Jobs, the
        # pods, the metrics, and the Events of the copy, its Job and its pod
        assert len(deadlines) == 8 and len(set(deadlines)) == 1, deadlines
        (until,) = set(deadlines)
        assert until is not None
        assert (
            started + job_story.STORY_SECONDS <= until <= time.monotonic() + job_story.STORY_SECONDS
        )
    finally:
        world.close()


def test_a_logs_look_for_its_pod_keeps_to_one_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both of a log's looks for its pod (the pod asked for, then whether the copy has any)
    read by one deadline, not READ_SECONDS for each of their pages."""
    deadlines: list[float | None] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        deadlines.append(kwargs.get("until"))
        return [], [], False

    monkeypatch.setattr(job_story, "pods_of", recorded)
    world, ctx = running_on_worker1()
    try:
        asked = ApiRequest("ns", "tj", "log", Caller("kim"), {}, http=None)  # type: ignore[arg-type]
        started = time.monotonic()
        with pytest.raises(copy_pods.Refusal, match="no pods"):  # none there, none kept
            job_story._prepare_log(ctx, asked)
        assert len(deadlines) == 2 and len(set(deadlines)) == 1, deadlines
        (until,) = set(deadlines)
        assert until is not None
        assert (
            started + job_story.STORY_SECONDS <= until <= time.monotonic() + job_story.STORY_SECONDS
        )
    finally:
        world.close()
