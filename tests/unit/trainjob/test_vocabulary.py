"""The status vocabulary's one table (trainjob/vocabulary.py) holds every condition and reason
the controllers write, and only those: constants and the `.set(...)` calls of the product are
read (an AST scan) and checked against it."""

from __future__ import annotations

import ast

from tests.support.files import REPO_ROOT
from trainjob import vocabulary
from trainjob_api import constants as c

PRODUCT = ("dispatcher", "worker_controller", "trainjob")


def _named(prefix: str) -> set[str]:
    return {v for k, v in vars(c).items() if k.startswith(prefix) and isinstance(v, str)}


def _condition_sets() -> list[tuple[str, str, str, str]]:
    """(where, condition, status, reason) of every `.set(c.COND_*, True|False, c.X, ...)`."""
    found = []
    for package in PRODUCT:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "set"
                    and len(node.args) >= 3
                    and isinstance(node.args[0], ast.Attribute)
                    and node.args[0].attr.startswith("COND_")
                ):
                    continue
                _, status, reason = node.args[:3]
                assert isinstance(status, ast.Constant), f"{path}:{node.lineno}"
                constant = (
                    isinstance(reason, ast.Attribute)
                    and isinstance(reason.value, ast.Name)
                    and reason.value.id == "c"
                )
                name = reason.attr if constant else None  # type: ignore[attr-defined]
                found.append(
                    (
                        f"{path.relative_to(REPO_ROOT)}:{node.lineno}",
                        getattr(c, node.args[0].attr),
                        "True" if status.value else "False",
                        getattr(c, name) if name else "",
                    )
                )
    return found


def test_every_condition_and_reason_constant_is_in_the_table() -> None:
    conditions = {cd.type for cd in vocabulary.CONDITIONS}
    reasons = {r.reason for r in vocabulary.REASONS}
    assert _named("COND_") <= conditions, _named("COND_") - conditions
    assert _named("REASON_") <= reasons, _named("REASON_") - reasons
    assert all(vocabulary.reasons_of(cd.type) for cd in vocabulary.CONDITIONS)
    assert {r.condition for r in vocabulary.REASONS} <= conditions


def test_every_condition_the_product_sets_is_in_the_table_with_its_status_and_reason() -> None:
    rows = {(r.condition, r.status, r.reason) for r in vocabulary.REASONS}
    sets = _condition_sets()
    assert len(sets) >= 15, "the scan found too few condition writes to be reading the code"
    for where, ctype, status, reason in sets:
        if reason:  # a reason given by a constant (else it comes from the problem: below)
            assert (ctype, status, reason) in rows, where
        else:
            assert any(r.condition == ctype and r.status == status for r in vocabulary.REASONS)


def test_the_reference_table_lists_each_condition_then_its_reasons() -> None:
    table = vocabulary.table().splitlines()
    assert table[0].startswith("| condition | status | reason |")
    heads = [i for i, line in enumerate(table) if line.startswith("| `")]
    # Each condition's line, then its reasons' lines (Suspended has two, Complete one).
    assert [table[i].split("`")[1] for i in heads[:3]] == ["Suspended", "Complete", "Failed"]
    assert heads[1] - heads[0] == 3 and heads[2] - heads[1] == 2
    assert any("`PodsStuck` (ours)" in line for line in table)
    assert any("(the kubelet's reason)" in line and "`" not in line.split("|")[3] for line in table)
