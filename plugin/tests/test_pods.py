"""Typed views of a pod spec (plugin/trainjob_api/pods.py): what each reads, and that no
shape a tenant can write makes one raise."""

from __future__ import annotations

from typing import Any

import pytest

from trainjob_api.pods import CONTAINER_LISTS, PodSpecView

SPEC = {
    "initContainers": [{"name": "setup", "restartPolicy": "Always"}],
    "containers": [
        "not an object",
        {
            "name": "trainer",
            "env": [
                None,
                {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "optional": True}}},
            ],
            "envFrom": [{"configMapRef": {"name": "cm"}}],
            "resources": {
                "requests": {"cpu": "1"},
                "limits": {"cpu": "2"},
                "claims": [{"name": "g"}],
            },
        },
    ],
    "volumes": [
        {"name": "v0", "secret": {"secretName": "vol", "optional": True}},
        {"name": "v1", "projected": {"sources": [7, {"configMap": {"name": "p"}}]}},
        {"name": "v2", "persistentVolumeClaim": {"claimName": "data"}},
    ],
    "imagePullSecrets": [{"name": "pull"}],
    "resources": {"requests": {"memory": "1Gi"}},
    "overhead": {"cpu": "100m"},
    "runtimeClassName": "gvisor",
    "resourceClaims": [{"name": "gpu"}],
}


def test_a_pod_spec_reads_each_field_and_each_entry_knows_its_place() -> None:
    pod = PodSpecView(SPEC)
    (ctr,) = pod.containers
    assert (ctr.name, ctr.at, ctr.sidecar, ctr.restart_policy) == ("trainer", 1, False, "")
    (setup,) = pod.init_containers
    assert (setup.name, setup.sidecar, setup.restart_policy) == ("setup", True, "Always")
    (env,) = ctr.env
    ref = env.value_from.ref("secretKeyRef")
    assert env.at == 1 and ref is not None and (ref.name, ref.optional) == ("s", True)
    (env_from,) = ctr.env_from
    assert env_from.ref("configMapRef") is not None and env_from.ref("secretRef") is None
    assert (ctr.resources.requests, ctr.resources.limits) == ({"cpu": "1"}, {"cpu": "2"})
    assert ctr.resources.claims == [{"name": "g"}]
    secret = pod.volumes[0].secret
    assert secret is not None and (secret.name, secret.optional) == ("vol", True)
    (source,) = pod.volumes[1].projected_sources
    assert source.at == 1 and source.ref("configMap") is not None
    assert [v.claim_name for v in pod.volumes] == ["", "", "data"]
    assert [(p.name, p.at) for p in pod.image_pull_secrets] == [("pull", 0)]
    assert pod.resources.requests == {"memory": "1Gi"} and pod.overhead == {"cpu": "100m"}
    assert (pod.runtime_class_name, pod.resource_claims) == ("gvisor", [{"name": "gpu"}])
    assert PodSpecView.of_template({"spec": SPEC}).raw is SPEC


# Every JSON type, in place of any field: none is what the field holds.
SHAPES: list[Any] = [
    None,
    0,
    5,
    True,
    "text",
    [],
    {},
    [None, 3, "s", []],
    {"a": 1},
    [None, {"name": "x"}, 3],
]


@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_no_shape_in_any_field_makes_a_view_raise(shape: Any) -> None:
    """Each field, nested ones too, holding any JSON type reads as nothing (or as what it
    holds, where it is the right type), never an exception."""

    def read_all(spec: Any) -> None:
        pod = PodSpecView.of_template({"spec": spec})
        for kind in CONTAINER_LISTS:
            for ctr in pod.containers_in(kind):
                _ = (ctr.name, ctr.sidecar, ctr.restart_policy)
                _ = (ctr.resources.requests, ctr.resources.limits, ctr.resources.claims)
                for env in ctr.env:
                    env.value_from.ref("secretKeyRef")
                for env_from in ctr.env_from:
                    env_from.ref("secretRef")
        for volume in pod.volumes:
            _ = (volume.secret, volume.claim_name, volume.ref("configMap"))
            for source in volume.projected_sources:
                source.ref("secret")
        _ = [p.name for p in pod.image_pull_secrets]
        _ = (pod.resources.requests, pod.overhead, pod.runtime_class_name, pod.resource_claims)

    read_all(shape)
    objects = [x for x in shape if isinstance(x, dict)] if isinstance(shape, list) else []
    for kind in CONTAINER_LISTS:
        assert [c.raw for c in PodSpecView({kind: shape}).containers_in(kind)] == objects
    assert [v.raw for v in PodSpecView({"volumes": shape}).volumes] == objects
    (ctr,) = PodSpecView({"containers": [{"env": shape}]}).containers
    assert [e.raw for e in ctr.env] == objects
    for key in (*CONTAINER_LISTS, "volumes", "imagePullSecrets", "resources", "overhead"):
        read_all({key: shape})
    for key in ("env", "envFrom", "resources"):
        read_all({"containers": [{key: shape}]})
    for key in ("requests", "limits", "claims"):
        read_all({"containers": [{"resources": {key: shape}}]})
    read_all({"containers": [{"env": [{"valueFrom": shape}]}, {"envFrom": [{"secretRef": shape}]}]})
    for key in ("secret", "projected", "persistentVolumeClaim", "configMap"):
        read_all({"volumes": [{key: shape}]})
    read_all({"volumes": [{"projected": {"sources": shape}}]})
    read_all({"volumes": [{"secret": {"secretName": shape, "optional": shape}}]})


def test_a_field_of_the_wrong_type_reads_as_absent() -> None:
    pod = PodSpecView({"containers": {"name": "c"}, "volumes": "v", "overhead": ["1"]})
    assert (pod.containers, pod.volumes, pod.overhead) == ([], [], {})
    ctr = PodSpecView({"containers": [{"resources": {"requests": ["1"]}, "env": 5}]}).containers[0]
    assert (ctr.resources.requests, ctr.env) == ({}, [])
