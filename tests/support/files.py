"""The checkout's files as the tests read them: where the repository is, and its YAML, read
with libyaml's safe loader where PyYAML has it (the CRDs and the chart's renderings run to
megabytes: libyaml reads them about 15 times faster than the pure loader)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def yaml_documents(text: str) -> list[dict[str, Any]]:
    """The documents of a YAML stream, empty ones left out (a manifest file's `---` ends)."""
    return [doc for doc in yaml.load_all(text, Loader=YAML_LOADER) if doc]
