"""The repository's example manifests the tests run: the runtimes a platform team installs
(examples/runtimes/) and the TrainJobs a tenant applies on them."""

from __future__ import annotations

from clusters.config import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"
RUNTIMES = EXAMPLES / "runtimes"

RUNTIME_FILE = RUNTIMES / "torch-ddp-cpu.yaml"
DDP_FILE = EXAMPLES / "torch-ddp-cpu.yaml"

MPI_RUNTIME_FILE = RUNTIMES / "mpi-cpu.yaml"
MPI_FILE = EXAMPLES / "mpi-cpu.yaml"
