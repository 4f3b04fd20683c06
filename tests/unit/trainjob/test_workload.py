"""The Workload Kueue keeps for a TrainJob (trainjob/workload.py), built as Kueue 0.19's
TrainJob integration builds it, and the runtimePatch that carries where Kueue admitted it."""

from __future__ import annotations

from kubebase.objects import Dict
from tests.support.builders import OWNER
from tests.unit.trainjob import HIGH, WL_NAME, info_of
from tests.unit.trainjob import queued_trainjob as trainjob
from trainjob import workload as wlmod
from trainjob.models import parse_trainjob
from trainjob.queues import ResourceFlavorView
from trainjob_api.views import WorkloadView

QUEUE_LABELS = {
    "kueue.x-k8s.io/local-queue-name": "q",
    "kueue.x-k8s.io/cluster-queue-name": "cq",
}
INIT_META = {
    "labels": {
        "kueue.x-k8s.io/podset": "init",
        "kueue.x-k8s.io/multikueue-worker-workload-pod": "true",
        **QUEUE_LABELS,
    },
    "annotations": {"kueue.x-k8s.io/workload": "wl"},
}


def test_the_workload_is_kueues_for_a_trainjob_in_full() -> None:
    body = trainjob(trainer={"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "2"}}})
    info = info_of(body)
    template = info.pod_sets[0].kueue_template
    assert template is not None
    assert wlmod.build_workload(parse_trainjob(body), info, "q", HIGH) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": WL_NAME,
            "namespace": "ns",
            "labels": {"kueue.x-k8s.io/job-uid": "uid-tj"},
            "ownerReferences": [OWNER],
        },
        "spec": {
            "queueName": "q",
            "podSets": [
                {
                    "name": "node",
                    "count": 2,
                    "template": {"metadata": {}, "spec": template["spec"]},
                    # Kueue's for a TrainJob with TAS on (its default): the index labels
                    "topologyRequest": {
                        "podIndexLabel": "batch.kubernetes.io/job-completion-index",
                        "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
                        "subGroupCount": 1,
                    },
                }
            ],
            "priorityClassRef": {
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "high",
            },
            "priority": 100,
        },
    }
    assert template["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "2"}}
    # As Kueue's own TrainJob integration makes it: without what the torch policy adds for the
    # pods to run (a prebuilt Workload with it is out of sync with Kueue on a Trainer worker).
    ran = info.pod_sets[0].pod_template["spec"]["containers"][0]
    kept = template["spec"]["containers"][0]
    assert "PET_NNODES" in {e["name"] for e in ran["env"]} and ran.get("ports")
    assert not [e for e in kept.get("env") or [] if e["name"].startswith("PET_")]
    assert not kept.get("ports")


def test_the_admission_patch_carries_flavours_and_check_updates_per_pod_set() -> None:
    toleration = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    flavors = {
        "a100": ResourceFlavorView(
            {"spec": {"nodeLabels": {"gpu": "a100"}, "tolerations": [toleration]}}
        ),
        "cpu": ResourceFlavorView({"spec": {"nodeLabels": {"pool": "cpu"}}}),
    }
    wl = {
        "metadata": {"name": "wl", "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"}},
        "spec": {"queueName": "q"},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": "node", "flavors": {"nvidia.com/gpu": "a100", "cpu": "cpu"}},
                    {"name": "init", "flavors": {}},
                ],
            },
            "admissionChecks": [
                {
                    "name": "prov",
                    "podSetUpdates": [
                        {
                            "name": "node",
                            "nodeSelector": {"zone": "z1"},
                            "labels": {"l": "1"},
                            "annotations": {"a": "2"},
                            "tolerations": [toleration],
                        }
                    ],
                }
            ],
        },
    }
    assert wlmod.build_admission_patch(WorkloadView(wl), flavors) == {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "metadata": {
                                            "labels": {
                                                "kueue.x-k8s.io/podset": "node",
                                                "kueue.x-k8s.io/multikueue-worker-workload-pod": (
                                                    "true"
                                                ),
                                                **QUEUE_LABELS,
                                                "l": "1",
                                            },
                                            "annotations": {
                                                "kueue.x-k8s.io/workload": "wl",
                                                "a": "2",
                                            },
                                        },
                                        "spec": {
                                            "nodeSelector": {
                                                "gpu": "a100",
                                                "pool": "cpu",
                                                "zone": "z1",
                                            },
                                            "tolerations": [toleration],
                                        },
                                    }
                                }
                            },
                        },
                        {
                            "name": "init",
                            "template": {"spec": {"template": {"metadata": INIT_META}}},
                        },
                    ]
                }
            }
        },
    }


def _placed(wl: Dict, flavors: dict[str, ResourceFlavorView]) -> Dict:
    """The pod template the admission patch gives the PodSet `node`."""
    patch = wlmod.build_admission_patch(WorkloadView(wl), flavors)
    (rj,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rj["name"] == "node"
    template: Dict = rj["template"]["spec"]["template"]
    return template


def _admitted(assignment_flavors: dict[str, str], checks: list[Dict]) -> Dict:
    return {
        "metadata": {"name": "wl"},
        "spec": {"queueName": "q"},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "node", "flavors": assignment_flavors}],
            },
            "admissionChecks": checks,
        },
    }


def test_every_checks_update_of_a_pod_set_is_merged_as_kueue_merges_them() -> None:
    """Kueue merges each admission check's podSetUpdates of a PodSet, in the checks' order:
    two checks' labels, annotations and node selectors all reach the pods, a key's first
    value kept; only a check's first update of a PodSet counts."""
    t1 = {"key": "a", "operator": "Exists"}
    t2 = {"key": "b", "operator": "Exists"}
    checks = [
        {
            "name": "prov",
            "podSetUpdates": [
                {"name": "node", "labels": {"l1": "1", "both": "first"}, "tolerations": [t1]},
                {"name": "node", "labels": {"ignored": "x"}},
            ],
        },
        {
            "name": "other",
            "podSetUpdates": [
                {
                    "name": "node",
                    "labels": {"l2": "2", "both": "second"},
                    "annotations": {"a2": "2"},
                    "nodeSelector": {"zone": "z2"},
                    "tolerations": [t1, t2],
                }
            ],
        },
    ]
    template = _placed(_admitted({}, checks), {})
    labels = template["metadata"]["labels"]
    assert (labels["l1"], labels["l2"], labels["both"]) == ("1", "2", "first")
    assert "ignored" not in labels and template["metadata"]["annotations"]["a2"] == "2"
    assert template["spec"] == {"nodeSelector": {"zone": "z2"}, "tolerations": [t1, t2]}


def test_the_flavours_and_the_checks_tolerations_each_reach_the_pods_once() -> None:
    t1 = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    t2 = {"key": "spot", "operator": "Exists"}
    t3 = {"key": "provisioned", "operator": "Exists"}
    flavors = {
        "a": ResourceFlavorView({"spec": {"tolerations": [t1]}}),
        "b": ResourceFlavorView({"spec": {"tolerations": [t1, t2]}}),
    }
    checks = [{"name": "prov", "podSetUpdates": [{"name": "node", "tolerations": [t3, t2]}]}]
    template = _placed(_admitted({"cpu": "a", "nvidia.com/gpu": "b"}, checks), flavors)
    assert template["spec"] == {"tolerations": [t1, t2, t3]}


def test_a_pod_sets_workload_template_keeps_of_its_metadata_the_labels_and_annotations() -> None:
    ps = info_of(trainjob()).pod_sets[0]
    meta = {"name": "x", "labels": {"a": "1"}, "annotations": {"b": "2"}, "finalizers": ["f"]}
    ps.kueue_template = {"metadata": meta, "spec": {"containers": [{"name": "c"}]}}
    made = ps.workload_template()
    assert made == {
        "metadata": {"labels": {"a": "1"}, "annotations": {"b": "2"}},
        "spec": {"containers": [{"name": "c"}]},
    }
    made["spec"]["containers"].append({"name": "d"})
    made["metadata"]["labels"]["c"] = "3"
    assert ps.kueue_template["spec"] == {"containers": [{"name": "c"}]}  # a copy
    assert meta["labels"] == {"a": "1"}
    ps.kueue_template = {"metadata": {"labels": ["a"], "annotations": {}}, "spec": None}
    assert ps.workload_template() == {"metadata": {}, "spec": {}}
