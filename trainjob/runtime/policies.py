"""ML policy plugins (torch, mpi, plain): what each training framework adds to the PodSets."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from kubecontrol.objects import Dict
from trainjob import constants as c
from trainjob.jsondoc import json_copy
from trainjob.models import MLPolicy, TrainJob
from trainjob.naming import pod_dns_name
from trainjob.quantity import parse_quantity
from trainjob.runtime.info import PodSet, RuntimeInfo, RuntimeSpecError
from trainjob.runtime.limits import check_hostfile, digits_below
from trainjob.runtime.patches import merge_by_key


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


def _any_container(info: RuntimeInfo, pod_set: str, name: str) -> Dict | None:
    """A container or init container `name` of the PodSet `pod_set`, if both exist."""
    ps = next((p for p in info.pod_sets if p.name == pod_set), None)
    spec = (ps.pod_template.get("spec") or {}) if ps else {}
    for ctr in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if ctr.get("name") == name:
            found: Dict = ctr
            return found
    return None


def _trainer_pod_set(info: RuntimeInfo) -> PodSet:
    for ps in info.pod_sets:
        if ps.role == c.STEP_TRAINER:
            return ps
    raise RuntimeSpecError(
        f"the runtime has no replicatedJob labelled {c.ANCESTOR_STEP_LABEL}={c.STEP_TRAINER}"
    )


def _whole(resources: Dict, section: str, pick: Callable[[str], bool]) -> int:
    """The first quantity in `section` (requests or limits) whose name `pick` accepts, rounded
    up to a whole number (as Kubernetes' Quantity.Value); 0 when there is none."""
    for name, qty in ((resources or {}).get(section) or {}).items():
        if pick(str(name)):
            try:
                whole: int = math.ceil(parse_quantity(qty))
                return max(0, whole)
            except (ValueError, TypeError):
                return 0
    return 0


def _per_node(resources: Dict, pick: Callable[[str], bool]) -> int:
    """Trainer's count per node: from requests, else from limits."""
    return _whole(resources, "requests", pick) or _whole(resources, "limits", pick)


def _is_gpu(name: str) -> bool:
    return "gpu" in name.lower()


def _node_resources(trainjob: TrainJob, runtime_resources: Dict) -> Dict:
    """What Trainer's plugins count a node's GPUs and CPUs from: the TrainJob's
    resourcesPerNode when it sets one (in place of the runtime's, not merged), else the
    runtime's `node` container resources."""
    trainer = trainjob.spec.trainer
    if trainer is not None and trainer.resources_per_node is not None:
        return trainer.resources_per_node
    return runtime_resources


def gpus_per_node(trainjob: TrainJob, runtime_resources: Dict) -> int:
    """Trainer v2.3's GetNumGPUPerNode: the first resource whose name holds "gpu", from
    requests, else from limits; 0 when there is none."""
    return _per_node(_node_resources(trainjob, runtime_resources), _is_gpu)


def refuse_reserved_env(trainjob: TrainJob, reserved: frozenset[str], policy: str) -> None:
    """Trainer's webhook refuses spec.trainer.env entries that the runtime's ML policy sets
    itself (each policy its own names); they would be overwritten silently."""
    trainer = trainjob.spec.trainer
    names = sorted(
        {str(e.get("name")) for e in (trainer.env if trainer else None) or []} & reserved
    )
    if names:
        raise RuntimeSpecError(
            f"spec.trainer.env: {', '.join(names)} are set by the {policy} runtime itself; "
            "remove them (numbers of nodes and processes have their own fields)"
        )


def _completion_index_env(name: str) -> Dict:
    """An env var holding the pod's completion index: its rank among the PodSet's pods."""
    return {
        "name": name,
        "valueFrom": {
            "fieldRef": {"fieldPath": f"metadata.annotations['{c.JOB_COMPLETION_INDEX}']"}
        },
    }


def torch_nproc(trainjob: TrainJob, runtime_resources: Dict) -> str:
    """PET_NPROC_PER_NODE as Trainer v2.3 sets it: the TrainJob's trainer.numProcPerNode;
    else `auto` (torchrun: one per GPU) when a node has GPUs; else the node's CPUs (at least
    1). The node's resources are the TrainJob's resourcesPerNode, else the runtime's."""
    trainer = trainjob.spec.trainer
    if trainer is not None and trainer.num_proc_per_node not in (None, "auto"):
        return str(trainer.num_proc_per_node)
    if gpus_per_node(trainjob, runtime_resources):
        return "auto"
    resources = _node_resources(trainjob, runtime_resources)
    return str(max(1, _per_node(resources, lambda name: name == "cpu")))


class PlainPolicy:
    """No framework: the trainer PodSet runs numNodes pods as they are."""

    name = "plain"

    def applies(self, ml: MLPolicy) -> bool:
        return not ml.named

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        return None


# The variables torchrun reads, which the torch policy sets (Trainer's reserved names).
TORCH_RESERVED = frozenset(
    {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
)


class TorchPolicy:
    """torchrun's PET_* environment on every trainer node, rank from the completion index."""

    name = "torch"

    def applies(self, ml: MLPolicy) -> bool:
        return ml.torch is not None

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        refuse_reserved_env(trainjob, TORCH_RESERVED, "torch")
        trainer = trainjob.spec.trainer
        if trainer is not None and trainer.command == ["tune", "run"]:
            # Trainer v2.3 rewrites this command (recipe, config, rendezvous) from the model
            # and the node count; run as written it would start no training.
            raise RuntimeSpecError(
                "spec.trainer.command: [tune, run] asks for Trainer's torchtune command "
                "rewriting, which this controller does not do; give the whole command (the "
                "runtime's own `tune run ...` runs when spec.trainer.command is unset)"
            )
        ps = _trainer_pod_set(info)
        ctr = _node_container(ps)
        nproc = torch_nproc(trainjob, ctr.get("resources") or {})
        master = pod_dns_name(info.trainjob, ps.name, 0, 0)
        pet: list[Dict] = [
            {"name": "PET_NNODES", "value": str(info.policy.num_nodes)},
            {"name": "PET_NPROC_PER_NODE", "value": str(nproc)},
            _completion_index_env("PET_NODE_RANK"),
            {"name": "PET_MASTER_ADDR", "value": master},
            {"name": "PET_MASTER_PORT", "value": str(c.TORCH_MASTER_PORT)},
        ]
        _set_env(ctr, pet)
        _add_port(ctr, c.TORCH_MASTER_PORT)
        # envInjection: the same PET_* (and master) variables in the runtime's other
        # containers it names, e.g. an init container that waits for the master.
        torch = info.policy.ml.torch
        for target in torch.env_injection.targets if torch and torch.env_injection else []:
            for name in target.container_names:
                found = _any_container(info, target.job_name, name)
                if found is None:
                    raise RuntimeSpecError(
                        "spec.mlPolicy.torch.envInjection: target replicatedJob "
                        f"{target.job_name!r} container {name!r} not found in the runtime"
                    )
                _set_env(found, json_copy(pet))


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
        slots = mpi_slots(trainjob, mpi.num_proc_per_node, _node_container(nodes))
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


def _rank_env_on_trainer(
    info: RuntimeInfo,
    trainjob: TrainJob,
    reserved: frozenset[str],
    policy: str,
    make_env: Callable[[PodSet, Dict], list[Dict]],
) -> None:
    """What the JAX and XGBoost policies do alike: refuse the variables Trainer v2.3 reserves
    for the policy in spec.trainer.env (`reserved`; none for JAX), then set theirs (`make_env`
    of the trainer PodSet and its node container) on every trainer node, over any of the same
    name, and have it listen on port 29500."""
    if reserved:
        refuse_reserved_env(trainjob, reserved, policy)
    ps = _trainer_pod_set(info)
    ctr = _node_container(ps)
    _set_env(ctr, make_env(ps, ctr))
    _add_port(ctr, c.TORCH_MASTER_PORT)


class JAXPolicy:
    """jax.distributed's environment on every trainer node (Trainer v2.3's JAX plugin): the
    number of processes (one per node), the process id from the completion index, and the
    coordinator, node 0, on port 29500."""

    name = "jax"

    def applies(self, ml: MLPolicy) -> bool:
        return ml.jax is not None

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        # Trainer v2.3 reserves none of these: a TrainJob that sets one is admitted, and the
        # policy's value is set over it, as Trainer sets it.
        def env(ps: PodSet, ctr: Dict) -> list[Dict]:
            coordinator = pod_dns_name(info.trainjob, ps.name, 0, 0)
            return [
                {"name": "JAX_NUM_PROCESSES", "value": str(ps.parallelism)},
                _completion_index_env("JAX_PROCESS_ID"),
                {
                    "name": "JAX_COORDINATOR_ADDRESS",
                    "value": f"{coordinator}:{c.TORCH_MASTER_PORT}",
                },
            ]

        _rank_env_on_trainer(info, trainjob, frozenset(), "JAX", env)


# The variables the XGBoost policy sets for its collective (Trainer's reserved names).
XGBOOST_RESERVED = frozenset(
    {"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"}
)


class XGBoostPolicy:
    """XGBoost's collective (Rabit) environment on every trainer node (Trainer v2.3's XGBoost
    plugin): the tracker on node 0, port 29500; the task id from the completion index; and
    the number of workers, nodes x GPUs per node (one per node without GPUs)."""

    name = "xgboost"

    def applies(self, ml: MLPolicy) -> bool:
        return ml.xgboost is not None

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        def env(ps: PodSet, ctr: Dict) -> list[Dict]:
            # GPUs from resourcesPerNode if the TrainJob sets it, else the runtime's container's
            per_node = gpus_per_node(trainjob, ctr.get("resources") or {}) or 1
            return [
                {"name": "DMLC_TRACKER_URI", "value": pod_dns_name(info.trainjob, ps.name, 0, 0)},
                {"name": "DMLC_TRACKER_PORT", "value": str(c.TORCH_MASTER_PORT)},
                _completion_index_env("DMLC_TASK_ID"),
                {"name": "DMLC_NUM_WORKER", "value": str(ps.parallelism * per_node)},
            ]

        _rank_env_on_trainer(info, trainjob, XGBOOST_RESERVED, "XGBoost", env)


class UnsupportedPolicy:
    """A policy Trainer v2.3 has and this controller does not run (flux): never a plain run
    in its place, a RuntimeInvalid condition naming it."""

    name = "unsupported"

    def applies(self, ml: MLPolicy) -> bool:
        return ml.flux is not None

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None:
        raise RuntimeSpecError(
            "mlPolicy.flux is not supported by this controller (supported: torch, mpi, jax, "
            "xgboost, or none); run it with Kubeflow Trainer's controller, or pick another "
            "runtime"
        )


# Most specific first: the first plugin that applies wins.
PLUGINS: list[MLPolicyPlugin] = [
    TorchPolicy(),
    MPIPolicy(),
    JAXPolicy(),
    XGBoostPolicy(),
    UnsupportedPolicy(),
    PlainPolicy(),
]


def select_plugin(ml: MLPolicy) -> MLPolicyPlugin:
    for plugin in PLUGINS:
        if plugin.applies(ml):
            return plugin
    raise RuntimeSpecError("no ML policy plugin applies")  # PlainPolicy always applies
