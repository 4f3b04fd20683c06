"""The runtime's shapes (trainjob/runtime/shapes.py): what is not the type the API would hold
is refused naming the field, never a crash; and what the framework refuses of a runtime's
templates beside them (two replicatedJobs of one name, a template too deep to copy)."""

from __future__ import annotations

import orjson
import pytest

from kubebase.objects import Dict
from tests.support.builders import (
    OWNER,
    container,
    edit,
    make_runtime,
    make_trainjob,
    replicated_job,
    runtime_patch,
)
from tests.unit.trainjob.runtime import info_for
from trainjob.models import parse_trainjob
from trainjob.runtime import RuntimeSpecError, resolve_runtime_info
from trainjob.runtime.framework import MAX_NESTING
from trainjob.runtime.shapes import check_template_spec
from trainjob.workload import build_pod_sets
from trainjob_api.views import RuntimeView
from worker_controller.builders import build_job


def test_a_claim_that_is_not_an_object_is_named_not_a_crash() -> None:
    """Found by the admission fuzzer: `claims: ["x"]` in resourcesPerNode raised an internal
    error where the TrainJob should be told."""
    tj = make_trainjob(trainer={"resourcesPerNode": {"claims": ["x"]}})
    with pytest.raises(RuntimeSpecError, match=r"resourcesPerNode.claims\[0\] must be an object"):
        info_for(tj, make_runtime())


@pytest.mark.parametrize("entry", [None, "claim", 3])
def test_a_list_entry_that_is_not_an_object_is_refused_naming_it(entry: object) -> None:
    with pytest.raises(RuntimeSpecError, match=r"volumeClaimPolicies\[1\] must be an object"):
        check_template_spec({"volumeClaimPolicies": [{}, entry]})


def _runtime_with(**pod_spec: object) -> Dict:
    """The default runtime, its trainer's pod spec given `pod_spec`'s fields."""
    return edit(make_runtime()).pod_spec("node", **pod_spec).obj()


@pytest.mark.parametrize(
    ("pod_spec", "field"),
    [
        # a merge key of another type: the framework tells entries apart by it
        (
            {"containers": [{"name": "node", "env": [{"name": ["x"]}]}]},
            r"containers\[0\].env\[0\].name",
        ),
        ({"containers": [{"name": "node", "env": [{"value": "1"}]}]}, r"env\[0\].name"),
        ({"volumes": [{"name": {"a": 1}}]}, r"volumes\[0\].name"),
        (
            {"containers": [{"name": "node", "volumeMounts": [{"name": "v", "mountPath": ["p"]}]}]},
            r"volumeMounts\[0\].mountPath",
        ),
        ({"containers": [{"name": "node", "volumeMounts": [{"name": "v"}]}]}, r"mountPath"),
        ({"tolerations": [{"key": ["k"], "operator": "Exists"}]}, r"tolerations\[0\].key"),
        ({"initContainers": [{"name": 3}]}, r"initContainers\[0\].name"),
        ({"containers": [{"name": 5}]}, r"containers\[0\].name"),
        ({"containers": [{}]}, r"containers\[0\].name"),
        (
            {"containers": [{"name": "node", "volumeMounts": [{"name": 5, "mountPath": "/p"}]}]},
            r"volumeMounts\[0\].name",
        ),
        ({"tolerations": [{"key": "k", "operator": ["Exists"]}]}, r"tolerations\[0\].operator"),
        ({"tolerations": [{"key": "k", "value": ["v"]}]}, r"tolerations\[0\].value"),
        ({"tolerations": [{"key": "k", "effect": {"e": 1}}]}, r"tolerations\[0\].effect"),
    ],
)
def test_a_key_entries_are_told_apart_by_is_refused_unless_a_string(
    pod_spec: Dict, field: str
) -> None:
    """Found by the hostile review: a list or object there raised `unhashable type` out of
    every pass (the torch policy merges its env into every runtime's trainer)."""
    with pytest.raises(RuntimeSpecError, match=rf"{field} must be a string"):
        info_for(make_trainjob(), _runtime_with(**pod_spec))


@pytest.mark.parametrize("field", ["labels", "annotations"])
@pytest.mark.parametrize("value", ["ab", ["ab"]])
def test_the_jobset_templates_labels_are_a_map_of_strings(field: str, value: object) -> None:
    """`labels: ["ab"]` became {"a": "b"}, and `labels: "ab"` raised a ValueError."""
    runtime = edit(make_runtime()).template_metadata({field: value}).obj()
    with pytest.raises(RuntimeSpecError, match=rf"spec\.template\.metadata\.{field} must be an"):
        info_for(make_trainjob(), runtime)
    bad = edit(make_runtime()).template_metadata({field: {"a": 1}}).obj()
    with pytest.raises(RuntimeSpecError, match=rf"spec\.template\.metadata\.{field}\[a\] must be"):
        info_for(make_trainjob(), bad)


_JOB = "replicatedJob 'node' template"


@pytest.mark.parametrize(
    ("metadata", "at", "field"),
    [
        ({"annotations": {"a": 1}}, "job", rf"{_JOB}\.metadata\.annotations\[a\] must be a string"),
        ({"labels": {"a": 1}}, "job", rf"{_JOB}\.metadata\.labels\[a\] must be a string"),
        ("x", "job", rf"{_JOB}\.metadata must be an object"),
        ({"labels": {"a": 1}}, "pod", rf"{_JOB}\.spec\.template\.metadata\.labels\[a\] must be"),
        (["x"], "pod", rf"{_JOB}\.spec\.template\.metadata must be an object"),
    ],
)
def test_a_replicated_jobs_and_its_pods_metadata_are_checked(
    metadata: object, at: str, field: str
) -> None:
    pods = {"metadata": metadata, "spec": {"containers": [container()]}}
    job: Dict = {"spec": {"template": pods}}
    if at == "job":
        job = {"metadata": metadata, "spec": {"template": {"spec": pods["spec"]}}}
    runtime = make_runtime(replicated_jobs=[{"name": "node", "template": job}])
    with pytest.raises(RuntimeSpecError, match=field):
        info_for(make_trainjob(), runtime)


def test_a_toleration_without_a_key_tolerates_everything_and_is_kept() -> None:
    everything = {"operator": "Exists"}
    info = info_for(make_trainjob(), _runtime_with(tolerations=[everything]))
    assert info.pod_sets[0].pod_template["spec"]["tolerations"] == [everything]


def test_a_replicated_jobs_null_labels_are_none() -> None:
    """`labels: null` read as no labels: this runtime has no trainer step (it raised)."""
    pods = {"template": {"spec": {"containers": [container()]}}}
    rj = {"name": "node", "template": {"metadata": {"labels": None}, "spec": pods}}
    runtime = make_runtime(replicated_jobs=[rj])
    with pytest.raises(RuntimeSpecError, match="has no replicatedJob labelled"):
        info_for(make_trainjob(), runtime)


def test_two_replicated_jobs_of_one_name_are_refused() -> None:
    """One name held one template for both: edits applied twice, the first one's lost."""
    runtime = make_runtime(
        replicated_jobs=[
            replicated_job("node", "trainer", [container()]),
            replicated_job("node", None, [container(image="other")]),
        ]
    )
    with pytest.raises(RuntimeSpecError, match=r"more than one is named 'node'"):
        info_for(make_trainjob(), runtime)


def _nested(levels: int) -> Dict:
    deep: Dict = {}
    at = deep
    for _ in range(levels):
        at["x"] = {}
        at = at["x"]
    return deep


@pytest.mark.parametrize("levels", [MAX_NESTING - 8, MAX_NESTING + 40])
def test_a_runtime_nested_deeper_than_json_is_written_is_a_runtime_problem(levels: int) -> None:
    """Found by two hostile reviews: orjson writes at most MAX_NESTING levels. A template too
    deep to copy raised out of every pass; one a few levels shallower built its Jobs and then
    could not be written as a Workload (its pod specs sit deeper there than in a Job). The
    runtime's own body holds them deeper still: what it cannot write is refused first."""
    runtime = _runtime_with(containers=[container(extra=_nested(levels))])
    info, problem = resolve_runtime_info(parse_trainjob(make_trainjob()), RuntimeView(runtime))
    assert info is None and problem is not None
    assert problem.reason == "RuntimeInvalid"
    assert problem.message == (
        "ClusterTrainingRuntime 'torch-distributed' cannot run this TrainJob: the runtime "
        f"nests deeper than {MAX_NESTING} levels"
    )


def test_runtime_patches_nested_deeper_than_json_is_written_are_named() -> None:
    volume = {"name": "v", "emptyDir": _nested(MAX_NESTING)}
    patch = runtime_patch("user.example/p", "node", {"spec": {"volumes": [volume]}})
    tj = parse_trainjob(make_trainjob(runtimePatches=[patch]))
    info, problem = resolve_runtime_info(tj, RuntimeView(make_runtime()))
    assert info is None and problem is not None
    assert f"spec.runtimePatches nest deeper than {MAX_NESTING} levels" in problem.message


def test_a_runtime_that_can_be_written_builds_a_workload_that_can() -> None:
    """The deepest runtime that can be written: its Jobs and its Workload can be too."""
    levels = next(n for n in range(MAX_NESTING, 0, -1) if _writes(n))
    runtime = _runtime_with(containers=[container(extra=_nested(levels))])
    info, problem = resolve_runtime_info(parse_trainjob(make_trainjob()), RuntimeView(runtime))
    assert problem is None and info is not None
    orjson.dumps(build_pod_sets(info))
    orjson.dumps(build_job(info, info.pod_sets[0], 0, OWNER, suspend=True))


def _writes(levels: int) -> bool:
    try:
        orjson.dumps(_runtime_with(containers=[container(extra=_nested(levels))]))
    except orjson.JSONEncodeError:
        return False
    return True


def test_whether_a_runtime_can_be_written_is_kept_only_for_an_object_the_api_server_named() -> None:
    """Kept by UID and resourceVersion: two bodies of one version and no UID never share it."""
    deep = edit(_runtime_with(containers=[container(extra=_nested(MAX_NESTING))]))
    plain = edit(make_runtime()).resource_version("5").obj()
    tj = parse_trainjob(make_trainjob())
    _, problem = resolve_runtime_info(tj, RuntimeView(deep.resource_version("5").obj()))
    assert problem is not None
    info, problem = resolve_runtime_info(tj, RuntimeView(plain))
    assert info is not None and problem is None
