"""A small data-parallel training run over MPI: one process per node, started by mpirun.

Each rank fits the same linear model to its own shard of a fixed synthetic regression
problem; after every step the ranks average their gradients with MPI's Allreduce (mpi4py), so
every rank holds the same weights. Rank 0 prints `ranks N on host-a, host-b`, then one line per
step, `step N/M loss L`, and exits 0 when the loss fell.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from mpi4py import MPI

STEPS = int(os.environ.get("TRAIN_STEPS", "30"))
BATCH, FEATURES, RATE = 64, 16, 0.1


def main() -> int:
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    if rank == 0:
        print(f"ranks {world} on {', '.join(hosts or [])}", flush=True)
    true_w = np.random.default_rng(0).normal(size=FEATURES)  # the same target on every rank
    w = np.zeros(FEATURES)
    data = np.random.default_rng(1000 + rank)  # each rank its own shard
    first = last = 0.0
    for step in range(1, STEPS + 1):
        x = data.normal(size=(BATCH, FEATURES))
        y = x @ true_w + 0.01 * data.normal(size=BATCH)
        error = x @ w - y
        grad = 2 * x.T @ error / BATCH
        summed = np.empty_like(grad)
        comm.Allreduce(grad, summed, op=MPI.SUM)
        w -= RATE * summed / world
        last = comm.allreduce(float(np.mean(error**2)), op=MPI.SUM) / world
        first = first or last
        if rank == 0:
            print(f"step {step}/{STEPS} loss {last:.4f}", flush=True)
    return 0 if last < first else 1


if __name__ == "__main__":
    sys.exit(main())
