"""A small data-parallel training run for CPUs: torch.distributed with the gloo backend.

Launched by torchrun, which reads its rendezvous from the PET_* environment a TrainJob's torch
runtime sets (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT).
Each rank fits the same small network to its own shard of a fixed synthetic regression
problem; DDP averages the gradients, so every rank holds the same weights. Rank 0 prints one
line per step: `step N/M loss L`, then `done: loss A -> B in S s` and exits 0 when the loss fell.
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

STEPS = int(os.environ.get("TRAIN_STEPS", "40"))
BATCH = 64


def main() -> int:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same target and the same initial weights on every rank
    true_w = torch.randn(16, 1)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own shard
    if rank == 0:
        host = os.environ.get("HOSTNAME", "?")
        print(f"world {world}, rank 0 on {host}, torch {torch.__version__}", flush=True)
    start, first, loss = time.monotonic(), None, torch.tensor(0.0)
    for step in range(1, STEPS + 1):
        x = torch.randn(BATCH, 16, generator=data)
        y = x @ true_w + 0.01 * torch.randn(BATCH, 1, generator=data)
        loss = nn.functional.mse_loss(model(x), y)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        # The mean loss over all ranks: one more collective, and the figure users expect.
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        first = first if first is not None else mean.item()
        if rank == 0:
            print(f"step {step}/{STEPS} loss {mean.item():.4f}", flush=True)
    last = mean.item()
    dist.destroy_process_group()
    if rank == 0:
        took = time.monotonic() - start
        print(f"done: loss {first:.4f} -> {last:.4f} in {took:.1f}s", flush=True)
    return 0 if last < first else 1


if __name__ == "__main__":
    sys.exit(main())
