"""An aggregated API, served beside the webhooks (kubecontrol/webhook_server.py).

The API server's aggregation layer authenticates the user and authorises the request
against RBAC on this API's group and resources, then proxies it here over TLS with its own
client certificate (the front proxy) and the user in request headers. This side checks that
certificate against the CA the cluster publishes in the ConfigMap
`kube-system/extension-apiserver-authentication`, and its name against the allowed names
there; a request without it is refused (401), whatever its headers say. It trusts the
headers only after that.

What is served: the discovery documents of one group-version (`/apis`, `/apis/GROUP`,
`/apis/GROUP/VERSION`), GET on namespaced subresources,
`/apis/GROUP/VERSION/namespaces/NS/RESOURCE/NAME/SUBRESOURCE`, GET by name on namespaced
resources that are only ever read, `/apis/GROUP/VERSION/namespaces/NS/RESOURCE/NAME`, the list
of cluster-scoped resources, `/apis/GROUP/VERSION/RESOURCE`, each by its handler, and the
OpenAPI documents of what they answer (`/openapi/v2`, `/openapi/v3`; kubecontrol/openapi.py).
Errors are `Status` objects, as kubectl shows them.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import orjson
from pydantic import BaseModel

from kubebase.kinds import CONFIG_MAP
from kubebase.objects import Dict
from kubecontrol import openapi, web
from kubecontrol.cluster import Cluster

log = logging.getLogger(__name__)

AUTHENTICATION_CONFIG_MAP = ("kube-system", "extension-apiserver-authentication")


@dataclass(frozen=True)
class Caller:
    """Who asked, as the API server vouched for them."""

    user: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApiRequest:
    """One GET of a namespaced object or its subresource: where, of what, by whom, with which
    query."""

    namespace: str
    name: str
    subresource: str  # "" for the object itself
    caller: Caller
    query: Mapping[str, str]
    http: web.Request


Handler = Callable[[ApiRequest], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class ListRequest:
    """One list of a cluster-scoped resource: of what, by whom."""

    resource: str
    caller: Caller
    query: Mapping[str, str]
    http: web.Request


ListHandler = Callable[[ListRequest], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class ClusterList:
    """A cluster-scoped resource of the group that is only ever listed, with what answers."""

    name: str  # plural
    kind: str  # of each item; the answer is `<kind>List`
    handler: ListHandler
    model: type[BaseModel] | None = None  # of the answer, for its OpenAPI schema


@dataclass(frozen=True)
class Subresource:
    """`RESOURCE/NAME/SUB` of the group's one resource, with what answers GET on it."""

    name: str
    kind: str
    handler: Handler
    model: type[BaseModel] | None = None  # of the answer; None: plain text


@dataclass(frozen=True)
class ReadOnly:
    """A namespaced resource of the group that is only ever read by name."""

    name: str  # plural
    singular: str
    kind: str
    handler: Handler
    model: type[BaseModel] | None = None


@dataclass(frozen=True)
class ApiGroup:
    group: str
    version: str
    resource: str  # plural; namespaced
    subresources: tuple[Subresource, ...] = field(default=())
    lists: tuple[ClusterList, ...] = field(default=())
    read_only: tuple[ReadOnly, ...] = field(default=())

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}"

    def operations(self) -> list[openapi.Operation]:
        """What the group serves, for its OpenAPI documents."""
        base = f"/apis/{self.group_version}"
        named = f"{base}/namespaces/{{namespace}}"
        return [
            *(
                openapi.Operation(
                    f"{named}/{r.name}/{{name}}",
                    f"read the {r.kind}",
                    r.model,
                    r.kind,
                    f"read{r.kind}",
                )
                for r in self.read_only
            ),
            *(
                openapi.Operation(
                    f"{named}/{self.resource}/{{name}}/{sub.name}",
                    f"read the {sub.kind}",
                    sub.model,
                    sub.kind if sub.model is not None else None,
                    f"read{sub.kind}",
                )
                for sub in self.subresources
            ),
            *(
                openapi.Operation(
                    f"{base}/{item.name}",
                    f"list {item.kind} objects",
                    item.model,
                    item.kind,
                    f"list{item.kind}",
                )
                for item in self.lists
            ),
        ]

    def discovery(self, path: str) -> Dict | None:
        """The discovery document at `path` (without a trailing slash), or None."""
        version = {"groupVersion": self.group_version, "version": self.version}
        group = {
            "name": self.group,
            "versions": [version],
            "preferredVersion": version,
        }
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}
        if path == f"/apis/{self.group}":
            return {"kind": "APIGroup", "apiVersion": "v1", **group}
        if path == f"/apis/{self.group_version}":
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": self.group_version,
                "resources": [
                    {
                        "name": f"{self.resource}/{sub.name}",
                        "singularName": "",
                        "namespaced": True,
                        "kind": sub.kind,
                        "verbs": ["get"],
                    }
                    for sub in self.subresources
                ]
                + [
                    {
                        "name": r.name,
                        "singularName": r.singular,
                        "namespaced": True,
                        "kind": r.kind,
                        "verbs": ["get"],
                    }
                    for r in self.read_only
                ]
                + [
                    {
                        "name": item.name,
                        "singularName": "",
                        "namespaced": False,
                        "kind": item.kind,
                        "verbs": ["list"],
                    }
                    for item in self.lists
                ],
            }
        return None


def status(code: int, message: str, reason: str = "") -> web.Response:
    """An error as the API server words one: a `Status` kubectl prints the message of."""
    reasons = {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        405: "MethodNotAllowed",
        409: "Conflict",
        413: "RequestEntityTooLarge",
        422: "Invalid",
        429: "TooManyRequests",
        503: "ServiceUnavailable",
        504: "Timeout",
    }
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or reasons.get(code, "InternalError"),
        "code": code,
    }
    return web.Response(status=code, body=orjson.dumps(body), content_type="application/json")


def _json_list(value: str | None) -> tuple[str, ...]:
    try:
        items = orjson.loads(value) if value else []
    except orjson.JSONDecodeError:
        return ()
    return tuple(str(i) for i in items) if isinstance(items, list) else ()


@dataclass(frozen=True)
class FrontProxyTrust:
    """The cluster's word on its front proxy: whose certificates to accept and which request
    headers carry the user."""

    ca_pem: str
    allowed_names: tuple[str, ...] = ()
    user_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)

    @classmethod
    def from_config_map(cls, config_map: Dict | None) -> FrontProxyTrust | None:
        data = (config_map or {}).get("data") or {}
        ca = data.get("requestheader-client-ca-file")
        if not ca:
            return None  # the cluster has no aggregation layer set up
        return cls(
            ca_pem=ca,
            allowed_names=_json_list(data.get("requestheader-allowed-names")),
            user_headers=_json_list(data.get("requestheader-username-headers"))
            or ("X-Remote-User",),
            group_headers=_json_list(data.get("requestheader-group-headers"))
            or ("X-Remote-Group",),
        )

    def caller(
        self, peer_cert: Dict | None, headers: Mapping[str, str], *, anyone: bool = False
    ) -> Caller | str:
        """The user the front proxy vouches for, or why the request is not from it. The
        certificate has been verified against `ca_pem` in the TLS handshake already. With
        `anyone`, the front proxy's own calls (its availability checks name no user) pass."""
        if not peer_cert:
            return "no client certificate: only the API server's front proxy may call this API"
        names = [
            value
            for rdn in peer_cert.get("subject", ())
            for key, value in rdn
            if key == "commonName"
        ]
        if self.allowed_names and not set(names) & set(self.allowed_names):
            return f"client certificate {names} is not one of the front proxy's names"
        user = next((headers[h] for h in self.user_headers if headers.get(h)), "")
        if not user and not anyone:
            return "the front proxy named no user"
        groups: list[str] = []
        getall = getattr(headers, "getall", None)  # a header may come more than once
        for header in self.group_headers:
            groups += getall(header, []) if getall else [headers.get(header, "")]
        return Caller(user, tuple(g for g in groups if g))


class FrontProxy:
    """Reads the front proxy's trust from the cluster, now and whenever asked again."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self.trust: FrontProxyTrust | None = None  # replaced whole, never changed in place

    def refresh(self) -> None:
        """Read the ConfigMap again. Keeps the last good word when the API server is away."""
        namespace, name = AUTHENTICATION_CONFIG_MAP
        try:
            config_map = self._cluster.get_or_none(CONFIG_MAP, name, namespace)
        except Exception as exc:  # the API server away: keep serving with what we know
            log.debug("front proxy trust not read", extra={"error": str(exc)})
            return
        trust = FrontProxyTrust.from_config_map(config_map)
        changed, self.trust = trust != self.trust, trust
        if changed and trust is None:
            log.warning(
                "the aggregated API refuses every request: no requestheader-client-ca-file "
                "(the API server's --requestheader-* flags)",
                extra={"configmap": f"{namespace}/{name}"},
            )

    def require_client_certificates(self, context: ssl.SSLContext) -> None:
        """Ask callers for a certificate, and verify one that comes against the front proxy's
        CA (the webhook callers send none, and are served as before)."""
        trust = self.trust
        if trust is None:
            return
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=trust.ca_pem)


class AggregatedApi:
    """The routes of one group's API (`routes`), for the webhook server to serve."""

    def __init__(self, group: ApiGroup, front_proxy: FrontProxy) -> None:
        self.group, self.front_proxy = group, front_proxy
        self._subresources = {s.name: s for s in group.subresources}
        self._lists = {item.name: item for item in group.lists}
        self._read_only = {r.name: r for r in group.read_only}
        operations = group.operations()
        self._v2 = openapi.Served.of(openapi.v2_document(group.group, group.version, operations))
        self._v3 = openapi.Served.of(openapi.v3_document(group.group, group.version, operations))
        path = f"apis/{group.group_version}"
        url = f"/openapi/v3/{path}?hash={self._v3.hash}"
        self._v3_root = openapi.Served.of({"paths": {path: {"serverRelativeURL": url}}})

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/apis", self._discovery),
            web.get("/apis/{path:.*}", self._answer),
            web.get("/openapi/v2", self._openapi_v2),
            web.get("/openapi/v3", self._openapi_v3_root),
            web.get("/openapi/v3/apis/{group}/{version}", self._openapi_v3),
        ]

    async def _openapi_v2(self, request: web.Request) -> web.StreamResponse:
        return self._document(request, self._v2)

    async def _openapi_v3_root(self, request: web.Request) -> web.StreamResponse:
        return self._document(request, self._v3_root)

    async def _openapi_v3(self, request: web.Request) -> web.StreamResponse:
        asked = (request.match_info["group"], request.match_info["version"])
        if asked != (self.group.group, self.group.version):
            return status(404, f"the path {request.path} is not served here")
        return self._document(request, self._v3)

    def _document(self, request: web.Request, served: openapi.Served) -> web.StreamResponse:
        """An OpenAPI document to the aggregator or a client it passes on, with the ETag the
        aggregator downloads by (a 304 when it has this one)."""
        caller = self._caller(request, anyone=True)
        if isinstance(caller, web.Response):
            return caller
        etag = f'"{served.hash}"'
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(
            body=served.body,
            content_type="application/json",
            headers={"ETag": etag, "Cache-Control": "no-cache, private"},
        )

    def _caller(self, request: web.Request, *, anyone: bool = False) -> Caller | web.Response:
        trust = self.front_proxy.trust
        if trust is None:
            return status(503, "the aggregated API has no front proxy trust to check calls by")
        transport = request.transport
        peer = transport.get_extra_info("peercert") if transport is not None else None
        caller = trust.caller(peer, request.headers, anyone=anyone)
        if isinstance(caller, str):
            return status(401, caller)
        return caller

    async def _discovery(self, request: web.Request) -> web.StreamResponse:
        caller = self._caller(request, anyone=True)
        if isinstance(caller, web.Response):
            return caller
        document = self.group.discovery(request.path.rstrip("/"))
        if document is None:
            return status(404, f"the path {request.path} is not served here")
        return web.Response(body=orjson.dumps(document), content_type="application/json")

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        parts = request.path.rstrip("/").split("/")[1:]
        if len(parts) == 4:  # apis, group, version, resource
            return await self._list(request, parts)
        if len(parts) == 7:  # apis, group, version, namespaces, NS, resource, NAME
            return await self._read(request, parts)
        if len(parts) == 6 and parts[5] in self._read_only:  # a list of a read-only resource
            caller = self._caller(request)
            if isinstance(caller, web.Response):
                return caller
            kind = self._read_only[parts[5]].singular
            return status(405, f"{parts[5]} can be read by name only: kubectl get {kind} NAME")
        # apis, group, version, namespaces, NS, resource, NAME, subresource
        if len(parts) != 8:
            return await self._discovery(request)
        caller = self._caller(request)
        if isinstance(caller, web.Response):
            return caller
        _, group, version, namespaces, namespace, resource, name, sub = parts
        handler = self._subresources.get(sub)
        ours = (self.group.group, self.group.version, "namespaces", self.group.resource)
        if (group, version, namespaces, resource) != ours or handler is None:
            return status(404, f"the path {request.path} is not served here")
        call = ApiRequest(namespace, name, sub, caller, dict(request.query), request)
        log.debug(
            "read", extra={"user": caller.user, "object": f"{namespace}/{name}", "subresource": sub}
        )
        return await handler.handler(call)

    async def _read(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        caller = self._caller(request)
        if isinstance(caller, web.Response):
            return caller
        _, group, version, namespaces, namespace, resource, name = parts
        served = self._read_only.get(resource)
        ours = (self.group.group, self.group.version, "namespaces")
        if (group, version, namespaces) != ours or served is None:
            return status(404, f"the path {request.path} is not served here")
        log.debug(
            "read",
            extra={"user": caller.user, "resource": resource, "object": f"{namespace}/{name}"},
        )
        return await served.handler(
            ApiRequest(namespace, name, "", caller, dict(request.query), request)
        )

    async def _list(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        caller = self._caller(request)
        if isinstance(caller, web.Response):
            return caller
        _, group, version, resource = parts
        listed = self._lists.get(resource)
        if (group, version) != (self.group.group, self.group.version) or listed is None:
            return status(404, f"the path {request.path} is not served here")
        if request.query.get("watch") in ("1", "true"):
            return status(405, f"{resource} can be listed, not watched")
        log.debug("list", extra={"user": caller.user, "resource": resource})
        return await listed.handler(ListRequest(resource, caller, dict(request.query), request))


def query_int(query: Mapping[str, str], key: str, *, low: int, high: int) -> int | None:
    """An optional whole number in the query, within [low, high]; ValueError naming it."""
    raw = query.get(key)
    if raw in (None, ""):
        return None
    try:
        value = int(str(raw))
    except ValueError:
        raise ValueError(f"{key}={raw!r} is not a whole number") from None
    if not low <= value <= high:
        raise ValueError(f"{key}={value} is out of range [{low}, {high}]")
    return value


def query_bool(query: Mapping[str, str], key: str) -> bool:
    raw = str(query.get(key) or "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise ValueError(f"{key}={raw!r} is not true or false")
    return raw in ("true", "1")
