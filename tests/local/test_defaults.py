"""A runtime on a worker that runs Trainer reads back with Trainer v2.3's CRD defaults; the
dispatcher still takes it for the manager's. The table of defaults is Trainer's own, derived
here from its release's CRDs."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from clusters import builds
from trainjob.runtime.defaults import TRAINER_V23_RUNTIME_DEFAULTS, same_runtime_spec

CRDS = (
    "trainer.kubeflow.org_clustertrainingruntimes.yaml",
    "trainer.kubeflow.org_trainingruntimes.yaml",
)


def _defaults(schema: dict[str, Any], path: str = "") -> dict[str, Any]:
    out = {path: schema["default"]} if "default" in schema else {}
    for name, sub in (schema.get("properties") or {}).items():
        out.update(_defaults(sub, f"{path}.{name}" if path else name))
    if "items" in schema:
        out.update(_defaults(schema["items"], f"{path}[]"))
    return out


@pytest.mark.parametrize("crd", CRDS)
def test_the_table_is_trainers_own(crd: str) -> None:
    trainer = builds.module_source_dir(
        "trainer", f"{builds.TRAINER_PACKAGE}@{builds.TRAINER_API_VERSION}"
    )
    doc = yaml.safe_load((trainer / "manifests" / "base" / "crds" / crd).read_text())
    (version,) = doc["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert _defaults(spec) == dict(TRAINER_V23_RUNTIME_DEFAULTS)


def _runtime(*, protocol: str | None = None, **job: Any) -> dict[str, Any]:
    """A runtime's spec: one replicatedJob "node" (`job`'s fields besides) whose container
    listens on 29500 (over `protocol`, when given)."""
    port: dict[str, Any] = {"containerPort": 29500}
    if protocol is not None:
        port["protocol"] = protocol
    container = {"name": "node", "image": "python", "ports": [port]}
    return {
        "mlPolicy": {"numNodes": 2, "torch": {}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {"spec": {"template": {"spec": {"containers": [container]}}}},
                        **job,
                    }
                ]
            }
        },
    }


def _as_trainer_stores_it() -> dict[str, Any]:
    """`_runtime()` as the API server stores it: Trainer's defaults filled in."""
    return _runtime(groupName="default", replicas=1, protocol="TCP")


def test_a_runtime_with_trainers_defaults_is_the_same_runtime() -> None:
    ours = _runtime()
    theirs = _as_trainer_stores_it()
    assert ours != theirs
    assert same_runtime_spec(ours, theirs) and same_runtime_spec(theirs, ours)
    assert same_runtime_spec(ours, ours)


@pytest.mark.parametrize(
    "change",
    [
        "a default set to another value",
        "a field without a default",
        "an absent object its default would sit in",
        "one item more",
        "true for 1",
    ],
)
def test_anything_else_is_a_different_runtime(change: str) -> None:
    ours = _runtime()
    theirs = _as_trainer_stores_it()
    job = theirs["template"]["spec"]["replicatedJobs"][0]
    pod = job["template"]["spec"]["template"]["spec"]
    if change == "a default set to another value":
        job["groupName"] = "workers"
    elif change == "a field without a default":
        pod["containers"][0]["image"] = "python:3.12"
    elif change == "an absent object its default would sit in":
        # mpi's defaults do not make an absent `mpi` policy the same as an MPI one
        theirs["mlPolicy"]["mpi"] = {"numProcPerNode": 1}
    elif change == "one item more":
        pod["containers"].append({"name": "sidecar", "image": "busybox"})
    else:
        ours["mlPolicy"]["numNodes"] = True
        theirs["mlPolicy"]["numNodes"] = 1
    assert not same_runtime_spec(ours, theirs) and not same_runtime_spec(theirs, ours)
