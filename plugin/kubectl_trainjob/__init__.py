"""`kubectl trainjob`: one view of TrainJobs across a MultiKueue manager and its workers."""

from __future__ import annotations

import importlib.metadata

DISTRIBUTION = "kubectl-trainjob"


def version() -> str:
    """This distribution's version (plugin/pyproject.toml), or 0+unknown from a source tree."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
