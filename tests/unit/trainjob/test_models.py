"""The TrainJob and runtime models (trainjob/models.py): what they parse, and how often."""

from __future__ import annotations

import copy

import pytest

from tests.support.builders import (
    edit,
    make_trainjob,
)
from trainjob import models
from trainjob.models import InvalidObject, parse_trainjob


def test_a_stored_trainjob_is_parsed_once_per_version() -> None:
    body = make_trainjob()
    edit(body).uid("uid-parse-once").resource_version("7")
    first = parse_trainjob(body, stored=True)
    assert parse_trainjob(copy.deepcopy(body), stored=True) is first
    changed = edit(body).clone().resource_version("8").spec(trainer={"numNodes": 5}).obj()
    assert parse_trainjob(changed, stored=True).spec.trainer.num_nodes == 5  # type: ignore[union-attr]
    # Not stored (an admission review, a test body edited in place): parsed every time.
    assert parse_trainjob(body) is not first


def test_a_stored_trainjob_that_does_not_parse_is_refused_once_per_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = make_trainjob(runtimeRef={"name": 5})
    edit(body).uid("uid-refused-once").resource_version("7")
    validated = []
    real = models.TrainJob.model_validate
    monkeypatch.setattr(models.TrainJob, "model_validate", lambda b: validated.append(1) or real(b))
    said = set()
    for _ in range(3):
        with pytest.raises(InvalidObject) as refused:
            parse_trainjob(copy.deepcopy(body), stored=True)
        said.add(str(refused.value))
        assert refused.value.__traceback__ is not None
        assert len(list(_frames(refused.value.__traceback__))) < 4  # a new one each time
    assert said == {"invalid TrainJob: spec.runtimeRef.name: Input should be a valid string"}
    assert len(validated) == 1


def _frames(tb: object) -> list[object]:
    found = []
    while tb is not None:
        found.append(tb)
        tb = tb.tb_next  # type: ignore[attr-defined]
    return found


def test_a_refusal_names_the_first_errors_and_counts_the_rest() -> None:
    body = make_trainjob()
    edit(body).spec(trainer={"command": list(range(40))})
    with pytest.raises(InvalidObject) as refused:
        parse_trainjob(body)
    said = str(refused.value)
    named = [f"spec.trainer.command.{i}: Input should be a valid string" for i in range(5)]
    assert said == "invalid TrainJob: " + "; ".join(named) + "; and 35 more"


def test_a_refusal_cuts_a_long_field_path_short() -> None:
    key = "k" * 1000
    body = make_trainjob()
    edit(body).label(key, 5)  # type: ignore[arg-type]
    with pytest.raises(InvalidObject) as refused:
        parse_trainjob(body)
    said = str(refused.value)
    path = f"metadata.labels.{key}"[: models.EXPLAINED_PATH - 3] + "..."
    assert said == f"invalid TrainJob: {path}: Input should be a valid string"
    assert len(said) < 400
