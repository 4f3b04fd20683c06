"""The TrainJob and runtime models (trainjob/models.py): what they parse, and how often."""

from __future__ import annotations

import copy

from tests.support.builders import (
    edit,
    make_trainjob,
)
from trainjob.models import parse_trainjob


def test_a_stored_trainjob_is_parsed_once_per_version() -> None:
    body = make_trainjob()
    edit(body).uid("uid-parse-once").resource_version("7")
    first = parse_trainjob(body, stored=True)
    assert parse_trainjob(copy.deepcopy(body), stored=True) is first
    changed = edit(body).clone().resource_version("8").spec(trainer={"numNodes": 5}).obj()
    assert parse_trainjob(changed, stored=True).spec.trainer.num_nodes == 5  # type: ignore[union-attr]
    # Not stored (an admission review, a test body edited in place): parsed every time.
    assert parse_trainjob(body) is not first
