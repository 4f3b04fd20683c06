"""Kueue's Topology Aware Scheduling request of a PodSet (trainjob/runtime/topology.py), from
the pod template's annotations as Kueue 0.19 reads them for a TrainJob's replicatedJob."""

from __future__ import annotations

import pytest

from kubebase.objects import Dict
from tests.support.builders import make_runtime, make_trainjob
from tests.unit.trainjob.runtime import info_for
from trainjob.runtime import RuntimeSpecError
from trainjob.runtime.info import PodSet
from trainjob.runtime.topology import topology_request

TAS = "kueue.x-k8s.io/podset-"
ALWAYS = {
    "podIndexLabel": "batch.kubernetes.io/job-completion-index",
    "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
    "subGroupCount": 1,
}


def pod_set(annotations: Dict) -> PodSet:
    ps = info_for(make_trainjob(trainer={"numNodes": 2}), make_runtime()).pod_sets[0]
    ps.pod_template.setdefault("metadata", {})["annotations"] = annotations
    return ps


@pytest.mark.parametrize(
    ("annotations", "request_"),
    [
        ({}, {}),
        ({f"{TAS}required-topology": "rack"}, {"required": "rack"}),
        ({f"{TAS}preferred-topology": "rack"}, {"preferred": "rack"}),
        # required wins over preferred, and both over unconstrained
        (
            {f"{TAS}required-topology": "rack", f"{TAS}preferred-topology": "block"},
            {"required": "rack"},
        ),
        ({f"{TAS}unconstrained-topology": "true"}, {"unconstrained": True}),
        ({f"{TAS}unconstrained-topology": "F"}, {"unconstrained": False}),
        ({f"{TAS}unconstrained-topology": "1"}, {"unconstrained": True}),
        (
            {
                f"{TAS}required-topology": "rack",
                f"{TAS}group-name": "g",
                f"{TAS}slice-required-topology": "block",
                f"{TAS}slice-size": "2",
            },
            {
                "required": "rack",
                "podSetSliceRequiredTopology": "block",
                "podSetSliceSize": 2,
                "podSetGroupName": "g",
            },
        ),
        # a slice needs both its topology and its size; a group name, a topology it groups
        ({f"{TAS}slice-required-topology": "block"}, {}),
        ({f"{TAS}slice-size": "2"}, {}),
        ({f"{TAS}group-name": "g"}, {}),
        (
            {f"{TAS}unconstrained-topology": "true", f"{TAS}group-name": "g"},
            {"unconstrained": True},
        ),
    ],
)
def test_the_annotations_become_kueues_request(annotations: Dict, request_: Dict) -> None:
    assert topology_request(pod_set(annotations)) == {**request_, **ALWAYS}


@pytest.mark.parametrize(
    ("annotations", "says"),
    [
        ({f"{TAS}unconstrained-topology": "yes"}, "unconstrained-topology='yes' is not a boolean"),
        (
            {f"{TAS}slice-required-topology": "block", f"{TAS}slice-size": "two"},
            "slice-size='two' is not a whole number",
        ),
    ],
)
def test_a_value_kueue_could_not_read_is_refused_naming_the_annotation(
    annotations: Dict, says: str
) -> None:
    with pytest.raises(RuntimeSpecError, match=f"replicatedJob 'node': pod annotation .*{says}"):
        topology_request(pod_set(annotations))


@pytest.mark.parametrize(
    ("annotations", "request_"),
    [
        ({f"{TAS}preferred-topology": "rack", f"{TAS}group-name": "g"},
         {"preferred": "rack", "podSetGroupName": "g"}),
        ({f"{TAS}required-topology": "rack", f"{TAS}unconstrained-topology": "true"},
         {"required": "rack"}),
        ({f"{TAS}preferred-topology": "rack", f"{TAS}unconstrained-topology": "true"},
         {"preferred": "rack"}),
    ],
)  # fmt: skip
def test_a_topology_it_groups_and_required_or_preferred_before_unconstrained(
    annotations: Dict, request_: Dict
) -> None:
    assert topology_request(pod_set(annotations)) == {**request_, **ALWAYS}


def test_each_job_of_a_replicated_job_is_a_sub_group() -> None:
    ps = pod_set({})
    ps.replicas = 3
    assert topology_request(ps)["subGroupCount"] == 3
