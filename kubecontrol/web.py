"""HTTP/1.1 on the controllers' ports (the webhooks, the aggregated API, progress reports):
requests and answers over asyncio, the protocol itself parsed and framed by h11.

Why not aiohttp, which served these ports up to 0.3.0: importing it cost each controller
process about 16 MiB of memory beyond asyncio (its client, cookie jar, tracing and web
framework come with its server), held by every replica for as long as it runs; h11 costs
0.4 MiB. What these ports need of a server is small (a few routes, bodies of a bounded size,
one streamed answer), and the policies that keep them open to the API server whatever a pod
sends (deadlines, room made by the address holding most) are the webhook server's own
(kubecontrol/webhook_server.py), written against the `Connection` here. Figures:
docs/contributors/design.md, "Choices measured".

What a handler sees is a `Request` (its path, decoded; the query, the first value of each
key; headers case-insensitive, every value of one kept; its body read whole up to the
server's limit, or piece by piece) and what it gives back is a `Response`, or a
`StreamResponse` it has begun and writes to as the data comes. A route is a method and a
path template (`/apis/{path:.*}`, `/namespaces/{namespace}/...`); GET routes answer HEAD too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote

import h11

log = logging.getLogger(__name__)

# A request's line and headers together (h11's bound on what it buffers before they end;
# beyond it, 431). Go's http.Server allows 1 MiB; the API server's calls carry a few hundred
# bytes, a pod's report a token of about 1 KiB.
MAX_HEAD_BYTES = 16 * 1024
# A body is buffered up to this much ahead of the handler that reads it; beyond it, reading
# from the connection pauses until the handler takes some.
BODY_BUFFER_BYTES = 256 * 1024


class HTTPError(Exception):
    """An answer of `status` with `text` as its body, raised from a handler."""

    def __init__(self, status: int, text: str = "") -> None:
        super().__init__(status, text)
        self.status, self.text = status, text or f"{HTTPStatus(status).phrase}\n"


class Headers(Mapping[str, str]):
    """A request's headers: names case-insensitive; `get` and `[]` give a header's first
    value, `getall` every one (a header may come more than once)."""

    def __init__(self, pairs: Sequence[tuple[str, str]]) -> None:
        self._pairs = [(name.lower(), value) for name, value in pairs]
        self._first: dict[str, str] = {}
        for name, value in self._pairs:
            self._first.setdefault(name, value)

    def __getitem__(self, name: str) -> str:
        return self._first[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._first

    def __iter__(self) -> Iterator[str]:
        return iter(self._first)

    def __len__(self) -> int:
        return len(self._first)

    def get(self, name: str, default: Any = None) -> Any:
        return self._first.get(name.lower(), default)

    def getall(self, name: str, default: Any = ...) -> list[str]:
        values = [value for key, value in self._pairs if key == name.lower()]
        if values or default is ...:
            if not values:
                raise KeyError(name)
            return values
        return list(default)


class Request:
    """One request: what it asks, of which path, with which headers; its body read by the
    handler (`read`, `read_some`)."""

    def __init__(
        self,
        method: str,
        target: str,
        headers: Sequence[tuple[str, str]],
        connection: Connection | None = None,
        *,
        transport: Any = None,
    ) -> None:
        self.method = method
        # Origin form only (`/path?query`), what the API server and pods send: no scheme or
        # host in front of the path, nothing in it that decodes to a control character.
        if not target.startswith("/"):
            raise ValueError(f"the target {target[:64]!r} is not a path")
        path, _, rest = target.partition("?")
        self.path = unquote(path)
        if not self.path.isprintable():
            raise ValueError("the path holds a control character")
        query: dict[str, str] = {}
        for key, value in parse_qsl(rest.partition("#")[0], keep_blank_values=True):
            query.setdefault(key, value)  # the first value of a key, as aiohttp's get gave
        self.query: Mapping[str, str] = query
        self.headers = Headers(headers)
        self.match_info: dict[str, str] = {}
        self.protocol = connection  # the connection it came on (one request at a time)
        self._transport = transport

    @property
    def transport(self) -> Any:
        """The connection's transport (its peer's address and certificate); closing once the
        connection is lost."""
        if self.protocol is not None:
            return self.protocol.transport
        return self._transport

    @property
    def remote(self) -> str | None:
        """The address of the peer, without its port."""
        transport = self.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        if isinstance(peer, (tuple, list)) and peer:
            return str(peer[0])
        return str(peer) if peer else None

    @property
    def content_length(self) -> int | None:
        raw = self.headers.get("Content-Length")
        return int(raw) if raw is not None and raw.isdigit() else None

    async def read(self) -> bytes:
        """The whole body, up to the server's limit (413 beyond it, unread)."""
        if self.protocol is None:
            return b""
        limit = self.protocol.server.max_body
        if (self.content_length or 0) > limit:
            raise HTTPError(413, f"a body is at most {limit} bytes\n")
        body = bytearray()
        while piece := await self.read_some(limit + 1 - len(body)):
            body += piece
            if len(body) > limit:
                raise HTTPError(413, f"a body is at most {limit} bytes\n")
        return bytes(body)

    async def read_some(self, most: int) -> bytes:
        """Up to `most` bytes of the body, as soon as some have come; b"" at its end.
        ConnectionResetError when the connection is lost before."""
        if self.protocol is None:
            return b""
        return await self.protocol.body_piece(most)


class StreamResponse:
    """An answer whose body is written as it comes: `prepare` sends the status and headers,
    `write` a piece (waiting while the client reads slower), `write_eof` the end."""

    def __init__(self, *, status: int = 200, headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.headers: dict[str, str] = dict(headers or {})
        self.body = b""
        self._connection: Connection | None = None
        self.prepared = self.ended = False
        self.closes = False  # the connection closes once this is answered

    def force_close(self) -> None:
        self.closes = True

    async def prepare(self, request: Request) -> None:
        if self.prepared:
            return
        self.prepared = True
        self._connection = request.protocol
        if self._connection is not None:
            self._connection.begin_answer(request, self, length=None)

    async def write(self, data: bytes) -> None:
        if self._connection is not None and data:
            await self._connection.send_body(data)

    async def write_eof(self) -> None:
        if self.ended:
            return
        self.ended = True
        if self._connection is not None:
            self._connection.end_answer()


class Response(StreamResponse):
    """A whole answer: `body` (bytes) or `text` (UTF-8), of `content_type`."""

    def __init__(
        self,
        *,
        status: int = 200,
        body: bytes | None = None,
        text: str | None = None,
        content_type: str | None = None,
        charset: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status=status, headers=headers)
        if text is not None:
            self.body = text.encode(charset or "utf-8")
            content_type, charset = content_type or "text/plain", charset or "utf-8"
        else:
            self.body = body or b""
        if content_type is not None:
            self.headers["Content-Type"] = (
                f"{content_type}; charset={charset}" if charset else content_type
            )


Handler = Callable[[Request], Awaitable[StreamResponse]]


@dataclass(frozen=True)
class RouteDef:
    """A method and a path template: `{name}` matches one segment, `{name:.*}` the rest."""

    method: str
    path: str
    handler: Handler

    def pattern(self) -> re.Pattern[str]:
        parts, at = [], 0
        for field in re.finditer(r"\{(\w+)(?::([^{}]+))?\}", self.path):
            parts += [re.escape(self.path[at : field.start()])]
            parts += [f"(?P<{field[1]}>{field[2] or '[^/]+'})"]
            at = field.end()
        return re.compile("".join([*parts, re.escape(self.path[at:])]) + r"\Z")


def get(path: str, handler: Handler) -> RouteDef:
    return RouteDef("GET", path, handler)


def post(path: str, handler: Handler) -> RouteDef:
    return RouteDef("POST", path, handler)


class Router:
    """The first route whose template matches the path and whose method is the request's;
    405 when only another method's matches, 404 when none does."""

    def __init__(self, routes: Sequence[RouteDef]) -> None:
        self._routes = [(route, route.pattern()) for route in routes]

    def resolve(self, request: Request) -> Handler:
        method = "GET" if request.method == "HEAD" else request.method
        other = False
        for route, pattern in self._routes:
            found = pattern.match(request.path)
            if found is None:
                continue
            if route.method != method:
                other = True
                continue
            request.match_info = {k: v for k, v in found.groupdict().items() if v is not None}
            return route.handler
        if other:
            raise HTTPError(405, f"{request.method} is not allowed on {request.path}\n")
        raise HTTPError(404, f"nothing is served at {request.path}\n")


class Hooks:
    """What the server that owns the connections is told of each (all on the loop)."""

    def asking(self, connection: Connection) -> None:
        """A request has come whole (its line and headers)."""

    def answering(self, request: Request, response: StreamResponse) -> None:
        """An answer's status and headers are about to be sent (they may still change)."""


class Server:
    """The routes, the bounds of a request, and the connections open now; `connection` makes
    the protocol of each new one (for `loop.create_server`)."""

    def __init__(
        self,
        routes: Sequence[RouteDef],
        *,
        max_body: int,
        keepalive: float,
        linger: float,
        hooks: Hooks | None = None,
    ) -> None:
        self.router = Router(routes)
        self.max_body, self.keepalive, self.linger = max_body, keepalive, linger
        self.hooks = hooks or Hooks()
        self.connections: set[Connection] = set()

    def connection(self) -> Connection:
        return Connection(self)


class Connection(asyncio.Protocol):
    """One client's connection: its requests answered one at a time, in order (pipelined
    ones wait their turn, unread). `idle`: no request under way. `close` ends it once the
    request under way is answered (at once when idle); `force_close` ends it now."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self._request: Request | None = None
        self._task: asyncio.Task[None] | None = None  # the request's: held while it runs
        self._body = bytearray()
        self._body_ended = False
        self._arrived = asyncio.Event()  # more body, its end, or the connection lost
        self._paused = False  # reading paused: the body buffered is BODY_BUFFER_BYTES
        self._drained: asyncio.Future[None] | None = None  # writing paused by the transport
        self._keepalive: asyncio.TimerHandle | None = None
        self._closing = False  # close once the request under way is answered
        self._broken: h11.RemoteProtocolError | None = None  # the request's body, malformed
        self._dropping = False  # the body is read only to be dropped (`_next`)
        self._head_only = False  # the answer under way is to a HEAD: its head alone
        self.lost = False

    # -- the server's view

    @property
    def idle(self) -> bool:
        """Waiting for a request (its first, or its next): none under way."""
        return self._request is None and not self.lost

    def close(self) -> None:
        self._closing = True
        if self.idle:
            self.force_close()

    def force_close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # -- asyncio's protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.server.connections.discard(self)
        if self._keepalive is not None:
            self._keepalive.cancel()
        self._arrived.set()  # a handler reading the body learns it is lost
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        if self._drained is None or self._drained.done():
            self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def data_received(self, data: bytes) -> None:
        try:
            self._h11.receive_data(data)
        except h11.RemoteProtocolError:  # data after the peer said it was done
            self.force_close()
            return
        self._events()

    def eof_received(self) -> bool | None:
        with contextlib.suppress(h11.RemoteProtocolError):
            self._h11.receive_data(b"")
        self._events()
        return None  # the transport closes itself

    # -- reading

    def _events(self) -> None:
        """Take what h11 has parsed: a request begins a handler; its body feeds it."""
        while self.transport is not None and not self.lost:
            if self._request is not None and self._h11.their_state is h11.MUST_CLOSE:
                self._pause()  # it said it sends nothing more: what follows is not read
                return
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                self._refuse(exc)
                return
            if event is h11.NEED_DATA:
                self._pause_if_full()
                return
            if event is h11.PAUSED:  # another request behind this one: it waits, unread
                self._pause()
                return
            if isinstance(event, h11.Request):
                self._begin(event)
            elif isinstance(event, h11.Data):
                if not self._dropping:
                    self._body += event.data
                self._arrived.set()
            elif isinstance(event, h11.EndOfMessage):
                self._body_ended = True
                self._arrived.set()
            elif isinstance(event, h11.ConnectionClosed):
                self._body_ended = True
                self._arrived.set()
                if self._request is None:
                    self.force_close()
                return

    def _pause_if_full(self) -> None:
        if len(self._body) >= BODY_BUFFER_BYTES:
            self._pause()

    def _pause(self) -> None:
        if not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def _resume(self) -> None:
        if self._paused and self.transport is not None and not self.lost:
            self._paused = False
            self.transport.resume_reading()

    def _resume_if_room(self) -> None:
        if self._paused and len(self._body) < BODY_BUFFER_BYTES:
            self._resume()
            self._events()

    async def body_piece(self, most: int) -> bytes:
        while True:
            if self._body:
                piece = bytes(self._body[:most])
                del self._body[:most]
                self._resume_if_room()
                return piece
            if self._broken is not None:
                raise ConnectionResetError(f"the request's body is malformed: {self._broken}")
            if self._body_ended:
                return b""
            if self.lost:
                raise ConnectionResetError("the connection was lost")
            if self._h11.they_are_waiting_for_100_continue and self.transport is not None:
                self._write(h11.InformationalResponse(status_code=100, headers=[]))
            self._arrived.clear()
            await self._arrived.wait()

    def _refuse(self, exc: h11.RemoteProtocolError) -> None:
        """A request h11 cannot take (malformed, or its head too long): answered with the
        status h11 suggests, then closed. When what breaks is the body of a request whose
        handler runs, the handler's read fails there (never a body cut short taken whole),
        and the answer is the refusal."""
        if self._request is not None:
            self._broken = self._broken or exc  # the first: what follows is its echo
            self._pause()
            self._arrived.set()
            return
        self._reject(exc.error_status_hint, str(exc))

    def _reject(self, status: int, why: str, method: str = "") -> None:
        """Answer `status` saying why, whatever was asked (a HEAD without the body), and
        close."""
        if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE) and self.transport is not None:
            body = f"{HTTPStatus(status).phrase}: {why}\n".encode()
            headers = [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
            ]
            try:
                phrase = HTTPStatus(status).phrase.encode()
                events: list[Any] = [
                    h11.Response(status_code=status, headers=headers, reason=phrase)
                ]
                if method != "HEAD":
                    events.append(h11.Data(data=body))
                self._write(*events, h11.EndOfMessage())
            except h11.LocalProtocolError:
                pass
        self.force_close()

    # -- answering

    def _begin(self, event: h11.Request) -> None:
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers]
        method, target = event.method.decode("ascii"), event.target.decode("latin-1")
        framing = {name for name, _ in headers} & {"content-length", "transfer-encoding"}
        try:
            if len(framing) == 2:  # RFC 9112 6.3: a request framed two ways is refused
                raise ValueError("Content-Length and Transfer-Encoding both given")
            request = Request(method, target, headers, self)
        except ValueError as exc:
            self._reject(400, str(exc), method)
            return
        self._request = request
        self._body.clear()
        self._body_ended = False
        self._dropping = False
        self.server.hooks.asking(self)
        self._task = asyncio.get_running_loop().create_task(self._serve(request))

    async def _serve(self, request: Request) -> None:
        try:
            await self._serve_one(request)
        except ConnectionResetError:  # lost mid-request, or its body malformed
            if self._broken is not None:
                self._reject(self._broken.error_status_hint, str(self._broken))
            self.force_close()
        except Exception:  # h11 refusing what was sent: a bug here, not the client's
            log.exception("answer not sent", extra={"path": request.path})
            self.force_close()

    async def _serve_one(self, request: Request) -> None:
        response = await self._respond(request)
        if self.lost:
            return
        if not response.prepared:  # a whole answer: one write, its head and body together
            response._connection = self
            response.prepared = response.ended = True
            events: list[Any] = [self._head(request, response, len(response.body))]
            if response.body and request.method != "HEAD":
                events.append(h11.Data(data=response.body))
            self._write(*events, h11.EndOfMessage())
            await self._drain()  # a client that reads no answer gets no next one
        if not response.ended:
            response.ended = True
            self.end_answer()
        await self._next(response)

    async def _respond(self, request: Request) -> StreamResponse:
        try:
            handler = self.server.router.resolve(request)
            return await handler(request)
        except HTTPError as exc:
            return Response(status=exc.status, text=exc.text)
        except ConnectionResetError:
            raise
        except Exception:
            log.exception("request failed", extra={"path": request.path})
            return Response(status=500, text="Internal Server Error\n")

    def begin_answer(self, request: Request, response: StreamResponse, length: int | None) -> None:
        self._head_only = request.method == "HEAD"  # what a stream writes is not sent
        self._write(self._head(request, response, length))

    def _head(self, request: Request, response: StreamResponse, length: int | None) -> h11.Response:
        self.server.hooks.answering(request, response)
        if self._closing:
            response.force_close()
        if response.closes:
            response.headers["Connection"] = "close"
        headers = [(k, v) for k, v in response.headers.items() if k.lower() != "content-length"]
        if length is not None and response.status not in (204, 304):
            headers.append(("Content-Length", str(length)))
        try:
            reason = HTTPStatus(response.status).phrase.encode()
        except ValueError:
            reason = b""
        return h11.Response(status_code=response.status, headers=headers, reason=reason)

    async def send_body(self, data: bytes) -> None:
        if self.lost:
            raise ConnectionResetError("the connection was lost")
        if not self._head_only:
            self._write(h11.Data(data=data))
            await self._drain()

    async def _drain(self) -> None:
        """Wait while the client reads slower than it is answered (asyncio's transport says so
        past 64 KiB held; an answer written whole is held whole); one that reads nothing for
        the server's keep-alive is cut off, what is held for it dropped."""
        if self._drained is not None and not self._drained.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._drained), self.server.keepalive)
            except TimeoutError:
                if self.transport is not None:
                    self.transport.abort()  # close() would wait for the client to read it
                raise ConnectionResetError("the client read nothing of its answer") from None

    def end_answer(self) -> None:
        if not self.lost:
            self._write(h11.EndOfMessage())

    def _write(self, *events: Any) -> None:
        data = b"".join(self._h11.send(event) or b"" for event in events)
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    async def _next(self, response: StreamResponse) -> None:
        """After an answer: the next request, or the end. A body the handler left unread is
        read and dropped for the server's `linger` first (the client may still be sending
        it, and reads the answer only once it has); what is left then closes the connection."""
        if self._h11.their_state is h11.SEND_BODY and not self._closing:
            self._dropping = True
            self._body.clear()
            self._resume()
            loop = asyncio.get_running_loop()
            until = loop.time() + self.server.linger
            while not (self._body_ended or self._broken or self.lost) and loop.time() < until:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), until - loop.time())
                except TimeoutError:
                    break
            self._dropping = False
        self._request, self._task = None, None
        if self.lost:
            return
        if self._closing or response.closes or self._h11.our_state is not h11.DONE:
            self.force_close()
            return
        if self._h11.their_state is not h11.DONE:
            self.force_close()
            return
        self._h11.start_next_cycle()
        self._resume()
        self._keepalive = asyncio.get_running_loop().call_later(
            self.server.keepalive, self._expired
        )
        self._events()  # a request already sent behind this one

    def _expired(self) -> None:
        if self.idle:
            self.force_close()
