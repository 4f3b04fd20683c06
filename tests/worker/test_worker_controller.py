"""The worker controller on a real worker cluster of the bed: TrainJob -> Jobs, Service, status."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from clusters.helpers.kube import TrainJobs, api_error
from clusters.helpers.waiting import stays_false, wait_for
from tests.support.builders import mpi_runtime, replicated_job, torch_runtime
from tests.support.worker import trainjob

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("worker_controllers")]


def test_torch_three_nodes_run_and_complete(tjs: TrainJobs) -> None:
    tjs.create_runtime(torch_runtime(run="4s"))
    tjs.create(trainjob("mnist", trainer={"numNodes": 3}))

    running = wait_for(
        lambda: len(tjs.pods("mnist", "Running")) == 3 and tjs.pods("mnist", "Running"),
        30,
        what="3 pods Running",
    )
    by_host = {p.spec.hostname: p for p in running}
    assert sorted(by_host) == ["mnist-node-0-0", "mnist-node-0-1", "mnist-node-0-2"]
    for host, pod in by_host.items():
        assert pod.spec.subdomain == "mnist"
        assert pod.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
        assert pod.metadata.annotations["batch.kubernetes.io/job-completion-index"] == host[-1]
        env = {e.name: e.value for e in pod.spec.containers[0].env}
        assert env["PET_NNODES"] == "3"
        assert env["PET_MASTER_ADDR"] == "mnist-node-0-0.mnist"
        assert env["PET_MASTER_PORT"] == "29500"
    svc = tjs.core.read_namespaced_service("mnist", tjs.ns)
    assert svc.spec.cluster_ip == "None" and svc.spec.publish_not_ready_addresses is True

    done = tjs.wait_condition("mnist", "Complete", timeout=60)
    assert done["reason"] == "AllJobsCompleted"
    assert tjs.get("mnist")["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    wait_for(
        lambda: (
            "AllJobsCompleted"
            in {
                e.reason
                for e in tjs.core.list_namespaced_event(
                    tjs.ns, field_selector="involvedObject.name=mnist,involvedObject.kind=TrainJob"
                ).items
            }
        ),
        15,
        what="the Completed Event (it follows the status write)",
    )


def test_suspend_removes_pods_and_resume_starts_them(tjs: TrainJobs) -> None:
    tjs.create_runtime(torch_runtime(run="600s"))
    tjs.create(trainjob("pause", trainer={"numNodes": 2}))
    wait_for(lambda: len(tjs.pods("pause", "Running")) == 2, 30, what="2 pods Running")

    tjs.patch("pause", {"spec": {"suspend": True}})
    assert tjs.wait_condition("pause", "Suspended")["reason"] == "Suspended"
    wait_for(lambda: not tjs.pods("pause"), 60, what="pods to go away while suspended")
    assert all(j.spec.suspend for j in tjs.jobs("pause"))

    tjs.patch("pause", {"spec": {"suspend": False}})
    resumed = tjs.wait_condition("pause", "Suspended", status="False")
    assert resumed["reason"] == "Resumed"
    wait_for(lambda: len(tjs.pods("pause", "Running")) == 2, 60, what="pods back after resume")


def test_deadline_fails_the_trainjob_and_stops_its_pods(tjs: TrainJobs) -> None:
    tjs.create_runtime(torch_runtime(run="600s"))
    tjs.create(trainjob("late", activeDeadlineSeconds=3))
    failed = tjs.wait_condition("late", "Failed", timeout=60)
    assert failed["reason"] == "DeadlineExceeded"
    wait_for(lambda: not tjs.pods("late"), 60, what="pods to be stopped after the deadline")


def test_failing_pod_fails_the_trainjob_naming_the_pod_set(tjs: TrainJobs) -> None:
    tjs.create_runtime(torch_runtime(run="1s", exit_code=7))
    tjs.create(trainjob("crash"))
    failed = tjs.wait_condition("crash", "Failed", timeout=60)
    assert failed["reason"] == "FailedJobs"
    assert "(first failed job: " in failed["message"]
    assert "container node exited with code 7 (Error)" in failed["message"]
    assert tjs.get("crash")["status"]["jobsStatus"][0]["failed"] == 1


def test_pods_the_api_refuses_are_a_condition_naming_the_job_and_the_apis_reason(
    tjs: TrainJobs,
) -> None:
    """A ResourceQuota that admits no pod: the Job exists, the Job controller cannot create
    its pods (FailedCreate Events on the Job); the TrainJob says so, with the API's words."""
    quota = client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="no-pods"),
        spec=client.V1ResourceQuotaSpec(hard={"pods": "0"}),
    )
    tjs.core.create_namespaced_resource_quota(tjs.ns, quota)
    tjs.create_runtime(torch_runtime(run="600s"))
    tjs.create(trainjob("refused"))
    stuck = tjs.wait_condition("refused", "PodsStuck", timeout=60)
    assert stuck["reason"] == "PodCreateFailed"
    assert stuck["message"].startswith("Job refused-node-0 cannot create its pods: ")
    assert "exceeded quota: no-pods" in stuck["message"], stuck["message"]
    wait_for(
        lambda: any(reason == "PodCreateFailed" for reason, _ in tjs.events("refused")),
        15,
        what="the PodCreateFailed Event (it follows the status write)",
    )


def test_initializer_completes_before_the_nodes_start(tjs: TrainJobs) -> None:
    init = replicated_job(
        "dataset-initializer",
        "dataset-initializer",
        [{"name": "dataset-initializer", "image": "kubeflow/dataset-initializer"}],
    )
    init["template"]["spec"]["template"]["metadata"] = {
        "annotations": {"bed.trainjob.dev/run-duration": "2s"}
    }
    tjs.create_runtime(torch_runtime(run="1s", extra_rjs=[init]))
    tjs.create(trainjob("withinit", initializer={"dataset": {"storageUri": "hf://x/y"}}))
    tjs.wait_condition("withinit", "Complete", timeout=90)
    jobs = {j.metadata.name: j for j in tjs.jobs("withinit")}
    init_job, node_job = jobs["withinit-dataset-initializer-0"], jobs["withinit-node-0"]
    assert node_job.metadata.creation_timestamp >= init_job.status.completion_time
    env = {e.name: e.value for e in init_job.spec.template.spec.containers[0].env}
    assert env["STORAGE_URI"] == "hf://x/y"


def test_missing_runtime_fails_then_recovers_when_it_appears(tjs: TrainJobs) -> None:
    tjs.create(trainjob("early", runtime="later"))
    failed = tjs.wait_condition("early", "Failed", timeout=30)
    assert failed["reason"] == "RuntimeNotFound"
    assert "'later'" in failed["message"]
    assert not tjs.jobs("early")

    tjs.create_runtime(torch_runtime("later", run="1s"))
    tjs.wait_condition("early", "Complete", timeout=60)
    assert tjs.condition("early", "Failed") is None


def test_multikueue_trainjob_gets_nothing_not_even_status(tjs: TrainJobs) -> None:
    tjs.create_runtime(torch_runtime(run="600s"))
    tjs.create(trainjob("remote", managedBy="kueue.x-k8s.io/multikueue"))
    tjs.create(trainjob("local"))
    # The local one proves the controller has seen this namespace since.
    wait_for(lambda: tjs.jobs("local"), 30, what="the built-in TrainJob's Job")
    # Nothing for two and a half resync periods of the controller (every 2 s here).
    stays_false(
        lambda: tjs.get("remote").get("status") or tjs.jobs("remote"),
        5,
        what="status or a Job on the MultiKueue TrainJob",
    )
    assert not tjs.core.list_namespaced_service(
        tjs.ns, label_selector="trainjob.dev/trainjob-name=remote"
    ).items


def test_service_rules(tjs: TrainJobs) -> None:
    tjs.create_runtime(torch_runtime(run="600s"))
    # A user's Service with its own labels, named like a TrainJob: never touched, blocks it.
    tjs.core.create_namespaced_service(
        tjs.ns,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="taken", labels={"app": "mine"}),
            spec=client.V1ServiceSpec(
                selector={"app": "mine"}, ports=[client.V1ServicePort(port=80)]
            ),
        ),
    )
    tjs.create(trainjob("taken"))
    cond = tjs.wait_condition("taken", "ServiceConflict", timeout=30)
    assert cond["reason"] == "ServiceNameTaken"
    assert not tjs.jobs("taken")
    user_svc = tjs.core.read_namespaced_service("taken", tjs.ns)
    assert user_svc.metadata.labels == {"app": "mine"} and not user_svc.metadata.owner_references

    # A Service carrying our label that someone else made: not the TrainJob's (the label is
    # no proof), never touched, and its own headless Service is made beside it.
    tjs.core.create_namespaced_service(
        tjs.ns,
        client.V1Service(
            metadata=client.V1ObjectMeta(
                name="dup-extra", labels={"trainjob.dev/trainjob-name": "dup"}
            ),
            spec=client.V1ServiceSpec(cluster_ip="None"),
        ),
    )
    tjs.create(trainjob("dup"))
    wait_for(lambda: tjs.jobs("dup"), 30, what="dup's Job")
    ours = tjs.core.read_namespaced_service("dup", tjs.ns)
    assert [o.name for o in ours.metadata.owner_references or []] == ["dup"]
    decoy = tjs.core.read_namespaced_service("dup-extra", tjs.ns)
    assert not decoy.metadata.owner_references
    conditions = (tjs.get("dup").get("status") or {}).get("conditions") or []
    assert "ServiceConflict" not in {x["type"] for x in conditions if x["status"] == "True"}


def test_deleting_the_trainjob_removes_everything(tjs: TrainJobs) -> None:
    tjs.create_runtime(torch_runtime(run="600s"))
    tjs.create(trainjob("bye", trainer={"numNodes": 2}))
    wait_for(lambda: len(tjs.pods("bye", "Running")) == 2, 30, what="pods Running")
    tjs.delete("bye")
    wait_for(
        lambda: (
            not tjs.jobs("bye")
            and not tjs.pods("bye")
            and not tjs.core.list_namespaced_service(
                tjs.ns, label_selector="trainjob.dev/trainjob-name=bye"
            ).items
        ),
        60,
        what="Jobs, pods and Service to be garbage-collected",
    )


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        ({"trainer": {"numNodes": 0}}, "spec.trainer.numNodes", "greater than or equal to 1"),
        ({"managedBy": "someone/else"}, "spec.managedBy", "must be trainer.kubeflow.org"),
        (
            {"runtimeRef": {"name": "torch", "kind": "Runtime"}},
            "spec.runtimeRef.kind",
            "Unsupported value",
        ),
        ({"managedBy": ""}, "spec.managedBy", "must be trainer.kubeflow.org"),
        ({"trainer": {"image": ""}}, "spec.trainer.image", "at least 1 chars long"),
        (
            {"trainer": {"image": " busybox"}},
            "spec.trainer.image",
            "must not have leading or trailing whitespace",
        ),
        (
            {"runtimeRef": {"name": "torch", "apiGroup": "jobset.x-k8s.io"}},
            "spec.runtimeRef.apiGroup",
            "Unsupported value",
        ),
        (
            {"trainer": {"resourcesPerNode": {"requests": {"cpu": "lots"}}}},
            "spec.trainer.resourcesPerNode.requests.cpu",
            "should match",
        ),
        (
            {"trainer": {"resourcesPerNode": {"limits": {"memory": "-1Gi"}}}},
            "spec.trainer.resourcesPerNode.limits.memory",
            "should match",
        ),
        (  # Trainer's webhook rule for a patch's owner
            {"runtimePatches": [{"manager": "just-a-name"}]},
            "spec.runtimePatches[0].manager",
            'must be a domain-prefixed path (such as "acme.io/foo")',
        ),
    ],
)
def test_invalid_specs_are_rejected_naming_the_field(
    tjs: TrainJobs, spec: dict[str, object], field: str, fragment: str
) -> None:
    body = trainjob("bad")
    body["spec"] = {**body["spec"], **spec}  # type: ignore[dict-item]
    with pytest.raises(client.ApiException) as err:
        tjs.create(body)
    message = api_error(err.value)
    assert field in message and fragment in message, message


def test_immutable_fields_and_long_names_are_rejected(tjs: TrainJobs) -> None:
    tjs.create_runtime(torch_runtime(run="600s"))
    tjs.create(trainjob("fixed", suspend=True, trainer={"numNodes": 1}))
    for patch, field in [
        ({"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}, "managedBy"),
        ({"spec": {"runtimeRef": {"name": "other"}}}, "runtimeRef"),
        ({"spec": {"trainer": {"numNodes": 5}}}, "trainer"),
        ({"spec": {"trainer": None}}, "trainer"),
        ({"spec": {"initializer": {"dataset": {"storageUri": "hf://x"}}}}, "initializer"),
    ]:
        with pytest.raises(client.ApiException) as err:
            tjs.patch("fixed", patch)
        assert f"spec.{field} is immutable" in api_error(err.value)
    with pytest.raises(client.ApiException) as err:
        tjs.create(trainjob("x" * 64))
    assert "no more than 63 characters" in api_error(err.value)


def test_mpi_launcher_and_nodes_run_with_hostfile_and_ssh_keys_and_complete_on_the_launcher(
    tjs: TrainJobs,
) -> None:
    """Trainer's MPI shape on a real worker: a launcher and two nodes, the hostfile in a
    ConfigMap, SSH keys in a Secret, both owned by the TrainJob; the JobSet success policy
    targets the launcher, so the TrainJob completes when the launcher does, nodes still up."""

    def with_run(rj: dict[str, Any], run: str) -> dict[str, Any]:
        pod = rj["template"]["spec"]["template"]
        pod["metadata"] = {"annotations": {"bed.trainjob.dev/run-duration": run}}
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
        return rj

    runtime = mpi_runtime(sshAuthMountPath="/home/mpiuser/.ssh")
    runtime["metadata"]["name"] = "mpi"
    runtime_spec = runtime["spec"]["template"]["spec"]
    launcher, node = runtime_spec["replicatedJobs"]
    runtime_spec["replicatedJobs"] = [with_run(launcher, "6s"), with_run(node, "120s")]
    runtime_spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": ["launcher"]}
    tjs.create_runtime(runtime)
    tjs.create(trainjob("allreduce", runtime="mpi"))

    running = wait_for(
        lambda: len(tjs.pods("allreduce", "Running")) == 3 and tjs.pods("allreduce", "Running"),
        30,
        what="the launcher and 2 node pods Running",
    )
    assert sorted(p.spec.hostname for p in running) == [
        "allreduce-launcher-0-0",
        "allreduce-node-0-0",
        "allreduce-node-0-1",
    ]
    hostfile = tjs.core.read_namespaced_config_map("allreduce-mpi-hostfile", tjs.ns)
    assert hostfile.data == {
        "hostfile": "allreduce-node-0-0.allreduce slots=4\nallreduce-node-0-1.allreduce slots=4\n"
    }
    secret = tjs.core.read_namespaced_secret("allreduce-mpi-ssh-auth", tjs.ns)
    assert {"ssh-privatekey", "ssh-publickey"} <= set(secret.data or {})
    for owned in (hostfile, secret):
        assert [o.name for o in owned.metadata.owner_references] == ["allreduce"]
    launcher_pod = next(p for p in running if "launcher" in p.spec.hostname)
    env = {e.name: e.value for e in launcher_pod.spec.containers[0].env or []}
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    mounts = {m.mount_path for m in launcher_pod.spec.containers[0].volume_mounts}
    assert {"/home/mpiuser/.ssh", "/etc/mpi"} <= mounts

    done = tjs.wait_condition("allreduce", "Complete", timeout=60)
    assert done["reason"] == "AllJobsCompleted"
    by_job = {s["name"]: s for s in tjs.get("allreduce")["status"]["jobsStatus"]}
    assert by_job["launcher"]["succeeded"] == 1


def test_a_runtime_pod_group_policy_is_a_condition_and_the_job_still_runs(tjs: TrainJobs) -> None:
    runtime = torch_runtime("gang", run="3s")
    runtime["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 60}}
    tjs.create_runtime(runtime)
    tjs.create(trainjob("gang", runtime="gang", trainer={"numNodes": 2}))
    ignored = tjs.wait_condition("gang", "PodGroupPolicyIgnored", timeout=30)
    assert "podGroupPolicy.coscheduling" in ignored["message"]
    assert "does not serve" in ignored["message"]
    tjs.wait_condition("gang", "Complete", timeout=60)
    reasons = [reason for reason, _ in tjs.events("gang")]
    assert reasons.count("PodGroupPolicyIgnored") == 1, reasons
