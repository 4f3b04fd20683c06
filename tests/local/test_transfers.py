"""A cluster's streams on one multi handle, driven by a thread of their own
(kubecontrol/transfers.py), as our API client uses them, against a loopback HTTP server: a
stream's reader that stops reading pauses its stream and holds up no other stream; one that
stops for good ends its transfer; a watch's events are handled on the pump's thread, its
caller waiting, and what its handler raises ends it; `abort` ends a quiet stream; the pump
leaves when idle and comes back; a pump that breaks fails what it carried, and the next stream
starts afresh. (That a cluster's streams share one HTTP/2 connection:
tests/bed/test_client.py.)"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pycurl
import pytest

from clusters.helpers.waiting import QuietHandler, http_server, loopback_client, wait_for
from kubecontrol import client, transfers
from kubecontrol.client import ApiClient, ApiException, TransportError

BIG = 48 << 20  # many times the backlog a paused stream may hold, and the sockets' buffers
PATTERN = bytes(range(256)) * 256  # 64 KiB
LONG_EVENT = (
    b'{"type":"ADDED","object":{"data":"'
    + b"x" * (client.PUMP_LINE_BYTES + 1)
    + b'"}}\n{"type":"DELETED","object":{"data":"short"}}\n'
)
EVENT_CHUNKS = [
    b'{"type":"ADDED","object":{"n":1}}\n{"type":"MOD',
    b'IFIED","object":{"n":2}}\n',
    b'{"type":"DELETED","object":{"n":3}}',
]


class Streams:
    """What the server did: the bytes of /big it has written so far."""

    written = 0
    quiet_release = threading.Event()


class Handler(QuietHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path.startswith("/small"):
            self.reply(200, b'{"ok":true}')
            return
        if self.path.startswith("/missing"):
            self.reply(404, b'{"kind":"Status","code":404,"message":"gone"}')
            return
        if self.path.startswith("/long-event"):  # an event longer than the pump takes, then one
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in (LONG_EVENT[i : i + 8192] for i in range(0, len(LONG_EVENT), 8192)):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path.startswith("/events"):  # three watch events, lines cut across chunks
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in EVENT_CHUNKS:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.path.startswith("/quiet"):
            self.wfile.flush()
            Streams.quiet_release.wait(60)
            with contextlib.suppress(OSError):  # the client may have gone
                self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True
            return
        try:
            for _ in range(BIG // len(PATTERN)):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(PATTERN), PATTERN))
                Streams.written += len(PATTERN)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client went away
            pass


@pytest.fixture
def api() -> Iterator[ApiClient]:
    Streams.written = 0
    Streams.quiet_release.clear()
    with http_server(Handler) as port:
        yield loopback_client(port)
        Streams.quiet_release.set()


def _get(api: ApiClient, path: str) -> bytes:
    """A short answer, read as a stream (a request does not go through the pump)."""
    pieces: list[bytes] = []

    def keep(piece: bytes) -> bool:
        pieces.append(piece)
        return True

    api.stream(path, {}, keep, timeout=30)
    return b"".join(pieces)


def transfers_budget() -> float:
    return client.PUMP_BUDGET_SECONDS


def _transfers_made(monkeypatch: pytest.MonkeyPatch) -> list[transfers.Transfer]:
    """The transfers made from here on, in order."""
    made: list[transfers.Transfer] = []
    transfer = transfers.Transfers.transfer

    def kept(self: transfers.Transfers, *args: Any) -> transfers.Transfer:
        made.append(transfer(self, *args))
        return made[-1]

    monkeypatch.setattr(transfers.Transfers, "transfer", kept)
    return made


def _in_thread(target: Any) -> threading.Thread:
    """Started; a daemon, so that one left waiting on a broken product never holds the
    session open (each is joined with a bound, and what it leaves checked)."""
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _failures(read: Callable[[], object]) -> list[TransportError]:
    """What `read` raised, run on a thread joined with a bound: a caller left waiting on a
    pump gone would wait for ever."""
    failures: list[TransportError] = []

    def run() -> None:
        try:
            read()
        except TransportError as exc:
            failures.append(exc)

    _in_thread(run).join(30)
    return failures


def test_a_reader_that_stops_pauses_its_stream_and_holds_up_no_other_stream(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    stuck, release = threading.Event(), threading.Event()
    digest, got = hashlib.sha256(), []

    def on_data(piece: bytes) -> bool:
        if not stuck.is_set():
            stuck.set()
            release.wait(120)  # the reader stops; the pump must not
        digest.update(piece)
        got.append(len(piece))
        return True

    received = transfers.Transfer.received
    unread: list[int] = []

    def counted(self: transfers.Transfer, data: bytes) -> int | None:
        unread.append(self._unread)
        return received(self, data)

    monkeypatch.setattr(transfers.Transfer, "received", counted)
    reader = _in_thread(lambda: api.stream("/big", {}, on_data, timeout=60))
    assert stuck.wait(30)
    # What the server could write meanwhile: the stream's backlog and the sockets' buffers,
    # not the whole answer (read into memory, it would all have gone).
    wait_for(lambda: Streams.written > transfers.BACKLOG_BYTES, 30, what="the server writes")
    answered: list[bytes] = []
    other = _in_thread(lambda: answered.append(_get(api, "/small")))
    other.join(60)
    assert answered == [b'{"ok":true}']
    written = Streams.written
    assert written < BIG // 3, f"{written} bytes written while the reader was stuck"
    assert max(unread) <= transfers.BACKLOG_BYTES + len(PATTERN)  # a piece over, at most
    release.set()
    reader.join(90)
    # Resumed, every piece came once, in order: a piece refused while paused came again.
    assert sum(got) == BIG
    assert digest.digest() == hashlib.sha256(PATTERN * (BIG // len(PATTERN))).digest()


def test_a_reader_that_stops_for_good_ends_its_transfer_and_its_handle(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[pycurl.Curl] = []
    new_handle = api._new_handle

    def kept() -> pycurl.Curl:
        made.append(new_handle())
        return made[-1]

    monkeypatch.setattr(api, "_new_handle", kept)
    pieces: list[bytes] = []

    def one(piece: bytes) -> bool:
        pieces.append(piece)
        return False

    api.stream("/big", {}, one)
    assert len(pieces) == 1

    def closed() -> bool:
        try:
            made[0].getinfo(pycurl.RESPONSE_CODE)
        except pycurl.error as exc:
            return "no curl handle" in str(exc)  # not one still in the pump's hands
        return False

    wait_for(closed, 10, what="the pump to close the stream's handle")
    assert _get(api, "/small") == b'{"ok":true}'


def test_on_open_and_the_pieces_are_handed_over_on_the_readers_thread(api: ApiClient) -> None:
    seen: list[tuple[str, threading.Thread]] = []

    def on_open() -> None:
        seen.append(("open", threading.current_thread()))

    def on_data(piece: bytes) -> bool:
        seen.append(("data", threading.current_thread()))
        return False

    api.stream("/big", {}, on_data, on_open=on_open)
    assert seen == [("open", threading.current_thread()), ("data", threading.current_thread())]


def test_on_the_pump_on_open_and_the_pieces_are_handled_there_while_the_caller_waits(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watch's way: no piece is handed over; the stream its handler ended leaves nothing
    running, and its handle closed."""
    seen: list[tuple[str, str]] = []
    made = _transfers_made(monkeypatch)

    def on_open() -> None:
        seen.append(("open", threading.current_thread().name))

    def on_data(piece: bytes) -> bool:
        seen.append(("data", threading.current_thread().name))
        return False

    api.stream("/big", {}, on_data, on_open=on_open, on_pump=True)
    assert seen == [("open", "transfers-127.0.0.1"), ("data", "transfers-127.0.0.1")]
    [transfer] = made
    assert transfer._items.empty() and transfer._unread == 0, "nothing handed over"
    assert not api._transfers._running
    with pytest.raises(pycurl.error, match="no curl handle"):
        transfer.curl.getinfo(pycurl.RESPONSE_CODE)  # closed
    assert _get(api, "/small") == b'{"ok":true}'


@pytest.mark.parametrize("fails_in", ["on_open", "on_data"])
def test_on_the_pump_what_the_handler_raises_ends_the_stream_and_is_raised_as_it_was(
    api: ApiClient, fails_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At once: nothing more is handed to `on_data`, and the handle is closed."""
    calls: list[str] = []
    made = _transfers_made(monkeypatch)

    def fails(*_: bytes) -> bool:
        raise KeyError("the handler's own")

    handlers: dict[str, Any] = {"on_open": lambda: None, "on_data": lambda _: True}
    handlers[fails_in] = fails

    def on_open() -> None:
        calls.append("on_open")
        handlers["on_open"]()

    def on_data(piece: bytes) -> bool:
        calls.append("on_data")
        return bool(handlers["on_data"](piece))

    with pytest.raises(KeyError, match="the handler's own"):
        api.stream("/big", {}, on_data, on_open=on_open, on_pump=True)
    assert calls == {"on_open": ["on_open"], "on_data": ["on_open", "on_data"]}[fails_in]
    assert not api._transfers._running
    with pytest.raises(pycurl.error, match="no curl handle"):
        made[0].curl.getinfo(pycurl.RESPONSE_CODE)  # closed
    assert _get(api, "/small") == b'{"ok":true}'


def test_on_the_pump_a_piece_over_the_budget_hands_the_rest_to_the_callers_thread(
    api: ApiClient,
) -> None:
    """A stream whose handling turned slow holds up the cluster's other streams once: its
    later pieces are handled on its caller's thread (here, blocked there), while another
    stream's go on being handled on the pump."""
    threads: list[str] = []
    release, blocked, other_done = threading.Event(), threading.Event(), threading.Event()

    def slow(_: bytes) -> bool:
        threads.append(threading.current_thread().name)
        if len(threads) == 1:
            time.sleep(transfers_budget() * 5)  # over the budget, on the pump
        elif len(threads) == 2:
            blocked.set()
            release.wait(30)  # where a pump would hold every stream up
        return len(threads) < 3

    pieces = [0]

    def other(_: bytes) -> bool:
        pieces[0] += 1
        return pieces[0] < 20

    slow_reader = _in_thread(lambda: api.stream("/big", {}, slow, on_pump=True, timeout=60))
    assert blocked.wait(30)
    other_reader = _in_thread(
        lambda: (api.stream("/big", {}, other, on_pump=True, timeout=60), other_done.set())
    )
    try:
        assert other_done.wait(10), "the other stream was held up"
    finally:
        release.set()
    slow_reader.join(30)
    other_reader.join(30)
    assert threads[0] == "transfers-127.0.0.1"
    assert threads[1:] == [slow_reader.name] * 2
    assert pieces[0] == 20


def test_on_the_pump_an_error_answer_raises_with_its_body_and_never_says_opened(
    api: ApiClient,
) -> None:
    opened: list[int] = []
    with pytest.raises(ApiException) as missing:
        api.stream("/missing", {}, lambda _: True, on_open=lambda: opened.append(1), on_pump=True)
    assert (missing.value.status, opened) == (404, [])
    assert '"message":"gone"' in missing.value.body


def test_a_watchs_events_are_decoded_on_the_pump_in_order_lines_cut_or_not(
    api: ApiClient,
) -> None:
    """The last line, without its newline, is handed on once the answer has ended."""
    events: list[tuple[str, object]] = []
    threads: set[str] = set()

    def on_event(event: dict[str, Any]) -> bool:
        events.append((event["type"], event["object"]["n"]))
        threads.add(threading.current_thread().name)
        return True

    def on_open() -> None:
        events.append(("open", threading.current_thread().name))

    api.watch("/events", {}, on_event, timeout=30, on_open=on_open)
    assert events == [
        ("open", "transfers-127.0.0.1"),
        ("ADDED", 1),
        ("MODIFIED", 2),
        ("DELETED", 3),
    ]
    assert threads == {"transfers-127.0.0.1", threading.current_thread().name}


def test_a_watch_that_takes_more_than_its_share_of_the_pump_is_handed_to_its_own_thread(
    api: ApiClient,
) -> None:
    """Pieces each well under the budget, back to back: the share runs out in a few."""
    threads: list[str] = []

    def busy(_: bytes) -> bool:
        threads.append(threading.current_thread().name)
        time.sleep(transfers_budget() / 4)
        return len(threads) < 40

    api.stream("/big", {}, busy, on_pump=True, timeout=60)
    handed = threads.index(threading.current_thread().name)
    assert 1 <= handed <= 10, threads
    assert set(threads[:handed]) == {"transfers-127.0.0.1"}
    assert set(threads[handed:]) == {threading.current_thread().name}


def test_an_event_longer_than_the_pump_takes_is_decoded_on_the_watchs_own_thread(
    api: ApiClient,
) -> None:
    """Looked at by its length, before it is decoded; the watch stays handed over."""
    seen: list[tuple[str, int, str]] = []

    def on_event(event: dict[str, Any]) -> bool:
        data = event["object"]["data"]
        seen.append((event["type"], len(data), threading.current_thread().name))
        return True

    api.watch("/long-event", {}, on_event, timeout=30)
    here = threading.current_thread().name
    assert seen == [("ADDED", client.PUMP_LINE_BYTES + 1, here), ("DELETED", 5, here)]


def test_a_stream_its_caller_left_takes_no_more_of_the_pump() -> None:
    pump = transfers.Transfers("left")
    transfer = pump.transfer(pycurl.Curl())
    handled: list[bytes] = []
    body = client._Body(
        [b"HTTP/1.1 200 OK\r\n"], lambda piece: handled.append(piece) or True, transfer
    )
    assert body.on_pump(b"before") is None
    transfer.give_up()
    assert body.on_pump(b"after") == 0
    assert handled == [b"before"]


def test_a_watch_its_handler_ends_hands_nothing_more_on_not_even_the_rest_of_a_line(
    api: ApiClient,
) -> None:
    """`on_event` returning False ends the watch where it is."""
    seen: list[str] = []
    api.watch("/events", {}, lambda event: seen.append(event["type"]) or False, timeout=30)
    assert seen == ["ADDED"]


@pytest.mark.parametrize("on_pump", [False, True])
def test_abort_ends_a_quiet_stream(api: ApiClient, on_pump: bool) -> None:
    abort, opened = threading.Event(), threading.Event()
    failures: list[TransportError] = []

    def read() -> None:
        try:
            api.stream(
                "/quiet", {}, lambda _: True, on_open=opened.set, abort=abort, timeout=60,
                on_pump=on_pump,
            )  # fmt: skip
        except TransportError as exc:
            failures.append(exc)

    reader = _in_thread(read)
    assert opened.wait(30)
    abort.set()
    reader.join(30)
    assert [f.code for f in failures] == [pycurl.E_ABORTED_BY_CALLBACK]
    assert _get(api, "/small") == b'{"ok":true}'


def test_the_pump_leaves_when_idle_and_comes_back(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfers, "IDLE_SECONDS", 0.2)
    pump, starts = transfers.Transfers._pump, []

    def counted(self: transfers.Transfers) -> None:
        starts.append(1)
        pump(self)

    monkeypatch.setattr(transfers.Transfers, "_pump", counted)
    assert _get(api, "/small") == b'{"ok":true}'
    wait_for(lambda: api._transfers._thread is None, 10, what="the pump to leave")
    assert _get(api, "/small") == b'{"ok":true}'
    assert len(starts) == 2


def test_streams_one_after_another_while_the_pump_leaves_are_all_carried(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream asked for as the pump decides to leave is carried, by it or the next."""
    monkeypatch.setattr(transfers, "IDLE_SECONDS", 0.0)
    answers: list[bytes] = []
    many = _in_thread(lambda: answers.extend(_get(api, "/small") for _ in range(100)))
    many.join(120)
    assert answers == [b'{"ok":true}'] * 100


def test_a_pump_that_breaks_fails_what_it_carried_and_the_next_transfer_starts_afresh(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    collect = transfers.Transfers._collect
    broken = threading.Event()

    def breaks_once(self: transfers.Transfers) -> None:
        if self._running and not broken.is_set():
            broken.set()
            raise RuntimeError("boom")
        collect(self)

    monkeypatch.setattr(transfers.Transfers, "_collect", breaks_once)
    failures = _failures(lambda: _get(api, "/small"))
    assert [str(f) for f in failures] == [
        "curl error 2: GET /small: the transfers of 127.0.0.1 broke: RuntimeError: boom"
    ]
    [logged] = [r for r in caplog.records if r.getMessage() == "a cluster's transfers failed"]
    assert getattr(logged, "cluster", None) == "127.0.0.1" and logged.exc_info is not None
    assert logged.name == transfers.__name__  # what the other tests' checks look for
    assert _get(api, "/small") == b'{"ok":true}'


def test_a_pump_that_breaks_taking_a_stream_fails_it_and_those_asked_after(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    take = transfers.Transfers._take

    def breaks(self: transfers.Transfers, what: str, transfer: transfers.Transfer) -> None:
        if what == "start" and not broken:
            broken.append(1)
            raise RuntimeError("boom")
        take(self, what, transfer)

    broken: list[int] = []
    monkeypatch.setattr(transfers.Transfers, "_take", breaks)
    failures = _failures(lambda: _get(api, "/small"))
    assert [f.code for f in failures] == [pycurl.E_FAILED_INIT]
    assert _get(api, "/small") == b'{"ok":true}'


def test_an_error_answer_raises_with_its_body_and_never_says_opened(api: ApiClient) -> None:
    opened: list[int] = []
    with pytest.raises(ApiException) as missing:
        api.stream("/missing", {}, lambda _: True, on_open=lambda: opened.append(1))
    assert (missing.value.status, opened) == (404, [])
    assert '"message":"gone"' in missing.value.body


def test_what_the_reader_raises_ends_the_stream_and_is_raised_as_it_was(api: ApiClient) -> None:
    def fails(_: bytes) -> bool:
        raise KeyError("the reader's own")

    with pytest.raises(KeyError, match="the reader's own"):
        api.stream("/big", {}, fails)
    assert _get(api, "/small") == b'{"ok":true}'


def test_a_quiet_stream_ends_at_its_timeout(api: ApiClient) -> None:
    with pytest.raises(TransportError) as timed_out:
        api.stream("/quiet", {}, lambda _: True, timeout=0.5)
    assert timed_out.value.code == pycurl.E_OPERATION_TIMEDOUT


def test_a_stream_aborted_while_paused_leaves_the_others_going(
    api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Its reader, back after the abort, reads what waited and asks for a resume the pump no
    longer has a transfer for."""
    stuck, release, abort = threading.Event(), threading.Event(), threading.Event()
    failures: list[TransportError] = []

    def on_data(_: bytes) -> bool:
        if not stuck.is_set():
            stuck.set()
            release.wait(60)
        return True

    def read() -> None:
        try:
            api.stream("/big", {}, on_data, abort=abort, timeout=60)
        except TransportError as exc:
            failures.append(exc)

    reader = _in_thread(read)
    assert stuck.wait(30)
    wait_for(lambda: Streams.written > transfers.BACKLOG_BYTES, 30, what="the stream paused")
    abort.set()
    wait_for(lambda: not api._transfers._running, 30, what="the aborted stream ended")
    release.set()
    reader.join(30)
    assert [f.code for f in failures] == [pycurl.E_ABORTED_BY_CALLBACK]
    assert _get(api, "/small") == b'{"ok":true}'
    assert not [r for r in caplog.records if r.name == transfers.__name__], "the pump broke"


def test_a_socket_the_pump_cannot_watch_fails_its_streams_not_leaves_them_waiting(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pycurl only prints what libcurl's socket callback raises: the pump fails what it
    carries, where the stream would have waited on a socket nobody watched."""
    watch = transfers.Transfers._watch
    broken: list[int] = []

    def breaks(self: transfers.Transfers, what: int, fd: int) -> None:
        if not broken:
            broken.append(1)
            raise OSError("epoll refused it")
        watch(self, what, fd)

    monkeypatch.setattr(transfers.Transfers, "_watch", breaks)
    failures = _failures(lambda: api.stream("/quiet", {}, lambda _: True))
    assert [f.code for f in failures] == [pycurl.E_FAILED_INIT]
    assert "epoll refused it" in str(failures[0])
    assert _get(api, "/small") == b'{"ok":true}'


def test_a_reader_that_leaves_as_its_paused_stream_resumes_ends_that_stream_alone(
    api: ApiClient, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant's client gone from a followed log: its reader, caught up enough to have asked
    for a resume, stops at once; the resume must not break the cluster's other streams."""
    stuck, release = threading.Event(), threading.Event()
    read = [0]

    def on_data(piece: bytes) -> bool:
        if not stuck.is_set():
            stuck.set()
            release.wait(60)
        read[0] += len(piece)
        return big[0]._paused  # leaves as soon as it has asked for the resume

    other_opened = threading.Event()
    others = _failures(lambda: None)  # the quiet stream's failures, if any, once it ends
    quiet = _in_thread(
        lambda: others.extend(
            _failures(lambda: api.stream("/quiet", {}, lambda _: True, on_open=other_opened.set))
        )
    )
    assert other_opened.wait(30)
    received, big = transfers.Transfer.received, list[transfers.Transfer]()

    def seen(self: transfers.Transfer, data: bytes) -> int | None:
        if not big:  # the quiet stream sends no piece: this is the big one
            big.append(self)
        return received(self, data)

    monkeypatch.setattr(transfers.Transfer, "received", seen)
    take = transfers.Transfers._take

    resumes = []

    def late(self: transfers.Transfers, what: str, transfer: transfers.Transfer) -> None:
        if what == "resume":  # the pump gets to it once the reader has left (as it may)
            wait_for(lambda: transfer._given_up, 10, what="the reader to leave", interval=0.01)
            resumes.append(transfer)
        take(self, what, transfer)

    monkeypatch.setattr(transfers.Transfers, "_take", late)
    reader = _in_thread(lambda: api.stream("/big", {}, on_data, timeout=60))
    assert stuck.wait(30)
    wait_for(lambda: big and big[0]._paused, 30, what="the stream paused")
    release.set()
    reader.join(30)
    assert read[0] >= transfers.BACKLOG_BYTES // 2, "left once it had asked for the resume"
    wait_for(lambda: resumes == big, 10, what="the pump to take the resume asked")
    wait_for(lambda: big[0].message != "", 10, what="the left stream ended")
    assert (big[0].code, big[0].message) == (transfers.ABORTED, "its reader stopped")
    assert _get(api, "/small") == b'{"ok":true}'
    assert not [r for r in caplog.records if r.name == transfers.__name__], "the pump broke"
    Streams.quiet_release.set()  # the quiet stream ends as its server does, never failed
    quiet.join(30)
    assert others == []


def test_what_comes_after_the_reader_left_is_refused_not_queued_for_nobody() -> None:
    """Between `give_up` and the pump taking it, libcurl may hand over more: refused (0 ends
    the transfer), where queued it would wait unread for nobody."""
    pump = transfers.Transfers("give-up")
    transfer = pump.transfer(pycurl.Curl())
    assert transfer.received(b"before") is None
    transfer.give_up()
    assert transfer.received(b"after") == 0
    assert transfer._unread == len(b"before")
    assert transfer._items.qsize() == 1, "nothing queued for a reader that has left"


def _body(handler: Callable[[bytes], bool]) -> client._Body:
    """A stream's body on the pump as `stream` makes it, for the allowance's arithmetic."""
    transfer = transfers.Transfers("allowance").transfer(pycurl.Curl())
    return client._Body([b"HTTP/1.1 200 OK\r\n"], handler, transfer)


def test_a_watchs_allowance_never_grows_past_the_budget_however_long_it_was_quiet() -> None:
    def handler(piece: bytes) -> bool:
        if piece == b"slow":
            time.sleep(client.PUMP_BUDGET_SECONDS * 2)
        return True

    body = _body(handler)
    body.on_pump(b"a")
    body._since -= 100  # quiet for 100 s: 10 s of refill, capped at the budget
    body.on_pump(b"slow")
    assert body.handed_over


def test_a_watchs_allowance_comes_back_with_the_time_that_passes() -> None:
    def handler(_: bytes) -> bool:
        time.sleep(client.PUMP_BUDGET_SECONDS * 0.4)
        return True

    body = _body(handler)
    for _ in range(3):  # without the refill, the third would go past the budget
        body.on_pump(b"s")
        body._since -= 1  # a second later: the budget is whole again
    assert not body.handed_over


def test_a_line_of_the_limit_exactly_stays_on_the_pump_counted_across_pieces() -> None:
    limit = client.PUMP_LINE_BYTES
    whole = _body(lambda _: True)
    whole.on_pump(b"x" * limit + b"\n")
    assert not whole.handed_over
    cut = _body(lambda _: True)
    cut.on_pump(b"{}\n" + b"x" * (limit - 1))
    cut.on_pump(b"x\n")
    assert not cut.handed_over
    cut.on_pump(b"x" * (limit + 1))
    assert cut.handed_over


def test_a_piece_that_starts_with_the_newline_ends_the_line_held_before_it() -> None:
    seen: list[dict[str, int]] = []
    events = client._Events(lambda event: seen.append(event) or True)
    events.write(b'{"a":1}')
    events.write(b'\n{"b":2}\n')
    assert seen == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize(
    ("vernum", "said"), [(0x075801, 1), (0x080000, 1), (0x0800FF, 1), (0x080100, 0), (0x080E01, 0)]
)
def test_a_libcurl_before_8_1_is_named_in_the_log_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, vernum: int, said: int
) -> None:
    """A pycurl built on a libcurl that keeps a paused stream's buffer after the stream ends
    (before 8.1) is said once, at the first pump, whatever pumps follow; 8.1 and later, never."""
    monkeypatch.setattr(transfers, "_older_libcurl_said", False)
    real = pycurl.version_info()
    named = f"{vernum >> 16}.{(vernum >> 8) & 0xFF}.{vernum & 0xFF}"
    monkeypatch.setattr(
        transfers.pycurl, "version_info", lambda: (real[0], named, vernum, *real[3:])
    )
    for _ in range(3):
        transfers.Transfers("libcurl-check")
    warned = [r for r in caplog.records if "libcurl before 8.1" in r.getMessage()]
    assert len(warned) == said
    assert all(getattr(r, "libcurl", "") == named for r in warned)
