"""A small Kubernetes API client: credentials from a kubeconfig or the pod's service account,
JSON requests and watches over libcurl (pycurl), JSON decoded by orjson. Why not urllib3 or
the kubernetes client's package: docs/contributors/design.md, "Choices measured".

A request is carried out on the caller's thread, over HTTP/1.1 (libcurl's own loop, in C: the
cheapest in CPU), on a handle from a small pool per cluster, each keeping its connection open
(libcurl's rule for threads: one request at a time per handle). A cluster's streams (watches,
followed logs), which each hold a connection for as long as they last, are transfers of one
libcurl multi handle driven by a thread of its own (`kubecontrol/transfers.py`): over HTTP/2
they share one connection, as client-go's do. A watch's events are decoded and handed on as
the pump receives them, on its thread, while the thread that asked waits (`ApiClient.watch`):
handing each piece to that thread cost more CPU than the event's own work. A followed log is
handed over to its reader's thread, whose pace is a tenant's (`ApiClient.stream`).

Our controllers send JSON to a few dozen paths and read JSON back; they never use API models,
and their entry points keep the kubernetes client's package out (`keep_kubernetes_client_out`),
should a library they load try to import it. The kubectl plugin and the tests still use the
kubernetes client: they are short-lived, and users' kubeconfigs may need its exec plugins.

What is supported is what Kueue accepts in a MultiKueue kubeconfig and what a pod has: a
server, its CA (data or file) or `insecure-skip-tls-verify` (a YAML boolean; a string is
refused, as client-go refuses it), `tls-server-name` (a host name or an IP address, anything
else refused; for requests it is also the Host header: libcurl checks the certificate against
the URL's host), `proxy-url`, a bearer token (or
`tokenFile`, re-read every minute as kubelet rotates it, and at once after a 401), a token
from an exec credential plugin (`kubecontrol/exec_credentials.py`), a client certificate and
key (each from data or a file; data wins, as in client-go), and impersonation (`as`, `as-uid`,
`as-groups`, `as-user-extra`). A kubeconfig that needs anything else (auth providers, basic
auth) is refused with the field named, never half used. Which of these a MultiKueue worker's
kubeconfig may use is Kueue's rule, applied before (`plugin/kubebase/kubeconfig.py`).
"""

from __future__ import annotations

import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import orjson
import pycurl

from kubebase.kinds import checked_path
from kubebase.objects import Dict
from kubecontrol.credentials import Credentials, KubeconfigError
from kubecontrol.exec_credentials import ExecTokens
from kubecontrol.transfers import OPENED, Transfer, Transfers
from kubecontrol.version import DISTRIBUTION, VERSION

TOKEN_REREAD_SECONDS = 60.0  # kubelet refreshes a projected token well before it expires
USER_AGENT = f"{DISTRIBUTION}/{VERSION} (python)"
JSON = "application/json"
# Only the objects' metadata, for any kind (what client-go's metadata informers ask for).
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
# Idle curl handles kept per cluster for requests, each with its connection open: as many as
# the dispatcher's reconcile threads (16 by default), which may all write to one cluster at
# once. A busier moment opens more; those beyond this are closed after use. libcurl gives each
# connection an OpenSSL context of its own (its read buffer alone 64 KiB): an idle handle costs
# about 155 KiB against the bed's API server (benchmarks/connections.py).
IDLE_HANDLES = 16
# A connection not made in 10 s fails (client-go dials for 30 s; an API server that answers
# nothing for 10 s is down for our purposes, and the caller retries).
CONNECT_TIMEOUT_MS = 10_000
# Idle connections are probed after 30 s, every 10 s: a peer gone without a word (a node lost,
# a NAT entry dropped) is noticed by the kernel, not by a request that waits on it.
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL = 30, 10
# The buffer a handle sends a request's body from: libcurl's least. Its default (64 KiB) stays
# allocated on every handle that has written once, for as long as the handle is kept idle; a
# body larger than this goes out in pieces of it.
UPLOAD_BUFFER = 16 * 1024
# A request whose answer stops coming for this long fails, whatever its own timeout (a watch,
# which may be quiet for a minute, is bounded by its timeout instead).
LOW_SPEED_SECONDS = 30
# What one watch may take of its cluster's pump (`ApiClient.watch`, `_Body.on_pump`): a
# share of its time, PUMP_SHARE, with PUMP_BUDGET_SECONDS at once at most, and lines (events)
# of at most PUMP_LINE_BYTES. A watch past either (a tenant's large objects, a handler gone
# slow) has the rest handed over to its own thread, so that it holds the cluster's other
# streams up once, not for as long as it lasts. An event is handled in about 0.15 ms: a watch
# may take over 600 a second on the pump.
PUMP_SHARE = 0.1
PUMP_BUDGET_SECONDS = 0.01
PUMP_LINE_BYTES = 256 << 10


class ApiException(Exception):
    """An answer of the API server with a status of 400 or more (`status` 0: none came)."""

    def __init__(
        self,
        status: int = 0,
        reason: str = "",
        body: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status, reason)
        self.status, self.reason, self.body = status, reason, body
        self.headers = dict(headers or {})

    def __str__(self) -> str:
        text = f"({self.status}) Reason: {self.reason}"
        return f"{text}\nHTTP response body: {self.body}" if self.body else text


class TransportError(ConnectionError):
    """No answer came (connection refused or lost, TLS refused, timed out): libcurl's error,
    with its code (`pycurl.E_*`). A ConnectionError, so callers retry it as they would any."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.code = code

    def __str__(self) -> str:
        return f"curl error {self.code}: {self.args[1]}"


class ApiClient:
    """One cluster's connections. Requests send and return JSON bytes; 4xx and 5xx raise
    `ApiException`; a request that gets no answer raises `TransportError` (nothing is retried
    here: the callers decide, with tenacity)."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        parts = urlsplit(credentials.server)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise KubeconfigError(f"server {credentials.server!r} is not an http(s) URL")
        if parts.scheme == "https":
            # libcurl is given the same settings (`_curl_setup`); building Python's context
            # here refuses a CA, certificate or key that does not load now, not at the first
            # request.
            credentials.ssl_context()
        self._prefix = parts.path.rstrip("/")  # a server behind a proxy may have a path
        self._origin, self._curl_options = _curl_setup(credentials)
        self._idle: list[pycurl.Curl] = []  # curl handles not in use, the last used on top
        self._name = str(parts.hostname)
        self._streams: Transfers | None = None  # made with the first stream
        self._streams_lock = threading.Lock()
        self._token = credentials.token
        self._token_read = 0.0
        self._token_lock = threading.Lock()
        plugin = credentials.exec_plugin
        self._exec = ExecTokens(plugin) if plugin is not None and not credentials.token else None

    def bearer_token(self) -> str | None:
        creds = self.credentials
        if self._exec is not None:
            return self._exec.token()
        if creds.token_file is None:
            return self._token
        with self._token_lock:
            if self._token is None or time.monotonic() - self._token_read > TOKEN_REREAD_SECONDS:
                self._token = Path(creds.token_file).read_text().strip()
                self._token_read = time.monotonic()
            return self._token

    def _borrow(self) -> pycurl.Curl:
        """An idle curl handle for a request (its connection still open), or a new one. A
        handle serves one request at a time; list.pop and list.append are atomic, so no lock."""
        try:
            return self._idle.pop()
        except IndexError:
            return self._new_handle()

    @property
    def _transfers(self) -> Transfers:
        with self._streams_lock:
            if self._streams is None:
                self._streams = Transfers(self._name)
            return self._streams

    def _new_handle(self) -> pycurl.Curl:
        curl = pycurl.Curl()
        for option, value in self._curl_options:
            curl.setopt(option, value)
        return curl

    def _give_back(self, curl: pycurl.Curl) -> None:
        # pycurl keeps the body a handle was given (up to the API server's 3 MiB, a tenant's
        # object) for as long as the handle lives: an idle one keeps none
        curl.setopt(pycurl.POSTFIELDS, b"")
        if len(self._idle) < IDLE_HANDLES:
            self._idle.append(curl)
        else:
            curl.close()

    def _headers(self, content_type: str | None, accept: str = JSON) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": USER_AGENT}
        if content_type:
            headers["Content-Type"] = content_type
        token = self.bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        """A request's target on the server: its own path, the API path, the query. A path
        with a segment no Kubernetes name has ("..", "?", "%", ...) raises `InvalidName`
        (a ValueError): requests are sent as built, never normalised by libcurl."""
        checked_path(path)
        params = {k: v for k, v in (query or {}).items() if v not in (None, "")}
        return self._prefix + path + (f"?{urlencode(params)}" if params else "")

    def token_refused(self) -> bool:
        """After a 401: whether the token comes from a file or a credential plugin, which is
        then read again (or run again) at the next request (kubelet may have rotated it within
        the minute; client-go does the same)."""
        if self._exec is not None:
            self._exec.refused()
            return True
        if self.credentials.token_file is None:
            return False
        with self._token_lock:
            self._token_read = float("-inf")
        return True

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
        accept: str = JSON,
    ) -> bytes:
        """Send one request and return the answer's body; `TransportError` when none came. A
        401 with a token from a file is sent once more, with the file read again."""
        args = (method, path, query, body, content_type, timeout, accept)
        try:
            return self._request(*args)
        except ApiException as exc:
            if exc.status != 401 or not self.token_refused():
                raise
        return self._request(*args)

    def _request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: float | None,
        accept: str,
    ) -> bytes:
        curl = self._borrow()
        chunks: list[bytes] = []
        answered = False
        try:
            self._prepare(curl, method, path, query, body, content_type, accept, timeout, None)
            curl.setopt(pycurl.WRITEFUNCTION, chunks.append)
            try:
                curl.perform()
            except pycurl.error as exc:
                code, message = (*exc.args, 0, "")[:2]  # pycurl gives (code, message)
                raise _no_answer(int(code), str(message), method, path) from None
            answered = True
            data = b"".join(chunks)
            chunks.clear()  # the idle handle keeps its write callback, not the answer
            status = curl.getinfo(pycurl.RESPONSE_CODE)
            error = _request_error(curl, status, data) if status >= 400 else None
        finally:
            if answered:
                self._give_back(curl)
            else:
                # No answer: the next request starts afresh, on a handle that has not kept
                # the addresses this one connected to.
                curl.close()
        if error is not None:
            raise error
        return data

    def _prepare(
        self,
        curl: pycurl.Curl,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        accept: str,
        timeout: float | None,
        head: list[bytes] | None,
    ) -> None:
        """Set a handle for one request (all but where its answer's body goes). The answer's
        header lines go to `head`, or nowhere when it is None: libcurl hands each line to
        Python on its own, and under a busy interpreter every such call waits for the GIL
        (what a request needs of them, libcurl keeps: `_request_error`)."""
        if body is None:
            curl.setopt(pycurl.HTTPGET, 1)
        else:
            curl.setopt(pycurl.POSTFIELDS, orjson.dumps(body))
        curl.setopt(pycurl.CUSTOMREQUEST, method)
        curl.setopt(pycurl.URL, self._origin + self.url(path, query))
        headers = self._headers(content_type if body is not None else None, accept)
        lines = [f"{k}: {v}" for k, v in headers.items()]
        lines += [f"{k}: {v}" for k, v in self.credentials.impersonate]
        # "Expect:" off: libcurl would wait for a 100 Continue before a large body.
        curl.setopt(pycurl.HTTPHEADER, [*lines, "Expect:"])
        if head is None:
            curl.unsetopt(pycurl.HEADERFUNCTION)
        else:
            curl.setopt(pycurl.HEADERFUNCTION, head.append)
        # at least 1 ms: libcurl takes 0 for "no timeout", and a deadline's last moments
        # must not become one
        curl.setopt(pycurl.TIMEOUT_MS, 0 if timeout is None else max(round(timeout * 1000), 1))
        curl.setopt(pycurl.LOW_SPEED_LIMIT, 1)  # bytes a second, for LOW_SPEED_TIME seconds
        curl.setopt(pycurl.NOPROGRESS, 1)  # no progress calls (a watch with `abort` asks them)
        curl.setopt(pycurl.LOW_SPEED_TIME, LOW_SPEED_SECONDS)

    def get_json(self, path: str, **kwargs: Any) -> Any:
        data = self.request("GET", path, **kwargs)
        return orjson.loads(data) if data else None

    def watch(
        self,
        path: str,
        query: Mapping[str, Any],
        on_event: Callable[[Dict], bool],
        *,
        timeout: float | None = None,
        on_open: Callable[[], None] | None = None,
        abort: threading.Event | None = None,
    ) -> None:
        """Hand each event of a watch, decoded, to `on_event` as it comes, until the server
        ends the watch (returns) or `on_event` returns False (returns at once). An exception
        raised by `on_event` ends the watch and is raised here; the rest as `stream`.

        `on_event` and `on_open` are called on the thread carrying the cluster's streams
        (`kubecontrol/transfers.py`), one call at a time, while this thread waits: they must
        be quick and never wait on another stream of the cluster (an informer's apply an
        event to a cache and queue a key). Handing each piece of the stream over to this
        thread instead cost about 0.06 ms of CPU per event, half the event's own
        (`benchmarks/floor.py`)."""
        events = _Events(on_event)
        self.stream(
            path,
            {**query, "watch": "true"},
            events.write,
            timeout=timeout,
            on_open=on_open,
            abort=abort,
            on_pump=True,
        )
        events.end()

    def stream(
        self,
        path: str,
        query: Mapping[str, Any],
        on_data: Callable[[bytes], bool],
        *,
        timeout: float | None = None,
        on_open: Callable[[], None] | None = None,
        abort: threading.Event | None = None,
        accept: str = JSON,
        own_connection: bool = False,
        on_pump: bool = False,
    ) -> None:
        """GET `path` and hand the answer's body to `on_data` in pieces as they come, on this
        thread, until the server ends it (returns) or `on_data` returns False (returns at
        once). An exception raised by `on_data` ends the stream and is raised here; an error
        answer raises `ApiException`, a broken stream `TransportError`. `on_open()` is called
        once the server has answered 200, before any piece (a quiet stream may send none for
        a minute). Setting `abort` ends the stream within two seconds, pieces or not (a
        `TransportError`, libcurl's E_ABORTED_BY_CALLBACK). `on_open` and `on_data` are called
        on this thread; with `on_pump`, on the pump's as the pieces come (`watch`: its lines
        are events), until the stream has taken more than its share of the pump's time or a
        line is longer than PUMP_LINE_BYTES: the rest of the stream is handed over to this
        thread.

        A stream shares the cluster's HTTP/2 connection; with `own_connection`, one a tenant's
        reader paces (a followed log), it has one of its own over HTTP/1.1, closed after: a
        paused HTTP/2 stream leaves libcurl holding what its window let in (about 21 MB with
        libcurl 8.23, while the connection's other streams are read), where a paused
        connection leaves it in the kernel's socket buffers."""
        # A handle of its own, closed after: the connection is the multi handle's, and a
        # request's handle keeps one of its own.
        curl = self._new_handle()
        head: list[bytes] = []  # the stream's status is read from them (`_Body`)
        try:
            self._prepare(curl, "GET", path, query, None, JSON, accept, timeout, head)
            if own_connection:
                curl.setopt(pycurl.FRESH_CONNECT, 1)
                curl.setopt(pycurl.FORBID_REUSE, 1)
            else:
                # HTTP/2 where TLS offers it (ALPN), waiting for a connection being made to
                # say whether it can share it: one connection for the cluster's streams.
                curl.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_2TLS)
                curl.setopt(pycurl.PIPEWAIT, 1)
            curl.setopt(pycurl.LOW_SPEED_LIMIT, 0)  # quiet is normal; `timeout` bounds it
        except BaseException:
            curl.close()
            raise
        transfer = self._transfers.transfer(curl, abort)
        body = _Body(head, on_data, transfer)
        opened = on_open if on_pump else transfer.opened
        if on_open is not None:

            def header(line: bytes) -> int | None:  # on the pump's thread
                head.append(line)
                if not line.strip() and _status_of(head) == 200:  # the header block ends
                    return body.call(opened)  # type: ignore[arg-type]
                return None

            curl.setopt(pycurl.HEADERFUNCTION, header)
        curl.setopt(pycurl.WRITEFUNCTION, body.on_pump if on_pump else transfer.received)
        transfer.start()
        ended = False
        try:
            # On the pump, only the transfer's end comes here, unless its pieces were handed
            # over (`_Body.on_pump`).
            for piece in transfer.pieces():
                if piece is OPENED:
                    on_open()  # type: ignore[misc]
                elif body.write(piece) == 0:
                    break
            else:
                ended = True
        finally:
            if not ended:
                transfer.give_up()  # left mid-answer: the pump ends it and closes the handle
        if ended:
            curl.close()
        if body.failure is not None:
            raise body.failure
        if body.stopped:
            return
        if transfer.code:
            raise _no_answer(transfer.code, transfer.message, "GET", path)
        if body.status >= 400:
            if body.status == 401:
                self.token_refused()  # the stream that follows reads the token file again
            raise _answer_error(body.status, head, b"".join(body.error_body))


class _Body:
    """A streamed answer as the pump hands it over: an error answer is kept whole (a Status),
    a good one goes to `on_data` piece by piece. Returning 0 from `write` ends the stream.
    `head`: the answer's header lines, as they come."""

    def __init__(
        self, head: list[bytes], on_data: Callable[[bytes], bool], transfer: Transfer
    ) -> None:
        self._head = head
        self._on_data = on_data
        self._transfer = transfer
        self.handed_over = False  # handled on the pump until it took too much there
        self._allowance = PUMP_BUDGET_SECONDS  # pump time it may take now (`on_pump`)
        self._since = 0.0  # when the allowance was reckoned
        self._line = 0  # bytes of the line under way
        self.status = 0
        self.error_body: list[bytes] = []
        self.stopped = False
        self.failure: Exception | None = None

    def write(self, data: bytes) -> int | None:
        if not self.status:  # the body's first piece: the header lines are all in
            self.status = _status_of(self._head)
        if self.status >= 400:
            self.error_body.append(data)
            return None
        return self.call(self._on_data, data)

    def on_pump(self, data: bytes) -> int | None:
        """`write` on the pump's thread (the stream's WRITEFUNCTION) while the stream keeps to
        its allowance there: PUMP_BUDGET_SECONDS at most, refilled at PUMP_SHARE of the time
        that passes (a token bucket), each line at most PUMP_LINE_BYTES (looked at before it
        is decoded). From the piece that goes past either on, the pieces go to the caller's
        thread, in order (`Transfer.received`); a stream its caller has left ends."""
        if self.handed_over:
            return self._transfer.received(data)
        if self._transfer.given_up:
            return 0
        end = data.find(b"\n")  # of the line under way, when it ends in this piece
        if end < 0:
            self._line += len(data)
            long = self._line > PUMP_LINE_BYTES
        else:
            long = self._line + end > PUMP_LINE_BYTES
            self._line = len(data) - data.rfind(b"\n") - 1
        if long:
            self.handed_over = True
            return self._transfer.received(data)
        started = time.perf_counter()
        result = self.write(data)
        now = time.perf_counter()
        refill = (started - self._since) * PUMP_SHARE if self._since else 0.0
        self._allowance = min(self._allowance + refill, PUMP_BUDGET_SECONDS) - (now - started)
        self._since = started
        if self._allowance < 0:
            self.handed_over = True
        return result

    def call(self, function: Callable[..., object], *args: object) -> int | None:
        """`function(*args)`; 0 (the stream ends) when it returns False or raises (kept in
        `failure`, raised again by `stream` once the pump has let the handle go)."""
        try:
            if function(*args) is False:
                self.stopped = True
                return 0
        except Exception as exc:
            self.failure = exc
            return 0
        return None


class _Events:
    """A watch's body, in pieces that need not end where events do: each whole line is an
    event, decoded and handed to `on_event`."""

    def __init__(self, on_event: Callable[[Dict], bool]) -> None:
        self._on_event = on_event
        self._pending: list[bytes] = []  # the pieces of a line not whole yet
        self._stopped = False

    def write(self, data: bytes) -> bool:
        """Each piece is looked through once, and a line joined once (a large object's event
        comes in many pieces)."""
        if b"\n" not in data:
            self._pending.append(data)
            return True
        first, *lines, rest = data.split(b"\n")
        whole = b"".join([*self._pending, first]) if self._pending else first
        self._pending = [rest] if rest else []
        return self._hand_over([whole, *lines])

    def end(self) -> None:
        """The server ended the answer: its last line, if it had no newline."""
        if not self._stopped:
            self._hand_over([b"".join(self._pending)])
        self._pending = []

    def _hand_over(self, lines: list[bytes]) -> bool:
        """Whether to go on reading."""
        for line in lines:
            if line.strip() and self._on_event(orjson.loads(line)) is False:
                self._stopped = True
                return False
        return True


def _no_answer(code: int, message: str, method: str, path: str) -> Exception:
    """libcurl's failure of a transfer: `TransportError` (callers retry it), or ValueError for
    a URL it could not parse (our mistake, not the network's: no retry)."""
    if code == pycurl.E_URL_MALFORMAT:
        return ValueError(f"{method} {path}: {message}")
    return TransportError(code, f"{method} {path}: {message}")


def _status_line(line: str) -> tuple[int, str]:
    """The code and reason of an answer's status line ("HTTP/1.1 200 OK"); 0 when unreadable."""
    parts = line.split(" ", 2)
    code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return code, parts[2] if len(parts) > 2 else ""


def _status_of(head: list[bytes]) -> int:
    """The status of an answer from its header lines (the last status line: an informational
    answer may come first); 0 when there is none. libcurl's own count cannot be asked for
    during the transfer."""
    for raw in reversed(head):
        if raw.startswith(b"HTTP/"):
            return _status_line(raw.decode("latin-1").strip())[0]
    return 0


def _request_error(curl: pycurl.Curl, status: int, data: bytes) -> ApiException:
    """A request's error answer from what libcurl kept of it: the status; its reason, the
    standard words for the code (the API server's status lines carry Go's `StatusText`, the
    same words); the headers a client acts on, `Content-Type` and `Retry-After`; the body."""
    headers = {}
    content_type = curl.getinfo(pycurl.CONTENT_TYPE)
    if content_type:
        headers["Content-Type"] = str(content_type)
    retry_after = curl.getinfo(pycurl.RETRY_AFTER)  # seconds; 0 when the header is absent
    if retry_after and retry_after > 0:
        headers["Retry-After"] = str(retry_after)
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    return ApiException(status, reason, data.decode("utf-8", errors="replace"), headers)


def _answer_error(status: int, head: list[bytes], data: bytes) -> ApiException:
    """A watch's error answer from libcurl's pieces: the header lines as they came (the last
    status line and what follows it; an informational answer may come first) and the body."""
    reason, headers = "", dict[str, str]()
    for raw in head:
        line = raw.decode("latin-1").strip()
        if line.startswith("HTTP/"):
            reason, headers = _status_line(line)[1], {}
        elif ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip()] = value.strip()
    return ApiException(status, reason, data.decode("utf-8", errors="replace"), headers)


def _curl_setup(credentials: Credentials) -> tuple[str, list[tuple[int, Any]]]:
    """The scheme, host and port requests go to, and the options every curl handle of this
    cluster is given once: TLS as `Credentials.ssl_context` sets it, HTTP/1.1, no proxy from
    the environment, no signals (threads), a connect timeout and TCP keepalive."""
    parts = urlsplit(credentials.server)
    options: list[tuple[int, Any]] = [
        (pycurl.NOSIGNAL, 1),
        (pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1),  # a stream's: `stream`
        (pycurl.PROXY, credentials.proxy_url or ""),
        (pycurl.FOLLOWLOCATION, 0),
        # The path as built: libcurl would otherwise remove "./" and "../" segments (RFC 3986),
        # and the request would reach another path than the one checked (`checked_path`).
        (pycurl.PATH_AS_IS, 1),
        # The server's name looked up for each connection made, as client-go's dialer does
        # (libcurl would keep what it resolved for a minute, a failed address too).
        (pycurl.DNS_CACHE_TIMEOUT, 0),
        (pycurl.CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS),
        (pycurl.TCP_KEEPALIVE, 1),
        (pycurl.TCP_KEEPIDLE, KEEPALIVE_IDLE),
        (pycurl.TCP_KEEPINTVL, KEEPALIVE_INTERVAL),
        (pycurl.UPLOAD_BUFFERSIZE, UPLOAD_BUFFER),
    ]
    origin = f"{parts.scheme}://{parts.netloc}"
    if parts.scheme != "https":
        return origin, options
    options += _trust(credentials)
    files = credentials.client_cert_files()
    if files:
        options += [(pycurl.SSLCERT, files[0]), (pycurl.SSLKEY, files[1])]
    else:
        cert, key = credentials.client_cert()
        if cert and key:
            options += [(pycurl.SSLCERT_BLOB, cert), (pycurl.SSLKEY_BLOB, key)]
    if credentials.tls_server_name:
        # libcurl checks the certificate against the URL's host: name it there, and connect
        # to the server's own address.
        port = parts.port or 443
        host = f"[{parts.hostname}]" if ":" in str(parts.hostname) else parts.hostname
        name = credentials.tls_server_name  # a host name or an address (credentials.py)
        name = f"[{name}]" if ":" in name else name
        options.append((pycurl.CONNECT_TO, [f"{name}:{port}:{host}:{port}"]))
        origin = f"https://{name}:{port}"
    return origin, options


def _trust(credentials: Credentials) -> list[tuple[int, Any]]:
    """What verifies the server, and an https proxy the same way: client-go's transport hands
    its TLS settings to Go, which verifies a proxy with them too. The CAs trusted are the
    kubeconfig's alone: libcurl's built-in CA file and folder (Debian's libcurl:
    /etc/ssl/certs, every public root) are unset (None), or they would be trusted besides."""
    if credentials.insecure:
        return [(pycurl.SSL_VERIFYPEER, 0), (pycurl.SSL_VERIFYHOST, 0),
                (pycurl.PROXY_SSL_VERIFYPEER, 0), (pycurl.PROXY_SSL_VERIFYHOST, 0)]  # fmt: skip
    if credentials.ca_pem is not None:
        blob = credentials.ca_pem.encode()
        return [(pycurl.CAINFO, None), (pycurl.CAPATH, None), (pycurl.CAINFO_BLOB, blob),
                (pycurl.PROXY_CAINFO, None), (pycurl.PROXY_CAPATH, None),
                (pycurl.PROXY_CAINFO_BLOB, blob)]  # fmt: skip
    if credentials.ca_file:
        file = credentials.ca_file
        return [(pycurl.CAINFO, file), (pycurl.CAPATH, None),
                (pycurl.PROXY_CAINFO, file), (pycurl.PROXY_CAPATH, None)]  # fmt: skip
    found = ssl.get_default_verify_paths()  # the system's, as Python's ssl finds them
    return [(pycurl.CAINFO, found.cafile), (pycurl.CAPATH, found.capath),
            (pycurl.PROXY_CAINFO, found.cafile), (pycurl.PROXY_CAPATH, found.capath)]  # fmt: skip


def keep_kubernetes_client_out() -> None:
    """Make `import kubernetes` fail in this process (call first): any import of it loads every
    API model. A process that has already imported it is left as it is."""
    sys.modules.setdefault("kubernetes", None)  # type: ignore[arg-type]
