"""The OpenAPI documents of the view API, read the way `kubectl explain` reads them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dispatcher.readapi import job_story
from kubecontrol import openapi
from kubecontrol.aggregated import ApiGroup, ClusterList, ReadOnly
from trainjob_api.story import TrainJobStory, WorkerList

GROUP, VERSION = job_story.GROUP, job_story.VERSION


def the_group() -> ApiGroup:
    """The group the dispatcher serves (its handlers are never called here)."""
    return job_story.api(None)  # type: ignore[arg-type]


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def explain(document: dict[str, Any], resource: str, *fields: str) -> dict[str, Any]:
    """What `kubectl explain RESOURCE.FIELD...` prints from: the GVK of the GET on the
    resource's path, the component schema carrying that GVK, then each field in turn through
    its `$ref` (or `allOf: [$ref]`, or an array's items)."""
    base = f"/apis/{GROUP}/{VERSION}"
    paths = document["paths"]
    tried = [
        f"{base}/{resource}",
        f"{base}/{resource}/{{name}}",
        f"{base}/namespaces/{{namespace}}/{resource}",
        f"{base}/namespaces/{{namespace}}/{resource}/{{name}}",
    ]
    gvk = next(paths[p]["get"]["x-kubernetes-group-version-kind"] for p in tried if p in paths)
    schemas = document["components"]["schemas"]
    schema = next(
        s for s in schemas.values() if gvk in s.get("x-kubernetes-group-version-kind", [])
    )
    for name in fields:
        schema = schema["properties"][name]
        schema = schema.get("items", schema)
        ref = schema.get("$ref") or (schema.get("allOf") or [{}])[0].get("$ref")
        if ref:
            schema = schemas[ref.rsplit("/", 1)[1]]
    return schema


def test_kubectl_explain_finds_the_story_and_its_fields() -> None:
    document = openapi.v3_document(GROUP, VERSION, the_group().operations())
    story = explain(document, "trainjobstories")
    assert "Where a TrainJob of the manager runs" in story["description"]
    assert {"pods", "events", "placements", "queues", "copy", "workerProblem"} <= set(
        story["properties"]
    )
    usage = explain(document, "trainjobstories", "pods", "usage")
    assert usage["properties"]["cpuMillicores"]["type"] == "integer"
    assert explain(document, "trainjobstories", "pods")["properties"]["usage"]["nullable"]
    worker = explain(document, "workers")  # a list's operation names the kind of its items
    assert worker["properties"]["connection"]["enum"] == [
        "Connected",
        "Connecting",
        "Disconnected",
        "NoKubeconfig",
    ]


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_every_reference_resolves_and_the_schemas_are_as_kubernetes_writes_them(
    version: str,
) -> None:
    operations = the_group().operations()
    if version == "v3":
        document = openapi.v3_document(GROUP, VERSION, operations)
        schemas, root = document["components"]["schemas"], "#/components/schemas/"
    else:
        document = openapi.v2_document(GROUP, VERSION, operations)
        schemas, root = document["definitions"], "#/definitions/"
    for node in walk(document):
        ref = node.get("$ref")
        if ref is not None:
            assert ref.startswith(root) and ref[len(root) :] in schemas, ref
            assert set(node) == {"$ref"}, node  # a description beside it goes in allOf
    for node in walk(schemas):
        assert "const" not in node and "title" not in node and "default" not in node
        assert {"type": "null"} not in node.get("anyOf", []), node
        assert "\n" not in str(node.get("description", ""))
        if version == "v2":
            assert "nullable" not in node
    kinds = {
        gvk["kind"]
        for s in schemas.values()
        for gvk in s.get("x-kubernetes-group-version-kind", [])
    }
    assert kinds == {"TrainJobStory", "Worker", "WorkerList"}


def test_what_the_worker_wrote_beyond_the_story_is_kept_unknown_fields_and_all() -> None:
    schemas = openapi.schemas([TrainJobStory], GROUP, VERSION, [], v3=True)
    copy_status = schemas["dev.trainjob.view.v1alpha1.CopyStatus"]
    assert copy_status["x-kubernetes-preserve-unknown-fields"] is True


def test_a_read_only_resource_is_discovered_with_get_only() -> None:
    group = ApiGroup(
        "view.example.dev",
        "v1alpha1",
        "things",
        (),
        (ClusterList("workers", "Worker", None, WorkerList),),  # type: ignore[arg-type]
        (ReadOnly("thingstories", "thingstory", "ThingStory", None, TrainJobStory),),  # type: ignore[arg-type]
    )
    listed = group.discovery("/apis/view.example.dev/v1alpha1")
    assert listed is not None
    by_name = {r["name"]: r for r in listed["resources"]}
    assert by_name["thingstories"] == {
        "name": "thingstories",
        "singularName": "thingstory",
        "namespaced": True,
        "kind": "ThingStory",
        "verbs": ["get"],
    }


def test_the_documents_hash_changes_with_them() -> None:
    operations = the_group().operations()
    one = openapi.Served.of(openapi.v3_document(GROUP, VERSION, operations))
    again = openapi.Served.of(openapi.v3_document(GROUP, VERSION, operations))
    other = openapi.Served.of(openapi.v3_document(GROUP, VERSION, operations[:1]))
    assert one == again and one.hash != other.hash
