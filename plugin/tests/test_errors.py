"""What each command says when the manager refuses, fails or cannot be reached: one line on
stderr, as kubectl says it, exit code 1, never a traceback (plugin/kubectl_trainjob/__main__.py).

The manager here is a loopback HTTP server that answers every request with one status; the
unreachable one is a port nothing listens on."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from kubectl_trainjob.__main__ import main

COMMANDS = [
    ["list"],
    ["list", "-A"],
    ["list", "-o", "json"],
    ["describe", "bert"],
    ["describe", "bert", "-o", "yaml"],
    ["logs", "bert"],
    ["progress", "bert"],
    ["progress", "bert", "--watch"],
]

# status -> the Status the API server sends (reason, message), and the line the user reads
ANSWERS = {
    401: (
        ("Unauthorized", "Unauthorized"),
        "error: You must be logged in to the server (Unauthorized)",
    ),
    403: (
        ("Forbidden", 'trainjobs.trainer.kubeflow.org "bert" is forbidden: User "u" cannot get'),
        'Error from server (Forbidden): trainjobs.trainer.kubeflow.org "bert" is forbidden: '
        'User "u" cannot get',
    ),
    429: (("TooManyRequests", "slow down"), "Error from server (TooManyRequests): slow down"),
    500: (("InternalError", "etcd is gone"), "Error from server (InternalError): etcd is gone"),
    503: (("ServiceUnavailable", "not ready"), "Error from server (ServiceUnavailable): not ready"),
}


def _handler(status: int, body: bytes) -> type[BaseHTTPRequestHandler]:
    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Answer


def _status(code: int) -> bytes:
    (reason, message), _ = ANSWERS[code]
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    return json.dumps({**body, "reason": reason, "message": message}).encode()


@pytest.fixture
def serve() -> Iterator[Callable[[int, bytes], str]]:
    """serve(status, body): a manager at http://127.0.0.1:PORT answering every GET so."""
    running: list[tuple[ThreadingHTTPServer, threading.Thread]] = []

    def start(status: int, body: bytes) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(status, body))
        serving = threading.Thread(target=server.serve_forever, args=(0.05,), name="manager")
        serving.start()
        running.append((server, serving))
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server, serving in running:
        server.shutdown()
        server.server_close()
        serving.join()  # shutdown() has ended serve_forever


def _kubeconfig(tmp_path: Path, server: str) -> str:
    path = tmp_path / "config"
    cluster = {"name": "m", "cluster": {"server": server}}
    user = {"name": "u", "user": {"token": "t"}}
    context = {"name": "m", "context": {"cluster": "m", "user": "u", "namespace": "team-a"}}
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "m"}
    config |= {"clusters": [cluster], "users": [user], "contexts": [context]}
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _run(argv: list[str], kubeconfig: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    code = main([*argv, "--kubeconfig", kubeconfig])
    out, err = capsys.readouterr()
    assert (code, out) == (1, ""), (code, out, err)
    return err.splitlines()


def _failure(status: int, argv: list[str]) -> tuple[bytes, str]:
    """What the manager answers with `status`, and the one line the user reads for it."""
    if status == 502:  # a proxy's page, not the API's Status
        return b"<html>bad gateway</html>", "error: the server answered 502 Bad Gateway"
    if status == 404:  # the TrainJob, or for `list` the kind itself (no Trainer CRD)
        body = {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"}
        said = (
            'error: the server doesn\'t have a resource type "trainjobs"'
            if argv[0] == "list"
            else 'error: TrainJob "bert" not found in namespace "team-a"'
        )
        return json.dumps(body).encode(), said
    return _status(status), ANSWERS[status][1]


@pytest.mark.parametrize("status", [*sorted(ANSWERS), 404, 502])
@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_failed_answer_is_one_line_as_kubectl_says_it(
    status: int,
    argv: list[str],
    serve: Callable[[int, bytes], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    body, said = _failure(status, argv)
    assert _run(argv, _kubeconfig(tmp_path, serve(status, body)), capsys) == [said]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_an_unreachable_manager_is_one_line_naming_where(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = f"http://127.0.0.1:{_closed_port()}"
    lines = _run(argv, _kubeconfig(tmp_path, server), capsys)
    assert lines == [f"error: cannot reach the manager at {server}: [Errno 111] Connection refused"]


def test_a_manager_that_does_not_speak_tls_is_one_line_naming_where(
    serve: Callable[[int, bytes], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(200, b"{}").replace("http://", "https://")
    lines = _run(["list"], _kubeconfig(tmp_path, server), capsys)
    assert len(lines) == 1 and "SSL" in lines[0], lines
    assert lines[0].startswith(f"error: cannot reach the manager at {server}: "), lines


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (  # a Status without a message: the HTTP reason stands in
            403,
            b'{"kind": "Status", "reason": "Forbidden"}',
            r"Error from server \(Forbidden\): Forbidden",
        ),
        (  # not a list where one was asked for: one line, never a traceback
            200,
            b"not json",
            r"error: TypeError: string indices must be integers.* \(a bug: please report it\)",
        ),
    ],
)
def test_an_answer_the_plugin_cannot_use_is_one_line(
    status: int,
    body: bytes,
    said: str,
    serve: Callable[[int, bytes], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = _run(["list"], _kubeconfig(tmp_path, serve(status, body)), capsys)
    assert len(lines) == 1 and re.fullmatch(said, lines[0]), lines


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (  # a message with lines of its own: printed as one, not as a forged table
            {"kind": "Status", "reason": "Forbidden", "message": "no\nNAME STATE\nbert Complete"},
            "Error from server (Forbidden): no NAME STATE bert Complete",
        ),
        (  # 5 MB of message: the line is cut
            {"kind": "Status", "reason": "Forbidden", "message": "x" * 5_000_000},
            "Error from server (Forbidden): " + "x" * (1000 - 34) + "...",
        ),
        (  # control characters, each written out as 4: cut after they are
            {"kind": "Status", "reason": "Forbidden", "message": "\x01" * 5000},
            "Error from server (Forbidden): " + "\\x01" * 241 + "\\x...",
        ),
    ],
)
def test_what_a_server_says_is_one_bounded_line(
    body: dict[str, str],
    said: str,
    serve: Callable[[int, bytes], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    manager = serve(403, json.dumps(body).encode())
    assert _run(["list"], _kubeconfig(tmp_path, manager), capsys) == [said]


def test_a_body_nested_too_deep_to_read_is_one_line_with_its_status(
    serve: Callable[[int, bytes], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manager = serve(500, b"[" * 200_000)
    lines = _run(["list"], _kubeconfig(tmp_path, manager), capsys)
    assert lines == ["error: the server answered 500 Internal Server Error"]
