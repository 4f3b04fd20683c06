"""docs/operators/operations.md names every series the controllers serve, with its type and
labels."""

from __future__ import annotations

import re

from tests.support.files import REPO_ROOT
from tests.support.metrics import served_series


def _documented() -> dict[str, tuple[str, tuple[str, ...]]]:
    text = (REPO_ROOT / "docs" / "operators" / "operations.md").read_text()
    rows = re.findall(r"^\| `([a-z_]+)` \| (\w+) \|([^|]*)\|", text, re.M)
    return {name: (kind, tuple(re.findall(r"`(\w+)`", labels))) for name, kind, labels in rows}


def test_every_series_is_documented_with_its_type_and_labels() -> None:
    served, documented = served_series(), _documented()
    assert served, "no series found in the registry"
    assert {n: documented.get(n) for n in served} == served
    assert set(documented) <= set(served), set(documented) - set(served)
