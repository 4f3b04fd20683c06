"""Bad input on the manager, by class: each case ends in a refusal or a condition that names it.

The classes of bad input and where each is tested:
1. Crash loops instead of conditions: garbage quantities are refused by the CRD
   (tests/worker/test_worker_controller.py::test_invalid_specs_are_rejected_naming_the_field);
   a Workload Kueue refuses is one Warning Event (tests/worker/test_kueue_integration.py::
   test_workload_refused_by_kueue_is_an_event_naming_the_field_and_is_not_resent); malformed
   kubeconfig Secrets are a condition on the MultiKueueCluster and never break the pass for
   others (tests/e2e/test_multikueue.py::test_bad_kubeconfig_secret_is_reported_on_the_cluster).
2. Silence on the manager: a runtime that cannot run the TrainJob is a Failed condition and a
   Warning Event on the manager TrainJob, before anything is dispatched (here).
3. Silence on configuration: AdmissionCheck parameters of the wrong kind, a MultiKueueConfig
   naming unknown clusters (here); the namespace missing on every worker, a job that requests
   nothing (tests/e2e/test_multikueue.py).
4. API validation gaps: tests/worker/test_worker_controller.py (the CRD's rules).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client

from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from tests.support.builders import container, make_runtime, make_trainjob, replicated_job
from tests.support.multikueue import KUEUE, TRAINER, MultiKueue, events_of

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
Dict = dict[str, Any]
COMPLETE = {"name": "x", "status": "Complete"}


def _node(**extra: Any) -> Dict:
    return replicated_job("node", "trainer", [container()], **extra)


def _after(name: str) -> list[Dict]:
    return [{**COMPLETE, "name": name}]


# case -> (replicatedJobs, mlPolicy or None, TrainJob spec overrides, reason, message fragment)
RUNTIME_CASES: dict[str, tuple[list[Dict], Dict | None, Dict, str, str]] = {
    "no-node-container": (
        [replicated_job("node", "trainer", [container("main")])],
        None,
        {"trainer": {"resourcesPerNode": {"requests": {"cpu": "1"}}}},
        "RuntimeInvalid",
        "replicatedJob 'node' of the runtime has no container named 'node'",
    ),
    "no-trainer-step": (
        [replicated_job("work", None, [container()])],
        None,
        {},
        "RuntimeInvalid",
        "no replicatedJob labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer",
    ),
    "depends-on-missing": (
        [_node(dependsOn=_after("ghost"))],
        None,
        {},
        "RuntimeInvalid",
        "replicatedJob 'node' dependsOn 'ghost', which is not another replicatedJob",
    ),
    "depends-on-itself": (
        [_node(dependsOn=_after("node"))],
        None,
        {},
        "RuntimeInvalid",
        "replicatedJob 'node' dependsOn 'node', which is not another replicatedJob",
    ),
    "depends-in-a-cycle": (
        [
            replicated_job("a", None, [container("a")], dependsOn=_after("b")),
            replicated_job("b", None, [container("b")], dependsOn=_after("a")),
            _node(),
        ],
        None,
        {},
        "RuntimeInvalid",
        "the replicatedJobs' dependsOn form a cycle: a -> b -> a",
    ),
    "patch-names-missing-job": (
        [_node()],
        None,
        {
            "runtimePatches": [
                {
                    "manager": "tests.trainjob.dev/e2e",
                    "trainingRuntimeSpec": {
                        "template": {"spec": {"replicatedJobs": [{"name": "ghost"}]}}
                    },
                }
            ]
        },
        "RuntimeInvalid",
        "runtimePatches[manager=tests.trainjob.dev/e2e].replicatedJobs[ghost]: the runtime has no "
        "replicatedJob 'ghost'",
    ),
    "mpi-without-launcher": (
        [_node()],
        {"numNodes": 1, "mpi": {}},
        {},
        "RuntimeInvalid",
        "an MPI runtime needs replicatedJobs named 'launcher' and 'node'",
    ),
    "more-jobs-than-podsets": (
        [_node(), *(replicated_job(f"aux-{i}", None, [container("aux")]) for i in range(18))],
        None,
        {},
        "RuntimeInvalid",
        "replicatedJobs has 19 entries; a queued TrainJob becomes a Kueue Workload, which holds "
        "at most 18 PodSets",
    ),
}


def test_runtime_that_cannot_run_the_trainjob_is_said_on_the_manager_before_dispatch(
    bed: Bed,
) -> None:
    mk = MultiKueue(bed)
    custom = mk.custom()
    # Each TrainJob first, then its runtime: with the runtime there, the webhook would refuse
    # the TrainJob (test_a_trainjob_its_runtime_cannot_run_is_refused_on_create); made later
    # (or changed), the runtime is judged by the controllers, as a condition.
    for case, (_, _, spec, _, _) in RUNTIME_CASES.items():
        body = make_trainjob(
            case, mk.ns, runtimeRef={"name": case, "kind": "TrainingRuntime"}, **spec
        )
        body["metadata"] = {"name": case, "labels": {"kueue.x-k8s.io/queue-name": "q"}}
        custom.create_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", body)
    for case, (rjs, ml, _, _, _) in RUNTIME_CASES.items():
        runtime = make_runtime(
            case, kind="TrainingRuntime", replicated_jobs=rjs, ml_policy=ml, namespace=mk.ns
        )
        custom.create_namespaced_custom_object(*TRAINER, mk.ns, "trainingruntimes", runtime)
    # The kind named in runtimeRef is the kind looked up: only a ClusterTrainingRuntime of
    # this name exists.
    body = make_trainjob(
        "wrong-kind", mk.ns, runtimeRef={"name": "torch-distributed", "kind": "TrainingRuntime"}
    )
    body["metadata"] = {"name": "wrong-kind", "labels": {"kueue.x-k8s.io/queue-name": "q"}}
    custom.create_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", body)
    expected = {case: (reason, text) for case, (_, _, _, reason, text) in RUNTIME_CASES.items()}
    expected["wrong-kind"] = (
        "RuntimeNotFound",
        f"TrainingRuntime 'torch-distributed' in {mk.ns} not found",
    )

    def unsaid() -> dict[str, Dict | None]:
        out = {}
        for case, (reason, text) in expected.items():
            failed = mk.condition(case, "Failed")
            if not failed or failed["reason"] != reason or text not in failed["message"]:
                out[case] = failed
        return out

    wait_for(lambda: not unsaid(), 30, what="a Failed condition naming each problem")
    for case, (reason, _) in expected.items():
        wait_for(
            lambda r=reason, n=case: r in events_of(mk, n),
            10,
            what=f"the {reason} Event on {case}",
        )
        tj = mk.get(case) or {}
        assert tj["spec"]["suspend"] is True, case
        assert mk.running_on(case) == [], case


def test_a_trainjob_its_runtime_cannot_run_is_refused_on_create(bed: Bed) -> None:
    """As Trainer's webhook: with the runtime there, what it cannot run is refused, naming the
    field, and nothing is left behind."""
    mk = MultiKueue(bed)
    custom = mk.custom()
    for case in ("no-node-container", "patch-names-missing-job", "mpi-without-launcher"):
        rjs, ml, spec, _, text = RUNTIME_CASES[case]
        runtime = make_runtime(
            case, kind="TrainingRuntime", replicated_jobs=rjs, ml_policy=ml, namespace=mk.ns
        )
        custom.create_namespaced_custom_object(*TRAINER, mk.ns, "trainingruntimes", runtime)
        body = make_trainjob(
            case, mk.ns, runtimeRef={"name": case, "kind": "TrainingRuntime"}, **spec
        )
        body["metadata"] = {"name": case, "labels": {"kueue.x-k8s.io/queue-name": "q"}}
        with pytest.raises(client.ApiException) as refused:
            custom.create_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", body)
        assert refused.value.status == 422, case
        assert text in str(refused.value.body), case
        assert mk.get(case) is None, case


def _admission_check(name: str, params: Dict) -> Dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": params},
    }


def test_admission_check_configuration_problems_are_said_in_its_active_condition(
    bed: Bed,
) -> None:
    mk = MultiKueue(bed)
    custom = mk.custom()
    suffix = uuid.uuid4().hex[:6]
    wrong_kind, partly = f"wrong-kind-{suffix}", f"partly-{suffix}"
    config = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueConfig",
        "metadata": {"name": partly},
        "spec": {"clusters": [mk.workers[0], f"ghost-{suffix}"]},
    }
    made: list[tuple[str, str]] = []
    try:
        custom.create_cluster_custom_object(*KUEUE, "multikueueconfigs", config)
        made.append(("multikueueconfigs", partly))
        for name, params in (
            (
                wrong_kind,
                {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "x"},
            ),
            (partly, {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": partly}),
        ):
            custom.create_cluster_custom_object(
                *KUEUE, "admissionchecks", _admission_check(name, params)
            )
            made.append(("admissionchecks", name))

        def active(name: str) -> Dict | None:
            check = custom.get_cluster_custom_object(*KUEUE, "admissionchecks", name)
            conds = (check.get("status") or {}).get("conditions") or []
            return next((c for c in conds if c["type"] == "Active"), None)

        bad = wait_for(lambda: active(wrong_kind), 30, what="Active on the wrong-kind check")
        assert (bad["status"], bad["reason"]) == ("False", "BadConfig"), bad
        assert (
            "must reference a kueue.x-k8s.io MultiKueueConfig, not "
            "'kueue.x-k8s.io'/'ProvisioningRequestConfig'" in (bad["message"])
        )
        some = wait_for(lambda: active(partly), 30, what="Active on the partly-known check")
        assert (some["status"], some["reason"]) == ("True", "SomeActiveClusters"), some
        assert f"Missing clusters: ['ghost-{suffix}']" in some["message"], some
    finally:
        for plural, name in reversed(made):
            try:
                custom.delete_cluster_custom_object(*KUEUE, plural, name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
