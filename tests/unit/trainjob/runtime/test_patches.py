"""A TrainJob's runtimePatches on its runtime (trainjob/runtime/patches.py), merged as Trainer v2.3
merges them: in the managers' order, each field by its own rule (tolerations atomic but
Kueue's added, maps field by field, lists of named entries by key, a null removes)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubebase.objects import Dict
from tests.support.builders import (
    container,
    edit,
    make_runtime,
    make_trainjob,
    replicated_job,
    runtime_patch,
)
from tests.unit.trainjob.runtime import info_for
from trainjob.runtime import (
    RuntimeSpecError,
)
from trainjob.runtime.patches import add_tolerations


def _patch(manager: str, pod_spec: Dict, meta: Dict | None = None) -> Dict:
    return runtime_patch(manager, "node", {"metadata": meta or {}, "spec": pod_spec})


def test_runtime_patches_merge_in_manager_order() -> None:
    runtime = make_runtime(
        replicated_jobs=[
            replicated_job("node", "trainer", [container(env=[{"name": "X", "value": "runtime"}])])
        ]
    )
    tj = make_trainjob(
        runtimePatches=[
            _patch(
                "user.example/first",
                {
                    "nodeSelector": {"pool": "a", "zone": "1"},
                    "tolerations": [{"key": "t1", "operator": "Exists"}],
                    "containers": [
                        {
                            "name": "node",
                            "env": [
                                {"name": "X", "value": "first"},
                                {"name": "Y", "value": "first"},
                            ],
                        }
                    ],
                },
                {"labels": {"team": "a"}},
            ),
            _patch(
                "kueue.x-k8s.io/manager",
                {
                    "nodeSelector": {"pool": "b"},
                    "tolerations": [{"key": "t2", "operator": "Exists"}],
                    "containers": [{"name": "node", "env": [{"name": "Y", "value": "second"}]}],
                },
                {"labels": {"kueue": "yes"}},
            ),
        ]
    )
    ps = info_for(tj, runtime).pod_sets[0]
    spec = ps.pod_template["spec"]
    assert spec["nodeSelector"] == {"pool": "b", "zone": "1"}
    assert spec["tolerations"] == [
        {"key": "t1", "operator": "Exists"},
        {"key": "t2", "operator": "Exists"},
    ]
    assert ps.pod_template["metadata"]["labels"] == {"team": "a", "kueue": "yes"}
    env = ps.container("node")["env"]
    assert env[:2] == [{"name": "X", "value": "first"}, {"name": "Y", "value": "second"}]


def test_patch_for_unknown_replicated_job_or_container_is_refused() -> None:
    bad_rj = make_trainjob(
        runtimePatches=[
            {
                "manager": "m",
                "trainingRuntimeSpec": {
                    "template": {"spec": {"replicatedJobs": [{"name": "nope"}]}}
                },
            }
        ]
    )
    with pytest.raises(RuntimeSpecError, match="no replicatedJob 'nope'"):
        info_for(bad_rj, make_runtime())
    bad_ctr = make_trainjob(runtimePatches=[_patch("m", {"containers": [{"name": "sidecar"}]})])
    with pytest.raises(RuntimeSpecError, match="container 'sidecar'"):
        info_for(bad_ctr, make_runtime())


def patched_pod_spec(pod_spec: Dict, *patches: tuple[str, Dict]) -> Dict:
    """The node PodSet's pod spec after `patches` ((manager, pod spec patch) in order)."""
    runtime = make_runtime(replicated_jobs=[replicated_job("node", "trainer", [container()])])
    edit(runtime).pod_spec("node", **pod_spec)
    runtime_patches = [_patch(manager, spec) for manager, spec in patches]
    info = info_for(make_trainjob(runtimePatches=runtime_patches), runtime)
    out: Dict = info.pod_sets[0].pod_template["spec"]
    return out


def toleration(key: str, **more: Any) -> Dict:
    return {"key": key, "operator": "Exists", "effect": "NoSchedule", **more}


def test_a_users_tolerations_replace_the_runtimes_as_trainers_atomic_list_does() -> None:
    spec = patched_pod_spec(
        {"tolerations": [toleration("a")]}, ("me", {"tolerations": [toleration("b")]})
    )
    assert spec["tolerations"] == [toleration("b")]


def test_kueues_tolerations_are_added_to_those_there_as_fixed_in_kueue_15161() -> None:
    runtime = [toleration("a", tolerationSeconds=30)]
    spec = patched_pod_spec(
        {"tolerations": runtime},
        ("kueue.x-k8s.io/manager", {"tolerations": [toleration("a"), toleration("gpu")]}),
    )
    assert spec["tolerations"] == [toleration("a", tolerationSeconds=30), toleration("gpu")]


def test_affinity_and_security_context_merge_field_by_field_lists_replaced() -> None:
    zone = {"key": "zone", "operator": "In", "values": ["a"]}
    required = {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}
    base = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
        "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
    }
    anti = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname"}
        ]
    }
    spec = patched_pod_spec(
        base,
        (
            "me",
            {
                "affinity": {"podAntiAffinity": anti},
                "securityContext": {"runAsUser": 0, "fsGroup": None},
            },
        ),
    )
    assert spec["affinity"] == {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required},
        "podAntiAffinity": anti,
    }
    assert spec["securityContext"] == {"runAsUser": 0}


def test_volume_mounts_merge_by_path_and_node_selector_nulls_remove() -> None:
    mounted = container(volumeMounts=[{"name": "data", "mountPath": "/data"}])
    spec = patched_pod_spec(
        {"containers": [mounted], "nodeSelector": {"pool": "a", "zone": "z"}},
        (
            "me",
            {
                "nodeSelector": {"zone": None, "disk": "ssd"},
                "containers": [
                    {"name": "node", "volumeMounts": [{"name": "scratch", "mountPath": "/data"}]}
                ],
            },
        ),
    )
    assert spec["nodeSelector"] == {"pool": "a", "disk": "ssd"}
    assert spec["containers"][0]["volumeMounts"] == [{"name": "scratch", "mountPath": "/data"}]


def test_a_patched_volume_or_env_entry_replaces_the_runtimes_of_its_name_whole() -> None:
    """An entry of a patch replaces the runtime's entry of its key whole, as Trainer's upsert
    does: merged, a claim and an emptyDir would make one volume of two sources, and a value
    beside a valueFrom a variable the API server refuses."""
    runtime_ctr = container(
        env=[{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    )
    spec = patched_pod_spec(
        {
            "containers": [runtime_ctr],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "big"}}],
        },
        (
            "me",
            {
                "volumes": [{"name": "data", "emptyDir": {}}],
                "containers": [{"name": "node", "env": [{"name": "TOKEN", "value": "plain"}]}],
            },
        ),
    )
    assert spec["volumes"] == [{"name": "data", "emptyDir": {}}]
    token = [e for e in spec["containers"][0]["env"] if e["name"] == "TOKEN"]
    assert token == [{"name": "TOKEN", "value": "plain"}]


def test_a_patch_merges_the_jobsets_and_a_jobs_labels_and_annotations_a_null_removing() -> None:
    """Each level's metadata merges key by key: the JobSet's (the TrainJob's own labels and
    annotations on what it makes), a replicatedJob's Job's, its pods'; the runtime is left as
    the cache holds it."""
    runtime = edit(make_runtime()).template_metadata(
        {"labels": {"keep": "1", "drop": "2"}, "annotations": {"a": "runtime"}}
    )
    runtime.replicated_job(
        "node",
        template={
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [container()]}}},
        },
    )
    body = runtime.obj()
    before = copy.deepcopy(body)
    meta = {"labels": {"drop": None, "new": "3"}, "annotations": {"a": "patch", "b": "4"}}
    rj_patch = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"job": "x"}, "annotations": {"j": "y"}},
            "spec": {"template": {"metadata": {"annotations": {"pod": "z"}}}},
        },
    }
    patch = {
        "manager": "user.example/p",
        "trainingRuntimeSpec": {
            "template": {"metadata": meta, "spec": {"replicatedJobs": [rj_patch]}}
        },
    }
    info = info_for(make_trainjob(runtimePatches=[patch]), body)
    assert info.labels == {"keep": "1", "new": "3"}
    assert info.annotations == {"a": "patch", "b": "4"}
    job_meta = info.pod_sets[0].job_template["metadata"]
    assert job_meta["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
        "job": "x",
    }
    assert job_meta["annotations"] == {"j": "y"}
    assert info.pod_sets[0].pod_template["metadata"]["annotations"] == {"pod": "z"}
    assert body == before  # edits are the framework's own copy's


def test_an_init_container_patch_merges_into_the_init_container() -> None:
    runtime = edit(make_runtime()).pod_spec(
        "node", initContainers=[container("wait", env=[{"name": "A", "value": "1"}])]
    )
    patch = _patch(
        "user.example/p",
        {"initContainers": [{"name": "wait", "env": [{"name": "B", "value": "2"}]}]},
    )
    spec = info_for(make_trainjob(runtimePatches=[patch]), runtime.obj()).pod_sets[0]
    pod = spec.pod_template["spec"]
    assert pod["initContainers"][0]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "2"},
    ]
    assert not {"A", "B"} & {e["name"] for e in pod["containers"][0].get("env", [])}


def test_volumes_merge_by_name_in_place_new_ones_after() -> None:
    a, b, c = ({"name": n, "emptyDir": {}} for n in "abc")
    b2 = {"name": "b", "configMap": {"name": "cm"}}
    spec = patched_pod_spec({"volumes": [a, b]}, ("me", {"volumes": [b2, c]}))
    assert spec["volumes"] == [a, b2, c]


def test_kueue_tells_a_toleration_without_an_operator_from_none_with_equal() -> None:
    """The API's default operator is Equal: Kueue's same toleration with it is not added."""
    runtime = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    again = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
    spec = patched_pod_spec(
        {"tolerations": runtime}, ("kueue.x-k8s.io/manager", {"tolerations": [again]})
    )
    assert spec["tolerations"] == runtime


def test_tolerations_apart_by_effect_or_of_another_shape_are_each_kept() -> None:
    """Kueue's tolerations are added beside those there: one that differs by its effect alone
    is another; a value of another shape (the CRDs refuse it) is told apart, never raised on."""
    no_schedule = toleration("k")
    no_execute = {**toleration("k"), "effect": "NoExecute"}
    assert add_tolerations([no_schedule], [no_execute]) == [no_schedule, no_execute]
    assert add_tolerations([], [no_execute, no_execute]) == [no_execute]
    odd = [{"key": "k", "value": ["x"]}, {"key": "k", "value": {"y": 1}}]
    assert add_tolerations(odd[:1], odd) == odd
