"""A progress report's body is read whole however it arrives (worker_controller/progress.py),
on a loopback server: in pieces with pauses, or chunked with no length said."""

from __future__ import annotations

import asyncio

from kubecontrol import web
from tests.support.plain_server import serving
from worker_controller.progress import _body

LIMIT = 64


async def _serve_and_send(pieces: list[bytes], headers: bytes) -> bytes:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=str(len(await _body(request, LIMIT))))

    async with serving([web.post("/r", handler)]) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /r HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + b"\r\n")
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.1)  # each piece on its own: the server sees it alone
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        return answer.rsplit(b"\r\n\r\n", 1)[1]


def test_a_body_in_pieces_is_read_whole() -> None:
    """Before: one read returned the first piece only, and the report was 'not JSON'."""
    pieces = [b"a" * 10, b"b" * 10, b"c" * 10]
    assert asyncio.run(_serve_and_send(pieces, b"Content-Length: 30\r\n")) == b"30"


def test_a_chunked_body_is_read_up_to_one_byte_past_the_limit() -> None:
    chunks = [b"%x\r\n%s\r\n" % (40, b"x" * 40)] * 3 + [b"0\r\n\r\n"]
    said = asyncio.run(_serve_and_send(chunks, b"Transfer-Encoding: chunked\r\n"))
    assert said == str(LIMIT + 1).encode()  # the caller refuses it: 413
