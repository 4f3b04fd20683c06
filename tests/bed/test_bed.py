"""The bed itself: real API servers, controller-manager, scheduler, kwok nodes and Kueue."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import urllib3
from kubernetes import client

from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from kubebase.kinds import CONFIG_MAP
from kubecontrol.cluster import Cluster

pytestmark = pytest.mark.bed

KUEUE = ("kueue.x-k8s.io", "v1beta2")


def _custom(bed: Bed, cluster: str) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(bed.api(cluster))


def _create_cluster_scoped(bed: Bed, cluster: str, plural: str, body: dict[str, Any]) -> None:
    _custom(bed, cluster).create_cluster_custom_object(*KUEUE, plural, body)


def _queue_setup(bed: Bed, cluster: str, namespace: str, cpu: str) -> str:
    """ResourceFlavor + ClusterQueue with `cpu` quota + LocalQueue `q` in `namespace`."""
    suffix = uuid.uuid4().hex[:6]
    flavor, cq = f"rf-{suffix}", f"cq-{suffix}"
    _create_cluster_scoped(
        bed,
        cluster,
        "resourceflavors",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
        },
    )
    _create_cluster_scoped(
        bed,
        cluster,
        "clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": cpu},
                                    {"name": "memory", "nominalQuota": "64Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
    )
    _custom(bed, cluster).create_namespaced_custom_object(
        *KUEUE,
        namespace,
        "localqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
    )
    return cq


def _job(name: str, *, cpu: str = "1", run: str = "3s", queue: str | None = "q") -> client.V1Job:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1JobSpec(
            backoff_limit=0,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(annotations={"bed.trainjob.dev/run-duration": run}),
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[
                        client.V1Container(
                            name="main",
                            image="busybox",
                            resources=client.V1ResourceRequirements(requests={"cpu": cpu}),
                        )
                    ],
                ),
            ),
        ),
    )


def _job_condition(batch: client.BatchV1Api, ns: str, name: str, cond: str) -> bool:
    job = batch.read_namespaced_job(name, ns)
    return any(c.type == cond and c.status == "True" for c in (job.status.conditions or []))


def test_every_api_server_is_ready_and_runs_the_kubernetes_the_bed_is_built_for(
    bed: Bed,
) -> None:
    """v1.36.3 by default; the version matrix (TJ_K8S_VERSION, `./run matrix`) runs what it
    names."""
    from clusters.builds import K8S_VERSION

    for spec in bed.config.clusters:
        api = bed.api(spec.name)
        ready = api.call_api(
            "/readyz", "GET", auth_settings=["BearerToken"], _preload_content=False
        )[0].data.decode()
        assert ready == "ok", f"{spec.name}: /readyz said {ready!r}"
        version = client.VersionApi(api).get_code()
        assert version.git_version == K8S_VERSION, (spec.name, version.git_version)
        assert (version.major, version.minor) == tuple(K8S_VERSION.lstrip("v").split(".")[:2])


def test_queued_job_runs_on_kwok_node_and_second_waits_for_quota(
    bed: Bed, worker_names: list[str], namespace_factory: Callable[..., str]
) -> None:
    worker = worker_names[0]
    ns = namespace_factory(worker)
    _queue_setup(bed, worker, ns, cpu="2")
    batch = client.BatchV1Api(bed.api(worker))
    core = client.CoreV1Api(bed.api(worker))

    batch.create_namespaced_job(ns, _job("first", cpu="2", run="4s"))
    wait_for(
        lambda: not batch.read_namespaced_job("first", ns).spec.suspend,
        30,
        what="Kueue to admit (unsuspend) the first job",
    )
    batch.create_namespaced_job(ns, _job("second", cpu="2", run="1s"))

    pods = wait_for(
        lambda: [
            p
            for p in core.list_namespaced_pod(ns, label_selector="job-name=first").items
            if p.status.phase == "Running"
        ],
        30,
        what="the first job's pod to run",
    )
    assert pods[0].spec.node_name.startswith(f"{worker}-"), pods[0].spec.node_name
    # While the first runs, the second has no quota: Kueue keeps it suspended.
    assert batch.read_namespaced_job("second", ns).spec.suspend is True

    wait_for(
        lambda: _job_condition(batch, ns, "first", "Complete"), 60, what="the first job to complete"
    )
    wait_for(
        lambda: _job_condition(batch, ns, "second", "Complete"),
        60,
        what="the second job to be admitted after the first and complete",
    )

    # Kueue marks a Workload Finished after it sees its Job complete, a moment later.
    def finished() -> int:
        workloads = _custom(bed, worker).list_namespaced_custom_object(*KUEUE, ns, "workloads")
        return sum(
            any(
                c["type"] == "Finished" and c["status"] == "True"
                for c in w.get("status", {}).get("conditions", [])
            )
            for w in workloads["items"]
        )

    wait_for(lambda: finished() == 2, 30, what="Kueue to mark both Workloads Finished")


def test_kueue_webhook_rejects_invalid_cluster_queue(bed: Bed, worker_names: list[str]) -> None:
    # A negative quota passes the CRD schema (its pattern allows a sign); only Kueue's
    # validating webhook refuses it, so a refusal proves the webhook is wired.
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": f"bad-{uuid.uuid4().hex[:6]}"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "-1"}]}
                    ],
                }
            ]
        },
    }
    for cluster in [bed.config.clusters[0].name, worker_names[0]]:
        with pytest.raises(client.ApiException) as err:
            _create_cluster_scoped(bed, cluster, "clusterqueues", body)
        message = json.loads(err.value.body)["message"]
        assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in message, message
        assert "must be greater than or equal to 0" in message, message


def test_pod_that_asks_to_fail_ends_failed_with_its_exit_code(
    bed: Bed, worker_names: list[str], namespace_factory: Callable[..., str]
) -> None:
    worker = worker_names[-1]
    ns = namespace_factory(worker)
    core = client.CoreV1Api(bed.api(worker))
    core.create_namespaced_pod(
        ns,
        client.V1Pod(
            metadata=client.V1ObjectMeta(
                name="crash",
                annotations={
                    "bed.trainjob.dev/exit-code": "3",
                    "bed.trainjob.dev/run-duration": "1s",
                },
            ),
            spec=client.V1PodSpec(
                restart_policy="Never",
                containers=[client.V1Container(name="main", image="busybox")],
            ),
        ),
    )
    pod = wait_for(
        lambda: (p := core.read_namespaced_pod("crash", ns)).status.phase == "Failed" and p,
        30,
        what="the pod to fail",
    )
    terminated = pod.status.container_statuses[0].state.terminated
    assert terminated.exit_code == 3

    core.create_namespaced_pod(
        ns,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="plain"),
            spec=client.V1PodSpec(
                restart_policy="Never",
                containers=[client.V1Container(name="main", image="busybox")],
            ),
        ),
    )
    wait_for(
        lambda: core.read_namespaced_pod("plain", ns).status.phase == "Succeeded",
        30,
        what="a pod that asks nothing to succeed after the default run time",
    )


def test_deleting_a_namespace_removes_its_objects(bed: Bed, worker_names: list[str]) -> None:
    worker = worker_names[0]
    core = client.CoreV1Api(bed.api(worker))
    batch = client.BatchV1Api(bed.api(worker))
    ns = f"gone-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"a": "b"})
    )
    batch.create_namespaced_job(ns, _job("long", run="300s", queue=None))
    wait_for(lambda: core.list_namespaced_pod(ns).items, 30, what="the job's pod")
    core.delete_namespace(ns)

    def gone() -> bool:
        try:
            core.read_namespace(ns)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, 90, what=f"namespace {ns} and its objects to be deleted")
    assert not core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={ns}").items


def test_our_client_lists_metadata_only_page_by_page(bed: Bed, namespace_factory: Any) -> None:
    """The watchdog's listing (kubecontrol/cluster.py `list_metadata`, `versions`) against the
    real API server: every object across pages, with names and resourceVersions, and no data
    nor managedFields."""
    worker = bed.config.workers[0].name
    ns = namespace_factory(worker, "meta")
    core = client.CoreV1Api(bed.api(worker))
    for i in range(5):
        core.create_namespaced_config_map(
            ns,
            client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"cm-{i}"), data={"a": "b"}),
        )
    ours = Cluster.from_kubeconfig(worker, bed.kubeconfig(worker), "test")
    listed = ours.list_metadata(CONFIG_MAP, ns, page=2)  # three pages
    names = sorted(o["metadata"]["name"] for o in listed)
    assert [n for n in names if n.startswith("cm-")] == [f"cm-{i}" for i in range(5)]
    assert all(o["metadata"]["resourceVersion"] for o in listed)
    assert not any("data" in o or "managedFields" in o["metadata"] for o in listed), listed[0]
    # The watchdog's own read: each object's version by its key, decoded an item at a time.
    versions = {(ns, o["metadata"]["name"]): o["metadata"]["resourceVersion"] for o in listed}
    assert ours.versions(CONFIG_MAP, ns, page=2) == versions


@pytest.mark.disruptive
def test_worker_api_server_restart_keeps_objects(
    bed: Bed, worker_names: list[str], namespace_factory: Callable[..., str]
) -> None:
    worker = worker_names[-1]
    ns = namespace_factory(worker)
    core = client.CoreV1Api(bed.api(worker))
    core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="survivor"), data={"k": "v"})
    )
    apiserver = bed.component(worker, "kube-apiserver")
    old_pid = apiserver.pid()

    bed.stop_component(worker, "kube-apiserver")
    # No answer: the connection is refused (urllib3 wraps it, after its retries), never a
    # reply from some other server on that port.
    with pytest.raises(urllib3.exceptions.HTTPError):
        client.CoreV1Api(bed.api(worker)).read_namespace(ns, _request_timeout=2)
    bed.start_component(worker, "kube-apiserver")

    assert apiserver.pid() not in (None, old_pid)
    cm = client.CoreV1Api(bed.api(worker)).read_namespaced_config_map("survivor", ns)
    assert cm.data == {"k": "v"}
    # Kueue reconnects too: its webhooks answer again.
    wait_for(lambda: bed.component(worker, "kueue").health(), 60, what="Kueue healthy again")


def test_up_again_repairs_a_partial_bed_and_keeps_the_rest(
    bed: Bed, worker_names: list[str]
) -> None:
    worker = worker_names[-1]
    before = {(s.cluster, s.name): s.pid for s in bed.status()}
    bed.stop_component(worker, "kwok")
    assert bed.component(worker, "kwok").pid() is None

    bed.up()

    after = {(s.cluster, s.name): s for s in bed.status()}
    assert all(s.healthy for s in after.values()), [k for k, s in after.items() if not s.healthy]
    assert after[(worker, "kwok")].pid not in (None, before[(worker, "kwok")])
    unchanged = {k: s.pid for k, s in after.items() if k != (worker, "kwok")}
    assert unchanged == {k: v for k, v in before.items() if k != (worker, "kwok")}
