"""Our CRDs explained (release/crd_docs.py): a field Trainer v2.3 has is described as Trainer
describes it, in our source and in docs/users/reference.md, whatever nodes our source shares."""

from __future__ import annotations

import re

import yaml

from release import crd_docs
from release.crd_docs import PLURALS, fields, openapi_schema, trainers_crd
from tests.support.files import YAML_LOADER

SOURCE = """\
spec:
  versions:
  - name: v1alpha1
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              suspend: {type: boolean}
              initializer:
                type: object
                properties:
                  dataset:
                    type: object
                    properties:
                      env: &envList
                        description: the dataset's, said once
                        type: array
              trainer:
                type: object
                properties:
                  env: *envList
                  numNodes: {description: ours, type: integer}
                  extra: {description: ours alone, type: string}
"""


def test_our_source_says_trainers_words_and_a_shared_node_says_none_of_one_path() -> None:
    text = crd_docs.described("trainjobs", SOURCE)
    assert "env: *envList" in text  # still one node
    said = {
        path: node.get("description")
        for path, node in fields(openapi_schema(yaml.load(text, Loader=YAML_LOADER)))
    }
    theirs = crd_docs.trainers_descriptions("trainjobs")
    assert said[".spec.suspend"] == theirs[".spec.suspend"].strip()
    assert said[".spec.trainer.numNodes"] == theirs[".spec.trainer.numNodes"].strip()
    assert said[".spec.trainer.extra"] == "ours alone"
    assert said[".spec.initializer.dataset.env"] is None
    assert said[".spec.trainer.env"] is None


ROW = re.compile(r"^\| `(?P<path>[^`]*)`(?: \(required\))? \| [^|]* \| (?P<said>.*) \|$")


def test_the_reference_says_what_trainer_says_of_each_of_its_fields() -> None:
    """Each row of docs/users/reference.md for a field Trainer has: Trainer's words (their
    first paragraph, as a table cell holds them)."""
    sections: dict[str, dict[str, str]] = {}
    rows: dict[str, str] = {}
    for line in crd_docs.REFERENCE.read_text().splitlines():
        if line.startswith("## "):
            rows = sections.setdefault(line[3:], {})
        elif match := ROW.match(line):
            rows["." + match["path"]] = match["said"]
    compared = 0
    for plural in PLURALS:
        crd = trainers_crd(plural)
        theirs = {
            path: crd_docs._cell(str(node.get("description") or ""))
            for path, node in fields(openapi_schema(crd))
        }
        rows = {
            p: said for p, said in sections[crd["spec"]["names"]["kind"]].items() if p in theirs
        }
        assert {p: said for p, said in rows.items() if said != theirs[p]} == {}, plural
        compared += len(rows)
    assert compared > 150, "the page lost most of its rows"
