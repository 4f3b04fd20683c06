"""The aggregated API's pure parts: who the front proxy vouches for, discovery, query values."""

from __future__ import annotations

import asyncio
import json

import pytest

from kubecontrol import web
from kubecontrol.aggregated import (
    AggregatedApi,
    ApiGroup,
    ApiRequest,
    ClusterList,
    FrontProxy,
    FrontProxyTrust,
    ReadOnly,
    Subresource,
    query_bool,
    query_int,
)

PROXY_CERT = {"subject": ((("commonName", "front-proxy-client"),),)}


def trust(**kw: object) -> FrontProxyTrust:
    return FrontProxyTrust.from_config_map(
        {
            "data": {
                "requestheader-client-ca-file": "PEM",
                "requestheader-allowed-names": '["front-proxy-client"]',
                "requestheader-username-headers": '["X-Remote-User"]',
                "requestheader-group-headers": '["X-Remote-Group"]',
                **kw,
            }
        }
    ) or pytest.fail("no trust read")


def test_the_user_and_every_group_the_front_proxy_names() -> None:
    headers = web.Headers(
        [
            ("X-Remote-User", "alice"),
            ("x-remote-group", "team-a"),
            ("X-Remote-Group", "system:authenticated"),
        ]
    )
    caller = trust().caller(PROXY_CERT, headers)
    assert not isinstance(caller, str)
    assert caller.user == "alice"
    assert caller.groups == ("team-a", "system:authenticated")


def test_no_certificate_no_call_whatever_the_headers_say() -> None:
    said = trust().caller(None, {"X-Remote-User": "system:admin"})
    assert isinstance(said, str) and "front proxy" in said


def test_a_certificate_of_another_name_is_refused() -> None:
    other = {"subject": ((("commonName", "someone-else"),),)}
    said = trust().caller(other, {"X-Remote-User": "alice"})
    assert isinstance(said, str) and "someone-else" in said


def test_any_name_when_the_cluster_allows_any() -> None:
    other = {"subject": ((("commonName", "someone-else"),),)}
    caller = trust(**{"requestheader-allowed-names": "[]"}).caller(other, {"X-Remote-User": "a"})
    assert not isinstance(caller, str) and caller.user == "a"


def test_a_user_is_needed_except_for_discovery() -> None:
    assert isinstance(trust().caller(PROXY_CERT, {}), str)
    assert not isinstance(trust().caller(PROXY_CERT, {}, anyone=True), str)


def test_no_ca_in_the_config_map_is_no_trust() -> None:
    assert FrontProxyTrust.from_config_map({"data": {}}) is None
    assert FrontProxyTrust.from_config_map(None) is None


def test_header_names_default_when_the_config_map_has_none() -> None:
    found = FrontProxyTrust.from_config_map({"data": {"requestheader-client-ca-file": "PEM"}})
    assert found is not None and found.user_headers == ("X-Remote-User",)


def test_discovery_documents() -> None:
    group = ApiGroup("view.example.dev", "v1alpha1", "things")
    assert group.discovery("/apis")["groups"][0]["name"] == "view.example.dev"  # type: ignore[index]
    one = group.discovery("/apis/view.example.dev")
    assert one is not None and one["preferredVersion"]["version"] == "v1alpha1"
    listed = group.discovery("/apis/view.example.dev/v1alpha1")
    assert listed is not None and listed["kind"] == "APIResourceList"
    assert group.discovery("/apis/other") is None


@pytest.mark.parametrize(
    ("raw", "problem"),
    [("x", "not a whole number"), ("-1", "out of range"), ("11", "out of range")],
)
def test_query_numbers_are_bounded_and_named(raw: str, problem: str) -> None:
    with pytest.raises(ValueError, match=f"tailLines.*{problem}"):
        query_int({"tailLines": raw}, "tailLines", low=0, high=10)


def test_query_values() -> None:
    assert query_int({}, "tailLines", low=0, high=10) is None
    assert query_int({"tailLines": "3"}, "tailLines", low=0, high=10) == 3
    assert query_bool({"follow": "true"}, "follow") and not query_bool({}, "follow")
    with pytest.raises(ValueError, match="follow"):
        query_bool({"follow": "yes please"}, "follow")


async def _never(_call: object) -> object:
    raise AssertionError("not called")


def test_a_cluster_scoped_list_is_discovered_as_list_only_and_not_namespaced() -> None:
    group = ApiGroup(
        "view.example.dev",
        "v1alpha1",
        "things",
        (Subresource("story", "ThingStory", _never),),  # type: ignore[arg-type]
        (ClusterList("workers", "Worker", _never),),  # type: ignore[arg-type]
    )
    listed = group.discovery("/apis/view.example.dev/v1alpha1")
    assert listed is not None
    by_name = {r["name"]: r for r in listed["resources"]}
    assert by_name["things/story"]["namespaced"] is True
    assert by_name["workers"] == {
        "name": "workers",
        "singularName": "",
        "namespaced": False,
        "kind": "Worker",
        "verbs": ["list"],
    }


def test_a_read_only_resource_is_read_by_name_and_never_listed() -> None:
    """`kubectl get trainjobstories` (a list) is told to name one; a call without the front
    proxy's certificate is refused first, whatever it asks."""

    async def story(call: ApiRequest) -> web.StreamResponse:
        body = json.dumps({"name": call.name, "namespace": call.namespace}).encode()
        return web.Response(body=body, content_type="application/json")

    group = ApiGroup(
        "view.example.dev",
        "v1alpha1",
        "things",
        read_only=(ReadOnly("thingstories", "thingstory", "ThingStory", story),),
    )
    proxy = FrontProxy.__new__(FrontProxy)
    proxy.trust = trust()
    served = AggregatedApi(group, proxy)

    class Transport:
        def __init__(self, cert: object) -> None:
            self.cert = cert

        def get_extra_info(self, name: str) -> object:
            return self.cert if name == "peercert" else None

    def ask(path: str, cert: object = PROXY_CERT) -> web.StreamResponse:
        request = web.Request("GET", path, [("X-Remote-User", "alice")], transport=Transport(cert))
        return asyncio.run(served._answer(request))

    base = "/apis/view.example.dev/v1alpha1/namespaces/ns/thingstories"
    listed = ask(base)
    assert listed.status == 405 and b"kubectl get thingstory NAME" in listed.body  # type: ignore[attr-defined]
    assert json.loads(ask(f"{base}/one").body) == {"name": "one", "namespace": "ns"}  # type: ignore[attr-defined]
    assert ask(base, cert=None).status == 401
    assert ask("/apis/view.example.dev/v1alpha1/namespaces/ns/others").status == 404
