"""The examples name public images; the bed, which reaches no registry, runs its own in their
place, and nothing else changes."""

from __future__ import annotations

import re

from clusters import images
from clusters.config import REPO_ROOT
from clusters.helpers.examples import EXAMPLES, MPI_RUNTIME_FILE, RUNTIME_FILE
from clusters.kube import load_manifests


def test_the_ddp_example_names_a_public_image_and_the_bed_swaps_in_its_own() -> None:
    docs = load_manifests(RUNTIME_FILE.read_text())
    text = RUNTIME_FILE.read_text()
    assert "localhost/" not in text, "an example must run on any cluster"
    swapped = images.for_the_bed(docs)
    (runtime,) = [d for d in swapped if d["kind"] == "ClusterTrainingRuntime"]
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    (container,) = job["template"]["spec"]["containers"]
    assert container["image"] == images.TRAINING.name
    original = next(d for d in docs if d["kind"] == "ClusterTrainingRuntime")
    assert (
        original["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
            "spec"
        ]["containers"][0]["image"]
        in images.STAND_INS
    )
    assert [d for d in swapped if d["kind"] == "TrainJob"] == [
        d for d in docs if d["kind"] == "TrainJob"
    ]


def test_no_example_names_an_image_of_the_bed() -> None:
    """Every example runs on any cluster: each image it names is a public one (the MPI
    example's too, which the bed's training image stands in for)."""
    examples = REPO_ROOT / "examples"
    named = {
        path.relative_to(examples).as_posix(): set(
            re.findall(r"^\s*image:\s*(\S+)", path.read_text(), re.M)
        )
        for path in sorted(examples.rglob("*.yaml"))
    }
    assert "gpu/" in " ".join(named), named  # the subdirectories are read too
    mpi = MPI_RUNTIME_FILE.relative_to(EXAMPLES).as_posix()
    assert named[mpi] == {"ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0"}
    assert named[mpi] <= set(images.STAND_INS)
    local = {name: found for name, found in named.items() if any("localhost/" in i for i in found)}
    assert not local, local
