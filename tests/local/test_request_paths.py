"""Every request path the product builds, driven with the strings a hostile tenant writes
(a runtime's `priorityClassName`, a forged review's namespace, a label value, a pod's name),
against a loopback HTTP server that records each request line as it arrived: nothing a tenant
wrote may choose the path. The same calls with valid names reach the server, at the path
expected, so a check that refused everything would fail here too."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pycurl
import pytest

from clusters.helpers.waiting import QuietHandler, http_server, loopback_client
from dispatcher.workers import copy_pods, log_tails
from kubebase.kinds import CONFIG_MAP, POD, InvalidName, checked_path
from kubecontrol.admission import review_problem
from kubecontrol.client import ApiException, _curl_setup
from kubecontrol.cluster import Cluster
from kubecontrol.deadline import Deadline
from kubecontrol.informer import Informer
from trainjob.jobframework_io import extract_priority
from trainjob.workload import ClassMissing
from trainjob_api import constants as c
from worker_controller import webhooks as worker_webhooks

# What a tenant writes where the product later puts a name: paths up and out, a query, a
# fragment, escapes that a server would decode, and characters no name has.
HOSTILE = [
    "../../../../api/v1/namespaces/team-a/configmaps?x=",
    "x/../../../../../api/v1/pods?watch=true&",
    "../../../../api/v1/namespaces/kube-system/secrets",
    "..",
    ".",
    "a/b",
    "a?watch=true",
    "a#b",
    "a%2F..%2Fsecrets",
    "a b",
    "a\r\nHost: evil",
    "ä",
    "x" * 254,
]
# Path segments that are no namespace's name (an RFC 1123 label): refused as namespaces.
NOT_NAMESPACES = ["Team-A", "a.b", "a_b", "x" * 64, "-a", "a:b"]


class Recorder(QuietHandler):
    """Answers every request with a 404 Status (a list with an empty one), and keeps the
    request target exactly as it came on the wire."""

    seen: list[str]
    lock = threading.Lock()

    def _any(self) -> None:
        with self.lock:
            self.seen.append(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path.split("?", 1)[0].rsplit("/", 1)[-1] in ("pods", "jobs", "priorityclasses"):
            self.reply(200, b'{"items": [], "metadata": {"resourceVersion": "1"}}')
        else:
            self.reply(404, b'{"kind": "Status", "code": 404, "reason": "NotFound"}')

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any


@pytest.fixture
def server() -> Iterator[tuple[Cluster, list[str]]]:
    seen: list[str] = []
    handler = type("Handler", (Recorder,), {"seen": seen})
    with http_server(handler) as port:
        cluster = Cluster("c", loopback_client(port), "test")
        cluster.timeout = 5.0
        yield cluster, seen


def remote_of(cluster: Cluster) -> Any:
    return SimpleNamespace(name="worker", cluster=cluster)


def calls(cluster: Cluster, ns: str, name: str) -> dict[str, Callable[[], object]]:
    """Each way the product turns a namespace and a name into a request."""
    obj = {"metadata": {"name": name, "namespace": ns}}
    remote = remote_of(cluster)
    return {
        "get": lambda: cluster.get_or_none(CONFIG_MAP, name, ns),
        "apply": lambda: cluster.apply(CONFIG_MAP, obj),
        "create": lambda: cluster.create(CONFIG_MAP, obj),
        "replace": lambda: cluster.replace(CONFIG_MAP, obj),
        "patch": lambda: cluster.patch(CONFIG_MAP, name, ns, {}),
        "status": lambda: cluster.patch(c.TRAINJOB, name, ns, {}, subresource="status"),
        "delete": lambda: cluster.delete(CONFIG_MAP, name, ns),
        "list": lambda: cluster.list_metadata(CONFIG_MAP, ns),
        "pods": lambda: copy_pods.read(remote, ns, "tj", "uid"),
        "tail": lambda: log_tails._tail(remote, ns, name, "c", 5.0),
        "jobset": lambda: copy_pods._our_jobset(remote, ns, name, "uid"),
        "informer": lambda: Informer(cluster.api, POD, namespace=ns),
    }


def test_valid_names_reach_the_server_at_the_path_built(server: tuple[Cluster, list[str]]) -> None:
    cluster, seen = server
    for what, call in calls(cluster, "team-a", "tj-1.a_b:c").items():
        if what == "informer":
            continue  # it asks only once started
        with contextlib.suppress(ApiException):  # the server's 404: it was asked
            call()
    paths = {p.split("?", 1)[0] for p in seen}
    assert paths == {
        "/api/v1/namespaces/team-a/configmaps/tj-1.a_b:c",  # get, apply, replace, patch, delete
        "/api/v1/namespaces/team-a/configmaps",  # create, list
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/tj-1.a_b:c/status",
        "/apis/batch/v1/namespaces/team-a/jobs",  # a copy's pods: its Jobs, then its pods
        "/api/v1/namespaces/team-a/pods",
        "/api/v1/namespaces/team-a/pods/tj-1.a_b:c/log",
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets/tj-1.a_b:c",
    }


@pytest.mark.parametrize(
    ("hostile", "where"),
    [
        *((h, w) for h in HOSTILE for w in ("namespace", "name")),
        *((n, "namespace") for n in NOT_NAMESPACES),
    ],
)
def test_no_hostile_name_or_namespace_reaches_a_path(
    server: tuple[Cluster, list[str]], hostile: str, where: str
) -> None:
    cluster, seen = server
    ns, name = (hostile, "tj") if where == "namespace" else ("team-a", hostile)
    for what, call in calls(cluster, ns, name).items():
        if where == "name" and what in ("create", "list", "pods", "informer"):
            continue  # no name in their paths (a create's is in its body, the API's to judge)
        with pytest.raises(InvalidName):
            call()
        assert seen == [], f"{what}: {seen}"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_runtimes_priority_class_name_never_becomes_a_path(
    server: tuple[Cluster, list[str]], hostile: str
) -> None:
    """The review's N1: a namespaced runtime's pod template names the PriorityClass."""
    cluster, seen = server
    templates = [{"spec": {"priorityClassName": hostile}}]
    # as a class that does not exist: no Workload is made, as Kueue makes none
    said = extract_priority(cluster, "", templates)
    assert said == ClassMissing("PriorityClass", hostile, "a pod template's priorityClassName")
    assert isinstance(extract_priority(cluster, hostile, []), ClassMissing)  # the label
    assert seen == []
    extract_priority(cluster, "", [{"spec": {"priorityClassName": "high"}}])
    assert [p.split("?", 1)[0] for p in seen] == ["/apis/scheduling.k8s.io/v1/priorityclasses/high"]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_forged_reviews_namespace_is_refused_before_any_lookup(
    server: tuple[Cluster, list[str]], hostile: str
) -> None:
    """The review's N2 (a): a review POSTed to the webhook port by a pod names a namespace
    that the worker's mutating webhook would look its default LocalQueue up in."""
    cluster, seen = server
    forged = {
        "uid": "u-1",
        "operation": "CREATE",
        "namespace": hostile,
        "object": {"metadata": {"name": "tj"}, "spec": {}},
    }
    assert review_problem(forged) is not None
    ctx = SimpleNamespace(
        cluster=cluster,
        caches=SimpleNamespace(local_queue=lambda *_: None),  # the watch holds none there
        settings=SimpleNamespace(manage_jobs_without_queue_name=False),
        trainjob_schema=None,
    )
    with pytest.raises(InvalidName):  # the handler alone, had the check been skipped
        worker_webhooks.on_trainjob_mutate(ctx, forged, Deadline(10))  # type: ignore[arg-type]
    assert seen == []


def test_a_forged_label_or_name_is_refused_and_a_real_review_is_not() -> None:
    real = {
        "uid": "0b7a8c7e-1c1f-4a40-9a53-3f8e6d7c2a10",
        "namespace": "team-a",
        "name": "tj",
        "object": {
            "metadata": {
                "name": "tj",
                "namespace": "team-a",
                "labels": {c.KUEUE_QUEUE_NAME_LABEL: "user-queue", "app": "", "A.b_c-1": "X"},
            }
        },
    }
    assert review_problem(real) is None
    assert (
        review_problem({**real, "name": "", "object": {"metadata": {"generateName": "tj-"}}})
        is None
    )
    for labels in (
        {c.KUEUE_QUEUE_NAME_LABEL: "q,x=y"},
        {c.KUEUE_QUEUE_NAME_LABEL: "../q"},
        {"bad key": "v"},
        {"a/b/c": "v"},
        {c.KUEUE_QUEUE_NAME_LABEL: "x" * 64},
        {c.KUEUE_QUEUE_NAME_LABEL: 7},
    ):
        forged = {**real, "object": {"metadata": {"name": "tj", "labels": labels}}}
        assert "labels" in str(review_problem(forged)), labels
    assert "request.name" in str(review_problem({**real, "name": "../x"}))
    assert "request.uid" in str(review_problem({**real, "uid": 7}))


# ("a/b" is two good segments once pasted: only Kind.path, which knows it was one name, can
# refuse it, above.)
@pytest.mark.parametrize("hostile", [h for h in HOSTILE if h != "a/b"])
def test_the_client_refuses_a_path_built_by_hand(
    server: tuple[Cluster, list[str]], hostile: str
) -> None:
    """The client's own check, whoever built the path: a climb, a query or a fragment in it
    never leaves the process (a name pasted into a path by hand, not through Kind.path)."""
    cluster, seen = server
    for path in (f"/api/v1/namespaces/a/configmaps/{hostile}", f"/api/v1/{hostile}/x"):
        with pytest.raises(InvalidName):
            cluster.api.get_json(path)
    assert seen == []


def test_paths_are_sent_as_built() -> None:
    """libcurl removes "../" segments unless told not to: the path checked is the one sent."""
    _, options = _curl_setup(loopback_client(1).credentials)
    assert (pycurl.PATH_AS_IS, 1) in options
    assert checked_path("/apis/view.trainjob.dev/v1alpha1/namespaces/a/trainjobs/b/story")
    for bad in ("/api/v1/../secrets", "/api//v1", "api/v1", "/api/v1/pods?watch=1", "/"):
        with pytest.raises(InvalidName):
            checked_path(bad)
