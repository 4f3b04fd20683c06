"""Kubeflow Trainer's own TrainJob CRD re-applied over ours on the manager: it has no
status.clusterName, which the API server would then drop from every status the dispatcher
writes (PodsReady would never turn True, and a finished job could be sent again). The
dispatcher notices, refuses new TrainJobs naming the CRD, and takes them again once the
product's CRD is back."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from clusters import builds
from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from clusters.kube import Applier, load_manifests
from tests.support.multikueue import TRAINER, MultiKueue

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
REPO = Path(__file__).resolve().parents[2]
MODULE = f"{builds.TRAINER_PACKAGE}@{builds.TRAINER_API_VERSION}"


def trainjob(name: str) -> dict[str, object]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    }


def test_trainers_crd_over_ours_is_named_and_new_trainjobs_refused_until_ours_is_back(
    bed: Bed,
) -> None:
    mk = MultiKueue(bed)
    applier = Applier(bed.api(mk.manager))
    crd_file = "trainer.kubeflow.org_trainjobs.yaml"
    upstream = builds.module_source_dir("trainer", MODULE) / "manifests" / "base" / "crds"
    theirs = load_manifests((upstream / crd_file).read_text())
    ours = load_manifests((REPO / "crds" / crd_file).read_text())
    custom = mk.custom()

    tries = iter(range(1_000))

    def refusal(prefix: str) -> str | None:
        # A new name each try: one accepted before the dispatcher saw the CRD change is
        # deleted, but stays (its finalizer) long enough to make the same name a 409.
        name = f"{prefix}-{next(tries)}"
        try:
            custom.create_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", trainjob(name))
        except client.ApiException as exc:
            return str(exc.body)
        custom.delete_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", name)
        return None

    applier.apply_all(theirs)
    try:
        said = wait_for(lambda: refusal("under-theirs"), 60, what="a refusal naming the CRD")
        assert "status.clusterName" in said and "trainjobs.trainer.kubeflow.org" in said, said
    finally:
        applier.apply_all(ours)
        applier.wait_crds_established(["trainjobs.trainer.kubeflow.org"])
    wait_for(lambda: refusal("under-ours") is None, 60, what="TrainJobs accepted again")
    mk.submit("after", run="1s")
    mk.wait_until("after", "Complete")
