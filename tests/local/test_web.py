"""The HTTP/1.1 layer of the controllers' ports (kubecontrol/web.py), spoken to byte by byte
over loopback: requests in order on one connection, pipelined ones included; bounds on a
request's head and body; bodies however they come (in length, chunked, after 100-continue);
routes, methods and HEAD; a streamed answer; a lost client. The policies of the webhook port
on top of it (deadlines, room made, draining) are tests/local/test_webhook_server.py's."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import Awaitable, Callable

import pytest

from kubecontrol import web
from tests.support.plain_server import serving

Chat = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[object]]


async def _echo(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    said = {
        "path": request.path,
        "match": request.match_info,
        "query": dict(request.query),
        "groups": request.headers.getall("X-Group", []),
        "agent": request.headers.get("user-agent"),
        "body": len(body),
    }
    return web.Response(text=repr(said))


async def _fail(request: web.Request) -> web.StreamResponse:
    raise RuntimeError("a bug")


# Set by the client once it has the first piece of `_stream`'s answer: the handler writes
# the second only then, so the first must have left before the answer ends.
FIRST_PIECE_READ: list[asyncio.Event] = []


async def _stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    await response.write(b"piece 0\n")
    if FIRST_PIECE_READ:
        await asyncio.wait_for(FIRST_PIECE_READ[0].wait(), 5)
    for i in (1, 2):
        await response.write(f"piece {i}\n".encode())
    await response.write_eof()
    return response


async def _not_modified(request: web.Request) -> web.StreamResponse:
    return web.Response(status=304, headers={"ETag": '"a"'})


ROUTES = [
    web.post("/echo/{name}", _echo),
    web.get("/echo/{name}", _echo),
    web.get("/rest/{path:.*}", _echo),
    web.get("/fail", _fail),
    web.get("/stream", _stream),
    web.get("/same", _not_modified),
]


def _talk(chat: Chat, *, max_body: int = 1024, routes: list[web.RouteDef] = ROUTES) -> object:
    async def run() -> object:
        async with serving(routes, max_body=max_body) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                return await asyncio.wait_for(chat(reader, writer), 10)
            finally:
                writer.close()

    return asyncio.run(run())


async def _answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One answer: status, headers (lower-cased names), body (by length, or chunked)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
    if "content-length" in headers:
        return status, headers, await reader.readexactly(int(headers["content-length"]))
    body = b""
    if headers.get("transfer-encoding") == "chunked":
        while size := int((await reader.readline()).strip(), 16):
            body += await reader.readexactly(size)
            await reader.readline()
        await reader.readline()
    return status, headers, body


def _request(method: str, target: str, body: bytes = b"", *extra: str) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: test", *extra]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_requests_on_one_connection_are_answered_in_order_pipelined_ones_too() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(_request("POST", "/echo/a", b"xyz"))
        first = await _answer(reader)
        # two at once, the second sent before the first is answered: it waits its turn
        writer.write(_request("GET", "/echo/b") + _request("POST", "/echo/c", b"12345"))
        return [first, await _answer(reader), await _answer(reader)]

    answers = _talk(chat)
    assert [a[0] for a in answers] == [200, 200, 200]  # type: ignore[index, union-attr]
    said = [eval(a[2]) for a in answers]  # type: ignore[index, union-attr]
    assert [(s["match"]["name"], s["body"]) for s in said] == [("a", 3), ("b", 0), ("c", 5)]


def test_a_path_is_decoded_its_query_keeps_each_keys_first_value_headers_any_case() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        headers = ("X-Group: one", "x-group: two", "USER-AGENT: me")
        writer.write(_request("GET", "/rest/a%20b/c?x=1&x=2&y=", b"", *headers))
        return await _answer(reader)

    status, _, body = _talk(chat)  # type: ignore[misc]
    said = eval(body)
    assert status == 200
    assert said["path"] == "/rest/a b/c" and said["match"] == {"path": "a b/c"}
    assert said["query"] == {"x": "1", "y": ""}
    assert said["groups"] == ["one", "two"] and said["agent"] == "me"


def test_no_route_is_404_another_methods_405_and_head_is_a_get_without_its_body() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(_request("GET", "/nothing"))
        missing = await _answer(reader)
        writer.write(_request("DELETE", "/echo/a"))
        other = await _answer(reader)
        writer.write(_request("HEAD", "/echo/a"))
        head = await reader.readuntil(b"\r\n\r\n")
        writer.write(_request("GET", "/echo/a"))  # the connection goes on: HEAD sent no body
        return missing, other, head, await _answer(reader)

    missing, other, head, after = _talk(chat)  # type: ignore[misc]
    assert missing[0] == 404 and b"/nothing" in missing[2]
    assert other[0] == 405
    assert head.startswith(b"HTTP/1.1 200")
    assert f"content-length: {len(after[2])}".encode() in head.lower()  # the GET's length
    assert after[0] == 200


def test_a_304_says_no_length() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(_request("GET", "/same"))
        head = await reader.readuntil(b"\r\n\r\n")
        writer.write(_request("GET", "/echo/a"))  # nothing after the head: the next answer
        return head, (await _answer(reader))[0]

    head, after = _talk(chat)  # type: ignore[misc]
    assert head.startswith(b"HTTP/1.1 304") and b"content-length" not in head.lower()
    assert b'etag: "a"' in head.lower() and after == 200


def test_a_head_too_long_is_refused_431_and_a_malformed_one_400_each_closing() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(b"GET /echo/a HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * web.MAX_HEAD_BYTES)
        status, headers, _ = await _answer(reader)
        return status, headers.get("connection"), await reader.read()

    assert _talk(chat) == (431, "close", b"")

    async def garbled(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(b"GET /echo/a HTTP/1.1\r\nHost: t\r\nno colon here\r\n\r\n")
        status, _, _ = await _answer(reader)
        return status, await reader.read()

    assert _talk(garbled) == (400, b"")


def test_a_body_over_the_limit_is_refused_413_unread_and_the_connection_goes_on() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        sent = _request("POST", "/echo/a", b"x" * 2000)  # the limit: 1024, said in its length
        writer.write(sent[:-1500])
        refused = await _answer(reader)  # before the rest of the body is sent
        writer.write(sent[-1500:])  # read and dropped: the client learns of the 413 this way
        writer.write(_request("POST", "/echo/b", b"x" * 10))
        return refused[0], await _answer(reader)

    status, after = _talk(chat)  # type: ignore[misc]
    assert status == 413 and after[0] == 200 and eval(after[2])["body"] == 10


def test_a_body_of_the_limit_exactly_is_taken_by_length_or_in_chunks() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(_request("POST", "/echo/a", b"x" * 1024))
        by_length = await _answer(reader)
        writer.write(b"POST /echo/a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"400\r\n" + b"y" * 1024 + b"\r\n0\r\n\r\n")
        return [(a[0], eval(a[2])["body"]) for a in (by_length, await _answer(reader))]

    assert _talk(chat) == [(200, 1024), (200, 1024)]


def test_a_refused_body_larger_than_the_buffer_is_still_read_out_and_dropped() -> None:
    """A body refused unread after more than BODY_BUFFER_BYTES of it came (reading paused
    for the handler meanwhile): reading resumes to drop the rest, and the connection goes on."""
    size = 1024 * 1024

    async def later(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.3)  # the buffer fills, and reading pauses
        assert request.transport is not None and not request.transport.is_reading()
        raise web.HTTPError(413)

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        head = b"POST /later HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % size
        writer.write(head + b"x" * (300 * 1024))
        refused = await _answer(reader)
        writer.write(b"x" * (size - 300 * 1024))
        writer.write(_request("POST", "/echo/b", b"x" * 10))
        return refused[0], (await _answer(reader))[0]

    assert _talk(chat, routes=[web.post("/later", later), *ROUTES]) == (413, 200)


def test_a_chunked_body_over_the_limit_is_refused_too() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(b"POST /echo/a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(3):
            writer.write(b"200\r\n" + b"y" * 0x200 + b"\r\n")
        writer.write(b"0\r\n\r\n")
        return (await _answer(reader))[0]

    assert _talk(chat) == 413


def test_a_client_waiting_for_100_continue_is_told_to_send_once_its_body_is_read() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(
            b"POST /echo/a HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"
        )
        go = await reader.readuntil(b"\r\n\r\n")
        writer.write(b"abcd")
        return go, await _answer(reader)

    go, (status, _, body) = _talk(chat)  # type: ignore[misc]
    assert go.startswith(b"HTTP/1.1 100") and status == 200 and eval(body)["body"] == 4


def test_a_failing_handler_is_a_500_and_the_connection_goes_on() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(_request("GET", "/fail"))
        failed = await _answer(reader)
        writer.write(_request("GET", "/echo/a"))
        return failed[0], (await _answer(reader))[0]

    assert _talk(chat) == (500, 200)


def test_a_streamed_answer_arrives_piece_by_piece_as_it_is_written() -> None:
    """The handler writes its second piece only once the client has read the first: an
    answer held until its end would never finish."""

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        FIRST_PIECE_READ.append(asyncio.Event())
        writer.write(_request("GET", "/stream"))
        head = await reader.readuntil(b"\r\n\r\n")
        await reader.readline()  # the first chunk's size
        first = await reader.readline()
        FIRST_PIECE_READ[0].set()
        rest = b""
        while chunk := await reader.read(1024):
            rest += chunk
            if rest.endswith(b"0\r\n\r\n"):
                break
        return head, first, rest

    try:
        head, first, rest = _talk(chat)  # type: ignore[misc]
    finally:
        FIRST_PIECE_READ.clear()
    assert b"transfer-encoding: chunked" in head.lower()
    assert first == b"piece 0\n"
    assert b"piece 1" in rest and b"piece 2" in rest


def _writing(ended: list[BaseException], piece: bytes, count: int, pause: float) -> web.Handler:
    """A handler streaming `count` pieces, `pause` apart; how its writes ended, in `ended`."""

    async def write(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        try:
            for _ in range(count):
                await response.write(piece)
                await asyncio.sleep(pause)
        except ConnectionResetError as exc:
            ended.append(exc)
            raise
        return response

    return write


def test_a_streamed_answer_to_a_client_gone_ends_its_writes() -> None:
    """A follow whose reader left stops at its next write (and stops reading its source)."""
    ended: list[BaseException] = []
    follow = _writing(ended, b"x" * 100, 200, 0.02)

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(_request("GET", "/follow"))
        await reader.readuntil(b"\r\n\r\n")
        writer.close()
        for _ in range(40):
            if ended:
                break
            await asyncio.sleep(0.05)
        return bool(ended)

    assert _talk(chat, routes=[web.get("/follow", follow)]) is True


def test_a_stream_waiting_on_a_client_that_reads_nothing_ends_when_it_goes() -> None:
    """Writes wait while the client reads nothing; its connection lost, the wait ends."""
    ended: list[BaseException] = []
    flood = _writing(ended, b"x" * 1024 * 1024, 64, 0.0)

    async def run() -> None:
        async with serving([web.get("/flood", flood)]) as port:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", port))
            sock.sendall(_request("GET", "/flood"))
            await asyncio.sleep(0.5)  # the handler waits on a full transport
            assert not ended
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # a reset
            for _ in range(40):
                if ended:
                    return
                await asyncio.sleep(0.05)

    asyncio.run(run())
    assert len(ended) == 1


def test_keepalive_counts_from_the_latest_answer() -> None:
    async def ok(request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    async def run() -> list[int]:
        served = web.Server([web.get("/a", ok)], max_body=1024, keepalive=1.0, linger=1.0)
        server = await asyncio.get_running_loop().create_server(served.connection, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", server.sockets[0].getsockname()[1]
        )
        statuses = []
        for pause in (0.0, 0.7, 0.6):  # the third 1.3 s after the first answer
            await asyncio.sleep(pause)
            writer.write(_request("GET", "/a"))
            statuses.append((await asyncio.wait_for(_answer(reader), 5))[0])
        writer.close()
        server.close()
        return statuses

    assert asyncio.run(run()) == [200, 200, 200]


def test_a_pipelined_request_whose_body_comes_later_is_answered() -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.3)
        return web.Response(text="slow")

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        head = b"POST /echo/r HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n"
        writer.write(_request("GET", "/slow") + head)
        first = await _answer(reader)
        writer.write(b"12345")
        return first[0], await _answer(reader)

    first, (status, _, body) = _talk(chat, routes=[web.get("/slow", slow), *ROUTES])  # type: ignore[misc]
    assert (first, status, eval(body)["body"]) == (200, 200, 5)


def test_what_is_pipelined_behind_a_request_under_way_is_not_read_meanwhile() -> None:
    """Reading pauses while a request is answered: a client cannot pile requests (or a
    body of megabytes) in the server's buffers behind a slow one."""
    reading: list[bool] = []

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.5)  # what follows has come by now
        assert request.transport is not None
        reading.append(request.transport.is_reading())
        return web.Response(text="slow")

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(_request("GET", "/slow") + _request("POST", "/echo/a", b"x" * 512))
        return (await _answer(reader))[0], (await _answer(reader))[0]

    assert _talk(chat, routes=[web.get("/slow", slow), *ROUTES]) == (200, 200)
    assert reading == [False]


def test_a_body_read_slowly_is_buffered_only_so_far_ahead_of_its_reader() -> None:
    """A client sending faster than the handler reads: reading from it pauses, so what is
    held for the handler stays near BODY_BUFFER_BYTES, however large the body."""
    held: list[int] = []

    async def slow(request: web.Request) -> web.StreamResponse:
        total = 0
        while piece := await request.read_some(64 * 1024):
            total += len(piece)
            assert request.protocol is not None
            held.append(len(request.protocol._body))
            await asyncio.sleep(0.01)
        return web.Response(text=str(total))

    size = 8 * 1024 * 1024

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(b"POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % size)
        for _ in range(size // (1024 * 1024)):
            writer.write(b"z" * 1024 * 1024)
            await writer.drain()
        return await _answer(reader)

    status, _, body = _talk(chat, routes=[web.post("/slow", slow)])  # type: ignore[misc]
    assert (status, body) == (200, str(size).encode())
    # at most the buffer and what one read from the socket brings beyond it
    assert max(held) <= web.BODY_BUFFER_BYTES + 256 * 1024, max(held)


def test_a_client_gone_mid_body_ends_the_handlers_read() -> None:
    ended: list[BaseException] = []
    began = asyncio.Event()

    async def reader_of(request: web.Request) -> web.StreamResponse:
        began.set()
        try:
            await request.read()
        except BaseException as exc:
            ended.append(exc)
            raise
        return web.Response()

    async def run() -> None:
        served = web.Server([web.post("/r", reader_of)], max_body=1 << 20, keepalive=30, linger=1)
        server = await asyncio.get_running_loop().create_server(served.connection, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /r HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc")
        await asyncio.wait_for(began.wait(), 5)
        writer.close()
        for _ in range(100):
            if ended and not served.connections:
                break
            await asyncio.sleep(0.05)
        server.close()

    asyncio.run(run())
    assert len(ended) == 1 and isinstance(ended[0], ConnectionResetError)


def test_headers_are_read_case_insensitively_every_value_kept() -> None:
    headers = web.Headers([("X-A", "1"), ("x-a", "2"), ("Other", "3")])
    assert headers["x-A"] == "1" and headers.get("X-A") == "1"
    assert headers.getall("X-a") == ["1", "2"] and headers.getall("nope", []) == []
    assert "OTHER" in headers and "none" not in headers and len(headers) == 2
    assert sorted(headers) == ["other", "x-a"] and len(list(headers)) == len(headers)


def test_a_whole_answers_content_type_says_its_charset_for_text_only() -> None:
    text = web.Response(text="é")
    assert text.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert text.body == "é".encode()
    body = web.Response(body=b"{}", content_type="application/json")
    assert body.headers["Content-Type"] == "application/json"


def test_the_first_route_that_matches_serves_as_the_webhook_port_lists_them() -> None:
    """Progress reports are routed before the webhook port's catch-all POST."""

    async def named(request: web.Request) -> web.StreamResponse:
        return web.Response(text="named " + request.match_info["x"])

    async def rest(request: web.Request) -> web.StreamResponse:
        return web.Response(text="rest " + request.match_info["path"])

    routes = [web.post("/a/{x}", named), web.post("/{path:.*}", rest)]

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(_request("POST", "/a/1") + _request("POST", "/b"))
        return (await _answer(reader))[2], (await _answer(reader))[2]

    assert _talk(chat, routes=routes) == (b"named 1", b"rest b")


def test_a_stream_prepared_twice_sends_its_head_once_and_a_busy_close_says_so() -> None:
    """A second `prepare` is nothing; a connection told to close while its request is under
    way says `Connection: close` in that answer, then closes."""

    async def twice(request: web.Request) -> web.StreamResponse:
        assert request.protocol is not None
        request.protocol.close()  # before its answer begins
        response = web.StreamResponse()
        await response.prepare(request)
        await response.prepare(request)
        await response.write(b"once")
        await response.write_eof()
        return response

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(_request("GET", "/twice"))
        status, headers, body = await _answer(reader)
        return status, headers.get("connection"), body, await reader.read()

    assert _talk(chat, routes=[web.get("/twice", twice)]) == (200, "close", b"once", b"")


def test_what_follows_a_request_that_closes_is_not_read_and_its_answer_goes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`Connection: close` (or HTTP/1.0): the client sends nothing more. Bytes that follow
    anyway are left unread; the request gets its own answer, and nothing is logged as failed.
    Before: they were parsed, refused 400 in its place, and the answer logged as an error."""

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(
            _request("POST", "/echo/a", b"xy", "Connection: close") + _request("GET", "/echo/b")
        )
        answer = await _answer(reader)
        return answer[0], eval(answer[2])["match"], await reader.read()

    with caplog.at_level(logging.WARNING):
        assert _talk(chat) == (200, {"name": "a"}, b"")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.records


@pytest.mark.parametrize(
    "target",
    ["http://evil/echo/a", "evil/echo/a", "/echo/a%00b", "/echo/%0d%0aX", "*"],
)
def test_a_target_that_is_no_plain_path_is_refused_400(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Only `/path?query` reaches a route: no scheme or host before the path (which would be
    dropped, the path the handler sees not the one sent), no control character in it. Before:
    `http://evil/echo/a` was routed as `/echo/a`."""

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(_request("GET", target))
        status, _, _ = await _answer(reader)
        return status, await reader.read()

    with caplog.at_level(logging.WARNING):
        assert _talk(chat) == (400, b"")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.records


def test_a_path_beginning_with_two_slashes_is_that_path_not_a_host_and_a_path() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(_request("GET", "//evil/echo/a") + _request("GET", "//[evil/echo/a"))
        return (await _answer(reader))[0], (await _answer(reader))[0]

    assert _talk(chat) == (404, 404)


def test_a_request_framed_both_by_length_and_chunks_is_refused_400() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(
            b"POST /echo/a HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        )
        return (await _answer(reader))[0], await reader.read()

    assert _talk(chat) == (400, b"")


def test_a_body_whose_chunks_break_midway_fails_its_read_and_is_refused_400() -> None:
    """The handler never takes the part that came for the whole body."""
    bodies: list[bytes] = []

    async def keep(request: web.Request) -> web.StreamResponse:
        bodies.append(await request.read())
        return web.Response()

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(b"POST /keep HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"3\r\n{}x\r\n")
        await asyncio.sleep(0.2)  # the handler reads what came
        writer.write(b"zz\r\n")  # no chunk size
        return (await _answer(reader))[0], await reader.read()

    assert _talk(chat, routes=[web.post("/keep", keep)]) == (400, b"")
    assert bodies == []


def test_a_client_that_reads_no_answer_is_not_answered_ahead_without_bound() -> None:
    """Requests pipelined by a client that reads nothing: each answer waits for the one
    before it to leave, so what is held for that client stays near asyncio's 64 KiB mark
    (and one answer), not every answer it asked for."""
    answer = b"a" * 64 * 1024
    held: list[int] = []

    async def big(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        held.append(request.transport.get_write_buffer_size())
        return web.Response(body=answer)

    async def run() -> None:
        served = web.Server([web.get("/big", big)], max_body=1024, keepalive=30, linger=1)
        server = await asyncio.get_running_loop().create_server(served.connection, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
        _, writer = await asyncio.open_connection(sock=sock)
        writer.write(_request("GET", "/big") * 400)  # 26 MB of answers asked for
        await asyncio.sleep(2)
        writer.close()
        server.close()

    asyncio.run(run())
    assert held and max(held) <= 64 * 1024 + len(answer), max(held)


def test_a_head_refused_400_is_answered_without_a_body() -> None:
    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(b"HEAD http://evil/echo/a HTTP/1.1\r\nHost: t\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        return head.split(b"\r\n")[0], await reader.read()

    assert _talk(chat) == (b"HTTP/1.1 400 Bad Request", b"")


def test_a_broken_body_is_refused_naming_what_broke_it_and_at_once_if_unread() -> None:
    """The 400 says what was wrong with the body (not what h11 says of what came after),
    and a body dropped unread that breaks ends the connection then, not after the linger."""

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(b"POST /echo/a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"5\r\nhello\r\nZZ\r\n")
        return (await _answer(reader))[2]

    said = _talk(chat)
    assert b"peer state is ERROR" not in said and b"chunk" in said.lower(), said  # type: ignore[operator, union-attr]

    async def unread(request: web.Request) -> web.StreamResponse:
        return web.Response(text="not read")

    async def dropped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        writer.write(b"POST /unread HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"5\r\nhello\r\n")
        await _answer(reader)
        await asyncio.sleep(0.1)
        began = asyncio.get_running_loop().time()
        writer.write(b"ZZ\r\n")
        await reader.read()
        return asyncio.get_running_loop().time() - began

    took = _talk(dropped, routes=[web.post("/unread", unread)])
    assert took < 0.5, took  # the linger is 1 s


def test_a_client_reading_nothing_is_cut_off_and_what_it_was_sent_dropped() -> None:
    """A whole answer is held whole for a client that reads nothing; after the keep-alive
    it is cut off (not closed politely, which waits for it to read), and forgotten."""
    answer = b"b" * 8 * 1024 * 1024

    async def big(request: web.Request) -> web.StreamResponse:
        return web.Response(body=answer)

    async def run() -> tuple[int, bool]:
        served = web.Server([web.get("/big", big)], max_body=1024, keepalive=0.5, linger=1)
        server = await asyncio.get_running_loop().create_server(served.connection, "127.0.0.1", 0)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.sockets[0].getsockname()[1]))
        sock.sendall(_request("GET", "/big"))
        await asyncio.sleep(0.2)
        held = len(served.connections)
        await asyncio.sleep(1.5)  # the keep-alive and then some
        gone = not served.connections
        sock.close()
        server.close()
        return held, gone

    assert asyncio.run(run()) == (1, True)


def test_a_head_of_a_streamed_answer_is_its_head_alone(caplog: pytest.LogCaptureFixture) -> None:
    """A stream's writes to a HEAD send nothing (h11 refused them: two tracebacks logged and
    the connection cut, for any client asking HEAD of a followed log)."""

    async def chat(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> object:
        FIRST_PIECE_READ.clear()
        writer.write(_request("HEAD", "/stream"))
        head = await reader.readuntil(b"\r\n\r\n")
        writer.write(_request("GET", "/echo/a"))  # the connection goes on
        return head.split(b"\r\n")[0], (await _answer(reader))[0]

    with caplog.at_level(logging.WARNING):
        assert _talk(chat) == (b"HTTP/1.1 200 OK", 200)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.records
