"""The in-memory API server of the whole-pass tests (tests/support/memory_api.py) held to a real
kube-apiserver: each test here runs twice, once against `MemoryApi` and once against the bed
manager's API server through the product's own client, and expects the same answers. What is
checked is what the controllers' passes lean on: server-side apply merging list-maps by key,
409 on a stale resourceVersion, 404 for a missing namespace or an API not installed, 422 for
invalid names and immutable fields, 400 for a field selector the kind does not support,
paging, metadata-only lists, dryRun and the garbage collector.

A rule the stand-in breaks fails here on its `memory` case; a rule the real server does not
have fails on its `apiserver` case.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from kubebase.objects import Dict
from kubecontrol.client import METADATA_LIST, ApiException
from kubecontrol.cluster import Cluster
from tests.support.memory_api import LIST_MAPS, MemoryApi, crd_list_maps

pytestmark = pytest.mark.bed

GROUP = "contract.trainjob.dev"
WIDGETS = f"/apis/{GROUP}/v1"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


def _condition_schema() -> Dict:
    return {
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string"},
            "reason": {"type": "string"},
        },
    }


# A namespaced kind with a status subresource and one list of each kind apply knows.
WIDGET_CRD: Dict = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer"},
                                    "tags": {
                                        "type": "array",
                                        "items": {"type": "string"},
                                        "x-kubernetes-list-type": "set",
                                    },
                                    "parts": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["name"],
                                            "properties": {
                                                "name": {"type": "string"},
                                                "size": {"type": "integer"},
                                                "colour": {"type": "string"},
                                            },
                                        },
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["name"],
                                    },
                                    "plain": {
                                        "type": "array",
                                        "items": {"type": "string"},
                                        "x-kubernetes-list-type": "atomic",
                                    },
                                    "ports": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["port", "protocol"],
                                            "properties": {
                                                "port": {"type": "integer"},
                                                "protocol": {"type": "string"},
                                                "name": {"type": "string"},
                                            },
                                        },
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["port", "protocol"],
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "conditions": {
                                        "type": "array",
                                        "items": _condition_schema(),
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["type"],
                                    }
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


@dataclass
class Side:
    """One API server under contract: `call` answers (status, body) for any request; `ns` is
    a namespace made for the test; `settle` lets the garbage collector act (in memory, when
    the test says)."""

    name: str
    api: Any  # MemoryApi or ApiClient: the same `request` surface
    ns: str
    settle: Callable[[], object]

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Dict | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        manager: str = "contract",
    ) -> tuple[int, Dict]:
        """Send one request; (200, the answer) or (the refusal's status, {})."""
        sent = {"fieldManager": manager} if method in ("PATCH", "POST", "PUT") else {}
        sent.update(query or {})
        try:
            answer = self.api.request(
                method, path, query=sent, body=body, content_type=content_type, accept=accept
            )
        except ApiException as exc:
            return exc.status, {}
        return 200, orjson.loads(answer) if answer else {}

    def eventually(self, check: Callable[[], bool], what: str) -> None:
        """`check` holds once the garbage collector has acted (at once in memory)."""
        self.settle()
        wait_for(check, 60, what=what)


def _namespace(name: str) -> Dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


@pytest.fixture(scope="module")
def crd_on_the_bed(bed: Bed) -> Iterator[Cluster]:
    """The contract's CRD on the bed's manager for the module (and removed after it)."""
    manager = Cluster.from_kubeconfig("manager", bed.kubeconfig(bed.config.managers[0].name), "t")
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    try:
        manager.api.request("POST", crds, body=WIDGET_CRD)
    except ApiException as exc:
        if exc.status != 409:
            raise

    def served() -> bool:
        try:
            manager.api.request("GET", f"{WIDGETS}/widgets")
        except ApiException:
            return False
        return True

    wait_for(served, 60, what="the contract's CRD served")
    yield manager
    manager.api.request("DELETE", f"{crds}/widgets.{GROUP}")


@pytest.fixture(params=["memory", "apiserver"])
def side(request: pytest.FixtureRequest) -> Iterator[Side]:
    ns = f"contract-{uuid.uuid4().hex[:8]}"
    if request.param == "memory":
        memory = MemoryApi("memory", [_namespace(ns)], collect_at_once=False)
        memory.install(WIDGET_CRD)
        yield Side("memory", memory, ns, memory.collect)
        return
    manager: Cluster = request.getfixturevalue("crd_on_the_bed")
    manager.api.request("POST", "/api/v1/namespaces", body=_namespace(ns))
    yield Side("apiserver", manager.api, ns, lambda: None)
    manager.api.request("DELETE", f"/api/v1/namespaces/{ns}")


def _widget(side: Side, name: str = "w", **spec: Any) -> Dict:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": side.ns},
        "spec": spec,
    }


def _config_map(side: Side, name: str, **fields: Any) -> Dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": side.ns, **fields.pop("metadata", {})},
        **fields,
    }


def _widgets(side: Side, name: str | None = None, sub: str | None = None) -> str:
    path = f"{WIDGETS}/namespaces/{side.ns}/widgets"
    return "/".join(p for p in (path, name, sub) if p)


def _config_maps(side: Side, name: str | None = None) -> str:
    path = f"/api/v1/namespaces/{side.ns}/configmaps"
    return f"{path}/{name}" if name else path


def _made(side: Side, path: str, obj: Dict) -> Dict:
    status, made = side.call("POST", path, obj)
    assert status == 200, f"{side.name}: POST {path} answered {status}"
    return made


def _apply(side: Side, path: str, obj: Dict, manager: str) -> Dict:
    """Server-side apply as the product sends it (forced: the stand-in has no field owners)."""
    status, applied = side.call(
        "PATCH", path, obj, content_type=APPLY, manager=manager, query={"force": "true"}
    )
    assert status == 200, f"{side.name}: apply by {manager} answered {status}"
    return applied


def test_apply_merges_a_list_map_by_its_keys_a_set_as_a_set_and_replaces_an_atomic_list(
    side: Side,
) -> None:
    """Two managers each apply their own entries: a list-map keeps both (an entry merged field
    by field where both name it), a set keeps both, an atomic list is the last applier's."""
    _apply(
        side,
        _widgets(side, "w"),
        _widget(side, tags=["a"], plain=["x"], parts=[{"name": "p", "size": 1}]),
        "kueue",
    )
    merged = _apply(
        side,
        _widgets(side, "w"),
        _widget(
            side, tags=["b"], plain=["y"], parts=[{"name": "p", "colour": "red"}, {"name": "q"}]
        ),
        "ours",
    )
    assert sorted(merged["spec"]["tags"]) == ["a", "b"]
    assert merged["spec"]["plain"] == ["y"]
    assert merged["spec"]["parts"] == [{"name": "p", "size": 1, "colour": "red"}, {"name": "q"}]

    kueues = {
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "True"},
            ]
        }
    }
    ours = {"status": {"conditions": [{"type": "PodsReady", "status": "True"}]}}
    _apply(side, _widgets(side, "w", "status"), {**_widget(side), **kueues}, "kueue")
    after = _apply(side, _widgets(side, "w", "status"), {**_widget(side), **ours}, "ours")
    assert [c["type"] for c in after["status"]["conditions"]] == [
        "QuotaReserved",
        "Admitted",
        "PodsReady",
    ]
    ours["status"]["conditions"][0]["status"] = "False"
    again = _apply(side, _widgets(side, "w", "status"), {**_widget(side), **ours}, "ours")
    assert [(c["type"], c["status"]) for c in again["status"]["conditions"]] == [
        ("QuotaReserved", "True"),
        ("Admitted", "True"),
        ("PodsReady", "False"),
    ]


def test_a_stale_resource_version_is_a_conflict_on_every_guarded_write(side: Side) -> None:
    made = _made(side, _config_maps(side), _config_map(side, "c", data={"a": "1"}))
    old = made["metadata"]["resourceVersion"]
    status, changed = side.call("PUT", _config_maps(side, "c"), {**made, "data": {"a": "2"}})
    assert status == 200 and changed["metadata"]["resourceVersion"] != old
    stale = {"metadata": {"resourceVersion": old}}
    assert side.call("PUT", _config_maps(side, "c"), {**made, "data": {"a": "3"}})[0] == 409
    assert (
        side.call(
            "PATCH", _config_maps(side, "c"), {**stale, "data": {"a": "3"}}, content_type=MERGE
        )[0]
        == 409
    )
    applied = {**_config_map(side, "c", data={"a": "3"}), **stale}
    applied["metadata"] = {**applied["metadata"], "resourceVersion": old}
    assert side.call("PATCH", _config_maps(side, "c"), applied, content_type=APPLY)[0] == 409
    preconditions = {"preconditions": {"resourceVersion": old}}
    assert side.call("DELETE", _config_maps(side, "c"), preconditions)[0] == 409
    assert (
        side.call("DELETE", _config_maps(side, "c"), {"preconditions": {"uid": str(uuid.uuid4())}})[
            0
        ]
        == 409
    )
    status, kept = side.call("GET", _config_maps(side, "c"))
    assert status == 200 and kept["data"] == {"a": "2"}
    current = {"preconditions": {"resourceVersion": kept["metadata"]["resourceVersion"]}}
    assert side.call("DELETE", _config_maps(side, "c"), current)[0] == 200
    assert side.call("GET", _config_maps(side, "c"))[0] == 404


def test_an_apply_naming_a_uid_changes_only_that_object(side: Side) -> None:
    """What the worker controller's Job updates lean on: an apply naming the UID it read
    never makes the object again once it is gone, nor changes another of that name."""
    first = _made(side, _config_maps(side), _config_map(side, "c", data={"a": "1"}))
    named = _config_map(side, "c", data={"a": "2"}, metadata={"uid": first["metadata"]["uid"]})

    def apply_named() -> int:  # forced, as the product applies
        path = _config_maps(side, "c")
        return side.call("PATCH", path, named, content_type=APPLY, query={"force": "true"})[0]

    assert apply_named() == 200
    assert side.call("DELETE", _config_maps(side, "c"))[0] == 200
    assert apply_named() == 409, f"{side.name}: an apply of a deleted object was not refused"
    assert side.call("GET", _config_maps(side, "c"))[0] == 404
    _made(side, _config_maps(side), _config_map(side, "c", data={"a": "new"}))
    assert apply_named() == 422, f"{side.name}: an apply naming another's uid was not refused"
    assert side.call("GET", _config_maps(side, "c"))[1]["data"] == {"a": "new"}


def test_a_merge_patch_naming_a_uid_changes_only_that_object(side: Side) -> None:
    """What the worker controller's suspensions and resumes of Jobs lean on: a merge patch
    naming the UID it read never makes the object, nor changes another made under the name."""
    first = _made(side, _config_maps(side), _config_map(side, "c", data={"a": "1"}))
    named = {"metadata": {"uid": first["metadata"]["uid"]}, "data": {"a": "2", "b": None}}

    def patch_named() -> int:
        return side.call("PATCH", _config_maps(side, "c"), named, content_type=MERGE)[0]

    assert patch_named() == 200
    assert side.call("DELETE", _config_maps(side, "c"))[0] == 200
    assert patch_named() == 404, f"{side.name}: a patch of a deleted object was not refused"
    _made(side, _config_maps(side), _config_map(side, "c", data={"a": "new", "b": "kept"}))
    assert patch_named() == 422, f"{side.name}: a patch naming another's uid was not refused"
    assert side.call("GET", _config_maps(side, "c"))[1]["data"] == {"a": "new", "b": "kept"}


def test_a_write_from_a_stale_version_naming_another_uid_is_a_conflict_first(side: Side) -> None:
    """The API server checks the version a write was read from before it validates what the
    write says: a merge patch or an apply from a stale resourceVersion is a 409 even when the
    uid it names is another's (a 422 alone)."""
    first = _made(side, _config_maps(side), _config_map(side, "c", data={"a": "1"}))
    stale = first["metadata"]["resourceVersion"]
    assert side.call("DELETE", _config_maps(side, "c"))[0] == 200
    _made(side, _config_maps(side), _config_map(side, "c", data={"a": "new"}))
    meta = {"uid": first["metadata"]["uid"], "resourceVersion": stale}
    merge = {"metadata": meta, "data": {"a": "2"}}
    assert side.call("PATCH", _config_maps(side, "c"), merge, content_type=MERGE)[0] == 409
    applied = _config_map(side, "c", data={"a": "2"}, metadata=meta)
    path, force = _config_maps(side, "c"), {"force": "true"}
    assert side.call("PATCH", path, applied, content_type=APPLY, query=force)[0] == 409
    assert side.call("GET", _config_maps(side, "c"))[1]["data"] == {"a": "new"}


def test_creating_what_exists_or_reading_what_does_not_and_a_create_with_a_version(
    side: Side,
) -> None:
    _made(side, _config_maps(side), _config_map(side, "c"))
    assert side.call("POST", _config_maps(side), _config_map(side, "c"))[0] == 409
    assert side.call("GET", _config_maps(side, "nothing"))[0] == 404
    assert (
        side.call("PATCH", _config_maps(side, "nothing"), {"data": {}}, content_type=MERGE)[0]
        == 404
    )
    assert side.call("DELETE", _config_maps(side, "nothing"))[0] == 404
    versioned = _config_map(side, "v", metadata={"resourceVersion": "1"})
    assert side.call("POST", _config_maps(side), versioned)[0] == 500
    assert side.call("GET", _config_maps(side, "v"))[0] == 404


def test_a_missing_namespace_and_an_api_not_installed_are_not_found(side: Side) -> None:
    missing = f"absent-{uuid.uuid4().hex[:8]}"
    cm = _config_map(side, "c")
    cm["metadata"]["namespace"] = missing
    assert side.call("POST", f"/api/v1/namespaces/{missing}/configmaps", cm)[0] == 404
    applied = f"/api/v1/namespaces/{missing}/configmaps/c"
    assert side.call("PATCH", applied, cm, content_type=APPLY)[0] == 404
    absent = f"/apis/absent.trainjob.dev/v1/namespaces/{side.ns}/things"
    assert side.call("GET", absent)[0] == 404
    assert (
        side.call(
            "POST",
            absent,
            {"apiVersion": "absent.trainjob.dev/v1", "kind": "Thing", "metadata": {"name": "t"}},
        )[0]
        == 404
    )
    assert side.call("GET", "/apis/absent.trainjob.dev/v1")[0] == 404
    assert side.call("GET", f"{WIDGETS}/namespaces/{side.ns}/gadgets")[0] == 404


def test_names_labels_and_apply_without_a_field_manager_are_refused(side: Side) -> None:
    assert side.call("POST", _config_maps(side), _config_map(side, "Bad_Name"))[0] == 422
    assert side.call("POST", _config_maps(side), _config_map(side, "x" * 254))[0] == 422
    bad_label = _config_map(side, "c", metadata={"labels": {"a": "two words"}})
    assert side.call("POST", _config_maps(side), bad_label)[0] == 422
    bad_key = _config_map(side, "c", metadata={"labels": {"a/b/c": "v"}})
    assert side.call("POST", _config_maps(side), bad_key)[0] == 422
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "svc.one", "namespace": side.ns},
        "spec": {"clusterIP": "None", "ports": [{"port": 80}]},
    }
    assert side.call("POST", f"/api/v1/namespaces/{side.ns}/services", service)[0] == 422
    made = _made(side, _config_maps(side), _config_map(side, "c"))
    relabelled = {"metadata": {"labels": {"ok": "-bad-"}}}
    assert side.call("PATCH", _config_maps(side, "c"), relabelled, content_type=MERGE)[0] == 422
    assert (
        side.call("PATCH", _config_maps(side, "c"), made, content_type=APPLY, manager="")[0] == 422
    )


def _suspended_job(side: Side) -> Dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": side.ns},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox:1"}],
                }
            },
        },
    }


def test_immutable_fields_are_refused_and_a_suspended_jobs_placement_is_not(side: Side) -> None:
    jobs = f"/apis/batch/v1/namespaces/{side.ns}/jobs"
    _made(side, jobs, _suspended_job(side))
    placed = {"spec": {"template": {"spec": {"nodeSelector": {"pool": "a"}}}}}
    assert side.call("PATCH", f"{jobs}/j", placed, content_type=MERGE)[0] == 200
    image = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}}
    assert side.call("PATCH", f"{jobs}/j", image, content_type=MERGE)[0] == 422
    selector = {"spec": {"selector": {"matchLabels": {"other": "x"}}}}
    assert side.call("PATCH", f"{jobs}/j", selector, content_type=MERGE)[0] == 422

    # An Indexed Job's size changes only with its parallelism equal to its completions.
    indexed = _suspended_job(side)
    indexed["metadata"]["name"] = "ij"
    indexed["spec"].update(completionMode="Indexed", parallelism=4, completions=4, suspend=False)
    _made(side, jobs, indexed)
    for size, answer in (((1, 1), 200), ((3, 2), 422), ((None, 3), 422), ((5, 5), 200)):
        parallelism, completions = size
        body = {"spec": {"completions": completions, "suspend": True}}
        if parallelism is not None:
            body["spec"]["parallelism"] = parallelism
        got = side.call("PATCH", f"{jobs}/ij", body, content_type=MERGE)[0]
        assert got == answer, f"{side.name}: size {size} answered {got}"

    claims = f"/api/v1/namespaces/{side.ns}/persistentvolumeclaims"
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": side.ns},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "none",
        },
    }
    _made(side, claims, claim)
    modes = {"spec": {"accessModes": ["ReadWriteMany"]}}
    assert side.call("PATCH", f"{claims}/data", modes, content_type=MERGE)[0] == 422

    _made(side, _config_maps(side), _config_map(side, "frozen", immutable=True, data={"a": "1"}))
    thawed = {"data": {"a": "2"}}
    assert side.call("PATCH", _config_maps(side, "frozen"), thawed, content_type=MERGE)[0] == 422
    labelled = {"metadata": {"labels": {"still": "allowed"}}}
    assert side.call("PATCH", _config_maps(side, "frozen"), labelled, content_type=MERGE)[0] == 200


@pytest.mark.parametrize(
    ("collection", "selector", "status"),
    [
        ("configmaps", "data.a=1", 400),
        ("configmaps", "metadata.name=c", 200),
        ("configmaps", "metadata.namespace!=x", 200),
        ("secrets", "type!=kubernetes.io/service-account-token", 200),
        ("secrets", "data.k=v", 400),
        ("events", "involvedObject.uid=u,reason=R,type=Warning", 200),
        ("events", "message=m", 400),
        ("pods", "status.phase=Running,spec.nodeName=n", 200),
        ("pods", "spec.priorityClassName=p", 400),
        ("widgets", "spec.size=1", 400),
        ("widgets", "metadata.name=w", 200),
    ],
)
def test_a_field_selector_the_kind_does_not_support_is_a_bad_request(
    side: Side, collection: str, selector: str, status: int
) -> None:
    base = WIDGETS if collection == "widgets" else "/api/v1"
    path = f"{base}/namespaces/{side.ns}/{collection}"
    assert side.call("GET", path, query={"fieldSelector": selector})[0] == status


def test_label_selectors_equality_and_set_based_select_the_same(side: Side) -> None:
    for name, labels in [("a", {"k": "a"}), ("b", {"k": "b", "x": ""}), ("c", {"other": "1"})]:
        _made(side, _config_maps(side), _config_map(side, name, metadata={"labels": labels}))

    def selected(selector: str) -> list[str]:
        status, found = side.call("GET", _config_maps(side), query={"labelSelector": selector})
        assert status == 200
        # (kube-root-ca.crt, which the controller-manager puts in every namespace, aside)
        return sorted(
            o["metadata"]["name"] for o in found["items"] if len(o["metadata"]["name"]) == 1
        )

    assert selected("k in (a, b)") == ["a", "b"]
    assert selected("k notin (a)") == ["b", "c"]
    assert selected("k,k!=b") == ["a"]
    assert selected("!k") == ["c"]
    assert selected("x") == ["b"]
    assert selected("k==a") == ["a"]


def test_a_list_pages_in_name_order_and_a_metadata_list_holds_metadata_only(side: Side) -> None:
    for i in range(5):
        labels = {"metadata": {"labels": {"set": "paged"}}}
        _made(side, _config_maps(side), _config_map(side, f"c{i}", data={"a": "1"}, **labels))
    names: list[str] = []
    query: Dict = {"limit": 2, "labelSelector": "set=paged"}
    pages = 0
    while True:
        status, page = side.call("GET", _config_maps(side), query=query)
        assert status == 200 and len(page["items"]) <= 2
        names += [o["metadata"]["name"] for o in page["items"]]
        pages += 1
        if not page["metadata"].get("continue"):
            break
        query = {**query, "continue": page["metadata"]["continue"]}
    assert (names, pages) == ([f"c{i}" for i in range(5)], 3)
    status, listed = side.call(
        "GET", _config_maps(side), query={"labelSelector": "set=paged"}, accept=METADATA_LIST
    )
    assert status == 200 and listed["kind"] == "PartialObjectMetadataList"
    assert len(listed["items"]) == 5
    assert {o["kind"] for o in listed["items"]} == {"PartialObjectMetadata"}
    assert all(set(o) == {"kind", "apiVersion", "metadata"} for o in listed["items"])


def test_status_and_the_object_are_written_apart_and_generation_counts_spec_changes(
    side: Side,
) -> None:
    made = _made(
        side, _widgets(side), {**_widget(side, size=1), "status": {"conditions": [{"type": "A"}]}}
    )
    assert "status" not in made and made["metadata"]["generation"] == 1
    status = {"status": {"conditions": [{"type": "B", "status": "True"}]}}
    code, written = side.call(
        "PATCH", _widgets(side, "w", "status"), {**status, "spec": {"size": 9}}, content_type=MERGE
    )
    assert code == 200 and written["spec"] == {"size": 1} and written["metadata"]["generation"] == 1
    labelled = {"metadata": {"labels": {"a": "b"}}, "status": {"conditions": []}}
    code, written = side.call("PATCH", _widgets(side, "w"), labelled, content_type=MERGE)
    assert code == 200 and written["metadata"]["generation"] == 1
    assert written["status"]["conditions"] == [{"type": "B", "status": "True"}]
    code, written = side.call(
        "PATCH", _widgets(side, "w"), {"spec": {"size": 2}}, content_type=MERGE
    )
    assert code == 200 and written["metadata"]["generation"] == 2


def test_a_finalizer_holds_a_deletion_and_dry_run_stores_nothing(side: Side) -> None:
    held = _config_map(side, "held", metadata={"finalizers": ["contract.trainjob.dev/hold"]})
    _made(side, _config_maps(side), held)
    assert side.call("DELETE", _config_maps(side, "held"))[0] == 200
    status, kept = side.call("GET", _config_maps(side, "held"))
    assert status == 200 and kept["metadata"].get("deletionTimestamp")
    release = {"metadata": {"finalizers": None}}
    assert side.call("PATCH", _config_maps(side, "held"), release, content_type=MERGE)[0] == 200
    side.eventually(lambda: side.call("GET", _config_maps(side, "held"))[0] == 404, "held gone")

    status, tried = side.call(
        "POST", _config_maps(side), _config_map(side, "dry"), query={"dryRun": "All"}
    )
    assert status == 200 and tried["metadata"]["name"] == "dry"
    assert side.call("GET", _config_maps(side, "dry"))[0] == 404


def test_the_garbage_collector_takes_dependents_with_their_last_owner(side: Side) -> None:
    first = _made(side, _config_maps(side), _config_map(side, "first"))
    second = _made(side, _config_maps(side), _config_map(side, "second"))

    def owned_by(*owners: Dict) -> Dict:
        return {
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": o["metadata"]["name"],
                    "uid": o["metadata"]["uid"],
                }
                for o in owners
            ]
        }

    _made(side, _config_maps(side), _config_map(side, "shared", metadata=owned_by(first, second)))
    _made(side, _config_maps(side), _config_map(side, "only", metadata=owned_by(first)))
    assert (
        side.call("DELETE", _config_maps(side, "first"), {"propagationPolicy": "Background"})[0]
        == 200
    )

    def shared_owners() -> list[str]:
        status, shared = side.call("GET", _config_maps(side, "shared"))
        assert status == 200, "a dependent with an owner left is kept"
        return [o["name"] for o in shared["metadata"].get("ownerReferences") or []]

    side.eventually(lambda: side.call("GET", _config_maps(side, "only"))[0] == 404, "only gone")
    side.eventually(lambda: shared_owners() == ["second"], "the reference to first dropped")
    assert side.call("DELETE", _config_maps(side, "second"))[0] == 200
    side.eventually(lambda: side.call("GET", _config_maps(side, "shared"))[0] == 404, "shared gone")


def test_the_stand_in_merges_the_lists_the_installed_crds_declare(
    bed: Bed, crd_on_the_bed: Cluster
) -> None:
    """The list-maps the stand-in merges for Kueue's Workload and the Trainer kinds are those
    of the CRDs the bed installs (the Trainer kinds' are read from our CRD files; Kueue's
    Workload's are written in the stand-in)."""
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for (group, plural), known in LIST_MAPS.items():
        if not group or group == "batch":
            continue
        crd = crd_on_the_bed.api.get_json(f"{crds}/{plural}.{group}")
        installed = crd_list_maps(crd)
        assert {p: installed.get(p) for p in known} == known, f"{plural}.{group}"
        if group == "trainer.kubeflow.org":
            assert installed == known, plural


def test_apply_merges_a_list_map_by_all_its_keys(side: Side) -> None:
    tcp, udp = {"port": 53, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}
    _apply(side, _widgets(side, "w"), _widget(side, ports=[{**tcp, "name": "a"}]), "kueue")
    merged = _apply(side, _widgets(side, "w"), _widget(side, ports=[{**udp, "name": "b"}]), "ours")
    assert merged["spec"]["ports"] == [{**tcp, "name": "a"}, {**udp, "name": "b"}]
    # (what a manager stops applying the API server removes, the stand-in keeps: the product
    # applies all it owns each time)
    mine = [{**tcp, "name": "c"}, {**udp, "name": "b"}]
    again = _apply(side, _widgets(side, "w"), _widget(side, ports=mine), "ours")
    assert again["spec"]["ports"] == mine


def test_a_custom_resources_status_and_updates_are_guarded_by_their_version(side: Side) -> None:
    made = _made(side, _widgets(side), _widget(side, size=1))
    old = made["metadata"]["resourceVersion"]
    fresh = {"metadata": {"resourceVersion": old}, "status": {"conditions": [{"type": "A"}]}}
    status, written = side.call("PATCH", _widgets(side, "w", "status"), fresh, content_type=MERGE)
    assert status == 200 and written["metadata"]["resourceVersion"] != old
    stale = {"metadata": {"resourceVersion": old}, "status": {"conditions": [{"type": "B"}]}}
    assert side.call("PATCH", _widgets(side, "w", "status"), stale, content_type=MERGE)[0] == 409
    applied = {**_widget(side), "metadata": {**_widget(side)["metadata"], "resourceVersion": old}}
    applied["status"] = {"conditions": [{"type": "C"}]}
    assert side.call("PATCH", _widgets(side, "w", "status"), applied, content_type=APPLY)[0] == 409
    unversioned = {**written, "metadata": {**written["metadata"]}, "spec": {"size": 2}}
    del unversioned["metadata"]["resourceVersion"]
    assert side.call("PUT", _widgets(side, "w"), unversioned)[0] == 422
    current = {**written, "spec": {"size": 2}}
    assert side.call("PUT", _widgets(side, "w"), current)[0] == 200


def test_a_malformed_selector_and_a_metadata_list_page(side: Side) -> None:
    for i in range(3):
        _made(side, _config_maps(side), _config_map(side, f"m{i}", metadata={"labels": {"p": "1"}}))
    assert side.call("GET", _config_maps(side), query={"labelSelector": "k in (a"})[0] == 400
    query: Dict = {"labelSelector": "p=1", "limit": 2}
    status, page = side.call("GET", _config_maps(side), query=query, accept=METADATA_LIST)
    assert status == 200 and len(page["items"]) == 2 and page["metadata"].get("continue")
    rest = {**query, "continue": page["metadata"]["continue"]}
    status, last = side.call("GET", _config_maps(side), query=rest, accept=METADATA_LIST)
    assert [o["metadata"]["name"] for o in page["items"] + last["items"]] == ["m0", "m1", "m2"]


def test_an_object_being_deleted_takes_no_new_finalizer_and_a_second_delete_changes_nothing(
    side: Side,
) -> None:
    held = _config_map(side, "held", metadata={"finalizers": ["contract.trainjob.dev/hold"]})
    _made(side, _config_maps(side), held)
    status, deleting = side.call("DELETE", _config_maps(side, "held"))
    assert status == 200 and deleting["metadata"].get("deletionTimestamp")
    status, again = side.call("DELETE", _config_maps(side, "held"))
    assert status == 200
    assert again["metadata"]["resourceVersion"] == deleting["metadata"]["resourceVersion"]
    more = {"metadata": {"finalizers": ["contract.trainjob.dev/hold", "example.com/more"]}}
    assert side.call("PATCH", _config_maps(side, "held"), more, content_type=MERGE)[0] == 422
    release = {"metadata": {"finalizers": None}}
    assert side.call("PATCH", _config_maps(side, "held"), release, content_type=MERGE)[0] == 200


def test_a_core_events_type_is_not_checked(side: Side) -> None:
    """A core/v1 Event of any type is taken (only events.k8s.io's are validated): a product
    that wrote "warning" would not be refused, here or there; its tests must say the type."""

    def event(name: str, etype: str) -> Dict:
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": side.ns},
            "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": side.ns},
            "reason": "Probed",
            "message": "a probe",
            "type": etype,
            "source": {"component": "contract"},
        }

    events = f"/api/v1/namespaces/{side.ns}/events"
    assert side.call("POST", events, event("a", "Warning"))[0] == 200
    assert side.call("POST", events, event("b", "Normal"))[0] == 200
    assert side.call("POST", events, event("c", "warning"))[0] == 200
