"""The web view's local server on loopback, before anything reaches a manager: what it serves,
what it refuses, and what a watch says when the manager cannot be reached (its kubeconfig
names a loopback port nobody listens on)."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from clusters.helpers.waiting import sooner_than
from kubectl_trainjob import ui
from kubectl_trainjob.__main__ import parser


def in_a_loop(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """An async test run to its end in a loop of its own (its fixtures as pytest gives them)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def closed_port() -> int:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    return port


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "clusters": [
                    {"name": "k", "cluster": {"server": f"http://127.0.0.1:{closed_port()}"}}
                ],
                "users": [{"name": "u", "user": {"token": "secret-token"}}],
            }
        )
    )
    yield path


async def client_of(kubeconfig: Path) -> TestClient[web.Request, web.Application]:
    server = ui.Server(ui.load(str(kubeconfig), None, None), ["team-a"], False)
    test_server = TestServer(server.app(), host="127.0.0.1")
    client = TestClient(test_server)
    await client.start_server()
    server.port = test_server.port or 0
    return client


@in_a_loop
async def test_the_page_and_its_session_are_served_with_a_strict_policy(kubeconfig: Path) -> None:
    client = await client_of(kubeconfig)
    try:
        page = await client.get("/")
        assert page.status == 200 and "app.js" in await page.text()
        assert "script-src 'self'" in page.headers["Content-Security-Policy"]
        module = await client.get("/ui/list.js")
        assert module.status == 200 and module.content_type == "text/javascript"
        session = await (await client.get("/session.json")).json()
        assert session["namespaces"] == ["team-a"] and not session["allNamespaces"]
        assert "secret-token" not in json.dumps(session)
        for path in ("/ui/..%2Fui.py", "/ui/nothing.js", "/ui/ui.py"):
            assert (await client.get(path)).status == 404, path
    finally:
        await client.close()


@in_a_loop
async def test_foreign_hosts_origins_and_reads_outside_the_list_are_refused(
    kubeconfig: Path,
) -> None:
    client = await client_of(kubeconfig)
    allowed = "/k8s/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs"
    try:
        assert (await client.get(allowed, headers={"Host": "evil.example"})).status == 403
        origin = {"Origin": "https://evil.example"}
        assert (await client.get(allowed, headers=origin)).status == 403
        cross = {"Sec-Fetch-Site": "cross-site"}
        assert (await client.get(allowed, headers=cross)).status == 403
        for path in ("/k8s/api/v1/secrets", "/k8s/api/v1/namespaces/team-a/pods/p/exec"):
            refused = await client.get(path)
            assert refused.status == 403 and "does not read" in (await refused.json())["message"]
        assert (await client.post(allowed)).status == 405  # GET only
        assert (await client.get("/watch")).status == 400
        secrets = await client.get("/watch", params={"p": "/api/v1/secrets?watch=1"})
        assert secrets.status == 403
        not_a_watch = await client.get("/watch", params={"p": allowed[4:]})
        assert not_a_watch.status == 400
        absolute = await client.get("/watch", params={"p": f"http://other{allowed[4:]}?watch=1"})
        assert absolute.status == 403
    finally:
        await client.close()


@in_a_loop
async def test_a_watch_the_manager_cannot_answer_ends_naming_it(kubeconfig: Path) -> None:
    client = await client_of(kubeconfig)
    path = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs?watch=1"
    try:
        answer = await client.get("/watch", params={"p": path})
        assert answer.status == 200
        (line,) = (await answer.text()).splitlines()
        said = json.loads(line)
        assert said["i"] == 0 and said["end"] == 502 and "127.0.0.1" in said["message"]
        unreachable = await client.get("/k8s" + path.split("?")[0])
        assert unreachable.status == 502
    finally:
        await client.close()


def _args(*argv: str) -> argparse.Namespace:
    return parser().parse_args(["ui", *argv])


def test_the_view_serves_on_loopback_only_unless_behind_a_proxy_it_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="loopback"):
        ui.run(_args("--address", "0.0.0.0"))
    with pytest.raises(ValueError, match="--public-host"):
        ui.run(_args("--behind-proxy", "--address", "0.0.0.0"))
    with pytest.raises(ValueError, match="go with --behind-proxy"):
        ui.run(_args("--public-host", "view.example"))
    with pytest.raises(ValueError, match="no such file"):
        ui.run(_args("--behind-proxy", "--public-host", "v", "--server", "https://127.0.0.1:1",
                     "--certificate-authority", str(tmp_path / "none")))  # fmt: skip


@in_a_loop
async def test_behind_a_proxy_nothing_is_read_without_the_viewers_token(tmp_path: Path) -> None:
    """The server holds no credential: a request the proxy sent without the viewer's bearer
    token is refused before anything reaches the manager, as is a Host not the proxy's."""
    ca = tmp_path / "ca.crt"
    ca.write_text("not read before a request is made\n")
    manager = ui.in_cluster(f"https://127.0.0.1:{closed_port()}", str(ca))
    server = ui.Server(manager, ["team-a"], False, ["view.example"])
    client = TestClient(TestServer(server.app(), host="127.0.0.1"))
    await client.start_server()
    ours = {"Host": "view.example"}
    allowed = "/k8s/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs"
    watch = {"p": allowed[4:] + "?watch=1"}
    try:
        assert (await client.get("/healthz")).status == 200  # the kubelet's probe, any Host
        assert (await client.get("/", headers=ours)).status == 200  # the page itself
        assert (await client.get(allowed)).status == 403  # Host 127.0.0.1: not the proxy's
        for path, query in ((allowed, {}), ("/watch", watch), ("/session.json", {})):
            for auth in ({}, {"Authorization": "Basic dTpw"}, {"Authorization": "Bearer "}):
                refused = await client.get(path, params=query, headers={**ours, **auth})
                assert refused.status == 401, (path, auth)
                assert "authenticating proxy" in (await refused.json())["message"]
        # with a token, the manager is asked (here: nobody listens) and named
        token = {**ours, "Authorization": "Bearer abc"}
        assert (await client.get(allowed, headers=token)).status == 502
    finally:
        await client.close()


async def naming_manager(users: dict[str, str], asked: list[str] | None = None) -> TestServer:
    """A manager on loopback that names each token's user (SelfSubjectReview; each token it is
    asked about is added to `asked`) and never answers a read, so each read holds its slot."""

    async def who(request: web.Request) -> web.Response:
        if asked is not None:
            asked.append(request.headers["Authorization"])
        user = users[request.headers["Authorization"]]
        return web.json_response({"status": {"userInfo": {"username": user}}}, status=201)

    async def never(_request: web.Request) -> web.Response:
        await asyncio.sleep(60)
        return web.json_response({})

    api = web.Application()
    api.router.add_post(ui.WHO_AM_I, who)
    api.router.add_get("/{path:.*}", never)
    manager = TestServer(api, host="127.0.0.1")
    await manager.start_server()
    return manager


async def behind_a_proxy(
    manager_port: int,
) -> tuple[TestClient, Callable[..., Any], Callable[[int], Awaitable[None]]]:
    """The view served behind a proxy (Host view.example) for a manager on loopback at
    `manager_port`, a read of a namespace's TrainJobs (a's) with a token, and a wait until that
    many reads hold a slot (an order of events, not a sleep)."""
    cfg = ui.client.Configuration()
    cfg.host = f"http://127.0.0.1:{manager_port}"
    server = ui.Server(ui.Manager(cfg, "c", "default"), ["a"], False, ["view.example"])
    client = TestClient(TestServer(server.app(), host="127.0.0.1"))
    await client.start_server()

    def read(token: str, namespace: str = "a") -> Any:
        return client.get(
            f"/k8s/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs",
            headers={"Host": "view.example", "Authorization": f"Bearer {token}"},
        )

    async def holding(reads: int) -> None:
        for _ in range(400):
            if server.shares.taken() == reads:
                return
            await asyncio.sleep(0.025)
        raise AssertionError(f"{server.shares.taken()} reads held, not {reads}, after 10 s")

    return client, read, holding


@in_a_loop
async def test_behind_a_proxy_a_viewer_gets_a_share_of_the_reads_and_nobody_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server is shared behind a proxy: one token's open reads are capped, and a read
    with no free slot is refused at once (429), never queued behind another viewer's. The
    manager here accepts connections and never answers, so each read holds its slot."""
    monkeypatch.setattr(ui, "MAX_STREAMS", 2)
    monkeypatch.setattr(ui, "MAX_VIEWER_STREAMS", 1)
    monkeypatch.setattr(ui, "MAX_NAMESPACE_STREAMS", 2)
    monkeypatch.setattr(ui, "REVIEW_SECONDS", 0.5)
    silent = socket.create_server(("127.0.0.1", 0))  # connections wait in its backlog
    client, read, holding = await behind_a_proxy(silent.getsockname()[1])

    held = [asyncio.ensure_future(read("alice")), asyncio.ensure_future(read("bob"))]
    try:
        await holding(2)  # both reads under way (who each is: not said), holding a slot
        again = await read("alice")
        assert (
            again.status == 429
            and "you hold 1 reads on this replica, your share" in (await again.json())["message"]
        )
        assert again.headers["Retry-After"] == "5"
        full = await read("carol", "b")
        # the manager names none of them: they share one group, full as the pool is
        said = (await full.json())["message"]
        assert full.status == 429
        assert "2 reads of the viewers the API server could not name are under way" in said
        wrong = await client.get(
            "/session.json",
            params={"namespaces": "a,No_Such"},
            headers={"Host": "view.example", "Authorization": "Bearer alice"},
        )
        assert wrong.status == 400 and "No_Such" in (await wrong.json())["message"]
        # a manager that never answers the viewer's access review: asked within its limit
        began = time.monotonic()
        session = await client.get(
            "/session.json",
            params={"namespaces": "a,b"},
            headers={"Host": "view.example", "Authorization": "Bearer alice"},
        )
        assert session.status == 200
        sooner_than(time.monotonic() - began, 10, "the default REVIEW_SECONDS")
        said = await session.json()
        assert said["namespaces"] == ["a", "b"] and said["allNamespaces"] is False
    finally:
        for task in held:
            task.cancel()
        silent.close()  # the reads waiting on it end (reset), and the server can stop
        await client.close()


@in_a_loop
async def test_behind_a_proxy_two_tokens_of_one_user_share_one_viewers_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the share was keyed by the token, so one user with two tokens (a tenant with
    `edit` can make them) held two shares. The manager here names the user of each token
    (SelfSubjectReview, as the API server answers it) and never answers a read."""
    monkeypatch.setattr(ui, "MAX_STREAMS", 4)
    monkeypatch.setattr(ui, "MAX_VIEWER_STREAMS", 1)
    monkeypatch.setattr(ui, "MAX_NAMESPACE_STREAMS", 4)
    asked: list[str] = []
    manager = await naming_manager(
        {"Bearer m-1": "mallory", "Bearer m-2": "mallory", "Bearer a-1": "alice"}, asked
    )
    client, read, holding = await behind_a_proxy(manager.port)

    held = asyncio.ensure_future(read("m-1"))
    try:
        await holding(1)  # mallory's first read holds her share
        again = await read("m-2")  # her other token: the same viewer
        assert (
            again.status == 429
            and "you hold 1 reads on this replica, your share" in (await again.json())["message"]
        )
        alice = asyncio.ensure_future(read("a-1"))
        await holding(2)
        assert not alice.done()  # taken: waiting on the manager, as her read should
        assert sorted(asked) == ["Bearer a-1", "Bearer m-1", "Bearer m-2"]  # once a token
        alice.cancel()
    finally:
        held.cancel()
        await client.close()
        await manager.close()


@in_a_loop
async def test_behind_a_proxy_a_token_the_api_server_cannot_name_is_asked_about_again_soon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A named token's user is kept a minute; a token the API server could not name (its
    review failed: here the manager knows no such token) is asked about again after
    WHO_UNNAMED_SECONDS (0 here), so a viewer whose review failed once does not stay in the
    unnamed viewers' group for a minute."""
    monkeypatch.setattr(ui, "WHO_UNNAMED_SECONDS", 0.0)
    asked: list[str] = []
    manager = await naming_manager({"Bearer a-1": "alice"}, asked)
    client, read, holding = await behind_a_proxy(manager.port)
    reads = []
    try:
        for token in ("a-1", "a-1", "unknown", "unknown"):
            reads.append(asyncio.ensure_future(read(token)))
            await holding(len(reads))  # its viewer known, its read under way
        assert asked.count("Bearer a-1") == 1  # named: kept
        assert asked.count("Bearer unknown") == 2  # not named: asked again
    finally:
        for task in reads:
            task.cancel()
        await client.close()
        await manager.close()


@in_a_loop
async def test_behind_a_proxy_the_users_of_one_namespace_share_its_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tenant and the ServiceAccounts it made are several users: with shares per user only,
    they held every slot. A namespace's ServiceAccounts share one group's share, a person holds
    their own, and reads naming another namespace take nothing from it (the manager has not yet
    said they may read it); viewers of that namespace still get in."""
    monkeypatch.setattr(ui, "MAX_STREAMS", 7)
    monkeypatch.setattr(ui, "MAX_VIEWER_STREAMS", 3)
    monkeypatch.setattr(ui, "MAX_NAMESPACE_STREAMS", 2)
    manager = await naming_manager(
        {
            "Bearer mallory": "mallory",
            "Bearer bot": "system:serviceaccount:a:bot",
            "Bearer bot2": "system:serviceaccount:a:bot2",
            "Bearer carol": "carol",
        }
    )
    client, read, holding = await behind_a_proxy(manager.port)
    held = []
    try:
        readers = [("mallory", "c")] * 3 + [("bot", "c"), ("bot2", "c")]
        for token, namespace in readers:
            held.append(asyncio.ensure_future(read(token, namespace)))
            await holding(len(held))
        for token, said in (
            ("mallory", "you hold 3 reads on this replica, your share"),  # a person: 3
            ("bot", "2 reads of the ServiceAccounts of namespace a are under way"),
            ("bot2", "2 reads of the ServiceAccounts of namespace a are under way"),
        ):
            refused = await read(token, "a")
            assert refused.status == 429, token
            assert said in (await refused.json())["message"]
        held.append(asyncio.ensure_future(read("carol", "c")))  # namespace c's own viewer
        await holding(6)
        assert not any(task.done() for task in held)  # all six waiting on the manager
    finally:
        for task in held:
            task.cancel()
        await client.close()
        await manager.close()


async def _events_then_end(request: web.Request) -> web.StreamResponse:
    """A manager's watch that sends two events and ends."""
    answer = web.StreamResponse()
    await answer.prepare(request)
    for name in ("one", "two"):
        await answer.write(b'{"type":"ADDED","object":{"name":"%s"}}\n' % name.encode())
    return answer


@in_a_loop
async def test_behind_a_proxy_a_watch_holds_its_slot_until_its_lines_are_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A watch that has ended while its lines still wait for a page that reads slowly holds
    its slot until the answer ends: the lines queued for the page are under its share. Here
    the page takes no line until the watch's last is queued."""
    reading = asyncio.Event()
    ended = asyncio.Event()

    class Slow(ui.Lines):
        async def put(self, item: tuple[bytes, bool]) -> None:
            await super().put(item)
            if item[1]:
                ended.set()

        async def get(self) -> tuple[bytes, bool]:
            await reading.wait()
            return await super().get()

    monkeypatch.setattr(ui, "Lines", Slow)
    api = web.Application()
    api.router.add_get("/{path:.*}", _events_then_end)
    manager = TestServer(api, host="127.0.0.1")
    await manager.start_server()
    client, _read, holding = await behind_a_proxy(manager.port)
    path = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/a/trainjobs?watch=1"
    page = asyncio.ensure_future(
        client.get(
            "/watch",
            params={"p": path},
            headers={"Host": "view.example", "Authorization": "Bearer alice"},
        )
    )
    try:
        await asyncio.wait_for(ended.wait(), 10)  # the watch ended, its lines all queued
        for _ in range(5):
            await asyncio.sleep(0)  # its pump goes on as far as it would
        await holding(1)
        reading.set()
        answer = await asyncio.wait_for(page, 10)
        lines = [json.loads(line) for line in (await answer.text()).splitlines()]
        assert [line.get("event", {}).get("object") for line in lines[:2]] == [
            {"name": "one"},
            {"name": "two"},
        ]
        assert lines[2] == {"i": 0, "end": 200, "message": "the watch ended"}
        await holding(0)  # the answer ended: its slot is free
    finally:
        page.cancel()
        await client.close()
        await manager.close()


@in_a_loop
async def test_behind_a_proxy_a_watch_refused_a_slot_ends_the_answer_with_429(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A viewer holding its share asks for a watch: the answer says so in its end line (429)
    and ends, for the page to try again later, rather than never ending."""
    monkeypatch.setattr(ui, "MAX_STREAMS", 2)
    monkeypatch.setattr(ui, "MAX_VIEWER_STREAMS", 1)
    monkeypatch.setattr(ui, "MAX_NAMESPACE_STREAMS", 2)
    monkeypatch.setattr(ui, "REVIEW_SECONDS", 0.5)
    silent = socket.create_server(("127.0.0.1", 0))  # connections wait in its backlog
    client, read, holding = await behind_a_proxy(silent.getsockname()[1])
    held = asyncio.ensure_future(read("alice"))
    try:
        await holding(1)
        answer = await asyncio.wait_for(
            client.get(
                "/watch",
                params={"p": "/apis/trainer.kubeflow.org/v1alpha1/namespaces/a/trainjobs?watch=1"},
                headers={"Host": "view.example", "Authorization": "Bearer alice"},
            ),
            10,
        )
        (line,) = (await asyncio.wait_for(answer.text(), 10)).splitlines()
        said = json.loads(line)
        assert said["i"] == 0 and said["end"] == 429
        assert "you hold 1 reads on this replica, your share" in said["message"]
    finally:
        held.cancel()
        silent.close()
        await client.close()
