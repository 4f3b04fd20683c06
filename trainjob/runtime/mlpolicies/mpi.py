"""MPI (Trainer v2.3's MPI plugin): a launcher and numNodes worker nodes, a hostfile
ConfigMap and an SSH key Secret, OpenMPI's, Intel MPI's or MPICH's environment."""

from __future__ import annotations

from kubebase.objects import Dict
from trainjob.models import MLPolicy, TrainJob
from trainjob.naming import pod_dns_name
from trainjob.runtime.info import RuntimeInfo, RuntimeSpecError
from trainjob.runtime.limits import check_hostfile, digits_below
from trainjob.runtime.mlpolicies.common import (
    add_port,
    gpus_per_node,
    node_container,
    refuse_reserved_env,
    set_env,
)
from trainjob.runtime.patches import merge_by_key
from trainjob_api import constants as c

# The variables the MPI policy sets for OpenMPI (Trainer's reserved names).
MPI_RESERVED = frozenset(
    {
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_plm_rsh_args",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
    }
)


def mpi_slots(trainjob: TrainJob, runtime_slots: int, node_container: Dict) -> int:
    """Slots per host as Trainer v2.3 sets them: the TrainJob's trainer.numProcPerNode;
    else the runtime's mpi.numProcPerNode, except that a runtime's 1 becomes the node's GPU
    count when it has more than one."""
    trainer = trainjob.spec.trainer
    if trainer is not None and isinstance(trainer.num_proc_per_node, int):
        return trainer.num_proc_per_node
    if runtime_slots == 1:
        gpus = gpus_per_node(trainjob, node_container.get("resources") or {})
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
        tj = info.trainjob
        nodes = (
            info.pod_set(c.NODE_REPLICATED_JOB)
            if any(p.name == c.NODE_REPLICATED_JOB for p in info.pod_sets)
            else None
        )
        launcher = next((p for p in info.pod_sets if p.name == c.LAUNCHER_REPLICATED_JOB), None)
        if launcher is None or nodes is None:
            raise RuntimeSpecError(
                "an MPI runtime needs replicatedJobs named "
                f"{c.LAUNCHER_REPLICATED_JOB!r} and {c.NODE_REPLICATED_JOB!r}"
            )
        refuse_reserved_env(trainjob, MPI_RESERVED, "MPI")
        slots = mpi_slots(trainjob, mpi.num_proc_per_node, node_container(nodes))
        if mpi.run_launcher_as_node:
            # Trainer v2.3: the launcher is one of the nodes, and at least one `node` pod runs
            node_pods = max(info.policy.num_nodes - 1, 1)
        else:
            node_pods = info.policy.num_nodes
        nodes.parallelism = node_pods
        launcher.parallelism = 1
        # The hostfile lists the hosts in the runtime's order of replicatedJobs, as Trainer's
        # does (its first host is MPI rank 0). Its size is known before it is written: a
        # hostfile a ConfigMap cannot hold is refused, not built.
        launcher_first = info.pod_sets.index(launcher) < info.pod_sets.index(nodes)
        as_node = mpi.run_launcher_as_node
        # OpenMPI reads `host slots=N` lines; Intel MPI and MPICH `host:N`.
        openmpi = mpi.mpi_implementation == "OpenMPI"
        line_end = f" slots={slots}\n" if openmpi else f":{slots}\n"
        launcher_name = launcher.name if as_node else None
        size = hostfile_size(tj, nodes.name, node_pods, launcher_name, line_end)
        check_hostfile(size, node_pods + int(as_node))
        hosts = [pod_dns_name(tj, nodes.name, 0, i) for i in range(node_pods)]
        if as_node:
            launcher_host = pod_dns_name(tj, launcher.name, 0, 0)
            hosts = [launcher_host, *hosts] if launcher_first else [*hosts, launcher_host]
        hostfile = "".join(f"{h}{line_end}" for h in hosts)
        if openmpi:
            env = [
                {
                    "name": "OMPI_MCA_orte_default_hostfile",
                    "value": f"{c.MPI_HOSTFILE_DIR}/{c.MPI_HOSTFILE_NAME}",
                },
                {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
                {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
                {"name": "OMPI_MCA_orte_set_default_slots", "value": str(slots)},
            ]
        else:
            var = (
                "I_MPI_HYDRA_HOST_FILE" if mpi.mpi_implementation == "Intel" else "HYDRA_HOST_FILE"
            )
            env = [{"name": var, "value": f"{c.MPI_HOSTFILE_DIR}/{c.MPI_HOSTFILE_NAME}"}]
        hostfile_cm = f"{tj}-mpi-hostfile"
        ssh_secret = f"{tj}-mpi-ssh-auth"
        info.policy.extra_objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": hostfile_cm, "namespace": info.namespace},
                "data": {c.MPI_HOSTFILE_NAME: hostfile},
            }
        )
        info.policy.ssh_secret_name = ssh_secret
        ssh_volume = {
            "name": "mpi-ssh-auth",
            "secret": {
                "secretName": ssh_secret,
                "defaultMode": 0o600,
                "items": [
                    {"key": "ssh-privatekey", "path": "id_rsa"},
                    {"key": "ssh-publickey", "path": "id_rsa.pub"},
                    {"key": "ssh-publickey", "path": "authorized_keys"},
                ],
            },
        }
        for ps in (launcher, nodes):
            spec = ps.pod_template.setdefault("spec", {})
            volumes = [ssh_volume]
            ctr = node_container(ps)
            mounts = [{"name": "mpi-ssh-auth", "mountPath": mpi.ssh_auth_mount_path}]
            if ps is launcher:
                volumes.append(
                    {
                        "name": "mpi-hostfile",
                        "configMap": {
                            "name": hostfile_cm,
                            "items": [
                                {
                                    "key": c.MPI_HOSTFILE_NAME,
                                    "path": c.MPI_HOSTFILE_NAME,
                                    "mode": 0o444,
                                }
                            ],
                        },
                    }
                )
                mounts.append({"name": "mpi-hostfile", "mountPath": c.MPI_HOSTFILE_DIR})
                set_env(ctr, env)
            spec["volumes"] = merge_by_key(spec.get("volumes") or [], volumes)
            ctr["volumeMounts"] = merge_by_key(ctr.get("volumeMounts") or [], mounts)
            add_port(ctr, c.MPI_SSH_PORT)
