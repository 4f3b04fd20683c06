"""The installed product's name and version (pyproject.toml is the version's one source), for
the API clients' User-Agent and the `trainjob_build_info` series."""

from __future__ import annotations

import importlib.metadata
import platform

DISTRIBUTION = "trainjob-dispatcher"


def _version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "0+unknown"


VERSION = _version()
PYTHON = platform.python_version()
