"""A tenant who wants to break the worker controller, played as one: a ServiceAccount with only
the namespace rights a platform team gives a team (TrainJobs and runtimes, PVCs, ConfigMaps,
Secrets, Jobs and Services in its namespace). Whatever it writes, the controller never adopts,
overwrites or owns an object it did not make, says why a TrainJob waits, and keeps serving."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from clusters.bed import Bed
from clusters.helpers.kube import TrainJobs, api_error
from clusters.helpers.waiting import wait_for
from clusters.kube import api_client, service_account_token, write_token_kubeconfig
from tests.support.builders import make_trainjob, mpi_runtime, runtime_patch, torch_runtime

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("worker_controllers")]
Dict = dict[str, Any]
WORKER = "trainjob-worker-controller"  # the worker controller's field manager

TENANT_RULES = [
    {
        "apiGroups": ["trainer.kubeflow.org"],
        "resources": ["trainjobs", "trainingruntimes"],
        "verbs": ["*"],
    },
    {
        "apiGroups": [""],
        "resources": ["persistentvolumeclaims", "configmaps", "secrets", "services"],
        "verbs": ["*"],
    },
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]},
    {"apiGroups": [""], "resources": ["events", "pods"], "verbs": ["get", "list", "watch"]},
]


@pytest.fixture
def tenant(
    bed: Bed, worker_names: list[str], namespace_factory: Callable[..., str], tmp_path: Path
) -> Iterator[TrainJobs]:
    """TrainJobs of a namespace, as its tenant's ServiceAccount sees and writes them."""
    worker = worker_names[0]
    admin = bed.api(worker)
    ns = namespace_factory(worker, "tenant")
    core, rbac = client.CoreV1Api(admin), client.RbacAuthorizationV1Api(admin)
    core.create_namespaced_service_account(ns, {"metadata": {"name": "tenant"}})
    rbac.create_namespaced_role(ns, {"metadata": {"name": "tenant"}, "rules": TENANT_RULES})
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "tenant"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": ns}],
        },
    )
    kubeconfig = tmp_path / "tenant.kubeconfig"
    write_token_kubeconfig(
        bed.kubeconfig(worker), service_account_token(admin, ns, "tenant"), kubeconfig
    )
    yield TrainJobs(api_client(kubeconfig), ns)


def _pvc(name: str) -> Dict:
    return {
        "metadata": {"name": name, "labels": {"team": "b"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def _claiming_runtime() -> Dict:
    """A runtime whose volumeClaimPolicies make `data-<trainjob>`, owned by the job (Delete)."""
    runtime = torch_runtime("claims", run="2s")
    spec = runtime["spec"]["template"]["spec"]
    spec["volumeClaimPolicies"] = [
        {
            "templates": [{"metadata": {"name": "data"}, "spec": _pvc("data")["spec"]}],
            "retentionPolicy": {"whenDeleted": "Delete"},
        }
    ]
    node = spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    node["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return runtime


def _blocked(tjs: TrainJobs, name: str) -> Dict:
    return tjs.wait_condition(name, "ObjectsBlocked", timeout=30)


def test_a_pvc_under_the_claims_name_is_never_adopted_or_deleted(tenant: TrainJobs) -> None:
    """Before: the worker controller applied `data-<tj>` with force and made the TrainJob its
    owner, so deleting the TrainJob let the garbage collector delete someone else's PVC."""
    tenant.create_runtime(_claiming_runtime())
    theirs = tenant.core.create_namespaced_persistent_volume_claim(tenant.ns, _pvc("data-grab"))
    tenant.create(make_trainjob("grab", runtimeRef={"name": "claims", "kind": "TrainingRuntime"}))

    blocked = _blocked(tenant, "grab")
    assert blocked["reason"] == "NameTaken"
    assert (
        "PersistentVolumeClaim 'data-grab' exists and was not made for this TrainJob"
        in (blocked["message"])
    )
    # The Event is posted after the condition is written: wait for it, do not race it.
    wait_for(
        lambda: any(reason == "NameTaken" for reason, _ in tenant.events("grab")),
        timeout=15,
        what="the NameTaken Event on the TrainJob",
    )
    assert tenant.jobs("grab") == []  # no pod mounts a claim that is not its own
    pvc = tenant.core.read_namespaced_persistent_volume_claim("data-grab", tenant.ns)
    assert pvc.metadata.resource_version == theirs.metadata.resource_version
    assert not pvc.metadata.owner_references

    tenant.delete("grab")
    wait_for(lambda: _gone(tenant, "grab"), 30, what="TrainJob grab deleted")
    pvc = tenant.core.read_namespaced_persistent_volume_claim("data-grab", tenant.ns)
    assert pvc.metadata.deletion_timestamp is None


def test_the_trainjob_goes_on_once_the_name_is_free(tenant: TrainJobs) -> None:
    tenant.create_runtime(_claiming_runtime())
    tenant.core.create_namespaced_persistent_volume_claim(tenant.ns, _pvc("data-later"))
    tenant.create(make_trainjob("later", runtimeRef={"name": "claims", "kind": "TrainingRuntime"}))
    _blocked(tenant, "later")
    tenant.core.delete_namespaced_persistent_volume_claim("data-later", tenant.ns)
    # The PVC protection finalizer keeps a deleted claim a moment; then ours is made.
    cleared = tenant.wait_condition("later", "ObjectsBlocked", "False", timeout=60)
    assert cleared["reason"] == "ObjectsCreated"
    pvc = tenant.core.read_namespaced_persistent_volume_claim("data-later", tenant.ns)
    assert [o.name for o in pvc.metadata.owner_references] == ["later"]
    assert len(tenant.jobs("later")) == 1


def _mpi(tenant: TrainJobs) -> None:
    runtime = mpi_runtime()
    runtime["metadata"]["name"] = "mpi"
    tenant.create_runtime(runtime)


def test_a_pre_made_hostfile_or_ssh_secret_is_never_used_or_overwritten(tenant: TrainJobs) -> None:
    """Before: the hostfile ConfigMap was overwritten, and an existing `<tj>-mpi-ssh-auth`
    Secret reused as it was, so a tenant's key decided which key MPI pods trust."""
    _mpi(tenant)
    planted = tenant.core.create_namespaced_config_map(
        tenant.ns, {"metadata": {"name": "hf-mpi-hostfile"}, "data": {"hostfile": "evil slots=1"}}
    )
    tenant.create(make_trainjob("hf", runtimeRef={"name": "mpi", "kind": "TrainingRuntime"}))
    blocked = _blocked(tenant, "hf")
    assert (
        "ConfigMap 'hf-mpi-hostfile' exists and was not made for this TrainJob"
        in (blocked["message"])
    )
    cm = tenant.core.read_namespaced_config_map("hf-mpi-hostfile", tenant.ns)
    assert cm.data == {"hostfile": "evil slots=1"}
    assert cm.metadata.resource_version == planted.metadata.resource_version

    key = {"ssh-privatekey": "a2V5", "ssh-publickey": "cHVi"}
    tenant.core.create_namespaced_secret(
        tenant.ns, {"metadata": {"name": "key-mpi-ssh-auth"}, "data": key}
    )
    tenant.create(make_trainjob("key", runtimeRef={"name": "mpi", "kind": "TrainingRuntime"}))
    blocked = _blocked(tenant, "key")
    assert (
        "Secret 'key-mpi-ssh-auth' exists and was not made for this TrainJob"
        in (blocked["message"])
    )
    assert tenant.jobs("key") == []
    secret = tenant.core.read_namespaced_secret("key-mpi-ssh-auth", tenant.ns)
    assert secret.data == key and not secret.metadata.owner_references


def test_a_job_with_our_label_and_name_is_not_the_trainjobs(tenant: TrainJobs) -> None:
    """Before: Jobs belonged to a TrainJob by a label anyone can set, so a planted Job was
    counted, suspended and written over as the TrainJob's own."""
    tenant.create_runtime(torch_runtime("torch", run="2s"))
    planted = {
        "metadata": {
            "name": "lbl-node-0",
            "labels": {"trainjob.dev/trainjob-name": "lbl", "jobset.sigs.k8s.io/jobset-name": "x"},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            },
        },
    }
    before = tenant.batch.create_namespaced_job(tenant.ns, planted)
    tenant.create(make_trainjob("lbl", runtimeRef={"name": "torch", "kind": "TrainingRuntime"}))
    blocked = _blocked(tenant, "lbl")
    assert "Job 'lbl-node-0' exists and was not made for this TrainJob" in blocked["message"]
    job = tenant.batch.read_namespaced_job("lbl-node-0", tenant.ns)
    assert not job.metadata.owner_references
    assert job.metadata.labels == before.metadata.labels
    assert job.spec.template.spec == before.spec.template.spec
    # The Job controller writes its status; we wrote nothing of it.
    assert WORKER not in {m.manager for m in job.metadata.managed_fields}
    # Its pod runs, and is not counted as the TrainJob's.
    wait_for(lambda: tenant.batch.read_namespaced_job("lbl-node-0", tenant.ns).status.active, 30)
    status = tenant.get("lbl").get("status") or {}
    assert all(not s.get("active") for s in status.get("jobsStatus") or []), status


def test_what_the_runtime_cannot_run_is_refused_to_the_tenant_naming_the_field(
    tenant: TrainJobs,
) -> None:
    _mpi(tenant)
    tenant.create_runtime(torch_runtime("torch", run="2s"))
    cases = [
        ("mpi", {"trainer": {"numNodes": 1_000_000}}, "should be less than or equal to 100000"),
        ("mpi", {"trainer": {"numNodes": 90_000}}, "over the 1048576 a ConfigMap holds"),
        (
            "torch",
            {"trainer": {"env": [{"name": "PET_NNODES", "value": "64"}]}},
            "spec.trainer.env: PET_NNODES are set by the torch runtime itself",
        ),
        (
            "torch",
            {"trainer": {"resourcesPerNode": {"requests": {"cpu": "1e5000"}}}},
            "'1e5000' is not a valid quantity",
        ),
    ]
    for i, (runtime, spec, text) in enumerate(cases):
        body = make_trainjob(
            f"bad-{i}", runtimeRef={"name": runtime, "kind": "TrainingRuntime"}, **spec
        )
        with pytest.raises(client.ApiException) as refused:
            tenant.create(body)
        assert text in api_error(refused.value), (spec, api_error(refused.value))
    with pytest.raises(client.ApiException) as refused:
        tenant.create(
            make_trainjob(
                "n" * 55,
                runtimeRef={"name": "torch", "kind": "TrainingRuntime"},
                trainer={"numNodes": 11},
            )
        )
    assert "shorten the TrainJob's name" in api_error(refused.value)
    # And the controller still serves: a good TrainJob of the same tenant runs to the end.
    tenant.create(make_trainjob("fine", runtimeRef={"name": "torch", "kind": "TrainingRuntime"}))
    tenant.wait_condition("fine", "Complete", timeout=60)


def test_runtime_patches_cannot_change_while_the_trainjob_runs(tenant: TrainJobs) -> None:
    tenant.create_runtime(torch_runtime("torch", run="30s"))
    tenant.create(make_trainjob("patched", runtimeRef={"name": "torch", "kind": "TrainingRuntime"}))
    wait_for(lambda: tenant.pods("patched", "Running"), 30, what="a running pod")
    patch = runtime_patch(
        "tenant.example.com/sneak", "node", {"spec": {"nodeSelector": {"gpu": "big"}}}
    )
    with pytest.raises(client.ApiException) as refused:
        tenant.patch("patched", {"spec": {"runtimePatches": [patch]}})
    assert "spec.runtimePatches can change only while the TrainJob is suspended" in api_error(
        refused.value
    )
    tenant.patch("patched", {"spec": {"suspend": True}})
    tenant.patch("patched", {"spec": {"runtimePatches": [patch]}})  # suspended: allowed


def _gone(tjs: TrainJobs, name: str) -> bool:
    try:
        tjs.get(name)
    except client.ApiException as exc:
        return exc.status == 404
    return False
