"""MPI (Trainer v2.3's MPI plugin): a launcher and numNodes worker nodes, a hostfile
ConfigMap and an SSH key Secret, OpenMPI's, Intel MPI's or MPICH's environment."""

from __future__ import annotations

from kubebase.objects import Dict
from trainjob.models import MLPolicy, TrainJob
from trainjob.naming import pod_dns_name
from trainjob.runtime.info import PodSet, RuntimeInfo, RuntimeSpecError
from trainjob.runtime.limits import check_hostfile, digits_below
from trainjob.runtime.mlpolicies.common import gpus_per_node, node_container, refuse_reserved_env
from trainjob_api import constants as c
from trainjob_api.pods import ContainerView

# The variables the MPI policy sets for OpenMPI (Trainer's reserved names).
MPI_RESERVED = frozenset(
    {
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_plm_rsh_args",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
    }
)


def mpi_slots(trainjob: TrainJob, runtime_slots: int, node: ContainerView) -> int:
    """Slots per host as Trainer v2.3 sets them: the TrainJob's trainer.numProcPerNode;
    else the runtime's mpi.numProcPerNode, except that a runtime's 1 becomes the node's GPU
    count when it has more than one."""
    trainer = trainjob.spec.trainer
    if trainer is not None and isinstance(trainer.num_proc_per_node, int):
        return trainer.num_proc_per_node
    if runtime_slots == 1:
        gpus = gpus_per_node(trainjob, node.resources)
        if gpus > 1:
            return gpus
    return runtime_slots


def hostfile_size(tj: str, nodes: str, node_pods: int, launcher: str | None, line_end: str) -> int:
    """The bytes of the hostfile `MPIPolicy` writes, counted without writing it: one line per
    host `<tj>-<replicatedJob>-0-<index>.<tj>` and `line_end` (the launcher's, index 0, when it
    runs as a node)."""
    fixed = 2 * len(tj) + len("--0-.") + len(line_end)
    size = node_pods * (fixed + len(nodes)) + digits_below(node_pods)
    return size + (fixed + len(launcher) + 1 if launcher is not None else 0)


class MPIPolicy:
    """A launcher and numNodes worker nodes; a hostfile ConfigMap and an SSH key Secret."""

    name = "mpi"

    def applies(self, ml: MLPolicy) -> bool:
        return ml.mpi is not None

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        mpi = info.policy.ml.mpi
        assert mpi is not None
        launcher, nodes = _launcher_and_nodes(info)
        refuse_reserved_env(trainjob, MPI_RESERVED, "MPI")
        slots = mpi_slots(trainjob, mpi.num_proc_per_node, node_container(nodes))
        # Trainer v2.3: a launcher run as a node is one of the nodes, and at least one `node`
        # pod runs.
        as_node = mpi.run_launcher_as_node
        node_pods = max(info.policy.num_nodes - 1, 1) if as_node else info.policy.num_nodes
        nodes.parallelism = node_pods
        launcher.parallelism = 1
        openmpi = mpi.mpi_implementation == "OpenMPI"
        hostfile = _hostfile(info, launcher, nodes, node_pods, slots, openmpi, as_node)
        hostfile_cm = f"{info.trainjob}-mpi-hostfile"
        ssh_secret = f"{info.trainjob}-mpi-ssh-auth"
        info.policy.extra_objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": hostfile_cm, "namespace": info.namespace},
                "data": {c.MPI_HOSTFILE_NAME: hostfile},
            }
        )
        info.policy.ssh_secret_name = ssh_secret
        ssh_mount = {"name": "mpi-ssh-auth", "mountPath": mpi.ssh_auth_mount_path}
        _mount(nodes, [_ssh_volume(ssh_secret)], [ssh_mount])
        _mount(
            launcher,
            [_ssh_volume(ssh_secret), _hostfile_volume(hostfile_cm)],
            [ssh_mount, {"name": "mpi-hostfile", "mountPath": c.MPI_HOSTFILE_DIR}],
        )
        node_container(launcher).merge_env(_launcher_env(mpi.mpi_implementation, slots))


def _launcher_and_nodes(info: RuntimeInfo) -> tuple[PodSet, PodSet]:
    """The runtime's launcher and node pod sets (RuntimeSpecError without both)."""
    launcher = next((p for p in info.pod_sets if p.name == c.LAUNCHER_REPLICATED_JOB), None)
    nodes = next((p for p in info.pod_sets if p.name == c.NODE_REPLICATED_JOB), None)
    if launcher is None or nodes is None:
        raise RuntimeSpecError(
            "an MPI runtime needs replicatedJobs named "
            f"{c.LAUNCHER_REPLICATED_JOB!r} and {c.NODE_REPLICATED_JOB!r}"
        )
    return launcher, nodes


def _hostfile(
    info: RuntimeInfo,
    launcher: PodSet,
    nodes: PodSet,
    node_pods: int,
    slots: int,
    openmpi: bool,
    as_node: bool,
) -> str:
    """The hostfile: the hosts in the runtime's order of replicatedJobs, as Trainer's (its
    first host is MPI rank 0), each with its slots as OpenMPI reads them (`host slots=N`) or
    Intel MPI and MPICH do (`host:N`). Its size is known before it is written: one a
    ConfigMap cannot hold is refused (RuntimeSpecError), not built."""
    tj = info.trainjob
    line_end = f" slots={slots}\n" if openmpi else f":{slots}\n"
    size = hostfile_size(tj, nodes.name, node_pods, launcher.name if as_node else None, line_end)
    check_hostfile(size, node_pods + int(as_node))
    hosts = [pod_dns_name(tj, nodes.name, 0, i) for i in range(node_pods)]
    if as_node:
        launcher_host = pod_dns_name(tj, launcher.name, 0, 0)
        launcher_first = info.pod_sets.index(launcher) < info.pod_sets.index(nodes)
        hosts = [launcher_host, *hosts] if launcher_first else [*hosts, launcher_host]
    return "".join(f"{h}{line_end}" for h in hosts)


def _launcher_env(implementation: str, slots: int) -> list[Dict]:
    """Where the launcher's MPI finds the hostfile, and OpenMPI's settings."""
    hostfile = f"{c.MPI_HOSTFILE_DIR}/{c.MPI_HOSTFILE_NAME}"
    if implementation == "OpenMPI":
        return [
            {"name": "OMPI_MCA_orte_default_hostfile", "value": hostfile},
            {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
            {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
            {"name": "OMPI_MCA_orte_set_default_slots", "value": str(slots)},
        ]
    var = "I_MPI_HYDRA_HOST_FILE" if implementation == "Intel" else "HYDRA_HOST_FILE"
    return [{"name": var, "value": hostfile}]


def _ssh_volume(secret: str) -> Dict:
    return {
        "name": "mpi-ssh-auth",
        "secret": {
            "secretName": secret,
            "defaultMode": 0o600,
            "items": [
                {"key": "ssh-privatekey", "path": "id_rsa"},
                {"key": "ssh-publickey", "path": "id_rsa.pub"},
                {"key": "ssh-publickey", "path": "authorized_keys"},
            ],
        },
    }


def _hostfile_volume(config_map: str) -> Dict:
    item = {"key": c.MPI_HOSTFILE_NAME, "path": c.MPI_HOSTFILE_NAME, "mode": 0o444}
    return {"name": "mpi-hostfile", "configMap": {"name": config_map, "items": [item]}}


def _mount(ps: PodSet, volumes: list[Dict], mounts: list[Dict]) -> None:
    """`volumes` in the pod set's pods, mounted in its node container (entries of the same
    name replaced), and the SSH port open there."""
    ctr = node_container(ps)
    ps.pod_spec.merge_entries("volumes", volumes)
    ctr.merge_entries("volumeMounts", mounts)
    ctr.add_port(c.MPI_SSH_PORT)
