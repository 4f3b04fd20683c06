"""The Kubeflow SDK (`kubeflow` 0.5, its TrainerClient) pointed at the manager, as an ML engineer
uses it, with only the built-in `edit` role in the team's namespace: it lists the runtimes
(cluster-scoped, readable by every authenticated user on a default install), trains (a
TrainJob with the queue label, which MultiKueue sends to a worker), gets and waits for it and
deletes it. Its log call looks for pods on the cluster it talks to and finds none on a
manager: the user guide sends people to `kubectl trainjob logs` and the view.trainjob.dev API
instead, and this test holds the SDK to that."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kubeflow.trainer import CustomTrainerContainer, KubernetesBackendConfig, TrainerClient
from kubeflow.trainer.options import Labels
from kubernetes import client

from clusters.bed import Bed
from clusters.helpers.tenant import Tenant
from clusters.helpers.waiting import wait_for
from tests.support.multikueue import MultiKueue

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]


def test_the_sdk_trains_gets_waits_and_deletes_a_trainjob_on_the_manager(
    bed: Bed, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    mk = MultiKueue(bed)
    alice = Tenant(bed, mk.ns, "alice", "edit", tmp_path)
    # The version the manager says it serves, read as the user guide says (the ConfigMap
    # kubeflow-trainer-public, readable by any user): the SDK starts without a warning.
    monkeypatch.setenv("KUBEFLOW_SYSTEM_NAMESPACE", "trainjob-system")
    with caplog.at_level(logging.WARNING):
        sdk = TrainerClient(
            KubernetesBackendConfig(namespace=mk.ns, config_file=str(alice.kubeconfig))
        )
    assert "version info is not available" not in caplog.text, caplog.text
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


def test_a_tenant_with_any_role_or_none_reads_the_cluster_runtimes_and_writes_none(
    bed: Bed, tmp_path: Path
) -> None:
    """ClusterTrainingRuntimes are readable by every authenticated user (the chart's
    clusterRuntimesReadable): a team's `view`, or no binding at all, lists and gets them; none
    may change one."""
    mk = MultiKueue(bed)
    group = ("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes")
    tenants = {
        role: Tenant(bed, mk.ns, f"t-{role or 'none'}", role, tmp_path) for role in ("view", None)
    }
    for role, who in tenants.items():
        custom = client.CustomObjectsApi(who.api)
        names = [r["metadata"]["name"] for r in custom.list_cluster_custom_object(*group)["items"]]
        assert "torch-distributed" in names, (role, names)
        assert custom.get_cluster_custom_object(*group, "torch-distributed")["spec"]
        with pytest.raises(client.ApiException) as refused:
            custom.delete_cluster_custom_object(*group, "torch-distributed")
        assert refused.value.status == 403, role
    # The SDK's list_runtimes() also lists the namespace's TrainingRuntimes: `view` there does.
    viewer = tenants["view"]
    listed = TrainerClient(
        KubernetesBackendConfig(namespace=mk.ns, config_file=str(viewer.kubeconfig))
    ).list_runtimes()
    assert "torch-distributed" in [r.name for r in listed]
