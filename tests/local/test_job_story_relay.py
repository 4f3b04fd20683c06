"""A followed log relayed by the job story API (dispatcher/readapi/job_story.py), on a loopback
server, from a worker played by our own stand-in of the client's `stream`: a follow
that has said nothing for FOLLOW_IDLE_SECONDS is ended, and one that speaks is not."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from dispatcher.readapi import job_story
from kubecontrol import web
from kubecontrol.aggregated import ApiRequest, Caller
from tests.support.plain_server import serving
from trainjob_api.views import TrainJobView


class Worker:
    """The worker's API server as `api.stream` sees it: it answers 200, sends `lines` a
    second apart, then stays quiet until the reader goes. `asked`: the paths read."""

    def __init__(self, lines: int) -> None:
        self.lines, self.ended = lines, threading.Event()
        self.cluster = SimpleNamespace(api=self)
        self.asked: list[str] = []

    def stream(self, path: str, query: Any, on_data: Any, **kw: Any) -> None:
        self.asked.append(path)
        kw["on_open"]()
        for i in range(self.lines):
            time.sleep(1.0)
            if not on_data(f"line {i}\n".encode()):
                break
        kw["abort"].wait(30)
        self.ended.set()


async def follow(worker: Worker) -> tuple[bytes, float]:
    async def handler(request: web.Request) -> web.StreamResponse:
        at = job_story.Running(TrainJobView({}), "w1", worker, None, None)  # type: ignore[arg-type]
        call = ApiRequest("ns", "tj", "log", Caller("alice"), {"follow": "true"}, request)
        return await job_story._relay(at, "tj-node-0-0", call, {"follow": True})

    async with serving([web.get("/log", handler)]) as port, aiohttp.ClientSession() as client:
        began = time.monotonic()
        async with client.get(f"http://127.0.0.1:{port}/log") as answer:
            body = await asyncio.wait_for(answer.read(), 20)
        return body, time.monotonic() - began


def test_a_quiet_follow_is_ended_and_its_worker_read_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(job_story, "FOLLOW_IDLE_SECONDS", 2.0)
    worker = Worker(lines=3)
    body, took = asyncio.run(follow(worker))
    assert worker.asked == ["/api/v1/namespaces/ns/pods/tj-node-0-0/log"]  # its log, not the pod
    assert body == b"line 0\nline 1\nline 2\n"  # each line as it came: speaking kept it open
    # ended 2 s after the last line, not before; one that never ends fails the read's 20 s
    assert took >= 3 + 2
    assert worker.ended.wait(5)  # the read of the worker ends too
