"""Bounds on what a TrainJob and its runtime may ask for, checked before anything that grows
with a user's numbers is built (pure).

Every figure here is a limit of Kubernetes itself, or of what the product builds per TrainJob:
a TrainJob beyond one could never run, so it is refused at admission (and, for one stored
before the limit existed, turned into a RuntimeInvalid condition) instead of costing memory.
"""

from __future__ import annotations

from trainjob.naming import MAX_DNS_LABEL
from trainjob.runtime.info import PodSet, RuntimeSpecError

# An Indexed Job's completions (and so a PodSet's pods per Job) are at most 100,000.
MAX_NODES = 100_000
# Jobs one TrainJob may make (the sum of its replicatedJobs' replicas): each is an object the
# worker controller writes and watches.
MAX_JOBS = 1_000
# A Job's name is a label value, and a pod's hostname (`<job>-<index>`) a DNS label
# (naming.MAX_DNS_LABEL).
# The API server refuses a ConfigMap whose data exceeds 1 MiB.
CONFIGMAP_MAX_BYTES = 1024 * 1024


def check_counts(pod_sets: list[PodSet], num_nodes: int, nodes_from: str) -> None:
    """numNodes (`nodes_from` says whose: spec.trainer, or the runtime's mlPolicy), and every
    PodSet's pods per Job and Jobs, within Kubernetes' limits."""
    if num_nodes > MAX_NODES:
        raise RuntimeSpecError(
            f"{nodes_from}.numNodes: {num_nodes} is over {MAX_NODES}, the most pods an Indexed "
            "Job can have"
        )
    jobs = 0
    for ps in pod_sets:
        if ps.parallelism > MAX_NODES:
            raise RuntimeSpecError(
                f"replicatedJob {ps.name!r}: parallelism {ps.parallelism} is over {MAX_NODES}, "
                "the most pods an Indexed Job can have"
            )
        jobs += ps.replicas
    if jobs > MAX_JOBS:
        raise RuntimeSpecError(
            f"spec.template.spec.replicatedJobs: {jobs} Jobs in all (the sum of replicas) is over "
            f"{MAX_JOBS}, the most one TrainJob may make"
        )


def check_names(trainjob: str, pod_sets: list[PodSet]) -> None:
    """Each PodSet's last Job name (`<trainjob>-<replicatedJob>-<index>`) and last pod hostname
    (`<job>-<index>`) fit a DNS label; the message says by how much the names are too long."""
    for ps in pod_sets:
        job = f"{trainjob}-{ps.name}-{ps.replicas - 1}"
        host = f"{job}-{max(ps.parallelism - 1, 0)}"
        for what, name in (("Job name", job), ("pod hostname", host)):
            if len(name) > MAX_DNS_LABEL:
                raise RuntimeSpecError(
                    f"metadata.name: the {what} {name!r} of replicatedJob {ps.name!r} is "
                    f"{len(name)} characters, over {MAX_DNS_LABEL}; shorten the TrainJob's name "
                    f"by {len(name) - MAX_DNS_LABEL} or more"
                )


def digits_below(n: int) -> int:
    """How many decimal digits the numbers 0 .. n-1 have together (without writing them)."""
    total, width, start = 0, 1, 0
    while start < n:
        end = min(n, 10**width)
        total += (end - start) * width
        start, width = end, width + 1
    return total


def check_hostfile(size: int, hosts: int) -> None:
    """An MPI hostfile of `size` bytes for `hosts` hosts fits in a ConfigMap."""
    if size > CONFIGMAP_MAX_BYTES:
        raise RuntimeSpecError(
            f"numNodes: the MPI hostfile for {hosts} hosts would be {size} bytes, over the "
            f"{CONFIGMAP_MAX_BYTES} a ConfigMap holds; use fewer nodes"
        )
