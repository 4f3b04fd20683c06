"""The registry picks one plugin from the runtime's mlPolicy (trainjob/runtime/mlpolicies/),
the most specific first."""

from __future__ import annotations

from typing import Any

import pytest

from trainjob.models import MLPolicy
from trainjob.runtime.mlpolicies import PLUGINS, select_plugin


@pytest.mark.parametrize(
    ("ml", "name"),
    [
        ({"torch": {}}, "torch"),
        ({"mpi": {}}, "mpi"),
        ({"jax": {}}, "jax"),
        ({"xgboost": {}}, "xgboost"),
        ({"flux": {}}, "unsupported"),  # refused by name, never run plain in its place
        ({}, "plain"),
        ({"numNodes": 3}, "plain"),
    ],
)
def test_the_policy_named_by_the_runtime_applies(ml: dict[str, Any], name: str) -> None:
    assert select_plugin(MLPolicy.model_validate(ml)).name == name


def test_every_plugin_has_a_name_of_its_own_and_plain_comes_last() -> None:
    names = [p.name for p in PLUGINS]
    assert len(set(names)) == len(names)
    assert names[-1] == "plain"  # it applies to any policy: after it, none would be asked
