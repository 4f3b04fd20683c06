"""`kubectl trainjob ui`: a read-only web view of the manager, served on this machine with the
viewer's own identity, as `kubectl proxy --www` serves files beside the API.

The page (plugin/kubectl_trainjob/ui/, plain files, nothing fetched from elsewhere) reads the
manager's API through `/k8s/...` on this server, which adds the kubeconfig's credentials and
passes on GET requests of an allow-list only: TrainJobs, Kueue's MultiKueueClusters,
ClusterQueues and LocalQueues, and the dispatcher's view.trainjob.dev API (a TrainJob's story
and log, the workers). The API server's RBAC decides what the viewer sees; no credential reaches
the browser. Requests whose Host is not this server's loopback address (DNS rebinding) or that
come from another origin are refused, and the page may load nothing but its own files.

Behind a platform's authenticating proxy (`--behind-proxy`, the chart's `ui`), the server holds
no credential at all: each request must carry the viewer's own bearer token, as the proxy
passes it, and it is that token that reads the manager; Host and Origin must be the proxy's
public name (`--public-host`).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import hashlib
import json
import os
import re
import socket
import ssl
import time
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yarl
from aiohttp import web
from kubernetes import client, config

from kubebase.shares import Shares
from trainjob_api import constants as c

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ASSETS = Path(__file__).parent / "ui"
_NAME = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
# What the page may read, and nothing else (GET only, so watch and follow too).
ALLOWED = re.compile(
    "^/(?:"
    rf"apis/{re.escape(c.TRAINER_API)}/(?:namespaces/{_NAME}/)?trainjobs(?:/{_NAME})?"
    rf"|apis/view\.{re.escape(c.DOMAIN)}/v1alpha1/workers"
    rf"|apis/view\.{re.escape(c.DOMAIN)}/v1alpha1/namespaces/{_NAME}/trainjobs/{_NAME}/(?:story|log)"
    rf"|apis/{re.escape(c.KUEUE_API)}/(?:multikueueclusters|clusterqueues)"
    rf"|apis/{re.escape(c.KUEUE_API)}/(?:namespaces/{_NAME}/)?localqueues"
    ")$"
)
MAX_STREAMS = 64  # watches and log streams held open at once to the manager
MAX_WATCHES = 32  # watches one /watch request merges
# Behind a proxy the server is shared, per viewer and per group as the manager's log streams
# are (kubebase.shares): one viewer (the user the API server names for the token,
# SelfSubjectReview; two tokens of one user are one viewer) holds at most MAX_VIEWER_STREAMS
# of the MAX_STREAMS (a page's watches and its reads). A person is a group of their own; the
# ServiceAccounts of a namespace are one group (a tenant may make many) and the viewers the API
# server could not name are one group together, each holding at most MAX_NAMESPACE_STREAMS. A
# group is never the namespace a read names: that is known before the manager has said the
# viewer may read it, so a viewer could otherwise take another namespace's share with reads the
# manager refuses. A stream without a free slot is refused (429) rather than waited for, so
# that no viewer's pages hold up another's.
MAX_VIEWER_STREAMS = MAX_WATCHES + 8
MAX_NAMESPACE_STREAMS = 16
SERVICE_ACCOUNT = re.compile(rf"system:serviceaccount:({_NAME}):[^:]+")
WHO_SECONDS = 60.0  # the user a token names is asked again after this
WHO_UNNAMED_SECONDS = 5.0  # and a token the API server could not name, after this
MAX_TOKENS_KNOWN = 4096
LINE_LIMIT = 4 << 20  # the longest watch event passed on (a TrainJob is far smaller)
# Lines waiting for one page's answer, in bytes (one line always fits): a page that reads
# slowly holds at most this much of the server's memory, not 64 lines of LINE_LIMIT.
QUEUE_BYTES = 8 << 20
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


@dataclass
class Manager:
    """How to reach the manager as the viewer: address, TLS and the current credentials."""

    configuration: client.Configuration
    context: str
    namespace: str

    @property
    def server(self) -> str:
        return str(self.configuration.host).rstrip("/")

    @functools.cached_property
    def ssl_context(self) -> ssl.SSLContext | bool:
        cfg = self.configuration
        if not cfg.verify_ssl:
            return False  # the kubeconfig says insecure-skip-tls-verify: as kubectl does
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, cfg.key_file)
        return context

    def headers(self) -> dict[str, str]:
        """The current token, if the kubeconfig has one: read through the client's hook, which
        runs an exec plugin (a cloud's login) or reads a token file again, as kubectl would."""
        token = self.configuration.get_api_key_with_prefix("authorization")
        return {"Authorization": token} if token else {}


# In a pod: the manager's API by the `kubernetes` Service, checked against the cluster's CA.
IN_CLUSTER_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"


def in_cluster(server: str | None, ca: str | None) -> Manager:
    """The manager without a credential of ours (--behind-proxy): its address (default: the
    pod's `kubernetes` Service) and the CA its certificate is checked against."""
    if not server:
        host, port = (
            os.environ.get("KUBERNETES_SERVICE_HOST"),
            os.environ.get("KUBERNETES_SERVICE_PORT", "443"),
        )
        if not host:
            raise ValueError("--server is needed outside a pod (no KUBERNETES_SERVICE_HOST)")
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    cfg = client.Configuration()
    cfg.host = server
    cfg.ssl_ca_cert = ca or IN_CLUSTER_CA
    if not Path(cfg.ssl_ca_cert).is_file():
        raise ValueError(f"--certificate-authority {cfg.ssl_ca_cert}: no such file")
    return Manager(cfg, "in-cluster", "default")


BEARER = re.compile(r"Bearer [!-~]{1,8192}")


def bearer(request: web.Request) -> dict[str, str] | None:
    """The viewer's token as the proxy passed it (a bearer token only), or None."""
    said = request.headers.get("Authorization", "")
    return {"Authorization": said} if BEARER.fullmatch(said) else None


def load(kubeconfig: str | None, context: str | None, namespace: str | None) -> Manager:
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    current = next((x for x in contexts if x["name"] == context), active)
    ns = namespace or (current.get("context") or {}).get("namespace") or "default"
    return Manager(cfg, str(current.get("name")), ns)


# Whether the viewer may list TrainJobs in every namespace (a SelfSubjectAccessReview).
EVERYWHERE = {
    "apiVersion": "authorization.k8s.io/v1",
    "kind": "SelfSubjectAccessReview",
    "spec": {
        "resourceAttributes": {
            "group": c.TRAINER_GROUP,
            "resource": c.TRAINJOB_PLURAL,
            "verb": "list",
        }
    },
}
REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
WHO_AM_I = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
SELF_SUBJECT_REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
REVIEW_SECONDS = 10.0  # a viewer's SelfSubjectAccessReview, behind a proxy


def may_list_everywhere(manager: Manager) -> bool:
    api = client.AuthorizationV1Api(client.ApiClient(manager.configuration))
    try:
        return bool(api.create_self_subject_access_review(EVERYWHERE).status.allowed)
    except client.ApiException:
        return False


class Server:
    """The page's files, its session, and the read-only pass-through to the manager."""

    def __init__(
        self,
        manager: Manager,
        namespaces: list[str],
        everywhere: bool,
        public_hosts: Sequence[str] = (),
    ) -> None:
        """`public_hosts`: behind a proxy, the Host names it is reached by; the viewer's
        token then comes with each request, and `everywhere` is asked per viewer."""
        self.manager, self.namespaces, self.everywhere = manager, namespaces, everywhere
        self.public_hosts = set(public_hosts)
        self.port = 0
        self._streams = asyncio.Semaphore(MAX_STREAMS)
        self.shares = Shares(MAX_STREAMS, MAX_VIEWER_STREAMS, "reads", MAX_NAMESPACE_STREAMS)
        # token digest -> (until when, the user it names), the least recently used first
        self._users: collections.OrderedDict[str, tuple[float, str]] = collections.OrderedDict()
        self._session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._file)
        app.router.add_get("/ui/{name}", self._file)
        app.router.add_get("/session.json", self._session_info)
        app.router.add_get("/k8s/{path:.*}", self._pass_on)
        app.router.add_get("/watch", self._watch_many)
        app.router.add_get("/healthz", self._healthz)
        app.on_cleanup.append(self._close)
        return app

    @property
    def behind_proxy(self) -> bool:
        return bool(self.public_hosts)

    def _auth(self, request: web.Request) -> dict[str, str] | None:
        """The credentials a read of the manager carries: behind a proxy, the viewer's token
        from the request (None when it has none); else none here (the kubeconfig's are added
        as the request goes, see `_get`)."""
        return bearer(request) if self.behind_proxy else {}

    @contextlib.asynccontextmanager
    async def _slot(self, auth: dict[str, str]) -> AsyncIterator[None]:
        """One of MAX_STREAMS for a stream to the manager. Behind a proxy: _Busy when the
        viewer or its group holds its share already, or none is free."""
        if not self.behind_proxy:
            async with self._streams:
                yield
            return
        viewer = await self._viewer(auth)
        with self.shares.slot(viewer, *group(viewer)) as refused:
            if refused is not None:
                raise _Busy(refused)
            yield

    async def _viewer(self, auth: dict[str, str]) -> str:
        """Who holds a stream: the user the API server names for the token (asked once a
        minute per token), else the token itself (the API server could not say)."""
        digest = hashlib.sha256(auth["Authorization"].encode()).hexdigest()
        now = time.monotonic()
        known = self._users.get(digest)
        if known is not None and known[0] > now:
            self._users.move_to_end(digest)
            return known[1]
        user = f"token:{digest}"
        try:
            review = self._call("POST", WHO_AM_I, {}, auth, SELF_SUBJECT_REVIEW, REVIEW_SECONDS)
            async with await review as answer:
                found = await answer.json() if answer.status == 201 else {}
            name = (((found or {}).get("status") or {}).get("userInfo") or {}).get("username")
            if name:
                user = f"user:{name}"
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
            pass
        # A token the API server could not name is asked again soon: until then its viewer
        # shares the unnamed viewers' group.
        named = user.startswith("user:")
        self._users[digest] = (now + (WHO_SECONDS if named else WHO_UNNAMED_SECONDS), user)
        self._users.move_to_end(digest)
        while len(self._users) > MAX_TOKENS_KNOWN:
            self._users.popitem(last=False)
        return user

    async def _healthz(self, _request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok\n")

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == "/healthz":  # the kubelet's probe, by the pod's address
            return await handler(request)
        host = request.headers.get("Host", "")
        ours = self.public_hosts or {
            f"127.0.0.1:{self.port}",
            f"localhost:{self.port}",
            f"[::1]:{self.port}",
        }
        if host not in ours:
            return web.Response(status=403, text=f"refused: Host {host!r} is not this server\n")
        origin = request.headers.get("Origin")
        if origin is not None and origin.split("://", 1)[-1] not in ours:
            return web.Response(status=403, text=f"refused: a request from {origin}\n")
        if request.headers.get("Sec-Fetch-Site") == "cross-site":
            return web.Response(status=403, text="refused: a request from another site\n")
        response = await handler(request)
        if not response.prepared:  # a stream has them already
            response.headers.update(SECURITY_HEADERS)
        return response

    async def _file(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info.get("name", "index.html")
        path = ASSETS / name
        if "/" in name or path.suffix not in CONTENT_TYPES or not path.is_file():
            return web.Response(status=404, text="not found\n")
        return web.Response(body=path.read_bytes(), content_type=CONTENT_TYPES[path.suffix])

    async def _session_info(self, request: web.Request) -> web.StreamResponse:
        everywhere, namespaces = self.everywhere, self.namespaces
        if self.behind_proxy:
            auth = self._auth(request)
            if auth is None:
                return _no_token()
            # the namespaces the page's address names (?namespaces=a,b), else the server's
            asked = [n for n in request.query.get("namespaces", "").split(",") if n]
            wrong = [n for n in asked if not (re.fullmatch(_NAME, n) and len(n) <= 63)]
            if wrong or len(asked) > MAX_WATCHES:
                why = f"not a namespace: {wrong[0][:70]!r}" if wrong else "too many"
                return _status(400, f"?namespaces= names at most {MAX_WATCHES}; {why}")
            namespaces = asked or namespaces
            everywhere = await self._may_list_everywhere(auth)
        return web.json_response(
            {
                "context": self.manager.context,
                "server": self.manager.server,
                "allNamespaces": everywhere,
                "namespaces": namespaces,
                "trainerApi": c.TRAINER_API,
                "kueueApi": c.KUEUE_API,
                "viewApi": f"view.{c.DOMAIN}/v1alpha1",
                "queueLabel": c.KUEUE_QUEUE_NAME_LABEL,
            }
        )

    async def _may_list_everywhere(self, auth: dict[str, str]) -> bool:
        try:
            review = self._call("POST", REVIEWS, {}, auth, EVERYWHERE, REVIEW_SECONDS)
            async with await review as answer:
                found = await answer.json() if answer.status == 201 else {}
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
            return False
        return bool(((found or {}).get("status") or {}).get("allowed"))

    async def _get(
        self, path: str, query: Mapping[str, str], auth: dict[str, str]
    ) -> aiohttp.ClientResponse:
        """GET `path` of the manager as the viewer; OSError-like failures raise."""
        return await self._call("GET", path, query, auth)

    async def _call(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        auth: dict[str, str],
        body: Mapping[str, Any] | None = None,
        seconds: float | None = None,
    ) -> aiohttp.ClientResponse:
        """`seconds`: the whole call's limit (a stream has none; only connecting has one)."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        cfg = self.manager.configuration
        # The viewer's token from the proxy, or the kubeconfig's: an exec plugin may take a
        # while, on a thread, not in the loop.
        headers = auth or await asyncio.to_thread(self.manager.headers)
        return await self._session.request(
            method,
            self.manager.server + path,
            params=query,
            json=body,
            timeout=aiohttp.ClientTimeout(total=seconds, sock_connect=10),
            headers={**headers, "Accept": "application/json, */*"},
            ssl=self.manager.ssl_context,
            server_hostname=getattr(cfg, "tls_server_name", None) or None,
            proxy=cfg.proxy or None,  # the kubeconfig's proxy-url
        )

    async def _pass_on(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["path"]
        if not ALLOWED.fullmatch(path):
            return _status(403, f"the view does not read {path}")
        auth = self._auth(request)
        if auth is None:
            return _no_token()
        try:
            async with self._slot(auth):
                return await self._relay(request, path, auth)
        except _Busy as exc:
            answer = _status(429, str(exc))
            answer.headers["Retry-After"] = "5"
            return answer

    async def _relay(
        self, request: web.Request, path: str, auth: dict[str, str]
    ) -> web.StreamResponse:
        try:
            upstream = await self._get(path, request.query, auth)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return _status(502, f"the manager {self.manager.server} is unreachable: {exc}")
        async with upstream:
            response = web.StreamResponse(status=upstream.status, headers=SECURITY_HEADERS)
            response.content_type = upstream.content_type
            await response.prepare(request)
            try:
                async for piece in upstream.content.iter_any():
                    await response.write(piece)
            except (aiohttp.ClientError, ConnectionResetError):
                pass  # the page left, or the manager ended the stream: the page retries
            return response

    async def _watch_many(self, request: web.Request) -> web.StreamResponse:
        """Several watches on one connection (a browser keeps at most six to a server): each
        `p` is a watch's path and query; each line is `{"i": N, "event": EVENT}` from the
        N-th, and the answer ends after a line `{"i": N, "end": CODE, "message": ...}` when
        any of them ends or fails, for the page to list again what it must and watch anew."""
        wanted = [yarl.URL(p) for p in request.query.getall("p", [])]
        if not 0 < len(wanted) <= MAX_WATCHES:
            return _status(400, f"give 1 to {MAX_WATCHES} watches (p=PATH?watch=1&...)")
        for url in wanted:
            if url.is_absolute() or not ALLOWED.fullmatch(url.path):
                return _status(403, f"the view does not read {url.path}")
            if url.query.get("watch") not in ("1", "true"):
                return _status(400, f"{url.path}: not a watch (watch=1)")
        auth = self._auth(request)
        if auth is None:
            return _no_token()
        lines = Lines(QUEUE_BYTES)
        response = web.StreamResponse(headers=SECURITY_HEADERS)
        response.content_type = "application/x-ndjson"
        await response.prepare(request)
        pumps = [
            asyncio.create_task(self._pump(i, url, lines, auth)) for i, url in enumerate(wanted)
        ]
        try:
            while True:
                line, last = await lines.get()
                await response.write(line)
                if last:
                    return response
        except (ConnectionResetError, aiohttp.ClientError):
            return response  # the page left
        finally:
            for pump in pumps:
                pump.cancel()

    async def _pump(self, i: int, url: yarl.URL, lines: Lines, auth: dict[str, str]) -> None:
        """The `i`-th watch of an answer, into its lines. Its slot is held until the answer
        ends (the answer cancels it), not only while it reads: the lines it queued for a
        slow page are under that slot's share until they are written."""
        try:
            async with self._slot(auth):
                await lines.put(await self._watch(i, url, lines, auth))
                await asyncio.Event().wait()
        except _Busy as exc:
            await lines.put(_end(i, 429, str(exc)))

    async def _watch(
        self, i: int, url: yarl.URL, lines: Lines, auth: dict[str, str]
    ) -> tuple[bytes, bool]:
        """The watch's events into `lines`; the line that ends it."""
        try:
            async with await self._get(url.path, url.query, auth) as upstream:
                if upstream.status != 200:
                    said = await upstream.content.read(64 << 10)
                    try:
                        message = str(json.loads(said).get("message") or "")
                    except (ValueError, AttributeError):
                        message = said.decode(errors="replace")[:500]
                    return _end(i, upstream.status, message or upstream.reason or "")
                head = b'{"i":%d,"event":' % i
                split = LineSplitter(LINE_LIMIT)
                async for piece in upstream.content.iter_any():
                    try:
                        whole = split.feed(piece)
                    except OverflowError:
                        return _end(i, 502, "a watch event over 4 MiB")
                    for line in whole:
                        if line.strip():
                            await lines.put((head + line + b"}\n", False))
                return _end(i, 200, "the watch ended")
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return _end(i, 502, f"the manager {self.manager.server}: {exc}")


def _end(i: int, code: int, message: str) -> tuple[bytes, bool]:
    """The last line of an answer: its `i`-th watch ended with `code`."""
    line = json.dumps({"i": i, "end": code, "message": message}, separators=(",", ":"))
    return line.encode() + b"\n", True


class LineSplitter:
    """A stream's pieces into whole lines, in time linear in the bytes: a line that spans
    many pieces is joined once, when its end comes (joining and splitting it again at each
    piece made a 4 MiB line cost gigabytes of copying). A line longer than `limit` raises
    OverflowError."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pending: list[bytes] = []
        self._size = 0

    def feed(self, piece: bytes) -> list[bytes]:
        """The lines `piece` ends (without their newlines)."""
        *ended, rest = piece.split(b"\n")
        if ended:
            ended[0] = b"".join([*self._pending, ended[0]])
            self._pending, self._size = [], 0
        if rest:
            self._pending.append(rest)
            self._size += len(rest)
        if self._size > self._limit or any(len(line) > self._limit for line in ended):
            raise OverflowError(f"a line over {self._limit} bytes")
        return ended


class Lines:
    """The lines of one answer, queued between the watches that make them and the response
    that writes them, bounded in bytes (`most`; one line always fits)."""

    def __init__(self, most: int) -> None:
        self._most = most
        self._queue: collections.deque[tuple[bytes, bool]] = collections.deque()
        self._bytes = 0
        self._changed = asyncio.Condition()

    async def put(self, item: tuple[bytes, bool]) -> None:
        async with self._changed:
            await self._changed.wait_for(
                lambda: not self._queue or self._bytes + len(item[0]) <= self._most
            )
            self._queue.append(item)
            self._bytes += len(item[0])
            self._changed.notify_all()

    async def get(self) -> tuple[bytes, bool]:
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._queue))
            item = self._queue.popleft()
            self._bytes -= len(item[0])
            self._changed.notify_all()
            return item


def group(viewer: str) -> tuple[str, int]:
    """The group whose share a viewer's reads count to, and that share (see
    MAX_NAMESPACE_STREAMS): a person's is their own, as large as one viewer's."""
    account = SERVICE_ACCOUNT.fullmatch(viewer.removeprefix("user:"))
    if account:
        return f"the ServiceAccounts of namespace {account[1]}", MAX_NAMESPACE_STREAMS
    if viewer.startswith("user:"):
        return f"viewer {viewer.removeprefix('user:')}", MAX_VIEWER_STREAMS
    return "the viewers the API server could not name", MAX_NAMESPACE_STREAMS


def _status(code: int, message: str) -> web.Response:
    return web.json_response({"kind": "Status", "code": code, "message": message}, status=code)


class _Busy(Exception):
    """No stream slot for this viewer now (behind a proxy): answered 429, saying why."""


def _no_token() -> web.Response:
    return _status(
        401,
        "no bearer token: this view serves behind an authenticating proxy that passes each "
        "viewer's own token in the Authorization header (docs/users/web-view.md)",
    )


async def _serve(server: Server, address: str, port: int, open_browser: bool) -> None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    server.port = sock.getsockname()[1]
    runner = web.AppRunner(server.app())
    await runner.setup()
    await web.SockSite(runner, sock).start()
    host = f"[{address}]" if family == socket.AF_INET6 else address
    url = f"http://{host}:{server.port}/"
    if server.behind_proxy:
        print(f"TrainJobs of {server.manager.server} at {url}", flush=True)
        print(f"Behind the proxy of {', '.join(sorted(server.public_hosts))}: read-only, "
              "each request with its viewer's own token.", flush=True)  # fmt: skip
    else:
        scope = "every namespace" if server.everywhere else ", ".join(server.namespaces)
        print(f"TrainJobs of {server.manager.server} ({scope}) at {url}", flush=True)
        print("Read-only, with your kubeconfig's identity. Ctrl-C to stop.", flush=True)
    if open_browser:
        webbrowser.open(url)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def run(args: argparse.Namespace) -> str:
    hosts = [h for h in (args.public_host or "").split(",") if h]
    if args.behind_proxy:
        if not hosts:
            raise ValueError("--behind-proxy needs --public-host, the proxy's name(s) for it")
        manager = in_cluster(args.server, args.certificate_authority)
        everywhere = False  # asked for each viewer
        namespaces = [n for n in (args.namespaces or "").split(",") if n] or ["default"]
    else:
        if args.address not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(
                f"--address {args.address}: the view serves on loopback addresses only "
                "(--behind-proxy serves others the way docs/users/web-view.md says)"
            )
        if hosts or args.server or args.certificate_authority:
            raise ValueError(
                "--public-host, --server and --certificate-authority go with --behind-proxy"
            )
        manager = load(args.kubeconfig, args.context, args.namespace)
        namespaces = [n for n in (args.namespaces or "").split(",") if n] or [manager.namespace]
        everywhere = may_list_everywhere(manager)
    server = Server(manager, namespaces, everywhere, hosts)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: the server stops, nothing to say
        asyncio.run(
            _serve(server, args.address, args.port, not (args.no_browser or args.behind_proxy))
        )
    return ""
