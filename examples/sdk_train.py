"""Train a function of your own on the fleet with the Kubeflow SDK (`pip install kubeflow`, 0.5).

The SDK sends `train` to the manager as a TrainJob on a torch runtime (here
examples/runtimes/torch-ddp-cpu.yaml's `torch-ddp-cpu`; Trainer's `torch-distributed` does as
well), with the MultiKueue queue's label; the dispatcher runs it on the worker that admits it, where
torchrun starts it on each of 2 nodes. It fits a small network with DDP over gloo and prints
`step N/M loss L` from rank 0. Then this script waits for the job to end and prints how to read
its logs, which the SDK cannot fetch from a manager (the pods are on a worker).

    python examples/sdk_train.py --namespace team-a --queue user-queue

Everything `train` needs is inside it (the SDK sends its source, not your module).
"""

from __future__ import annotations

import argparse
from typing import Any


def train(steps: int = 30) -> None:
    import os

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same target and initial weights on every rank
    true_w = torch.randn(16, 1)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own shard
    first = last = None
    for step in range(1, steps + 1):
        x = torch.randn(64, 16, generator=data)
        loss = nn.functional.mse_loss(model(x), x @ true_w)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        last = mean.item() / world
        first = first if first is not None else last
        if rank == 0:
            print(f"step {step}/{steps} loss {last:.4f}", flush=True)
    dist.destroy_process_group()
    if rank == 0:
        print(f"done on {os.environ.get('HOSTNAME', '?')}: loss {first:.4f} -> {last:.4f}")
    if last is None or first is None or last >= first:
        raise SystemExit("the loss did not fall")


def submit(sdk: Any, *, queue: str, runtime: str, image: str, resources: dict[str, str]) -> str:
    """`train` as a 2-node TrainJob for the manager's queue `queue`; returns its name."""
    from kubeflow.trainer import CustomTrainer
    from kubeflow.trainer.options import Labels

    return str(
        sdk.train(
            runtime=sdk.get_runtime(runtime),
            trainer=CustomTrainer(
                func=train,
                func_args={"steps": 30},
                image=image,
                num_nodes=2,
                resources_per_node=resources,
            ),
            options=[Labels({"kueue.x-k8s.io/queue-name": queue})],
        )
    )


def main() -> None:
    from kubeflow.trainer import KubernetesBackendConfig, TrainerClient

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--queue", default="user-queue", help="the manager's LocalQueue")
    parser.add_argument("--runtime", default="torch-ddp-cpu")
    parser.add_argument(
        "--image", default="docker.io/pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"
    )
    args = parser.parse_args()
    sdk = TrainerClient(KubernetesBackendConfig(namespace=args.namespace))
    resources = {"cpu": "1", "memory": "1Gi"}
    name = submit(
        sdk, queue=args.queue, runtime=args.runtime, image=args.image, resources=resources
    )
    print(f"TrainJob {name} submitted; waiting for it to end")
    job = sdk.wait_for_job_status(name, {"Complete", "Failed"}, timeout=1800)
    print(f"{name}: {job.status}; its logs: kubectl trainjob logs {name} -n {args.namespace}")


if __name__ == "__main__":
    main()
