"""The coordinates of a kind in the API (plugin/kubebase/kinds.py): each object's path, and
the name rules that keep a string a tenant wrote out of any path but as one valid segment
(tests/local/test_request_paths.py sends them to a server)."""

from __future__ import annotations

import pytest

from kubebase.kinds import (
    CONFIG_MAP,
    NAMESPACE,
    InvalidName,
    Kind,
    checked_namespace,
    checked_path,
    checked_segment,
    is_label_key,
    is_label_value,
)

JOBS = Kind("batch", "v1", "jobs", "Job", True)


@pytest.mark.parametrize(
    ("kind", "namespace", "name", "sub", "path"),
    [
        (CONFIG_MAP, "ns", "cm", None, "/api/v1/namespaces/ns/configmaps/cm"),
        (CONFIG_MAP, "ns", None, None, "/api/v1/namespaces/ns/configmaps"),
        (CONFIG_MAP, None, None, None, "/api/v1/configmaps"),  # across namespaces
        (JOBS, "ns", "tj-node-0", "status", "/apis/batch/v1/namespaces/ns/jobs/tj-node-0/status"),
        (NAMESPACE, "ignored", "ns", None, "/api/v1/namespaces/ns"),  # not namespaced
        (
            Kind("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
            None,
            "system:controller:job",  # RBAC names hold colons
            None,
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:controller:job",
        ),
    ],
)
def test_an_objects_path(
    kind: Kind, namespace: str | None, name: str | None, sub: str | None, path: str
) -> None:
    assert kind.path(namespace, name, sub) == path
    assert checked_path(path) == path


HOSTILE = ["..", ".", "a/b", "a?watch=1", "a%2Fb", "a b", "", "x" * 254, "é", "a\n", "a#b"]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_name_that_is_no_segment_never_becomes_a_path(name: str) -> None:
    with pytest.raises(InvalidName) as err:
        JOBS.path("ns", name)
    assert "no request made" in str(err.value) and len(str(err.value)) < 160
    with pytest.raises(InvalidName):
        checked_segment(name)
    with pytest.raises(InvalidName):
        JOBS.path("ns", "ok", name)  # nor a subresource


# "" is no namespace: the path across namespaces, for a kind's collection (first row above).
@pytest.mark.parametrize("namespace", [*(n for n in HOSTILE if n), "kube_system", "-ns", "n" * 64])
def test_a_namespace_is_an_rfc_1123_label(namespace: str) -> None:
    with pytest.raises(InvalidName):
        checked_namespace(namespace)
    with pytest.raises(InvalidName):
        JOBS.path(namespace, "x")


def test_a_valid_namespace_and_segment_pass_unchanged() -> None:
    assert checked_namespace("team-a") == "team-a" and checked_namespace("n" * 63) == "n" * 63
    assert checked_segment("a.b_c:d-1") == "a.b_c:d-1"


@pytest.mark.parametrize(
    "path", ["", "/", "api/v1", "/api//v1", "/api/v1/../secrets", "/api/v1/x?y", "//api"]
)
def test_a_path_built_by_hand_is_refused_unless_every_segment_is_one(path: str) -> None:
    with pytest.raises(InvalidName):
        checked_path(path)


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("app", True),
        ("trainjob.dev/trainjob-name", True),
        ("kueue.x-k8s.io/queue-name", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("Example.com/x", False),  # a prefix is lower case
        ("/x", False),  # an empty prefix: apimachinery's "prefix part must be non-empty"
        ("x/", False),
        ("a/b/c", False),
        ("-x", False),
        ("", False),
        (7, False),
    ],
)
def test_a_label_key(key: object, ok: bool) -> None:
    assert is_label_key(key) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [("", True), ("v1.2_3-x", True), ("a" * 63, True), ("a" * 64, False), ("a b", False),
     ("-a", False), (None, False), (1, False)],
)  # fmt: skip
def test_a_label_value(value: object, ok: bool) -> None:
    assert is_label_value(value) is ok


def test_a_kind_stamps_its_coordinates_on_an_object() -> None:
    bare = {"metadata": {"name": "x"}}
    assert CONFIG_MAP.stamped(bare) == {"apiVersion": "v1", "kind": "ConfigMap", **bare}
    stamped = {"apiVersion": "batch/v1", "kind": "Job"}
    assert JOBS.stamped(stamped) is stamped
    assert JOBS.api_version == "batch/v1" and CONFIG_MAP.api_version == "v1"


@pytest.mark.parametrize("name", [None, 0, ["a"]])
def test_one_objects_path_needs_its_name_never_the_collections(name: object) -> None:
    """None names the collection in `path`; for one object's GET, PATCH, PUT or DELETE it
    would be every object of the kind."""
    with pytest.raises(InvalidName):
        JOBS.object_path("ns", name)  # type: ignore[arg-type]
    with pytest.raises(InvalidName):  # not the object named "status"
        JOBS.object_path("ns", name, "status")  # type: ignore[arg-type]
    if name is None:
        with pytest.raises(InvalidName):  # a collection has no subresource
            JOBS.path("ns", None, "status")
    assert JOBS.object_path("ns", "tj-node-0", "status") == JOBS.path("ns", "tj-node-0", "status")


@pytest.mark.parametrize("namespace", [None, ""])
def test_one_namespaced_objects_path_needs_its_namespace(namespace: str | None) -> None:
    with pytest.raises(InvalidName):
        JOBS.object_path(namespace, "tj-node-0")
    assert NAMESPACE.object_path(namespace, "ns") == "/api/v1/namespaces/ns"  # not namespaced


def test_no_namespace_is_the_path_across_namespaces() -> None:
    assert JOBS.path("", None) == JOBS.path(None, None) == "/apis/batch/v1/jobs"


def test_names_at_the_apis_own_length_limits_pass() -> None:
    longest = "a" * 253
    assert checked_segment(longest) == longest
    assert JOBS.path("ns", longest).endswith(f"/jobs/{longest}")
    assert is_label_key(f"{'a' * 253}/{'b' * 63}")
    assert not is_label_key(f"{'a' * 254}/b")


def test_a_kind_stamps_both_its_api_version_and_its_kind() -> None:
    wrong_kind = {"apiVersion": "batch/v1", "kind": "CronJob"}
    assert JOBS.stamped(wrong_kind) == {"apiVersion": "batch/v1", "kind": "Job"}
    wrong_version = {"apiVersion": "batch/v2", "kind": "Job"}
    assert JOBS.stamped(wrong_version) == {"apiVersion": "batch/v1", "kind": "Job"}
