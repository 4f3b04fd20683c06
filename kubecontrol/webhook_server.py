"""The admission webhook server: AdmissionReview v1 over HTTPS, one handler per path; and,
on the same port and certificate, an aggregated API when one is given (kubecontrol/aggregated.py).

A handler returns a `Verdict` that names the fields it sets, and the patch is those few
operations (kubecontrol/admission.py), never a copy of the object diffed against the changed
copy (docs/contributors/design.md, "Choices measured").

The server runs its own event loop in a thread of its own. Its port is taken at start-up (a
port in use is an error then), but it listens only once the caches its handlers read are
filled: until then connections are refused, as a Service sends nothing to a replica that is
not ready. A renewed certificate (CertKeeper rewrites the files) is picked up without a
restart or a gap: the files are checked every few seconds, and every TLS handshake takes the
newest certificate that loaded whole.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from kubebase.objects import Dict
from kubebase.shares import Held, Shares, make_room
from kubecontrol import web
from kubecontrol.admission import (
    REVIEW_FROM,
    Crowded,
    Verdict,
    refuse,
    review_problem,
    review_response,
)
from kubecontrol.aggregated import AggregatedApi
from kubecontrol.deadline import Deadline, DeadlinePassed

# Answers on the server's loop, so it must not block: see `in_thread`.
Handler = Callable[[Dict], Awaitable[Verdict]]
# Judges a review in a thread, by the deadline it is handed (kubecontrol/deadline.py).
Judge = Callable[[Dict, Deadline], Verdict]
log = logging.getLogger(__name__)
# An AdmissionReview of a CREATE holds one object, at most what etcd stores (1.5 MiB), and
# its JSON framing.
MAX_REVIEW_BYTES = 3 * 1024 * 1024
# An idle connection is closed after this: longer than the API server keeps one idle (90 s,
# Go's transport), so that it is the API server that closes it. Were it this server, a review
# sent as it closed would be lost, and the API server does not send a POST again.
KEEPALIVE_SECONDS = 100.0
# A new connection must have begun its first request within this (the API server sends one
# as soon as it connects). At most MAX_CONNECTIONS are kept (each holds its buffers). Beyond
# it a new connection is never turned away: the address holding the most connections gives
# one up, its longest idle or else its oldest (plugin/kubebase/shares.py), so that connections
# held by a pod that reaches the port, idle or trickling a body, never keep the API server out.
# A connection whose review is being judged is never the one given up: however many addresses
# hold connections, the API server's reviews under way are answered (a pod's own reviews under
# way are at most MAX_IN_FLIGHT_EACH). Unlike the probe port's (kubecontrol/serving.py), a
# newcomer from the address holding the most is not closed as it comes: here it costs no
# thread (one event loop serves them all), and that address may be the API server's own (on
# the manager, its log follows of the view API), whose new connection carries a review while
# one of its idle ones can give way.
FIRST_REQUEST_SECONDS = 10.0
MAX_CONNECTIONS = 1024
# Every request is answered, or its connection closed, within this of its headers: the API
# server gives up on a call after 60 s (its default request timeout; a webhook's is at most
# 30 s). Reviews and reports have shorter bounds of their own (READ_SECONDS, JUDGE_SECONDS),
# which answer first; this one holds for every route. A streamed answer (a log that follows)
# counts as answered once it begins. Checked every SWEEP_SECONDS.
REQUEST_SECONDS = 60.0
SWEEP_SECONDS = 1.0
# After an answer whose body was not read (a refusal of a slow or large one), the rest of the
# body is read and dropped for at most this long before the connection closes.
LINGER_SECONDS = 1.0
# Stopping: connections are closed once their answer is given, with `Connection: close`, and
# new ones still served for this long, the time the API server takes to stop sending to a
# replica that goes; then the port closes and the reviews under way get SHUTDOWN_SECONDS.
DRAIN_SECONDS = 2.0
SHUTDOWN_SECONDS = 10.0
HANDSHAKE_SECONDS = 10.0  # a TLS handshake, from the connection's start
# A review's body must arrive, and its verdict be made (the wait for a slot included), within
# these; at most MAX_IN_FLIGHT reviews are judged at once, at most MAX_IN_FLIGHT_EACH of them
# from one address (beyond it, 429 at once): reviews POSTed by a pod that reaches the port
# never take every slot from the API server's. A judge that blocks runs on one of the server's
# MAX_IN_FLIGHT threads, never the loop's default executor, and is handed the review's
# deadline: a review answered 503 stops its judge at its next check or API call, and one whose
# judge has not begun by then never runs.
READ_SECONDS = 10.0
JUDGE_SECONDS = 10.0
MAX_IN_FLIGHT = 32
MAX_IN_FLIGHT_EACH = 24
# How often the front proxy's CA is read again (the cluster may rotate it), in file checks.
TRUST_CHECKS = 12


@dataclass(frozen=True)
class InThread:
    """A route whose judge may block (it asks the API server): see `in_thread`."""

    judge: Judge


Route = Handler | InThread


def in_thread(judge: Judge) -> InThread:
    """A route judged by a function that may block: run on one of the server's judge threads,
    so its loop goes on serving, and handed the review's deadline."""
    return InThread(judge)


class WebhookServer(web.Hooks):
    def __init__(
        self,
        address: str,
        port: int,
        files: tuple[Path, Path],
        routes: Mapping[str, Route],
        ready: threading.Event,
        *,
        resource: tuple[str, str],
        operations: frozenset[str] = frozenset({"CREATE"}),
        check_seconds: float = 5.0,
        api: AggregatedApi | None = None,
        more: Sequence[web.RouteDef] = (),
    ) -> None:
        """`routes`: path -> handler of the AdmissionReview's `request`. Requests for another
        `resource` (group, plural) or operation are allowed unchanged. `api`: an aggregated
        API served under /apis. `more`: other HTTP routes, answered before the webhooks. Listens
        once `ready` is set."""
        self._address, self._files = address, files
        self._routes, self._ready = dict(routes), ready
        self._resource, self._operations = resource, operations
        self._check = check_seconds
        self._api = api
        self._more = list(more)
        self._digest = ""
        self._current: ssl.SSLContext | None = None
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)  # reviews judged at once
        self._judged = Shares(MAX_IN_FLIGHT, MAX_IN_FLIGHT_EACH, "reviews")  # by address
        # Connections whose review is being judged (at most MAX_IN_FLIGHT): never closed to
        # make room for a new connection.
        self._judging: set[web.Connection] = set()
        self._judges = ThreadPoolExecutor(MAX_IN_FLIGHT, thread_name_prefix="webhook-judge")
        self._closing = False
        self._fresh: set[web.Connection] = set()  # connections that have not asked yet
        # Each connection: since when it does what it does now (connected, asking, idle).
        self._since: dict[web.Connection, float] = {}
        # Those with a request not yet answered, since when.
        self._asking_since: dict[web.Connection, float] = {}
        self.port = port  # once started, the one bound (port 0: the system's choice)
        # Set once the server has stopped: every connection closed, or never started.
        self.stopped = threading.Event()

    def start(self, stop: threading.Event) -> None:
        """Load the certificate and take the port (OSError or ssl.SSLError here, naming what
        is wrong), then serve in a thread, once ready, until `stop` is set."""
        if self._api is not None:
            self._api.front_proxy.refresh()
        try:
            self._digest, front = self._digest_now(), self._load()
        except OSError as exc:  # ssl.SSLError is one
            raise ssl.SSLError(f"webhooks: cannot load {self._files[0]}: {exc}") from exc
        self._current = front
        front.sni_callback = self._pick_context
        sock = socket.socket(socket.AF_INET6 if ":" in self._address else socket.AF_INET)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._address, self.port))  # listen() comes once ready (_serve)
        except OSError as exc:
            sock.close()
            raise OSError(f"webhooks: cannot listen on {self._address}:{self.port}: {exc}") from exc
        self.port = sock.getsockname()[1]

        def run() -> None:
            try:
                while not self._ready.wait(0.2):
                    if stop.is_set():
                        sock.close()
                        return
                asyncio.run(self._serve(sock, front, stop))
            finally:
                self.stopped.set()

        threading.Thread(target=run, name="webhooks", daemon=True).start()

    def _pick_context(self, conn: Any, _server_name: str | None, _ctx: ssl.SSLContext) -> None:
        """At every handshake (with or without SNI): the newest certificate loaded."""
        if self._current is not None:
            conn.context = self._current

    def _digest_now(self) -> str:
        """What the served context is made of: the certificate files, and the front proxy's
        CA when an aggregated API is served."""
        parts = [p.read_bytes() for p in self._files]
        trust = self._api.front_proxy.trust if self._api is not None else None
        parts.append(trust.ca_pem.encode() if trust is not None else b"")
        return hashlib.sha256(b"".join(parts)).hexdigest()

    def _load(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*self._files)
        if self._api is not None:
            self._api.front_proxy.require_client_certificates(context)
        return context

    def _reload(self) -> None:
        """Serve the certificate files as they are now (and the front proxy's CA), when they
        changed since the last load and load whole (a key and certificate that do not match
        yet, mid-rewrite, wait for the next check)."""
        try:
            digest = self._digest_now()
            if digest == self._digest:
                return
            context = self._load()
        except OSError as exc:  # ssl.SSLError is one
            log.debug("webhook certificate not loaded (yet)", extra={"error": str(exc)})
            return
        log.info("webhook certificate reloaded", extra={"path": str(self._files[0])})
        self._digest, self._current = digest, context

    async def _serve(
        self, sock: socket.socket, context: ssl.SSLContext, stop: threading.Event
    ) -> None:
        routes = [*self._more, web.post("/{path:.*}", self._answer)]
        if self._api is not None:
            routes += self._api.routes()
        # An object may be as large as the API server stores (etcd's 1.5 MiB).
        served = web.Server(
            routes,
            max_body=MAX_REVIEW_BYTES,
            keepalive=KEEPALIVE_SECONDS,
            linger=LINGER_SECONDS,
            hooks=self,
        )
        loop = asyncio.get_running_loop()

        def connection() -> asyncio.Protocol:
            live = [self._held(h) for h in served.connections if not _closing(h)]
            victim = make_room(live, MAX_CONNECTIONS)
            if victim is not None:
                victim.force_close()
            handler = served.connection()
            self._fresh.add(handler)
            self._since[handler] = loop.time()
            loop.call_later(FIRST_REQUEST_SECONDS, self._asked_or_closed, handler)
            return handler

        # A connection that never sends a ClientHello is dropped after HANDSHAKE_SECONDS
        # (asyncio's own wait is 60 s).
        server = await loop.create_server(
            connection,
            sock=sock,
            ssl=context,
            ssl_handshake_timeout=HANDSHAKE_SECONDS,
            # a closed connection's TLS goodbye is waited for this long (asyncio's 30 s)
            ssl_shutdown_timeout=HANDSHAKE_SECONDS,
        )  # listens
        sweeping = asyncio.create_task(self._sweep(served))
        checks = 0
        try:
            while not await asyncio.to_thread(stop.wait, self._check):
                checks += 1
                if self._api is not None and checks % TRUST_CHECKS == 0:
                    await asyncio.to_thread(self._api.front_proxy.refresh)
                self._reload()
        finally:
            sweeping.cancel()
            await self._drain(server, served)

    def _held(self, handler: web.Connection) -> Held[web.Connection]:
        peer = handler.transport.get_extra_info("peername") if handler.transport else None
        source = peer[0] if isinstance(peer, tuple) and peer else peer
        kept = handler in self._judging
        return Held(handler, source, handler.idle, self._since.get(handler, 0.0), kept)

    async def _sweep(self, served: web.Server) -> None:
        """Every SWEEP_SECONDS: a request not answered within REQUEST_SECONDS has its
        connection closed; what is kept of closed connections is dropped."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            live = set(served.connections)
            late = loop.time() - REQUEST_SECONDS
            for handler, began in list(self._asking_since.items()):
                if handler not in live:
                    del self._asking_since[handler]
                elif began < late:
                    del self._asking_since[handler]
                    handler.force_close()
            for handler in [h for h in self._since if h not in live]:
                del self._since[handler]

    async def _drain(self, server: asyncio.Server, served: web.Server) -> None:
        """Stop without losing a review: each connection closes once idle (at once if it is),
        every answer from now on says `Connection: close`, and new connections are served
        for DRAIN_SECONDS; then the port closes, and the reviews under way get their answers
        (within SHUTDOWN_SECONDS) before the connections close."""
        self._closing = True
        for handler in list(served.connections):
            handler.close()  # now when idle; a busy one after its answer
        await asyncio.sleep(DRAIN_SECONDS)
        server.close()
        loop = asyncio.get_running_loop()
        until = loop.time() + SHUTDOWN_SECONDS
        while any(not h.idle for h in served.connections) and loop.time() < until:
            await asyncio.sleep(0.05)
        for handler in list(served.connections):
            handler.force_close()
        await asyncio.sleep(0)  # the closes begin before the loop ends
        self._judges.shutdown(wait=False, cancel_futures=True)

    def asking(self, connection: web.Connection) -> None:
        """A request has come: it must be answered within REQUEST_SECONDS (`_sweep`)."""
        self._fresh.discard(connection)
        now = asyncio.get_running_loop().time()
        self._since[connection] = self._asking_since[connection] = now

    def _asked_or_closed(self, handler: web.Connection) -> None:
        """A connection that has asked nothing by now is closed: the keep-alive between
        requests is long (KEEPALIVE_SECONDS), the wait for the first one is not."""
        if handler in self._fresh:
            self._fresh.discard(handler)
            handler.force_close()

    def answering(self, request: web.Request, response: web.StreamResponse) -> None:
        """The request is answered (its deadline no longer runs); while stopping, the
        connection closes after this answer, and the answer says so (its headers are made,
        not yet sent)."""
        conn = request.protocol
        if conn is not None:
            self._asking_since.pop(conn, None)
            self._since[conn] = asyncio.get_running_loop().time()
        if self._closing:
            response.force_close()

    async def _answer(self, request: web.Request) -> web.Response:
        handler = self._routes.get(request.path)
        if handler is None:
            raise web.HTTPError(404, f"no webhook at {request.path}\n")
        try:
            review = orjson.loads(await asyncio.wait_for(request.read(), READ_SECONDS))
        except orjson.JSONDecodeError as exc:
            raise web.HTTPError(400, f"not an AdmissionReview: {exc}\n") from None
        except TimeoutError:
            raise web.HTTPError(408, "the AdmissionReview came too slowly\n") from None
        admission = review.get("request") if isinstance(review, dict) else None
        if not isinstance(admission, dict) or not admission.get("uid"):
            raise web.HTTPError(400, "not an AdmissionReview: it has no request.uid\n")
        source, conn = request.remote or "", request.protocol
        assert conn is not None  # a request the server took
        with self._judged.slot(source) as refused:
            if refused is not None:
                verdict = refuse(refused, code=429)
            else:
                self._judging.add(conn)  # never closed to make room meanwhile
                # (this request's task only: whose allowance of uncached reads it spends)
                REVIEW_FROM.set((source, str(admission.get("namespace") or "")))
                try:
                    verdict = await self._judged_in_time(request.path, handler, admission)
                finally:
                    self._judging.discard(conn)
        return web.Response(
            body=orjson.dumps(review_response(review, verdict)), content_type="application/json"
        )

    def _judged_here(self, admission: Dict) -> bool:
        """Is the request about the resource and operations this server judges?"""
        resource = admission.get("resource")
        if not isinstance(resource, dict):  # a forged review's: nothing to judge
            return False
        kind = (resource.get("group"), resource.get("resource"))
        operation = admission.get("operation")
        return (
            kind == self._resource and isinstance(operation, str) and operation in self._operations
        )

    async def _judged_in_time(self, path: str, handler: Route, admission: Dict) -> Verdict:
        """The verdict within JUDGE_SECONDS, the wait for a slot included, else a 503; a judge
        still at work then is told to give up."""
        deadline = Deadline(JUDGE_SECONDS)
        late = refuse(f"no verdict within {JUDGE_SECONDS:g}s; try again", code=503)
        try:
            async with asyncio.timeout(JUDGE_SECONDS), self._slots:
                return await self._verdict(path, handler, admission, deadline)
        except (TimeoutError, DeadlinePassed):
            return late
        finally:
            deadline.give_up()

    async def _verdict(
        self, path: str, handler: Route, admission: Dict, deadline: Deadline
    ) -> Verdict:
        if not self._judged_here(admission):
            return Verdict()
        problem = review_problem(admission)  # before anything is looked up: names become paths
        if problem is not None:
            return refuse(problem, code=400)
        try:
            if isinstance(handler, InThread):
                context = contextvars.copy_context()  # REVIEW_FROM, on the judge's thread
                return await asyncio.get_running_loop().run_in_executor(
                    self._judges, context.run, _judge_by, handler.judge, admission, deadline
                )
            return await handler(admission)
        except DeadlinePassed:
            raise
        except Crowded as exc:
            return refuse(str(exc), 429)
        except Exception as exc:  # a bug, or the API server away: refused, saying why
            meta = (admission.get("object") or {}).get("metadata") or {}
            log.exception(
                "webhook failed",
                extra={"path": path, "object": f"{admission.get('namespace')}/{meta.get('name')}"},
            )
            return refuse(f"the webhook {path} failed: {type(exc).__name__}: {exc}", 500)


def _judge_by(judge: Judge, admission: Dict, deadline: Deadline) -> Verdict:
    """On a judge thread: the verdict, unless the review's time ran out while it waited."""
    deadline.check("judging")
    return judge(admission, deadline)


def _closing(handler: web.Connection) -> bool:
    transport = handler.transport
    return transport is None or bool(transport.is_closing())
