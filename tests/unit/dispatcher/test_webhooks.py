"""`webhooks._answer`: admission questions answered from the caches on the event loop, and
asked again in a thread when they need an object the caches do not hold yet."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

from dispatcher import webhooks
from kubecontrol.kinds import Kind
from trainjob import constants as c

Dict = dict[str, Any]


class Server:
    """Stands in for `ctx.manager`: records on which thread each read came."""

    def __init__(self, objects: dict[str, Dict]) -> None:
        self.objects, self.threads = objects, []

    def get_or_none(self, kind: Kind, name: str, namespace: str | None) -> Dict | None:
        self.threads.append(threading.get_ident())
        return self.objects.get(name)


def ask(cached: dict[str, Dict], server: Server) -> tuple[Dict | None, int]:
    """Look `lq` up as the webhooks do; return it and the event loop's thread."""

    def question(get: webhooks.Getter) -> Dict | None:
        return cached.get("lq") or get(c.LOCAL_QUEUE, "lq", "ns")

    async def main() -> tuple[Dict | None, int]:
        ctx: Any = SimpleNamespace(manager=server)
        return await webhooks._answer(ctx, question), threading.get_ident()

    return asyncio.run(main())


def test_a_cached_answer_reads_nothing() -> None:
    server = Server({"lq": {"from": "server"}})
    found, _loop = ask({"lq": {"from": "cache"}}, server)
    assert found == {"from": "cache"}
    assert server.threads == []


def test_an_object_not_cached_yet_is_read_off_the_loop() -> None:
    server = Server({"lq": {"from": "server"}})
    found, loop = ask({}, server)
    assert found == {"from": "server"}
    assert len(server.threads) == 1 and server.threads[0] != loop


def test_an_object_nowhere_is_none() -> None:
    server = Server({})
    found, _loop = ask({}, server)
    assert found is None and len(server.threads) == 1


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
    verdict = asyncio.run(webhooks.on_mutate(ctx, review))  # type: ignore[arg-type]
    assert not verdict.allowed and "900000 items, over the 16" in verdict.message
