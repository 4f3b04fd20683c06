"""Every field of Trainer v2.3's runtimes is honoured, refused or reported
(trainjob/runtime/fields.py), walked from Trainer's own CRD schemas (read from its Go module,
not copied): a field a new Trainer adds fails here until the table says what happens to it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters import builds
from trainjob.runtime.fields import FIELDS, field_of, ignored

Dict = dict[str, Any]
CRDS = ("trainingruntimes", "clustertrainingruntimes")
REPO = Path(__file__).resolve().parents[2]


def trainers_runtime_schema(plural: str) -> Dict:
    trainer = builds.module_source_dir(
        "trainer", f"{builds.TRAINER_PACKAGE}@{builds.TRAINER_API_VERSION}"
    )
    crd = yaml.safe_load(
        (trainer / f"manifests/base/crds/trainer.kubeflow.org_{plural}.yaml").read_text()
    )
    [version] = [v for v in crd["spec"]["versions"] if v.get("storage")]
    spec: Dict = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def leaves(schema: Dict, path: str = "") -> Iterator[str]:
    """Every field's path under `schema` that has no fields of its own (a list's items as
    `[]`), as `kubectl explain` writes them."""
    if schema.get("type") == "array" and "items" in schema:
        yield from leaves(schema["items"], f"{path}[]")
        return
    properties = schema.get("properties") or {}
    if not properties:
        yield path
        return
    for name, below in properties.items():
        yield from leaves(below, f"{path}.{name}" if path else name)


@pytest.mark.parametrize("plural", CRDS)
def test_every_field_of_trainers_runtime_is_honoured_refused_or_reported(plural: str) -> None:
    paths = list(leaves(trainers_runtime_schema(plural)))
    assert len(paths) > 800  # the pod template's fields are in it
    unnamed = sorted({p for p in paths if field_of(p) is None})
    assert unnamed == [], f"{len(unnamed)} fields of Trainer's {plural} are in no row of FIELDS"
    for entry in FIELDS:  # and no row names a field Trainer does not have
        assert any(entry.covers(p) for p in paths), entry.path


def test_the_counts_docs_differences_gives_are_the_schemas() -> None:
    paths = list(leaves(trainers_runtime_schema("trainingruntimes")))
    by = Counter(entry.treatment for entry in map(field_of, paths) if entry is not None)
    said = " ".join((REPO / "docs" / "operators" / "differences.md").read_text().split())
    assert (
        f"Of the {len(paths)} fields of Trainer v2.3's schema, {by['honoured']} are honoured "
        f"(the pod template's among them), {by['refused']} refused and {by['reported']} "
        "reported." in said
    )


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({}, []),
        ({"failurePolicy": {"maxRestarts": 1, "restartStrategy": "BlockingRecreate"}}, []),
        (
            {"failurePolicy": {"restartStrategy": "InPlaceRestart"}},
            ["template.spec.failurePolicy.restartStrategy (InPlaceRestart)"],
        ),
        (
            {
                "failurePolicy": {
                    "rules": [
                        {"name": "a", "action": "RestartJob"},
                        {"name": "b", "action": "FailJobSet", "onJobFailureReasons": ["X"]},
                        {
                            "name": "c",
                            "action": "FailJobSet",
                            "onJobFailureMessagePatterns": [
                                "x",
                                "(?<=y)z",
                                "a" * 1025,
                                r"\pL{40}a17",  # RE2 takes it, past the memory bound
                                r"\pL{10}x",
                                r"[\pL\pN\pP]x",  # three Unicode classes: costly to compile
                            ],
                        },
                    ]
                }
            },
            [
                "template.spec.failurePolicy.rules[0].action (RestartJob)",
                "template.spec.failurePolicy.rules[2].onJobFailureMessagePatterns[1] "
                "(not an RE2 pattern within 256 KiB)",
                "template.spec.failurePolicy.rules[2].onJobFailureMessagePatterns[2] "
                "(longer than 1024 characters)",
                "template.spec.failurePolicy.rules[2].onJobFailureMessagePatterns[3] "
                "(not an RE2 pattern within 256 KiB)",
                "template.spec.failurePolicy.rules[2].onJobFailureMessagePatterns[5] "
                "(more than 2 Unicode classes (\\p, \\P))",
            ],
        ),
        (
            {
                "failurePolicy": {
                    "rules": [
                        {"action": "FailJobSet", "onJobFailureMessagePatterns": ["x"] * 60},
                        {"action": "FailJobSet", "onJobFailureMessagePatterns": ["y"] * 10_000},
                    ]
                }
            },
            [  # a runtime's 10,000 patterns: 4 run, the rest said once
                "template.spec.failurePolicy.rules[1].onJobFailureMessagePatterns[4:] "
                "(beyond the policy's first 64 patterns)"
            ],
        ),
        ({"coordinator": {"replicatedJob": "node"}}, ["template.spec.coordinator"]),
        ({"ttlSecondsAfterFinished": 60}, ["template.spec.ttlSecondsAfterFinished"]),
        ({"managedBy": "someone-else"}, ["template.spec.managedBy"]),
        ({"network": {"enableDNSHostnames": True, "subdomain": "tj"}}, []),
        ({"network": {"enableDNSHostnames": False}}, ["template.spec.network.enableDNSHostnames"]),
        (
            {"network": {"publishNotReadyAddresses": False}},
            ["template.spec.network.publishNotReadyAddresses"],
        ),
        ({"network": {"subdomain": "other"}}, ["template.spec.network.subdomain"]),
        ({"startupPolicy": {"startupPolicyOrder": "AnyOrder"}}, []),
        (
            {"startupPolicy": {"startupPolicyOrder": "InOrder"}},
            ["template.spec.startupPolicy.startupPolicyOrder"],
        ),
        ({"replicatedJobs": [{"name": "node", "groupName": "default"}]}, []),
        (
            {
                "replicatedJobs": [
                    {"name": "a", "groupName": "g1"},
                    {"name": "b", "groupName": "g1"},
                ]
            },
            ["template.spec.replicatedJobs[].groupName (g1)"],
        ),
    ],
)
def test_what_a_runtime_sets_that_this_worker_does_not_do(spec: Dict, named: list[str]) -> None:
    assert ignored({"replicatedJobs": [], **spec}, "tj") == named
