"""The dispatcher's admission judges: a LocalQueue is read from the watch cache, and from the
API server (by the review's deadline) only when the cache does not hold it yet."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from dispatcher.controller import webhooks
from kubebase.kinds import Kind
from kubecontrol.deadline import Deadline
from trainjob.queues import LocalQueueView
from trainjob_api import constants as c

Dict = dict[str, Any]


class Server:
    """Stands in for `ctx.manager`: records what was read, and by which deadline."""

    def __init__(self, objects: dict[str, Dict]) -> None:
        self.objects = objects
        self.read: list[tuple[str, str | None, str]] = []
        self.deadlines: list[Deadline] = []

    def within(self, deadline: Deadline) -> Server:
        self.deadlines.append(deadline)
        return self

    def get_or_none(self, kind: Kind, name: str, namespace: str | None) -> Dict | None:
        self.read.append((kind.kind, namespace, name))
        return self.objects.get(name)


class Caches:
    def __init__(self, queues: dict[str, Dict]) -> None:
        self.queues = queues

    def local_queue(self, namespace: str, name: str) -> LocalQueueView | None:
        found = self.queues.get(name)
        return None if found is None else LocalQueueView(found)


def queue(cluster_queue: str) -> Dict:
    return {
        "metadata": {"name": "default", "namespace": "team-a"},
        "spec": {"clusterQueue": cluster_queue},
    }


def mutate(cached: dict[str, Dict], server: Server) -> tuple[Any, Deadline]:
    deadline = Deadline(10)
    ctx: Any = SimpleNamespace(
        crd_problem=None,
        trainjob_schema=None,
        caches=Caches(cached),
        manager=server,
        settings=SimpleNamespace(manager_runs_trainjobs=True),
    )
    review = {"uid": "u", "namespace": "team-a", "object": {"metadata": {"name": "tj"}}}
    return webhooks.on_mutate(ctx, review, deadline), deadline


def test_a_cached_queue_reads_nothing(monkeypatch: Any) -> None:
    monkeypatch.setattr(webhooks, "cq_has_our_check", lambda *a: False)
    server = Server({"default": queue("from-server")})
    verdict, _ = mutate({"default": queue("cq")}, server)
    assert server.read == []
    assert {"op": "add", "path": "/metadata/labels", "value": {}} in verdict.patch


def test_a_queue_not_cached_yet_is_read_by_the_reviews_deadline(monkeypatch: Any) -> None:
    monkeypatch.setattr(webhooks, "cq_has_our_check", lambda *a: False)
    server = Server({"default": queue("cq")})
    verdict, deadline = mutate({}, server)
    assert server.read == [(c.LOCAL_QUEUE.kind, "team-a", "default")] * 2  # default, then its cq
    assert server.deadlines == [deadline]
    assert verdict.allowed


def test_a_queue_nowhere_is_none() -> None:
    server = Server({})
    verdict, _ = mutate({}, server)
    assert server.read == [(c.LOCAL_QUEUE.kind, "team-a", "default")]
    assert verdict.allowed and verdict.patch == ()


def test_the_mutating_webhook_bounds_the_object_before_looking_anything_up() -> None:
    """The API server calls mutating webhooks before it checks the CRD's schema."""
    patches = {"type": "array", "maxItems": 16}
    schema = {"properties": {"spec": {"properties": {"runtimePatches": patches}}}}
    ctx = SimpleNamespace(crd_problem=None, trainjob_schema=schema, caches=None, manager=None)
    review = {
        "uid": "u",
        "namespace": "team-a",
        "object": {"metadata": {"name": "tj"}, "spec": {"runtimePatches": [{}] * 900_000}},
    }
    verdict = webhooks.on_mutate(ctx, review, Deadline(10))  # type: ignore[arg-type]
    assert not verdict.allowed and "900000 items, over the 16" in verdict.message
