"""The repository's example manifests the tests run."""

from __future__ import annotations

from clusters.config import REPO_ROOT

RUNTIME_FILE = REPO_ROOT / "examples" / "torch-ddp-cpu.yaml"


MPI_FILE = REPO_ROOT / "examples" / "mpi-cpu.yaml"
