"""The Kubeflow SDK (`kubeflow` 0.5, its TrainerClient) pointed at the manager, as an ML engineer
uses it: it lists the runtimes, trains (a TrainJob with the queue label, which MultiKueue sends
to a worker), gets and waits for it and deletes it. Its log call looks for pods on the cluster
it talks to and finds none on a manager: the user guide sends people to `kubectl trainjob logs`
and the view.trainjob.dev API instead, and this test holds the SDK to that."""

from __future__ import annotations

import pytest
from kubeflow.trainer import CustomTrainerContainer, KubernetesBackendConfig, TrainerClient
from kubeflow.trainer.options import Labels

from clusters.bed import Bed
from tests.support.multikueue import MultiKueue
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]


def test_the_sdk_trains_gets_waits_and_deletes_a_trainjob_on_the_manager(bed: Bed) -> None:
    mk = MultiKueue(bed)
    sdk = TrainerClient(
        KubernetesBackendConfig(namespace=mk.ns, config_file=str(bed.kubeconfig(mk.manager)))
    )
    runtimes = {r.name: r for r in sdk.list_runtimes()}
    assert "torch-distributed" in runtimes, sorted(runtimes)

    name = sdk.train(
        runtime=runtimes["torch-distributed"],
        trainer=CustomTrainerContainer(
            image="docker.io/library/python:3.12-slim", num_nodes=2, resources_per_node={"cpu": 1}
        ),
        options=[Labels({"kueue.x-k8s.io/queue-name": "q"})],
    )
    worker = mk.started_on(name)  # MultiKueue sent it to a worker
    assert sdk.get_job(name).num_nodes == 2
    done = sdk.wait_for_job_status(name, {"Complete"}, timeout=120, polling_interval=1)
    assert done.status == "Complete"
    assert mk.condition(name, "Complete")["status"] == "True"
    assert list(sdk.get_job_logs(name)) == []  # no pods on the manager: see the user guide

    sdk.delete_job(name)
    wait_for(lambda: mk.get(name) is None, 60, what="the TrainJob gone from the manager")
    wait_for(lambda: mk.get(name, worker) is None, 60, what=f"its copy gone from {worker}")
