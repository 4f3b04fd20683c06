"""The installed CRDs (release/crd_schema.py): ours with the Kubernetes types they leave open
typed as Kubeflow Trainer v2.3's CRDs type them, and nothing of ours lost on the way."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from release import crd_schema
from release.crd_docs import PLURALS, fields, installed_path, openapi_schema, trainers_crd
from tests.support.files import YAML_LOADER


def _load(path: Any) -> Any:
    return yaml.load(path.read_text(), Loader=YAML_LOADER)


@pytest.fixture(scope="module", params=PLURALS)
def pair(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    plural = request.param
    source = dict(crd_schema.sources())[plural]
    return openapi_schema(_load(source)), openapi_schema(_load(installed_path(plural)))


def test_the_installed_crds_leave_no_field_open(pair: tuple[Any, Any]) -> None:
    source, installed = pair
    assert list(crd_schema.still_open(source)), "api/crds/ has nothing left to type"
    assert list(crd_schema.still_open(installed)) == []


def test_every_field_and_rule_of_ours_is_installed(pair: tuple[Any, Any]) -> None:
    """Each field of our source is in the installed CRD, with our type, our limits and each
    of our validation rules."""
    source, installed = pair
    where = dict(fields(installed))
    for path, ours in fields(source):
        assert path in where, path
        theirs = where[path]
        for key in ("type", "maxItems", "maxLength", "maxProperties", "minimum", "enum"):
            if key in ours:
                assert theirs.get(key) == ours[key], (path, key)
        for rule in ours.get("x-kubernetes-validations") or []:
            assert rule in theirs["x-kubernetes-validations"], (path, rule)
        assert set(ours.get("required") or []) <= set(theirs.get("required") or []), path


def test_an_open_node_takes_trainers_type_with_ours_laid_over_it() -> None:
    ours = {
        "description": "ours, one line",
        "type": "array",
        "maxItems": 4,
        "x-kubernetes-validations": [{"rule": "self.size() > 0"}],
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    }
    theirs: dict[str, Any] = {
        "description": "Trainer's",
        "type": "array",
        "x-kubernetes-validations": [{"rule": "true"}],
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
        },
    }
    done = crd_schema.complete_node(
        {"type": "object", "properties": {"env": ours}},
        {
            "type": "object",
            "properties": {"env": theirs},
        },
    )["properties"]["env"]
    assert done["items"] == theirs["items"]
    assert done["maxItems"] == 4  # our limit kept
    assert done["description"] == "Trainer's"  # Trainer has the field: Trainer's words
    assert done["x-kubernetes-validations"] == [{"rule": "self.size() > 0"}]

    opened = {**ours, "x-kubernetes-preserve-unknown-fields": True}
    done = crd_schema.complete_node(opened, theirs)
    assert "x-kubernetes-preserve-unknown-fields" not in done
    assert done["description"] == "Trainer's"
    assert done["maxItems"] == 4
    assert done["x-kubernetes-validations"] == [{"rule": "true"}, {"rule": "self.size() > 0"}]
    assert done["items"]["properties"] == theirs["items"]["properties"]


def test_a_node_trainer_leaves_open_or_lacks_stays_ours() -> None:
    ours = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert crd_schema.complete_node(ours, None) == ours
    assert crd_schema.complete_node(ours, dict(ours)) == ours
    assert crd_schema.complete_node(ours, {"type": "string"}) == ours
    # Trainer's struct without fields (`jax: {}`) types ours as holding none.
    assert crd_schema.complete_node(ours, {"type": "object"}) == {"type": "object"}


# Fields a real TrainJob needs whose help once came from another field sharing their node.
NEEDED = (
    ".spec.initializer.model",
    ".spec.trainer.env",
    ".spec.trainer.resourcesPerNode.requests",
    *(
        f".spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[].template{p}"
        for p in (
            ".metadata.labels",
            ".spec.template.spec.volumes",
            ".spec.template.spec.imagePullSecrets",
            ".spec.template.spec.schedulingGates",
            ".spec.template.spec.containers",
            ".spec.template.spec.containers[].volumeMounts",
            ".spec.template.spec.initContainers[].volumeMounts",
        )
    ),
)


@pytest.mark.parametrize("copy", ["crds/", "the chart's"])
@pytest.mark.parametrize("plural", PLURALS)
def test_each_field_trainer_has_is_described_as_trainer_describes_it(
    plural: str, copy: str
) -> None:
    """What `kubectl explain` says of a field Trainer has is what it says on Trainer's CRD, field
    by field, in the CRD installed with kustomize and in the chart's copy."""
    if copy == "crds/":
        crd = _load(installed_path(plural))
    else:
        crd = json.loads(crd_schema.chart_copy_path(plural).read_text())
    ours = dict(fields(openapi_schema(crd)))
    theirs = dict(fields(openapi_schema(trainers_crd(plural))))
    shared = [path for path in theirs if path in ours]
    assert len(shared) > len(theirs) * 9 // 10, "the walk lost most of Trainer's fields"
    if plural == "trainjobs":
        assert set(NEEDED) <= set(shared)
    differ = [
        (path, ours[path].get("description"), theirs[path].get("description"))
        for path in shared
        if ours[path].get("description") != theirs[path].get("description")
    ]
    assert differ == []


def test_a_node_shared_by_two_fields_is_described_at_each_as_trainer_describes_it() -> None:
    shared = {"description": "tolerations, said once", "type": "array", "maxItems": 8}
    ours = {
        "type": "object",
        "properties": {"tolerations": shared, "volumes": shared, "ours": shared},
    }
    theirs = {
        "type": "object",
        "properties": {
            "tolerations": {"description": "tolerations patches", "type": "array"},
            "volumes": {"description": "volumes patches", "type": "array"},
        },
    }
    done = crd_schema.complete_node(ours, theirs)["properties"]
    assert done["tolerations"] == {**shared, "description": "tolerations patches"}
    assert done["volumes"] == {**shared, "description": "volumes patches"}
    assert done["ours"] == shared  # Trainer has no such field: ours
    # A field Trainer has and does not describe is not described.
    assert "description" not in crd_schema.complete_node(shared, {"type": "array"})
