"""The admission webhook server on a loopback port, over real TLS: what it answers, when it
refuses, and a renewed certificate taken without a restart."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from clusters.helpers.waiting import (
    QuietHandler,
    http_server,
    loopback_client,
    sooner_than,
    wait_for,
)
from kubecontrol import web
from kubecontrol.admission import REVIEW_FROM, UNCACHED_BURST, Verdict, rate_limited
from kubecontrol.certs import Material, issue
from kubecontrol.cluster import Cluster
from kubecontrol.deadline import Deadline
from kubecontrol.webhook_server import Route, WebhookServer, in_thread
from tests.support.builders import edit
from trainjob_api.constants import LOCAL_QUEUE
from worker_controller import webhooks as worker_webhooks

Dict = dict[str, Any]
TRAINJOBS = {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"}


def review(uid: str = "u-1", resource: Dict = TRAINJOBS, operation: str = "CREATE") -> Dict:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "resource": resource,
            "operation": operation,
            "namespace": "team-a",
            "object": {"metadata": {"name": "tj"}, "spec": {}},
        },
    }


def write(directory: Path, material: Material) -> tuple[Path, Path]:
    (directory / "tls.crt").write_bytes(material.tls_crt)
    (directory / "tls.key").write_bytes(material.tls_key)
    return directory / "tls.crt", directory / "tls.key"


class Served:
    def __init__(self, server: WebhookServer, ca: bytes, stop: threading.Event) -> None:
        self.server, self.ca, self.stop = server, ca, stop

    def connect(self) -> http.client.HTTPSConnection:
        """A connection kept alive between requests, as the API server keeps one."""
        context = ssl.create_default_context(cadata=self.ca.decode())
        return http.client.HTTPSConnection(
            "127.0.0.1", self.server.port, context=context, timeout=10
        )

    def post(
        self, path: str, body: bytes, host: str = "127.0.0.1", ca: bytes | None = None
    ) -> tuple[int, bytes]:
        context = ssl.create_default_context(cadata=(ca or self.ca).decode())
        conn = http.client.HTTPSConnection(host, self.server.port, context=context, timeout=10)
        try:
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()

    def ask(self, path: str, request: Dict) -> Dict:
        status, data = self.post(path, json.dumps(request).encode())
        assert status == 200, data
        answer: Dict = json.loads(data)
        return answer


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    stop = threading.Event()

    def start(
        routes: dict[str, Route],
        ready: threading.Event | None = None,
        check: float = 5.0,
        more: list[web.RouteDef] | None = None,
    ) -> Served:
        material = issue(["127.0.0.1", "localhost"], dt.datetime.now(dt.UTC))
        server = WebhookServer(
            "127.0.0.1",
            0,
            write(tmp_path, material),
            routes,
            ready or ready_now(),
            resource=("trainer.kubeflow.org", "trainjobs"),
            check_seconds=check,
            more=more or [],
        )
        server.start(stop)
        if ready is None:
            wait_listening(server.port)
        return Served(server, material.ca_crt, stop)

    yield start
    stop.set()


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except ConnectionRefusedError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.05)


def ready_now() -> threading.Event:
    ready = threading.Event()
    ready.set()
    return ready


async def suspend(admission: Dict) -> Verdict:
    return Verdict(patch=({"op": "add", "path": "/spec/suspend", "value": True},))


def test_a_mutating_answer_carries_the_patch_and_the_uid(serve: Any) -> None:
    served = serve({"/mutate": suspend})
    answer = served.ask("/mutate", review(uid="abc"))
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == "abc" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == [
        {"op": "add", "path": "/spec/suspend", "value": True}
    ]


def test_other_resources_and_operations_pass_untouched(serve: Any) -> None:
    served = serve({"/mutate": suspend})
    pods = {"group": "", "version": "v1", "resource": "pods"}
    for request in (review(resource=pods), review(operation="UPDATE")):
        response = served.ask("/mutate", request)["response"]
        assert response["allowed"] is True and "patch" not in response


def test_a_refusal_names_the_reason_and_code(serve: Any) -> None:
    async def no_queue(admission: Dict) -> Verdict:
        return Verdict(allowed=False, message="LocalQueue 'q' does not exist", code=422)

    response = serve({"/validate": no_queue}).ask("/validate", review())["response"]
    assert response["allowed"] is False
    assert response["status"] == {"code": 422, "message": "LocalQueue 'q' does not exist"}


def test_it_listens_only_once_the_caches_are_filled(serve: Any) -> None:
    """As a Service sends nothing to a replica that is not ready: refused connections, and
    the port is ours all along (bound, not listening yet)."""
    ready = threading.Event()
    served = serve({"/mutate": suspend}, ready=ready)
    with pytest.raises(ConnectionRefusedError):
        served.ask("/mutate", review())
    with socket.socket() as other, pytest.raises(OSError):
        other.bind(("127.0.0.1", served.server.port))
    ready.set()
    wait_listening(served.server.port)
    assert served.ask("/mutate", review())["response"]["allowed"] is True


def test_a_failing_handler_is_a_refusal_that_says_why(serve: Any) -> None:
    def broken(admission: Dict, deadline: Deadline) -> Verdict:
        raise ConnectionError("the API server is away")

    response = serve({"/validate": in_thread(broken)}).ask("/validate", review())["response"]
    assert response["allowed"] is False and response["status"]["code"] == 500
    assert "ConnectionError: the API server is away" in response["status"]["message"]


def test_a_review_whose_reads_are_spent_is_refused_to_be_sent_again(serve: Any) -> None:
    """Past its source's allowance of reads of what the caches do not hold (the address it
    came from, in its namespace), a judge that needs one is refused with 429 saying why and
    when to try again (the API server's Retry-After)."""
    seen: list[tuple[str, str]] = []

    def crowded(admission: Dict, deadline: Deadline) -> Verdict:
        seen.append(REVIEW_FROM.get())  # on the judge's thread
        rate_limited(lambda *_: None)(LOCAL_QUEUE, "default", "team-a")  # nothing there
        return Verdict()

    served = serve({"/mutate": in_thread(crowded)})
    for _ in range(UNCACHED_BURST):
        assert served.ask("/mutate", review())["response"]["allowed"] is True  # no patch
    response = served.ask("/mutate", review())["response"]
    assert response["allowed"] is False and response["status"]["code"] == 429
    message = response["status"]["message"]
    assert "LocalQueue team-a/default is not in this replica's watch yet" in message
    assert response["status"]["details"] == {"retryAfterSeconds": 1}
    assert set(seen) == {("127.0.0.1", "team-a")}


def test_unknown_paths_and_bodies_that_are_no_review_are_http_errors(serve: Any) -> None:
    served = serve({"/mutate": suspend})
    assert served.post("/elsewhere", json.dumps(review()).encode())[0] == 404
    assert served.post("/mutate", b"{not json")[0] == 400
    assert served.post("/mutate", b'{"request": {}}')[0] == 400


def test_a_blocking_handler_does_not_hold_up_other_calls(serve: Any) -> None:
    release, started = threading.Event(), threading.Event()

    def slow(admission: Dict, deadline: Deadline) -> Verdict:
        started.set()
        release.wait(10)
        return Verdict()

    served = serve({"/slow": in_thread(slow), "/mutate": suspend})
    waiting = threading.Thread(target=served.ask, args=("/slow", review()))
    waiting.start()
    try:
        assert started.wait(10), "the slow call never reached its handler"
        assert served.ask("/mutate", review())["response"]["allowed"] is True
        assert waiting.is_alive() and not release.is_set()  # answered while it was held
    finally:
        release.set()
        waiting.join()


def test_a_renewed_certificate_is_served_without_a_restart(serve: Any, tmp_path: Path) -> None:
    served = serve({"/mutate": suspend}, check=0.2)
    renewed = issue(["127.0.0.1", "localhost"], dt.datetime.now(dt.UTC))  # a new CA too
    write(tmp_path, renewed)
    deadline = time.monotonic() + 10
    while True:
        try:  # 127.0.0.1: no SNI in the handshake; localhost: with SNI
            for host in ("127.0.0.1", "localhost"):
                assert (
                    served.post("/mutate", json.dumps(review()).encode(), host, renewed.ca_crt)[0]
                    == 200
                )
            break
        except ssl.SSLError:
            assert time.monotonic() < deadline, "the renewed certificate was never served"
            time.sleep(0.1)
    with pytest.raises(ssl.SSLError):
        served.post("/mutate", json.dumps(review()).encode())  # the old CA no longer verifies


def test_a_taken_port_is_an_error_naming_the_address(serve: Any, tmp_path: Path) -> None:
    taken = socket.create_server(("127.0.0.1", 0))
    try:
        material = issue(["127.0.0.1"], dt.datetime.now(dt.UTC))
        server = WebhookServer(
            "127.0.0.1",
            taken.getsockname()[1],
            write(tmp_path, material),
            {},
            ready_now(),
            resource=("trainer.kubeflow.org", "trainjobs"),
        )
        with pytest.raises(OSError, match=f"127.0.0.1:{taken.getsockname()[1]}"):
            server.start(threading.Event())
    finally:
        taken.close()


def test_a_trainjob_as_large_as_the_api_server_stores_is_judged(serve: Any) -> None:
    """etcd takes objects up to 1.5 MiB; aiohttp's default limit of a body is 1 MiB."""
    large = review()
    edit(large["request"]["object"]).annotations({"big": "x" * (1536 * 1024)})
    assert serve({"/mutate": suspend}).ask("/mutate", large)["response"]["allowed"] is True


def test_a_certificate_that_does_not_load_is_an_error_naming_the_file(tmp_path: Path) -> None:
    mine = issue(["127.0.0.1"], dt.datetime.now(dt.UTC))
    other = issue(["127.0.0.1"], dt.datetime.now(dt.UTC))
    cert, key = write(tmp_path, mine)
    key.write_bytes(other.tls_key)  # not this certificate's key
    server = WebhookServer(
        "127.0.0.1", 0, (cert, key), {}, ready_now(), resource=("trainer.kubeflow.org", "trainjobs")
    )
    with pytest.raises(ssl.SSLError, match=r"cannot load .*tls\.crt"):
        server.start(threading.Event())


# A pod's address: the whole of 127/8 is this host's, so a client can come from another
# address than the API server's (127.0.0.1) as a training pod would.
POD = "127.0.0.2"


def _posted(
    served: Served, length: int, body: bytes, source: str = "127.0.0.1", path: str = "/mutate"
) -> ssl.SSLSocket:
    """A TLS connection to the server (from `source`) on which a review of `length` bytes
    was begun with `body` (the whole of it, or less: the rest never comes)."""
    context = ssl.create_default_context(cadata=served.ca.decode())
    raw = socket.create_connection(
        ("127.0.0.1", served.server.port), timeout=30, source_address=(source, 0)
    )
    conn = context.wrap_socket(raw, server_hostname="127.0.0.1")
    conn.sendall(
        b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
        % (path.encode(), length, body)
    )
    return conn


def test_an_idle_connection_is_closed_after_the_keepalive(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiohttp's own default kept an idle connection for 3630 s."""
    monkeypatch.setattr("kubecontrol.webhook_server.KEEPALIVE_SECONDS", 1.0)
    served = serve({"/mutate": suspend})
    conn = _posted(served, 2, b"{}")
    assert conn.recv(4096).startswith(b"HTTP/1.1 400")  # answered, connection kept
    # then nothing: the server closes it once idle for 1 s; a connection kept (the default
    # 100 s, or aiohttp's 3630 s) fails the recv at the socket's own 30 s timeout
    while conn.recv(4096):
        pass


def test_a_body_that_comes_too_slowly_is_refused_and_a_big_one_unread(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kubecontrol.webhook_server.READ_SECONDS", 1.0)
    served = serve({"/mutate": suspend})
    conn = _posted(served, 100, b"{")
    started = time.monotonic()
    assert conn.recv(4096).startswith(b"HTTP/1.1 408")
    sooner_than(time.monotonic() - started, 10, "the default READ_SECONDS")
    status, _ = served.post("/mutate", b" " * (3 * 1024 * 1024 + 1))
    assert status == 413


def test_a_handler_that_takes_too_long_is_a_refusal_saying_so(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kubecontrol.webhook_server.JUDGE_SECONDS", 0.5)

    async def slow(admission: Dict) -> Verdict:
        await asyncio.sleep(5)
        return Verdict()

    answer = serve({"/slow": slow}).ask("/slow", review())
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"] == {
        "code": 503,
        "message": "no verdict within 0.5s; try again",
    }


def test_a_judge_waiting_on_the_api_server_stops_once_its_review_is_answered_503(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's mutating judge looks a default LocalQueue up from an API server that
    never answers: the review is refused at its deadline, and the judge's thread is free soon
    after (its call waited no longer than the deadline). Before, the look-up went on for its
    own timeout, 15 s, and four more tries, while the review had long been answered."""
    monkeypatch.setattr("kubecontrol.webhook_server.JUDGE_SECONDS", 0.5)
    asked, release, ended = threading.Event(), threading.Event(), threading.Event()

    class Silent(QuietHandler):
        def do_GET(self) -> None:
            asked.set()
            release.wait(30)

    with contextlib.ExitStack() as stack:
        port = stack.enter_context(http_server(Silent))
        stack.callback(release.set)  # before the API server closes: it waits for its threads
        cluster = Cluster("worker", loopback_client(port), "test")
        settings = SimpleNamespace(manage_jobs_without_queue_name=False)
        no_queues = SimpleNamespace(local_queue=lambda *_: None)  # a queue made moments ago
        ctx = SimpleNamespace(
            cluster=cluster, caches=no_queues, settings=settings, trainjob_schema=None
        )

        def judge(admission: Dict, deadline: Deadline) -> Verdict:
            try:
                return worker_webhooks.on_trainjob_mutate(ctx, admission, deadline)  # type: ignore[arg-type]
            finally:
                ended.set()

        answer = serve({"/mutate": in_thread(judge)}).ask("/mutate", review())["response"]
        assert answer["status"] == {"code": 503, "message": "no verdict within 0.5s; try again"}
        assert asked.is_set(), "the judge never asked the API server"
        assert ended.wait(5), "the judge still works for a review answered 503"


def test_judges_run_on_at_most_max_in_flight_threads_however_many_reviews_time_out(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Judges that never return (nor look at their deadline): each review is answered 503 at
    its deadline, which frees its slot but not its thread. The next reviews' judges wait for
    one of the server's MAX_IN_FLIGHT threads, and never begin once their own review has been
    answered: released at the end, the first three return and the nine queued behind them
    never run. Before, each ran on the loop's default executor, as many at once as it had
    threads, and a judge begun after its answer ran all the same. JUDGE_SECONDS is short but
    not tight: each wave's judges must begin within it on a loaded machine."""
    monkeypatch.setattr("kubecontrol.webhook_server.MAX_IN_FLIGHT", 3)
    monkeypatch.setattr("kubecontrol.webhook_server.MAX_IN_FLIGHT_EACH", 3)
    monkeypatch.setattr("kubecontrol.webhook_server.JUDGE_SECONDS", 2.0)
    release = threading.Event()
    lock, calls, threads = threading.Lock(), [0], set()

    def stuck(admission: Dict, deadline: Deadline) -> Verdict:
        with lock:
            calls[0] += 1
            threads.add(threading.get_ident())
        release.wait(30)
        return Verdict()

    served = serve({"/mutate": in_thread(stuck)})
    answers: list[Dict] = []
    clients: list[threading.Thread] = []
    try:
        for wave in range(4):  # 3 at once, the address's share: the next once they are answered
            batch = [
                threading.Thread(
                    target=lambda uid=f"u{wave}-{i}": answers.append(
                        served.ask("/mutate", review(uid))
                    )
                )
                for i in range(3)
            ]
            clients += batch
            for client in batch:
                client.start()
            for client in batch:
                client.join(20)
        codes = [a["response"]["status"]["code"] for a in answers]
        assert codes == [503] * 12
        assert (calls[0], len(threads)) == (3, 3), "judges begun, and their threads"
        # every review is answered: the stuck judges return, and what was queued behind them
        # is taken from the pool's queue before these three, which wait for each other
        release.set()
        drained = threading.Barrier(3, timeout=20)
        last = [served.server._judges.submit(drained.wait) for _ in range(3)]
        for done in last:
            done.result(30)
        assert calls[0] == 3, "a judge began after its review was answered 503"
    finally:
        release.set()
        for client in clients:
            client.join(20)


def test_a_judge_whose_review_ran_out_of_time_before_a_thread_took_it_never_begins(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review's judge waits in the pool's queue behind a judge that never returns; the
    review's deadline passes while the server's loop is too busy to answer it 503 (and so to
    take the judge off the queue), and then a thread takes it: it never begins. The loop is
    held here by a route that blocks it, the queue's thread freed once the deadline passed."""
    monkeypatch.setattr("kubecontrol.webhook_server.MAX_IN_FLIGHT", 1)
    monkeypatch.setattr("kubecontrol.webhook_server.MAX_IN_FLIGHT_EACH", 1)
    monkeypatch.setattr("kubecontrol.webhook_server.JUDGE_SECONDS", 2.0)
    deadlines: list[Deadline] = []

    class Kept(Deadline):
        def __init__(self, seconds: float) -> None:
            super().__init__(seconds)
            deadlines.append(self)

    monkeypatch.setattr("kubecontrol.webhook_server.Deadline", Kept)
    release, hogging, unhog = threading.Event(), threading.Event(), threading.Event()
    calls: list[str] = []

    def stuck(admission: Dict, deadline: Deadline) -> Verdict:
        calls.append(admission["uid"])
        release.wait(30)
        return Verdict()

    async def hog(request: web.Request) -> web.Response:
        hogging.set()
        unhog.wait(30)  # blocks the server's loop: no timeout of it fires meanwhile
        return web.Response(text="done")

    served = serve({"/mutate": in_thread(stuck)}, more=[web.post("/hog", hog)])
    answers: dict[str, int] = {}

    def ask(uid: str) -> None:
        answers[uid] = served.ask("/mutate", review(uid))["response"]["status"]["code"]

    first = threading.Thread(target=ask, args=("a",))
    hogged = threading.Thread(target=lambda: served.post("/hog", b""))
    second = threading.Thread(target=ask, args=("b",))
    try:
        first.start()
        first.join(20)
        assert answers == {"a": 503}  # its judge still holds the only thread
        second.start()
        wait_for(lambda: served.server._judges._work_queue.qsize() == 1, 10, what="b queued")
        hogged.start()
        assert hogging.wait(10), "the loop was not held"
        wait_for(lambda: deadlines[1].left() == 0, 10, what="b's deadline passed")
        release.set()  # the thread takes b's judge, which the loop could not take back
        served.server._judges.submit(lambda: None).result(10)  # after b's, on the one thread
        assert calls == ["a"], "a judge began after its review's deadline passed"
    finally:
        release.set()
        unhog.set()
        for client in (first, hogged, second):
            client.join(20)
    assert answers == {"a": 503, "b": 503}


def test_a_judge_is_told_to_give_up_when_its_review_ends_before_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review whose handler is cancelled long before JUDGE_SECONDS (the server stopping
    past SHUTDOWN_SECONDS cancels the handlers still at work): its judge, waiting by its
    deadline, stops at once rather than at JUDGE_SECONDS, its thread free for the next."""
    monkeypatch.setattr("kubecontrol.webhook_server.JUDGE_SECONDS", 60.0)
    began, stopped = threading.Event(), threading.Event()

    def patient(admission: Dict, deadline: Deadline) -> Verdict:
        began.set()
        deadline.sleep(60)  # as a look-up bounded by what is left of the deadline waits
        stopped.set()
        return Verdict()

    files = (tmp_path / "tls.crt", tmp_path / "tls.key")  # never read: the server never starts
    server = WebhookServer(
        "127.0.0.1", 0, files, {}, ready_now(), resource=("trainer.kubeflow.org", "trainjobs")
    )

    async def cancelled() -> None:
        judged = asyncio.create_task(
            server._judged_in_time("/mutate", in_thread(patient), review()["request"])
        )
        assert await asyncio.to_thread(began.wait, 10), "the judge never began"
        judged.cancel()
        with pytest.raises(asyncio.CancelledError):
            await judged

    try:
        asyncio.run(cancelled())
        assert stopped.wait(10), "the judge still waits for a review no one waits for"
    finally:
        server._judges.shutdown(wait=False, cancel_futures=True)


def _review_on(conn: http.client.HTTPSConnection, uid: str) -> http.client.HTTPResponse:
    conn.request("POST", "/mutate", json.dumps(review(uid)).encode())
    answer = conn.getresponse()
    answer.read()
    return answer


def test_stopping_answers_the_review_under_way_and_closes_each_connection_cleanly(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server keeps connections to a webhook and does not send a POST again: a
    review that reaches a replica as it stops is answered, never cut off."""
    monkeypatch.setattr("kubecontrol.webhook_server.DRAIN_SECONDS", 3.0)
    started = threading.Event()

    async def slow(admission: Dict) -> Verdict:
        started.set()
        await asyncio.sleep(3.5)  # still judging when the drain ends
        return Verdict()

    served = serve({"/mutate": suspend, "/slow": slow})
    idle, busy = served.connect(), served.connect()
    assert _review_on(idle, "u-1").getheader("Connection") != "close"  # kept alive
    busy.request("POST", "/slow", json.dumps(review("u-2")).encode())
    assert started.wait(5)
    served.stop.set()
    # the idle connection is closed by the server at once, with a FIN: no reset, nothing lost
    assert idle.sock is not None
    idle.sock.settimeout(5)
    closing = time.monotonic()
    assert idle.sock.recv(1) == b""
    sooner_than(time.monotonic() - closing, 3, "waiting for the end of the drain")
    # new connections are still served while the API server learns the replica goes, and
    # told to close after their answer
    late = served.connect()
    assert _review_on(late, "u-3").getheader("Connection") == "close"
    # the review under way when it stopped gets its answer, then the connection closes
    answer = busy.getresponse()
    assert answer.status == 200 and json.loads(answer.read())["response"]["uid"] == "u-2"
    assert answer.getheader("Connection") == "close"
    assert served.server.stopped.wait(5)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", served.server.port), timeout=1)


def test_beyond_the_limit_the_oldest_idle_connection_makes_room_and_busy_ones_are_kept(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idle connections held by whoever reaches the port never keep the API server out."""
    monkeypatch.setattr("kubecontrol.webhook_server.MAX_CONNECTIONS", 3)
    began = threading.Semaphore(0)

    async def slow(admission: Dict) -> Verdict:
        began.release()
        await asyncio.sleep(2)
        return Verdict()

    served = serve({"/mutate": suspend, "/slow": slow})
    busy = served.connect()
    busy.request("POST", "/slow", json.dumps(review("u-0")).encode())
    assert began.acquire(timeout=5)
    oldest, newer = served.connect(), served.connect()
    for i, conn in enumerate((oldest, newer)):
        assert _review_on(conn, f"u-{i}").status == 200
    assert _review_on(served.connect(), "u-2").status == 200  # served: the oldest made room
    assert oldest.sock is not None
    oldest.sock.settimeout(5)
    assert oldest.sock.recv(1) == b""
    assert _review_on(newer, "u-3").status == 200  # the newer one is kept
    assert busy.getresponse().status == 200  # and the busy one, older than both, answered


def test_a_pod_trickling_bodies_on_every_connection_never_keeps_the_api_server_out(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a connection mid-request was never made to give room, so connections that
    trickled a body (a pod needs no token to begin a request) closed the API server's new
    connection at once, and every TrainJob create was refused."""
    monkeypatch.setattr("kubecontrol.webhook_server.MAX_CONNECTIONS", 8)
    served = serve({"/mutate": suspend})
    held = [_posted(served, 65536, b"{", source=POD) for _ in range(8)]
    time.sleep(0.5)  # all of them mid-request
    answered: list[float] = []
    for i in range(5):  # the API server, a new connection for each review
        started = time.monotonic()
        assert served.ask("/mutate", review(f"u-{i}"))["response"]["allowed"] is True
        answered.append(time.monotonic() - started)
    sooner_than(max(answered), 10, "waiting for the pod's requests to end (READ_SECONDS)")
    closed = 0
    for conn in held:  # the pod gave up its own to make room
        conn.settimeout(5)
        try:
            closed += conn.recv(1) == b""
        except OSError:
            closed += 1
        conn.close()
    assert closed >= 1


def test_a_pod_posting_reviews_meets_its_share_of_the_judges(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reviews POSTed straight to the port by a pod take at most their share of the judge
    slots: the API server's are judged at once, the pod's beyond its share get 429."""
    monkeypatch.setattr("kubecontrol.webhook_server.MAX_IN_FLIGHT", 3)
    monkeypatch.setattr("kubecontrol.webhook_server.MAX_IN_FLIGHT_EACH", 2)
    began = threading.Semaphore(0)
    release = threading.Event()

    async def slow(admission: Dict) -> Verdict:
        began.release()
        await asyncio.to_thread(release.wait, 10)
        return Verdict()

    served = serve({"/mutate": suspend, "/slow": slow})
    judged = []
    for i in range(2):  # the pod's share
        data = json.dumps(review(f"p-{i}")).encode()
        conn = _posted(served, len(data), data, source=POD, path="/slow")
        judged.append(conn)
        assert began.acquire(timeout=5)
    try:
        data = json.dumps(review("p-9")).encode()
        late = _posted(served, len(data), data, source=POD)
        late.settimeout(5)
        answer = late.recv(65536)
        assert b'"code":429' in answer, answer  # at once, not after the others
        late.close()
        said = served.ask("/mutate", review("api-1"))  # the API server: the slot left
        assert said["response"]["allowed"] is True
    finally:
        release.set()
        for conn in judged:
            conn.settimeout(10)
            assert conn.recv(65536).startswith(b"HTTP/1.1 200")
            conn.close()


def test_a_request_not_answered_within_the_deadline_has_its_connection_closed(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the route: a request's answer begins within REQUEST_SECONDS of its headers."""
    monkeypatch.setattr("kubecontrol.webhook_server.REQUEST_SECONDS", 1.0)
    monkeypatch.setattr("kubecontrol.webhook_server.SWEEP_SECONDS", 0.2)

    async def never(request: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.Response(text="late")

    served = serve({"/mutate": suspend}, more=[web.get("/never", never)])
    context = ssl.create_default_context(cadata=served.ca.decode())
    conn = context.wrap_socket(
        socket.create_connection(("127.0.0.1", served.server.port), timeout=40),
        server_hostname="127.0.0.1",
    )
    conn.sendall(b"GET /never HTTP/1.1\r\nHost: x\r\n\r\n")
    started = time.monotonic()
    # Closed, with a TLS goodbye (EOF) or a reset; the socket's own timeout is neither.
    with contextlib.suppress(ConnectionResetError, ssl.SSLError):
        assert conn.recv(1) == b"", "an answer after the deadline"
    sooner_than(time.monotonic() - started, 30, "the handler's own answer")


def test_an_answered_request_no_longer_runs_against_the_deadline(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """REQUEST_SECONDS bounds a request until its answer begins; a connection kept open
    after its answer (the API server's, between reviews) is idle, never cut by it."""
    monkeypatch.setattr("kubecontrol.webhook_server.REQUEST_SECONDS", 1.0)
    monkeypatch.setattr("kubecontrol.webhook_server.SWEEP_SECONDS", 0.2)
    served = serve({"/mutate": suspend})
    asking = served.connect()
    assert _review_on(asking, "u-1").status == 200
    time.sleep(2.0)  # ten sweeps, twice the deadline
    assert _review_on(asking, "u-2").status == 200  # the same connection, kept


def test_a_connection_that_asks_nothing_is_closed_long_before_the_keepalive(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idle between requests a connection is kept 100 s, longer than the API server keeps
    one; a connection that never asks is not."""
    monkeypatch.setattr("kubecontrol.webhook_server.FIRST_REQUEST_SECONDS", 0.5)
    served = serve({"/mutate": suspend})
    context = ssl.create_default_context(cadata=served.ca.decode())
    silent = context.wrap_socket(
        socket.create_connection(("127.0.0.1", served.server.port), timeout=30),
        server_hostname="127.0.0.1",
    )
    asking = served.connect()
    assert _review_on(asking, "u-1").status == 200
    opened = time.monotonic()
    assert silent.recv(1) == b""  # closed by the server
    sooner_than(time.monotonic() - opened, 10, "the default FIRST_REQUEST_SECONDS")
    time.sleep(0.5)
    assert _review_on(asking, "u-2").status == 200  # the same connection, kept


def test_a_review_no_api_server_sends_is_refused_before_its_handler(serve: Any) -> None:
    """The review's N2: a review forged from a pod whose namespace, name or labels no API
    server sends (a namespace that climbs to a watch of every pod) reached the handler, which
    looked things up with it. Refused with 400 naming the field; the handler never runs; a
    review whose resource is not even an object is passed over, not a 500."""
    judged: list[Dict] = []

    async def look_up(admission: Dict) -> Verdict:
        judged.append(admission)
        return Verdict()

    served = serve({"/mutate": look_up})
    forged = review()
    for field, value in (
        ("namespace", "x/../../../../../api/v1/pods?watch=true&"),
        ("namespace", "Team-A"),
        ("name", "../secrets"),
    ):
        bad = {**forged, "request": {**forged["request"], field: value}}
        response = served.ask("/mutate", bad)["response"]
        assert response["allowed"] is False and response["status"]["code"] == 400
        assert f"request.{field}" in response["status"]["message"]
    for meta in ({"name": "tj", "namespace": "a.b"}, {"name": "tj", "labels": {"q": "a,b=c"}}):
        bad = {**forged, "request": {**forged["request"], "object": {"metadata": meta}}}
        response = served.ask("/mutate", bad)["response"]
        assert response["status"]["code"] == 400, meta
    shapeless = {**forged, "request": {**forged["request"], "resource": "x", "operation": []}}
    assert served.ask("/mutate", shapeless)["response"]["allowed"] is True
    assert judged == []
    served.ask("/mutate", forged)  # a review an API server sends reaches its handler
    assert [j["uid"] for j in judged] == ["u-1"]


def test_a_connection_whose_review_is_judged_is_never_closed_to_make_room(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server's address holding the most connections (a flood from many pod addresses
    leaves it the busiest), all of them mid-request: a new connection closes one of them, and
    never the one whose review is being judged, even when it is the oldest."""
    monkeypatch.setattr("kubecontrol.webhook_server.MAX_CONNECTIONS", 4)
    began, release = threading.Semaphore(0), threading.Event()

    async def slow(admission: Dict) -> Verdict:
        began.release()
        await asyncio.to_thread(release.wait, 20)
        return Verdict()

    served = serve({"/mutate": suspend, "/slow": slow})
    judged = served.connect()
    judged.request("POST", "/slow", json.dumps(review("u-0")).encode())
    assert began.acquire(timeout=5)
    trickling = [_posted(served, 65536, b"{") for _ in range(3)]  # the same address, newer
    try:
        wait_for(  # each of them mid-request: none idle, the judged one the oldest
            lambda: len(served.server._asking_since) == 4, 10, what="4 requests under way"
        )
        assert served.ask("/mutate", review("u-1"))["response"]["allowed"] is True
        release.set()
        answer = judged.getresponse()
        assert answer.status == 200 and json.loads(answer.read())["response"]["uid"] == "u-0"
        closed = 0
        for conn in trickling:  # one of them gave room
            conn.settimeout(5)
            try:
                closed += conn.recv(1) == b""
            except OSError:
                closed += 1
        assert closed >= 1
    finally:
        release.set()
        for conn in trickling:
            conn.close()
