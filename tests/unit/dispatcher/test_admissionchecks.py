"""Our AdmissionChecks' Active condition and parameters, as Kueue judges them
(dispatcher/controller/admissionchecks.py)."""

from __future__ import annotations

from typing import Any

from dispatcher.controller.admissionchecks import check_active, parameters_problem

Dict = dict[str, Any]


def test_check_active_names_missing_and_inactive_clusters_as_kueue_does() -> None:
    assert check_active(None, {"w1": True, "w2": True}) == (
        True,
        "Active",
        "The admission check is active",
    )
    assert check_active(None, {"w1": True, "ghost": None}) == (
        True,
        "SomeActiveClusters",
        "Missing clusters: ['ghost']",
    )
    assert check_active(None, {"w1": False, "ghost": None}) == (
        False,
        "NoUsableClusters",
        "Missing clusters: ['ghost'], Inactive clusters: ['w1']",
    )
    active, reason, message = check_active("spec.parameters must name a MultiKueueConfig", {})
    assert (active, reason) == (False, "BadConfig")
    assert message == (
        "Cannot load the AdmissionChecks parameters: spec.parameters must name a MultiKueueConfig"
    )


def test_admission_check_parameters_must_reference_a_multikueue_config() -> None:
    good = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "c"}
    assert parameters_problem(good) is None
    wrong = parameters_problem({**good, "kind": "ProvisioningRequestConfig"})
    assert wrong is not None and "'kueue.x-k8s.io'/'ProvisioningRequestConfig'" in wrong
    assert parameters_problem({}) == "spec.parameters must name a MultiKueueConfig"
