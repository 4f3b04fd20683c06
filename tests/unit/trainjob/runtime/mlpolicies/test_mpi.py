"""MPI's slots per host, its hostfile's size known before it is written, and the launcher's
and nodes' pods whole for each MPI implementation (trainjob/runtime/mlpolicies/mpi.py), as
Trainer v2.3's MPI plugin; its ConfigMap and SSH Secret through the framework too
(tests/unit/trainjob/runtime/test_framework.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import container, edit, make_trainjob, mpi_runtime
from tests.unit.trainjob.runtime.mlpolicies import trainjob
from trainjob.models import parse_runtime, parse_trainjob
from trainjob.naming import pod_dns_name
from trainjob.runtime.framework import build_runtime_info
from trainjob.runtime.info import RuntimeInfo, RuntimeSpecError
from trainjob.runtime.mlpolicies import mpi as mpi_policy
from trainjob.runtime.mlpolicies.mpi import hostfile_size, mpi_slots
from trainjob_api.pods import ContainerView

Dict = dict[str, Any]
GPU = {"limits": {"nvidia.com/gpu": 2}}


@pytest.mark.parametrize(
    ("trainer", "runtime_slots", "node", "want"),
    [
        ({}, 4, {}, 4),
        ({}, 1, {"resources": GPU}, 2),  # a runtime's 1 becomes the node's GPUs
        ({}, 1, {"resources": {"limits": {"nvidia.com/gpu": 1}}}, 1),
        ({}, 3, {"resources": GPU}, 3),  # any other number stays
        ({"numProcPerNode": 7}, 1, {"resources": GPU}, 7),
        ({"numProcPerNode": "auto"}, 1, {"resources": GPU}, 2),  # "auto" is no count
    ],
)
def test_mpi_slots_per_host(trainer: Dict, runtime_slots: int, node: Dict, want: int) -> None:
    assert mpi_slots(trainjob(**trainer), runtime_slots, ContainerView(node)) == want


@pytest.mark.parametrize("node_pods", [1, 9, 10, 11, 100, 1234])
@pytest.mark.parametrize("launcher", [None, "launcher"])
@pytest.mark.parametrize("line_end", [" slots=8\n", ":1\n"])
def test_the_hostfiles_size_is_the_bytes_written(
    node_pods: int, launcher: str | None, line_end: str
) -> None:
    hosts = [pod_dns_name("my-job", "node", 0, i) for i in range(node_pods)]
    if launcher is not None:
        hosts.append(pod_dns_name("my-job", launcher, 0, 0))
    written = "".join(f"{h}{line_end}" for h in hosts)
    assert hostfile_size("my-job", "node", node_pods, launcher, line_end) == len(written)


def _built(runtime: Dict, num_nodes: int) -> RuntimeInfo:
    job = make_trainjob(runtimeRef={"name": "mpi-runtime"}, trainer={"numNodes": num_nodes})
    return build_runtime_info(
        parse_trainjob(job), parse_runtime(runtime), runtime["spec"]["template"]["spec"]
    )


SSH_VOLUME = {
    "name": "mpi-ssh-auth",
    "secret": {
        "secretName": "tj-mpi-ssh-auth",
        "defaultMode": 0o600,
        "items": [
            {"key": "ssh-privatekey", "path": "id_rsa"},
            {"key": "ssh-publickey", "path": "id_rsa.pub"},
            {"key": "ssh-publickey", "path": "authorized_keys"},
        ],
    },
}
HOSTFILE_VOLUME = {
    "name": "mpi-hostfile",
    "configMap": {
        "name": "tj-mpi-hostfile",
        "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
    },
}
SSH_MOUNT = {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"}
OPENMPI_ENV = [
    {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
    {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
    {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
    {"name": "OMPI_MCA_orte_set_default_slots", "value": "4"},
]


@pytest.mark.parametrize(
    ("mpi", "env", "hostfile"),
    [
        ({}, OPENMPI_ENV, "tj-node-0-0.tj slots=4\ntj-node-0-1.tj slots=4\n"),
        (
            {"mpiImplementation": "Intel"},
            [{"name": "I_MPI_HYDRA_HOST_FILE", "value": "/etc/mpi/hostfile"}],
            "tj-node-0-0.tj:4\ntj-node-0-1.tj:4\n",
        ),
        (
            {"mpiImplementation": "MPICH", "sshAuthMountPath": "/home/mpiuser/.ssh"},
            [{"name": "HYDRA_HOST_FILE", "value": "/etc/mpi/hostfile"}],
            "tj-node-0-0.tj:4\ntj-node-0-1.tj:4\n",
        ),
    ],
)
def test_the_launchers_and_nodes_pods_for_each_implementation(
    mpi: Dict, env: list[Dict], hostfile: str
) -> None:
    info = _built(mpi_runtime(**mpi), 2)
    ssh_mount = {**SSH_MOUNT, "mountPath": mpi.get("sshAuthMountPath", "/root/.ssh")}
    launcher, node = info.pod_set("launcher"), info.pod_set("node")
    assert (launcher.count, node.count) == (1, 2)
    assert info.policy.extra_objects[0]["data"] == {"hostfile": hostfile}
    assert launcher.pod_template["spec"]["volumes"] == [SSH_VOLUME, HOSTFILE_VOLUME]
    assert node.pod_template["spec"]["volumes"] == [SSH_VOLUME]
    ports = [{"containerPort": 22, "protocol": "TCP"}]
    launcher_node = launcher.container("node")
    assert launcher_node is not None
    assert launcher_node["env"] == env
    assert launcher_node["volumeMounts"] == [
        ssh_mount,
        {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
    ]
    assert launcher_node["ports"] == ports
    node_node = node.container("node")
    assert node_node is not None
    assert "env" not in node_node
    assert node_node["volumeMounts"] == [ssh_mount]
    assert node_node["ports"] == ports


@pytest.mark.parametrize(
    ("num_nodes", "launcher_first", "hosts"),
    [
        (3, True, ["tj-launcher-0-0.tj", "tj-node-0-0.tj", "tj-node-0-1.tj"]),
        (3, False, ["tj-node-0-0.tj", "tj-node-0-1.tj", "tj-launcher-0-0.tj"]),
        (1, True, ["tj-launcher-0-0.tj", "tj-node-0-0.tj"]),  # at least one node pod runs
    ],
)
def test_a_launcher_run_as_a_node_is_a_host_in_the_runtimes_order(
    num_nodes: int, launcher_first: bool, hosts: list[str]
) -> None:
    runtime = mpi_runtime(runLauncherAsNode=True)
    if not launcher_first:
        jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
        edit(runtime).template_spec(replicatedJobs=jobs[::-1])
    info = _built(runtime, num_nodes)
    assert info.pod_set("node").count == len(hosts) - 1
    assert info.policy.extra_objects[0]["data"]["hostfile"] == "".join(
        f"{h} slots=4\n" for h in hosts
    )


def test_slots_come_from_the_node_pods_gpus_not_the_launchers() -> None:
    runtime = mpi_runtime(numProcPerNode=1)
    edit(runtime).pod_spec("node", containers=[container(image="mpi:1", resources=GPU)])
    info = _built(runtime, 2)
    assert info.policy.extra_objects[0]["data"]["hostfile"] == (
        "tj-node-0-0.tj slots=2\ntj-node-0-1.tj slots=2\n"
    )


def test_one_launcher_runs_whatever_its_template_says() -> None:
    runtime = mpi_runtime()
    edit(runtime).job_spec("launcher", parallelism=2)
    assert _built(runtime, 2).pod_set("launcher").count == 1


@pytest.mark.parametrize("keep", ["launcher", "node"])
def test_a_runtime_without_a_launcher_or_nodes_is_refused(keep: str) -> None:
    runtime = mpi_runtime()
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    edit(runtime).template_spec(replicatedJobs=[j for j in jobs if j["name"] == keep])
    with pytest.raises(RuntimeSpecError, match="needs replicatedJobs named 'launcher' and 'node'"):
        _built(runtime, 2)


def test_the_runtimes_own_ssh_volume_and_mount_of_that_name_are_replaced() -> None:
    runtime = mpi_runtime()
    for name in ("launcher", "node"):
        mounted = container(
            image="mpi:1", volumeMounts=[{"name": "mpi-ssh-auth", "mountPath": "/x"}]
        )
        edit(runtime).pod_spec(
            name, volumes=[{"name": "mpi-ssh-auth", "emptyDir": {}}], containers=[mounted]
        )
    info = _built(runtime, 2)
    for name in ("launcher", "node"):
        pod_set = info.pod_set(name)
        assert pod_set.pod_template["spec"]["volumes"][0] == SSH_VOLUME
        node = pod_set.container("node")
        assert node is not None and node["volumeMounts"][0] == SSH_MOUNT


@pytest.mark.parametrize("as_node", [False, True])
def test_the_hostfile_checked_is_the_hostfile_written(
    as_node: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[tuple[int, int]] = []
    monkeypatch.setattr(
        mpi_policy, "check_hostfile", lambda size, hosts: checked.append((size, hosts))
    )
    info = _built(mpi_runtime(runLauncherAsNode=as_node), 4)
    hostfile = info.policy.extra_objects[0]["data"]["hostfile"]
    assert checked == [(len(hostfile.encode()), hostfile.count("\n"))]
