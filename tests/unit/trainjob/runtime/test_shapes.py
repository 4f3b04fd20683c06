"""The runtime's shapes (trainjob/runtime/shapes.py): what is not the type the API would hold
is refused naming the field, never a crash."""

from __future__ import annotations

import pytest

from tests.support.builders import (
    make_runtime,
    make_trainjob,
)
from tests.unit.trainjob.runtime import info_for
from trainjob.runtime import (
    RuntimeSpecError,
)
from trainjob.runtime.shapes import check_template_spec


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
