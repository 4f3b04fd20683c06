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
    # Without a resourceVersion nothing names its content: parsed every time.
    unversioned = edit(make_trainjob()).uid("uid-parse-unversioned").resource_version(None).obj()
    assert parse_trainjob(unversioned, stored=True).spec.trainer is None
    edit(unversioned).spec(trainer={"numNodes": 3})
    assert parse_trainjob(unversioned, stored=True).spec.trainer.num_nodes == 3  # type: ignore[union-attr]
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
        assert len(_frames(refused.value.__traceback__)) < 4  # a new one each time
    assert said == {"invalid TrainJob: spec.runtimeRef.name: Input should be a valid string"}
    assert len(validated) == 1


def _frames(tb: object) -> list[object]:
    found = []
    while tb is not None:
        found.append(tb)
        tb = tb.tb_next  # type: ignore[attr-defined]
    return found


def test_a_refusal_says_a_lists_wrong_entries_once_on_the_first_ones_line() -> None:
    body = edit(make_trainjob()).spec(trainer={"command": list(range(40))}).obj()
    with pytest.raises(InvalidObject) as refused:
        parse_trainjob(body)
    assert str(refused.value) == (
        "invalid TrainJob: spec.trainer.command.0: Input should be a valid string "
        "(and 39 more entries)"
    )


def test_a_refusal_names_five_fields_and_counts_the_rest() -> None:
    def refusal(wrong: int) -> str:
        labels = {f"l{i}": 1 for i in range(wrong)}
        with pytest.raises(InvalidObject) as refused:
            parse_trainjob(edit(make_trainjob()).labels(labels).obj())
        return str(refused.value)

    said = [f"metadata.labels.l{i}: Input should be a valid string" for i in range(5)]
    assert refusal(5) == "invalid TrainJob: " + "; ".join(said)
    assert refusal(7) == "invalid TrainJob: " + "; ".join(said) + "; and 2 more"
    assert refusal(1) == f"invalid TrainJob: {said[0]}"


@pytest.mark.parametrize(
    ("key_length", "said"),
    [
        # metadata.labels. and the key: 256 characters, said whole
        (240, "metadata.labels." + "k" * 240),
        # longer: its first 126 characters, "...", its last 127 (the key's own end)
        (1000, "metadata.labels." + "k" * 110 + "..." + "k" * 126 + "Z"),
    ],
)
def test_a_refusal_keeps_a_long_field_paths_two_ends(key_length: int, said: str) -> None:
    key = "k" * (key_length - 1) + ("Z" if key_length > 240 else "k")
    with pytest.raises(InvalidObject) as refused:
        parse_trainjob(edit(make_trainjob()).label(key, 5).obj())  # type: ignore[arg-type]
    assert str(refused.value) == f"invalid TrainJob: {said}: Input should be a valid string"
    assert len(said) == 256
