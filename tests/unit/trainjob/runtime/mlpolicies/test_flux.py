"""Flux (trainjob/runtime/mlpolicies/flux.py): refused by name, never run plain."""

from __future__ import annotations

import pytest

from tests.unit.trainjob.runtime.mlpolicies import built
from trainjob.runtime.info import RuntimeSpecError


def test_a_flux_runtime_is_refused_naming_the_policy_and_what_runs_instead() -> None:
    with pytest.raises(RuntimeSpecError, match=r"mlPolicy\.flux is not supported") as refused:
        built({"numNodes": 2, "flux": {"numProcPerNode": 1}})
    assert "Kubeflow Trainer's controller" in str(refused.value)
