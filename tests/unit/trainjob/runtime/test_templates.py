"""The runtime framework's template editors and patch views (trainjob/runtime/templates.py):
edits in place that keep every field they do not name, a list or object that is null made
before it is written to, ports and env kept once, and a runtimePatch read as Trainer types it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import (
    container,
    edit,
    make_runtime,
    make_trainjob,
    replicated_job,
    runtime_patch,
)
from tests.unit.trainjob.runtime import info_for
from trainjob.runtime.templates import (
    ContainerEdit,
    JobSetSpecView,
    JobTemplateEdit,
    MetaEdit,
    PodSpecEdit,
    TemplatePatchView,
    identity,
    merge_by_key,
)

Dict = dict[str, Any]


def test_an_edit_keeps_every_field_it_does_not_name() -> None:
    """A field newer than this code (here `futureField`, at each level) reaches the pods."""
    raw: Dict = {
        "futureField": {"x": 1},
        "metadata": {"labels": {"a": "1"}, "futureMeta": True},
        "spec": {
            "futureJob": 2,
            "template": {
                "spec": {
                    "futurePod": [3],
                    "containers": [{"name": "node", "futureCtr": "4", "env": []}],
                }
            },
        },
    }
    job = JobTemplateEdit(raw)
    job.metadata.merge_map("labels", {"b": "2"})
    spec = job.pod_template.spec
    ctr = spec.container("node")
    assert ctr is not None
    ctr.merge_env([{"name": "E", "value": "v"}])
    ctr.add_port(29500)
    spec.merge_entries("volumes", [{"name": "v", "emptyDir": {}}])
    assert raw["futureField"] == {"x": 1}
    assert raw["metadata"] == {"labels": {"a": "1", "b": "2"}, "futureMeta": True}
    assert raw["spec"]["futureJob"] == 2
    pod_spec = raw["spec"]["template"]["spec"]
    assert pod_spec["futurePod"] == [3]
    assert pod_spec["containers"] == [
        {
            "name": "node",
            "futureCtr": "4",
            "env": [{"name": "E", "value": "v"}],
            "ports": [{"containerPort": 29500, "protocol": "TCP"}],
        }
    ]


def test_a_port_the_container_declares_is_not_declared_again() -> None:
    """Two entries of one containerPort and protocol: the API server refuses the pod."""
    raw: Dict = {"ports": [{"containerPort": 29500, "protocol": "TCP", "name": "torch"}]}
    ctr = ContainerEdit(raw)
    ctr.add_port(29500)
    assert raw["ports"] == [{"containerPort": 29500, "protocol": "TCP", "name": "torch"}]
    ctr.add_port(29501)
    assert raw["ports"][1] == {"containerPort": 29501, "protocol": "TCP"}
    bare: Dict = {}
    ContainerEdit(bare).add_port(29500)
    ContainerEdit(bare).add_port(29500)
    assert bare == {"ports": [{"containerPort": 29500, "protocol": "TCP"}]}


def test_a_policys_env_replaces_a_variable_of_its_name_in_place() -> None:
    user = {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    raw: Dict = {"env": [user, {"name": "A", "value": "1"}]}
    ContainerEdit(raw).merge_env([{"name": "B", "value": "policy"}, {"name": "C", "value": "3"}])
    assert raw["env"] == [
        {"name": "B", "value": "policy"},  # where the user's was, whole
        {"name": "A", "value": "1"},
        {"name": "C", "value": "3"},
    ]


@pytest.mark.parametrize("field", ["ports", "envFrom"])
def test_a_null_list_is_made_before_an_entry_is_added(field: str) -> None:
    """`ports: null` is what the API holds for no ports; the runtime's shapes admit it."""
    raw: Dict = {"name": "node", field: None}
    ctr = ContainerEdit(raw)
    ctr.add_port(29500)
    ctr.add_secret_env("creds")
    ctr.add_secret_env("creds")
    assert raw["ports"] == [{"containerPort": 29500, "protocol": "TCP"}]
    assert raw["envFrom"] == [{"secretRef": {"name": "creds"}}]


def test_a_map_merge_removes_a_key_set_to_null_and_leaves_out_an_empty_map() -> None:
    raw: Dict = {"labels": {"a": "1", "b": "2"}, "annotations": {"x": "1"}}
    meta = MetaEdit(raw)
    meta.merge_map("labels", {"a": None, "c": "3"})
    meta.merge_map("annotations", {"x": None})
    meta.merge_map("labels", None)  # nothing to merge: nothing changes
    assert raw == {"labels": {"b": "2", "c": "3"}}
    meta.put("annotations", "k", "v")
    assert raw["annotations"] == {"k": "v"}


def test_a_container_and_an_init_container_are_found_and_their_mounts_read() -> None:
    raw: Dict = {
        "containers": [{"name": "node"}],
        "initContainers": [{"name": "wait", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}],
    }
    spec = PodSpecEdit(raw)
    assert spec.container("wait") is None  # containers only
    found = spec.any_container("wait")
    assert found is not None and found.raw is raw["initContainers"][0]
    assert spec.mounted() == {"data"}
    both = PodSpecEdit({"containers": [{"name": "x"}], "initContainers": [{"name": "x"}]})
    first = both.any_container("x")  # a container first (the Pod API refuses the two anyway)
    assert first is not None and first.raw is both.raw["containers"][0]


def test_an_absent_or_null_template_part_is_made_when_edited() -> None:
    raw: Dict = {"metadata": None, "spec": None}
    job = JobTemplateEdit(raw)
    job.metadata.merge_map("labels", {"a": "1"})
    job.pod_template.spec.merge_map("nodeSelector", {"pool": "x"})
    assert raw == {
        "metadata": {"labels": {"a": "1"}},
        "spec": {"template": {"spec": {"nodeSelector": {"pool": "x"}}}},
    }


def test_a_patch_is_read_as_trainer_types_it_and_any_other_shape_as_nothing() -> None:
    patch = runtime_patch(
        "user.example/p",
        "node",
        {"metadata": {"labels": {"a": "1"}}, "spec": {"nodeSelector": {"pool": "x"}}},
    )["trainingRuntimeSpec"]
    (rj,) = TemplatePatchView(patch).replicated_jobs
    assert rj.name == "node"
    assert rj.pod_metadata.labels == {"a": "1"}
    assert rj.job_metadata.labels is None
    assert rj.pod_spec is not None and rj.pod_spec.node_selector == {"pool": "x"}
    odd = TemplatePatchView({"template": {"spec": {"replicatedJobs": [{"name": "n"}, "x"]}}})
    (bare,) = odd.replicated_jobs
    assert bare.pod_spec is None
    assert bare.pod_metadata.labels is None
    assert TemplatePatchView({"template": []}).replicated_jobs == []


def test_a_runtime_whose_ports_are_null_gets_the_policys_port() -> None:
    """torch adds its port to the node container; `ports: null` is no list to append to."""
    runtime = make_runtime(
        ml_policy={"numNodes": 1, "torch": {}},
        replicated_jobs=[replicated_job("node", "trainer", [container(ports=None)])],
    )
    node = info_for(make_trainjob(), runtime).pod_sets[0].container("node")
    assert node is not None
    assert node["ports"] == [{"containerPort": 29500, "protocol": "TCP"}]


def test_a_runtime_patch_on_a_job_template_whose_spec_is_null() -> None:
    """Absent and null are one to the API: a patch on such a template patches its pods."""
    rj = replicated_job("node", "trainer", [container()])
    runtime = make_runtime(replicated_jobs=[rj, {"name": "extra", "template": {"spec": None}}])
    patch = runtime_patch("user.example/p", "extra", {"metadata": {"labels": {"team": "a"}}})
    info = info_for(make_trainjob(runtimePatches=[patch]), runtime)
    extra = info.pod_set("extra")
    assert extra.pod_template["metadata"] == {"labels": {"team": "a"}}


def test_a_merge_key_of_another_shape_is_told_apart_never_raised_on() -> None:
    """A TrainJob's env through a CRD looser than the shipped one: a name that is a list is
    one entry of its own (the shipped CRDs and the runtime's shapes refuse it)."""
    base = [{"name": "A", "value": "1"}, {"name": ["x"], "value": "2"}]
    extra = [{"name": ["x"], "value": "3"}, {"name": {"y": 1}, "value": "4"}, {"name": "A"}]
    assert merge_by_key(base, extra) == [
        {"name": "A"},
        {"name": ["x"], "value": "3"},
        {"name": {"y": 1}, "value": "4"},
    ]
    assert identity("a") == ("string", "a") != identity(None)
    assert identity('["a"]') != identity(["a"])  # a string is never another value's JSON
    assert len({identity(1), identity(True), identity(1.0)}) == 3
    assert identity({"b": 1, "a": 2}) == identity({"a": 2, "b": 1}) != identity([1])
    assert merge_by_key([{"name": 1}], [{"name": True}]) == [{"name": 1}, {"name": True}]


def test_a_volume_two_claim_templates_name_is_mounted_once_in_their_order() -> None:
    """Each PodSet's claims are merged once, in the templates' order; a name two templates
    give is the later one's, where the first was."""
    mounts = [{"name": n, "mountPath": f"/{n}"} for n in ("b", "a")]
    runtime = make_runtime(
        replicated_jobs=[
            replicated_job("node", "trainer", [container(volumeMounts=mounts)]),
            replicated_job("other", None, [container(volumeMounts=mounts[1:])]),
        ]
    )
    policies = [
        {"templates": [{"metadata": {"name": n}, "spec": {}} for n in ("a", "b", "unused")]},
        {"templates": [{"metadata": {"name": "a"}, "spec": {}}]},
    ]
    edit(runtime).template_spec(volumeClaimPolicies=policies)
    info = info_for(make_trainjob(), runtime)
    claim = {"persistentVolumeClaim": {"claimName": "a-tj"}}
    assert info.pod_set("node").pod_template["spec"]["volumes"] == [
        {"name": "a", **claim},
        {"name": "b", "persistentVolumeClaim": {"claimName": "b-tj"}},
    ]
    assert info.pod_set("other").pod_template["spec"]["volumes"] == [{"name": "a", **claim}]
    assert [c["metadata"]["name"] for c in info.policy.claims] == [
        "a-tj",
        "b-tj",
        "unused-tj",
        "a-tj",
    ]


def test_a_runtime_patch_on_pods_whose_spec_is_null() -> None:
    pods = {"template": {"spec": {"template": {"spec": None}}}}
    rj = replicated_job("node", "trainer", [container()])
    runtime = make_runtime(replicated_jobs=[rj, {"name": "extra", **pods}])
    patch = runtime_patch("user.example/p", "extra", {"spec": {"nodeSelector": {"pool": "x"}}})
    info = info_for(make_trainjob(runtimePatches=[patch]), runtime)
    assert info.pod_set("extra").pod_template["spec"] == {"nodeSelector": {"pool": "x"}}


def test_the_jobset_spec_is_read_for_its_success_and_claim_policies() -> None:
    assert JobSetSpecView({}).success_policy == ("All", [])
    spec = JobSetSpecView(
        {
            "successPolicy": {"operator": "Any", "targetReplicatedJobs": ["node"]},
            "volumeClaimPolicies": [
                {
                    "retentionPolicy": {"whenDeleted": "Delete"},
                    "templates": [
                        {"metadata": {"name": "data", "labels": {"a": "1"}}, "spec": {"x": 1}},
                        {"spec": None},
                        "not a template",
                    ],
                },
                None,
            ],
        }
    )
    assert spec.success_policy == ("Any", ["node"])
    (policy,) = spec.claim_policies
    assert policy.when_deleted == "Delete"
    data, bare = policy.templates
    assert (data.name, data.labels, data.annotations, data.spec) == (
        "data",
        {"a": "1"},
        {},
        {"x": 1},
    )
    assert (bare.name, bare.spec) == ("", {})


def test_claim_volumes_follow_the_templates_order() -> None:
    mounts = [{"name": n, "mountPath": f"/{n}"} for n in ("b", "a")]
    runtime = make_runtime(
        replicated_jobs=[replicated_job("node", "trainer", [container(volumeMounts=mounts)])]
    )
    templates = [{"metadata": {"name": n}, "spec": {}} for n in ("a", "b")]
    edit(runtime).template_spec(volumeClaimPolicies=[{"templates": templates}])
    volumes = info_for(make_trainjob(), runtime).pod_sets[0].pod_template["spec"]["volumes"]
    assert [v["name"] for v in volumes] == ["a", "b"]
