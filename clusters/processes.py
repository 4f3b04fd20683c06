"""Starting, watching and stopping the bed's processes, each tracked by a PID file."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clusters.errors import BedError

HealthCheck = Callable[[], bool]


@dataclass
class Component:
    """One process of one cluster: what to run, where it listens, how to tell it is healthy."""

    cluster: str
    name: str
    argv: list[str]
    ports: list[int]
    health: HealthCheck
    run_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    # A prefix that sets the process up and execs argv in place (same PID): a real node's
    # daemons enter the node's network namespace and cgroup this way.
    wrapper: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.cluster}/{self.name}"

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        """PID of our running process, or None (stale PID files are ignored)."""
        try:
            record = json.loads(self.pid_file.read_text())
        except (OSError, ValueError):
            return None
        pid = int(record["pid"])
        return pid if runs(pid, record["exe"]) else None


def runs(pid: int, program: str) -> bool:
    """True when `pid` is alive and still runs `program` (guards against recycled PIDs): the
    executable itself, or the script a Python interpreter runs (a console script)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":  # zombie: exited, not yet reaped
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return program in (arg.decode(errors="replace") for arg in cmdline[:2])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start(component: Component) -> bool:
    """Start `component` unless it already runs; return True if a process was started."""
    if component.pid() is not None:
        return False
    if not Path(component.argv[0]).is_file():
        raise BedError(
            f"{component.label}: {component.argv[0]} is not built; "
            "run `python -m clusters build` (or `up`, which builds first)"
        )
    for port in component.ports:
        if port_in_use(port):
            raise BedError(
                f"port {port} for {component.label} is already in use by another process; "
                f"stop that process (e.g. `ss -ltnp 'sport = :{port}'`) or choose another "
                "`base_port` in the bed config"
            )
    component.run_dir.mkdir(parents=True, exist_ok=True)
    with component.log_file.open("ab") as log:
        log.write(f"\n=== start {time.strftime('%H:%M:%S')}: {' '.join(component.argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            [*component.wrapper, *component.argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **component.env},
            start_new_session=True,
        )
    component.pid_file.write_text(json.dumps({"pid": proc.pid, "exe": component.argv[0]}))
    # Until the child has exec'd, /proc shows our own command line; wait for the switch.
    deadline = time.monotonic() + 10
    while component.pid() is None and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return True


def wait_healthy(component: Component, timeout: float = 60.0) -> None:
    """Wait until the health check passes; a dead or hung process raises with its log tail."""
    deadline = time.monotonic() + timeout
    while True:
        if component.pid() is None:
            raise BedError(
                f"{component.label} exited during start-up; log: "
                f"{component.log_file}\n--- last lines ---\n"
                f"{log_tail(component.log_file)}"
            )
        if component.health():
            return
        if time.monotonic() > deadline:
            raise BedError(
                f"{component.label} did not become healthy within {timeout:.0f}s; "
                f"log: {component.log_file}\n--- last lines ---\n"
                f"{log_tail(component.log_file)}"
            )
        time.sleep(0.2)


def stop(component: Component, grace: float = 10.0) -> bool:
    """Stop our process (SIGTERM, then SIGKILL); return True if one was running."""
    pid = component.pid()
    component_was_running = pid is not None
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while component.pid() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        if component.pid() is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while component.pid() is not None:
                time.sleep(0.05)
        # A process stops looking like itself (/proc/PID/cmdline empties) before the kernel has
        # closed its sockets: wait for its ports too, or a start right after finds them taken.
        deadline = time.monotonic() + grace
        while any(port_in_use(p) for p in component.ports) and time.monotonic() < deadline:
            time.sleep(0.05)
    component.pid_file.unlink(missing_ok=True)
    return component_was_running


def resident_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def http_ok(
    url: str,
    *,
    context: ssl.SSLContext | None = None,
    expect: str | None = None,
    timeout: float = 2.0,
) -> bool:
    """GET `url`; True on 200 (and `expect` in the body when given)."""
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as resp:
            body = resp.read().decode(errors="replace")
            return resp.status == 200 and (expect is None or expect in body)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def insecure_context() -> ssl.SSLContext:
    """For health probes of components that serve a self-signed loopback certificate."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def client_context(ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.load_cert_chain(str(cert), str(key))
    return ctx
