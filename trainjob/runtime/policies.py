"""ML policy plugins (torch, mpi, plain): what each training framework adds to the PodSets."""

from __future__ import annotations

from typing import Any, Protocol

from trainjob import constants as c
from trainjob.models import MLPolicy, TrainJob
from trainjob.naming import pod_dns_name
from trainjob.runtime.info import PodSet, RuntimeInfo, RuntimeSpecError
from trainjob.runtime.patches import merge_by_key

Dict = dict[str, Any]


class MLPolicyPlugin(Protocol):
    """One ML framework. `applies` picks it from the runtime's mlPolicy; `enforce` edits PodSets."""

    name: str

    def applies(self, ml: MLPolicy) -> bool: ...

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None: ...


def _node_container(ps: PodSet) -> Dict:
    ctr = ps.container(c.NODE_CONTAINER)
    if ctr is None:
        raise RuntimeSpecError(
            f"replicatedJob {ps.name!r} has no container named "
            f"{c.NODE_CONTAINER!r}, which the ML policy configures"
        )
    return ctr


def _set_env(ctr: Dict, env: list[Dict]) -> None:
    ctr["env"] = merge_by_key(ctr.get("env") or [], env)


def _add_port(ctr: Dict, port: int) -> None:
    ports = ctr.setdefault("ports", [])
    if not any(p.get("containerPort") == port for p in ports):
        ports.append({"containerPort": port, "protocol": "TCP"})


def _trainer_pod_set(info: RuntimeInfo) -> PodSet:
    for ps in info.pod_sets:
        if ps.role == c.STEP_TRAINER:
            return ps
    raise RuntimeSpecError(
        f"the runtime has no replicatedJob labelled {c.ANCESTOR_STEP_LABEL}={c.STEP_TRAINER}"
    )


def _gpus(ctr: Dict) -> int | None:
    for section in ("limits", "requests"):
        value = (ctr.get("resources") or {}).get(section, {}).get("nvidia.com/gpu")
        if value is not None:
            return int(str(value))
    return None


class PlainPolicy:
    """No framework: the trainer PodSet runs numNodes pods as they are."""

    name = "plain"

    def applies(self, ml: MLPolicy) -> bool:
        return ml.torch is None and ml.mpi is None

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        return None


class TorchPolicy:
    """torchrun's PET_* environment on every trainer node, rank from the completion index."""

    name = "torch"

    def applies(self, ml: MLPolicy) -> bool:
        return ml.torch is not None

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        ps = _trainer_pod_set(info)
        ctr = _node_container(ps)
        trainer = trainjob.spec.trainer
        nproc: int | str | None = trainer.num_proc_per_node if trainer else None
        if nproc is None and info.policy.ml.torch is not None:
            nproc = info.policy.ml.torch.num_proc_per_node
        if nproc in (None, "auto"):
            # Like torchrun's `auto`: one process per GPU when the node asks for GPUs.
            nproc = _gpus(ctr) or "auto"
        master = pod_dns_name(info.trainjob, ps.name, 0, 0)
        _set_env(
            ctr,
            [
                {"name": "PET_NNODES", "value": str(info.policy.num_nodes)},
                {"name": "PET_NPROC_PER_NODE", "value": str(nproc)},
                {
                    "name": "PET_NODE_RANK",
                    "valueFrom": {
                        "fieldRef": {
                            "fieldPath": f"metadata.annotations['{c.JOB_COMPLETION_INDEX}']"
                        }
                    },
                },
                {"name": "PET_MASTER_ADDR", "value": master},
                {"name": "PET_MASTER_PORT", "value": str(c.TORCH_MASTER_PORT)},
            ],
        )
        _add_port(ctr, c.TORCH_MASTER_PORT)


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
        trainer = trainjob.spec.trainer
        slots = (
            trainer.num_proc_per_node
            if trainer and isinstance(trainer.num_proc_per_node, int)
            else None
        ) or mpi.num_proc_per_node
        node_pods = info.policy.num_nodes - (1 if mpi.run_launcher_as_node else 0)
        if node_pods < 1 and not mpi.run_launcher_as_node:
            raise RuntimeSpecError("an MPI TrainJob needs at least one node")
        nodes.parallelism = max(node_pods, 0)
        launcher.parallelism = 1
        hosts = []
        if mpi.run_launcher_as_node:
            hosts.append(pod_dns_name(tj, launcher.name, 0, 0))
        hosts += [pod_dns_name(tj, nodes.name, 0, i) for i in range(node_pods)]
        if mpi.mpi_implementation == "OpenMPI":
            hostfile = "".join(f"{h} slots={slots}\n" for h in hosts)
            env = [
                {
                    "name": "OMPI_MCA_orte_default_hostfile",
                    "value": f"{c.MPI_HOSTFILE_DIR}/{c.MPI_HOSTFILE_NAME}",
                },
                {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
                {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
                {"name": "OMPI_MCA_orte_set_default_slots", "value": str(slots)},
            ]
        else:  # Intel MPI and MPICH read `host:slots` lines
            hostfile = "".join(f"{h}:{slots}\n" for h in hosts)
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
            ctr = _node_container(ps)
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
                _set_env(ctr, env)
            spec["volumes"] = merge_by_key(spec.get("volumes") or [], volumes)
            ctr["volumeMounts"] = merge_by_key(ctr.get("volumeMounts") or [], mounts)
            _add_port(ctr, c.MPI_SSH_PORT)


# Most specific first: the first plugin that applies wins.
PLUGINS: list[MLPolicyPlugin] = [TorchPolicy(), MPIPolicy(), PlainPolicy()]


def select_plugin(ml: MLPolicy) -> MLPolicyPlugin:
    for plugin in PLUGINS:
        if plugin.applies(ml):
            return plugin
    raise RuntimeSpecError("no ML policy plugin applies")  # PlainPolicy always applies
