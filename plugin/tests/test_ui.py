"""What the web view's server passes on to the manager (plugin/kubectl_trainjob/ui.py's
allow-list)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from kubernetes import client

from kubectl_trainjob import ui
from kubectl_trainjob.ui import ALLOWED, LINE_LIMIT, Lines, LineSplitter


@pytest.mark.parametrize(
    "path",
    [
        "/apis/trainer.kubeflow.org/v1alpha1/trainjobs",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/bert.v2",
        "/apis/view.trainjob.dev/v1alpha1/namespaces/team-a/trainjobs/bert/story",
        "/apis/view.trainjob.dev/v1alpha1/namespaces/team-a/trainjobs/bert/log",
        "/apis/view.trainjob.dev/v1alpha1/workers",
        "/apis/kueue.x-k8s.io/v1beta2/multikueueclusters",
        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues",
    ],
)
def test_the_reads_the_page_makes_pass(path: str) -> None:
    assert ALLOWED.fullmatch(path)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/secrets",
        "/api/v1/namespaces/team-a/pods",
        "/api/v1/namespaces/team-a/pods/p/exec",
        "/api/v1/namespaces/team-a/services/s/proxy",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/bert/status/../../../secrets",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/bert/status",
        "/apis/view.trainjob.dev/v1alpha1/namespaces/team-a/trainjobs/bert/exec",
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/Team_A/trainjobs",
        "/apis/trainer.kubeflow.org/v1alpha1/trainjobs/",
    ],
)
def test_nothing_else_passes(path: str) -> None:
    assert not ALLOWED.fullmatch(path)


def test_a_long_line_in_many_pieces_is_joined_once() -> None:
    """A 4 MiB watch event in 4 KiB pieces: before, each piece joined and split everything
    held so far again (the review's quadratic join: ~2 GB copied for that one line)."""
    split = LineSplitter(LINE_LIMIT)
    line = b"x" * (LINE_LIMIT - 10)
    pieces = [line[i : i + 4096] for i in range(0, len(line), 4096)]
    got: list[bytes] = []
    for piece in pieces:
        got += split.feed(piece)
    assert got == []
    assert split._size == len(line)  # held as the pieces came, not joined yet
    assert len(split._pending) == len(pieces)
    got += split.feed(b"\n{}\nhalf")
    assert got == [line, b"{}"]
    assert split.feed(b"-done\n") == [b"half-done"]
    with pytest.raises(OverflowError):
        LineSplitter(10).feed(b"0123456789ab")
    with pytest.raises(OverflowError):
        LineSplitter(10).feed(b"0123456789abc\n")


def test_the_lines_waiting_for_a_page_are_bounded_in_bytes() -> None:
    async def run() -> list[str]:
        lines = Lines(10)
        seen: list[str] = []

        async def writer() -> None:
            for item in (b"aaaaaaaa", b"bbbbbbbb", b"c" * 30):
                await lines.put((item, False))
                seen.append(f"put {item[:1].decode()}")

        task = asyncio.create_task(writer())
        await asyncio.sleep(0.05)
        assert seen == ["put a"]  # b waits: 16 bytes would be over 10
        for _ in range(3):
            line, _ = await lines.get()
            seen.append(f"got {line[:1].decode()}")
            await asyncio.sleep(0.01)
        await task
        return seen

    # one line over the bound still goes, alone
    assert asyncio.run(run()) == ["put a", "got a", "put b", "got b", "put c", "got c"]

    async def drained() -> None:  # what is taken out no longer counts
        lines = Lines(10)
        await lines.put((b"c" * 30, False))
        await lines.get()
        await asyncio.wait_for(lines.put((b"aaaa", False)), 1)
        await asyncio.wait_for(lines.put((b"bbbb", False)), 1)

    asyncio.run(drained())


ACCOUNTS_OF_A = ("the ServiceAccounts of namespace team-a", ui.MAX_NAMESPACE_STREAMS)
UNNAMED = ("the viewers the API server could not name", ui.MAX_NAMESPACE_STREAMS)


@pytest.mark.parametrize(
    ("viewer", "share"),
    [
        ("user:system:serviceaccount:team-a:bot", ACCOUNTS_OF_A),
        ("user:system:serviceaccount:team-a:other", ACCOUNTS_OF_A),
        ("user:alice", ("viewer alice", ui.MAX_VIEWER_STREAMS)),
        # a person whose name holds a ServiceAccount's is no ServiceAccount of that namespace
        (
            "user:x:system:serviceaccount:victim:y",
            ("viewer x:system:serviceaccount:victim:y", ui.MAX_VIEWER_STREAMS),
        ),
        ("token:ab12", UNNAMED),
        ("token:cd34", UNNAMED),
    ],
)
def test_a_viewers_reads_count_to_its_group_never_to_the_namespace_it_names(
    viewer: str, share: tuple[str, int]
) -> None:
    """A tenant's ServiceAccounts share one group, a person is one of their own (as large as
    one viewer's share: a page watching many namespaces is not cut short), the viewers the API
    server could not name (any token a client makes up) share one; which namespace a read
    names is not asked, as the manager has not yet said the viewer may read it."""
    assert ui.group(viewer) == share


def test_a_hostile_watch_of_4_mib_lines_never_fills_the_queue_past_its_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A manager's watch sends events of nearly LINE_LIMIT each to a page that reads
    slowly: the lines waiting for the page never pass QUEUE_BYTES, and every event arrives."""
    peak = [0]

    class Watched(ui.Lines):
        async def put(self, item: tuple[bytes, bool]) -> None:
            await super().put(item)
            peak[0] = max(peak[0], self._bytes)

    monkeypatch.setattr(ui, "Lines", Watched)
    event = b'{"type":"ADDED","object":{"a":"' + b"x" * (ui.LINE_LIMIT - 64) + b'"}}\n'

    async def hostile(request: web.Request) -> web.StreamResponse:
        answer = web.StreamResponse()
        await answer.prepare(request)
        for _ in range(6):
            for i in range(0, len(event), 4096):
                await answer.write(event[i : i + 4096])
        return answer

    async def run() -> list[bytes]:
        api = web.Application()
        api.router.add_get("/{path:.*}", hostile)
        manager = TestServer(api, host="127.0.0.1")
        await manager.start_server()
        cfg = client.Configuration()
        cfg.host = f"http://127.0.0.1:{manager.port}"
        server = ui.Server(ui.Manager(cfg, "c", "default"), ["a"], False)
        page = TestClient(TestServer(server.app(), host="127.0.0.1"))
        await page.start_server()
        server.port = page.port or 0
        try:
            answer = await page.get(
                "/watch",
                params={"p": "/apis/trainer.kubeflow.org/v1alpha1/trainjobs?watch=1"},
                headers={"Host": f"127.0.0.1:{page.port}"},
            )
            got = bytearray()
            async for piece in answer.content.iter_chunked(1 << 20):
                got += piece
                await asyncio.sleep(0.01)  # a page that reads slowly
            return bytes(got).splitlines(keepends=True)
        finally:
            await page.close()
            await manager.close()

    got = asyncio.run(run())
    assert [len(line) for line in got[:-1]] == [len(event) + len(b'{"i":0,"event":}')] * 6
    assert b'"end":200' in got[-1]
    assert 0 < peak[0] <= ui.QUEUE_BYTES
