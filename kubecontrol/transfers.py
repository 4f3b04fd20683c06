"""One cluster's streams (watches, followed logs) on one libcurl multi handle, so that they
share a connection: over HTTP/2, which every Kubernetes API server speaks (client-go's default),
they are streams of one TLS connection.

Why: each TLS connection libcurl keeps costs the process about 180 KiB (its OpenSSL context,
the session, the CA store read for it), and each watch held one for as long as it lasted: the
dispatcher kept about 70. A stream of a shared connection costs about 30 KiB, its thread
included (`benchmarks/connections.py`). Requests stay on their callers' threads, each on a
connection of its own (`client.py`): handing a request to another thread and back costs about
0.2 ms of CPU, more than the request itself.

libcurl's handles may be used by one thread at a time, so one thread per cluster (the pump)
drives the multi handle and every transfer on it, and the callers wait: a caller sets its easy
handle up, hands it over (`Transfer.start`), and reads it again only once the transfer has
ended; between, only the pump touches it. The pump starts with the first transfer and leaves
after `IDLE_SECONDS` without any; it waits on the sockets libcurl names (epoll, any number of
them) and on libcurl's timer, and wakes at least every second while a transfer runs, to end
those whose `abort` is set.

What a stream receives is handed to its caller's thread piece by piece and read there
(`Transfer.pieces`), so a slow reader of one stream holds no other: once `BACKLOG_BYTES` wait
unread for it, its stream is paused, and is resumed when its reader has caught up to half of
that. (HTTP/2 stops the server with its flow control once the stream's window is spent: about
21 MB that libcurl 8.23 holds for a paused stream while the connection's others are read.)
A watch's caller instead gives the pump its own WRITEFUNCTION, quick by contract, and waits
for the end (`ApiClient.watch`): waking
another thread for each event cost more CPU than the event's own work. Once it has taken more
than its share of the pump, or an event is too long, the rest of that watch is handed over as
above (`client.PUMP_SHARE`).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import threading
import time
from collections.abc import Iterator

import pycurl

log = logging.getLogger(__name__)

IDLE_SECONDS = 30.0  # the pump leaves after this long without a transfer (a new one starts it)
TICK_SECONDS = 1.0  # the longest the pump waits while a transfer runs (an `abort` is seen)
BACKLOG_BYTES = 256 << 10  # unread bytes of a stream before it is paused
# Idle connections the multi handle keeps open (over HTTP/2 it needs one; an API server
# reached over HTTP/1.1 takes one per stream).
MAX_CONNECTIONS = 16
ABORTED = pycurl.E_ABORTED_BY_CALLBACK
# Before 8.1 libcurl never frees what a paused HTTP/2 stream buffered (up to its window, 32
# MiB) when that stream ends while its connection serves others (curl issue #10971): each watch
# given up behind a slow reader keeps it for good. The image's libcurl is 8.1 or later; a
# pycurl built against an older one is named in the log once, when the first pump is made.
PAUSE_FREED_FROM = 0x080100
_older_libcurl_said = False

_END = object()  # a transfer's last item: it has ended (its code and message are set)
OPENED = None  # a stream's item when its header block has come whole, before its body


class Transfer:
    """An easy handle handed to the pump, and what its caller gets back: the pieces a stream
    received, then its end (`code`, libcurl's error, 0 when the answer came whole)."""

    def __init__(self, pump: Transfers, curl: pycurl.Curl, abort: threading.Event | None) -> None:
        self.curl = curl
        self.abort = abort
        self.code, self.message = 0, ""
        self._pump = pump
        self._items: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._unread = 0  # bytes handed over, not yet read by the caller
        self._paused = False
        self._given_up = False

    # The pump's side.

    def received(self, data: bytes) -> int | None:
        """A stream's WRITEFUNCTION: the piece goes to the reader, or (too much waits unread)
        the stream is paused and libcurl hands the same piece again once it is resumed."""
        if self._given_up:
            return 0  # libcurl ends the transfer (its reader is gone)
        with self._lock:
            if self._unread >= BACKLOG_BYTES:
                self._paused = True
                return pycurl.WRITEFUNC_PAUSE
            self._unread += len(data)
        self._items.put(data)
        return None

    def opened(self) -> None:
        """A stream's header block has come whole."""
        self._items.put(OPENED)

    def ended(self, code: int, message: str) -> None:
        self.code, self.message = code, message
        self._items.put(_END)

    # The caller's side.

    @property
    def given_up(self) -> bool:
        """Its caller reads no more of it (`give_up`)."""
        return self._given_up

    def start(self) -> None:
        """Hand the handle, set for its transfer, over to the pump; the caller reads it again
        only once `wait` or `pieces` has returned (or, having given up, never)."""
        self._pump.ask("start", self)

    def wait(self) -> None:
        """Until the transfer has ended (a request: its answer is whole in its own buffer)."""
        for _ in self.pieces():
            pass

    def pieces(self) -> Iterator[bytes | None]:
        """The pieces of a stream as they come (`OPENED` first, for a stream that asked), until
        it ends; a caller that stops reading before then calls `give_up`."""
        while (item := self._items.get()) is not _END:
            if isinstance(item, bytes):
                with self._lock:
                    self._unread -= len(item)
                    resume = self._paused and self._unread <= BACKLOG_BYTES // 2
                    self._paused = self._paused and not resume
                if resume:
                    self._pump.ask("resume", self)
            yield item  # type: ignore[misc]

    def give_up(self) -> None:
        """The caller reads no more of it, and leaves its handle to the pump: the transfer is
        ended there if it has not, and its handle closed (its connection's state is unknown)."""
        self._given_up = True
        self._pump.ask("give up", self)


class Transfers:
    """One cluster's multi handle, and the pump that drives it (see the module's doc)."""

    def __init__(self, name: str) -> None:
        global _older_libcurl_said
        if pycurl.version_info()[2] < PAUSE_FREED_FROM and not _older_libcurl_said:
            _older_libcurl_said = True
            log.warning(
                "libcurl before 8.1: a paused stream that ends keeps what it buffered",
                extra={"libcurl": pycurl.version_info()[1], "wanted": "8.1 or later"},
            )
        self._name = name
        self._lock = threading.Lock()
        self._asks: list[tuple[str, Transfer]] = []
        self._thread: threading.Thread | None = None
        self._wake_in, self._wake_out = socket.socketpair()
        self._wake_in.setblocking(False)
        self._wake_out.setblocking(False)
        self._setup()

    def _setup(self) -> None:
        """A fresh multi handle, its sockets watched by a fresh selector."""
        self._running: dict[pycurl.Curl, Transfer] = {}
        self._due: float | None = None  # when libcurl asked to be called for its timeouts
        self._tick = 0.0  # when to look for aborted transfers next
        self._broken: Exception | None = None
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_out, selectors.EVENT_READ)
        self._multi = pycurl.CurlMulti()
        self._multi.setopt(pycurl.M_PIPELINING, pycurl.PIPE_MULTIPLEX)
        self._multi.setopt(pycurl.M_MAXCONNECTS, MAX_CONNECTIONS)
        self._multi.setopt(pycurl.M_SOCKETFUNCTION, self._socket)
        self._multi.setopt(pycurl.M_TIMERFUNCTION, self._timer)

    def transfer(self, curl: pycurl.Curl, abort: threading.Event | None = None) -> Transfer:
        """A transfer of this cluster's for a handle (a stream gives it `Transfer.received` as
        its WRITEFUNCTION), to `start` once set."""
        return Transfer(self, curl, abort)

    def ask(self, what: str, transfer: Transfer) -> None:
        with self._lock:
            self._asks.append((what, transfer))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._pump, name=f"transfers-{self._name}", daemon=True
                )
                self._thread.start()
        # full of wake-ups not yet read: the pump wakes anyway
        with contextlib.suppress(BlockingIOError):
            self._wake_in.send(b"\0")

    # The pump's side: nothing below runs on any other thread.

    def _pump(self) -> None:
        idle_since = time.monotonic()
        try:
            while True:
                with self._lock:
                    asks, self._asks = self._asks, []
                    if not asks and not self._running:
                        if time.monotonic() - idle_since >= IDLE_SECONDS:
                            self._thread = None
                            return
                    else:
                        idle_since = time.monotonic()
                for i, (what, transfer) in enumerate(asks):
                    try:
                        self._take(what, transfer)
                    except BaseException:
                        with self._lock:  # for `_fail_all`: no caller left waiting unanswered
                            self._asks[:0] = asks[i:]
                        raise
                self._turn(idle_since)
        except Exception as exc:  # libcurl or a callback of ours broke: no caller may hang
            log.exception("a cluster's transfers failed", extra={"cluster": self._name})
            self._fail_all(f"the transfers of {self._name} broke: {type(exc).__name__}: {exc}")

    def _fail_all(self, why: str) -> None:
        with self._lock:  # a pump started by the next ask finds a fresh multi handle
            asks, self._asks = self._asks, []
            running = list(self._running.values())
            try:
                for transfer in running:
                    with contextlib.suppress(pycurl.error):
                        self._multi.remove_handle(transfer.curl)
                self._multi.close()  # its callbacks act on what is dropped next, not after
                self._selector.close()
                self._setup()
            except Exception:  # out of descriptors, say: the next ask fails and tries again
                log.exception(
                    "a cluster's transfers could not start afresh", extra={"cluster": self._name}
                )
            finally:
                self._thread = None
        for what, transfer in asks:
            if what == "give up":
                transfer.curl.close()
        for transfer in running + [t for what, t in asks if what == "start"]:
            transfer.ended(pycurl.E_FAILED_INIT, why)

    def _take(self, what: str, transfer: Transfer) -> None:
        curl = transfer.curl
        if what == "start":
            self._multi.add_handle(curl)
            self._running[curl] = transfer
        elif what == "resume":
            if curl in self._running and not transfer._given_up:
                try:
                    curl.pause(pycurl.PAUSE_CONT)  # may hand over what waited, at once
                except pycurl.error as exc:  # what it handed over ended it: this one alone
                    code, message = (*exc.args, 0, "")[:2]
                    self._end(transfer, int(code) or ABORTED, str(message))
        elif what == "give up":
            if curl in self._running:
                self._end(transfer, ABORTED, "its reader stopped")
            curl.close()

    def _turn(self, idle_since: float) -> None:
        """Wait for a socket, the timer, an ask or a tick; act on what came; end the transfers
        that are done or aborted."""
        now = time.monotonic()
        wait = TICK_SECONDS if self._running else max(IDLE_SECONDS - (now - idle_since), 0.0)
        if self._due is not None:
            wait = min(wait, max(self._due - now, 0.0))
        for key, mask in self._selector.select(wait):
            if key.fileobj is self._wake_out:
                self._drain_wakes()
                continue
            flags = (pycurl.CSELECT_IN if mask & selectors.EVENT_READ else 0) | (
                pycurl.CSELECT_OUT if mask & selectors.EVENT_WRITE else 0
            )
            self._multi.socket_action(key.fd, flags)
        if self._due is not None and time.monotonic() >= self._due:
            self._due = None  # libcurl sets it again, from within, if it wants
            self._multi.socket_action(pycurl.SOCKET_TIMEOUT, 0)
        if self._broken is not None:  # raised in a callback, which pycurl only prints
            raise self._broken
        self._collect()
        if now >= self._tick:
            self._tick = now + TICK_SECONDS
            for transfer in list(self._running.values()):
                if transfer.abort is not None and transfer.abort.is_set():
                    self._end(transfer, ABORTED, "aborted")

    def _drain_wakes(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_out.recv(4096):
                pass

    def _collect(self) -> None:
        while True:
            queued, done, failed = self._multi.info_read()
            for curl in done:
                if curl in self._running:
                    self._end(self._running[curl], 0, "")
            for curl, code, message in failed:
                if curl in self._running:
                    self._end(self._running[curl], int(code), str(message))
            if not queued:
                return

    def _end(self, transfer: Transfer, code: int, message: str) -> None:
        del self._running[transfer.curl]
        try:
            self._multi.remove_handle(transfer.curl)
        finally:
            transfer.ended(code, message)

    def _socket(self, what: int, fd: int, multi: object, data: object) -> None:
        """libcurl's SOCKETFUNCTION: which of its sockets to wait on, and for what. What it
        raises is kept for the pump (pycurl would print it and go on, the socket unwatched)."""
        try:
            self._watch(what, fd)
        except Exception as exc:
            self._broken = exc

    def _watch(self, what: int, fd: int) -> None:
        if fd in self._selector.get_map():
            self._selector.unregister(fd)  # a closed socket's number may come back reused
        if what == pycurl.POLL_REMOVE:
            return
        events = (selectors.EVENT_READ if what & pycurl.POLL_IN else 0) | (
            selectors.EVENT_WRITE if what & pycurl.POLL_OUT else 0
        )
        self._selector.register(fd, events)

    def _timer(self, milliseconds: int) -> None:
        """libcurl's TIMERFUNCTION: when to call it for its timeouts (-1: no need)."""
        self._due = None if milliseconds < 0 else time.monotonic() + milliseconds / 1000
