"""The pure runtime framework: TrainJob + runtime -> PodSets, policies, and the Jobs built."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubeflow_trainer_api.models.trainer_v1alpha1_cluster_training_runtime import (
    TrainerV1alpha1ClusterTrainingRuntime,
)
from kubeflow_trainer_api.models.trainer_v1alpha1_train_job import TrainerV1alpha1TrainJob

from tests.support.builders import (
    OWNER,
    TrainJobBuilder,
    container,
    edit,
    initializer_runtime,
    make_runtime,
    make_trainjob,
    mpi_runtime,
    replicated_job,
)
from tests.unit.trainjob.runtime import info_for
from trainjob.models import parse_runtime, parse_trainjob
from trainjob.naming import owner_of
from trainjob.runtime import (
    RuntimeProblem,
    RuntimeSpecError,
    build_runtime_info,
    resolve_runtime_info,
)
from trainjob_api.views import ObjectView, RuntimeView
from worker_controller.builders import build_job, build_service

Dict = dict[str, Any]


RANK_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
POD_LABELS = {
    "jobset.sigs.k8s.io/jobset-name": "tj",
    "trainjob.dev/trainjob-name": "tj",
    "trainjob.dev/managed-by": "worker-controller",
    "jobset.sigs.k8s.io/replicatedjob-name": "node",
    "jobset.sigs.k8s.io/job-index": "0",
    "trainjob.dev/podset": "node",
    "jobset.sigs.k8s.io/restart-attempt": "0",
}


def test_torch_three_nodes_builds_one_indexed_job_with_pet_env() -> None:
    tj = make_trainjob(
        trainer={
            "numNodes": 3,
            "image": "pytorch:2",
            "command": ["torchrun", "train.py"],
            "env": [{"name": "EPOCHS", "value": "2"}],
            "resourcesPerNode": {"requests": {"cpu": "2", "memory": "4Gi"}},
        }
    )
    info = info_for(tj, make_runtime())
    assert [(p.name, p.role, p.count) for p in info.pod_sets] == [("node", "trainer", 3)]
    assert info.policy.ml_policy == "torch"
    node = info.pod_sets[0].container("node")
    assert node["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"}}

    job = build_job(info, info.pod_sets[0], 0, owner_of(ObjectView(tj)), suspend=False)
    assert job == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "tj-node-0",
            "namespace": "ns",
            "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer", **POD_LABELS},
            "annotations": {},
            "ownerReferences": [OWNER],
        },
        "spec": {
            "completionMode": "Indexed",
            "parallelism": 3,
            "completions": 3,
            "suspend": False,
            "template": {
                "metadata": {
                    "labels": {
                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
                        **POD_LABELS,
                    },
                    "annotations": {},
                },
                "spec": {
                    "containers": [
                        {
                            "name": "node",
                            "image": "pytorch:2",
                            "command": ["torchrun", "train.py"],
                            "env": [
                                {"name": "EPOCHS", "value": "2"},
                                {"name": "PET_NNODES", "value": "3"},
                                {"name": "PET_NPROC_PER_NODE", "value": "2"},
                                {
                                    "name": "PET_NODE_RANK",
                                    "valueFrom": {"fieldRef": {"fieldPath": RANK_PATH}},
                                },
                                {"name": "PET_MASTER_ADDR", "value": "tj-node-0-0.tj"},
                                {"name": "PET_MASTER_PORT", "value": "29500"},
                            ],
                            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
                            "ports": [{"containerPort": 29500, "protocol": "TCP"}],
                        }
                    ],
                    "subdomain": "tj",
                    "restartPolicy": "OnFailure",
                },
            },
        },
    }
    assert build_service(info, OWNER) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "tj",
            "namespace": "ns",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "tj",
                "trainjob.dev/trainjob-name": "tj",
                "trainjob.dev/managed-by": "worker-controller",
            },
            "ownerReferences": [OWNER],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {"jobset.sigs.k8s.io/jobset-name": "tj"},
        },
    }


def test_num_nodes_from_runtime_unless_trainjob_overrides() -> None:
    runtime = make_runtime(ml_policy={"numNodes": 4, "torch": {}})
    assert info_for(make_trainjob(), runtime).pod_sets[0].count == 4
    assert info_for(make_trainjob(trainer={"numNodes": 2}), runtime).pod_sets[0].count == 2


def test_torch_nproc_is_explicit_else_auto_with_gpus_else_the_cpus_as_in_trainer_2_3() -> None:
    def nproc(trainer: Dict, runtime: Dict | None = None) -> str:
        env = info_for(make_trainjob(trainer=trainer), runtime or make_runtime()).pod_sets[0]
        return next(
            e["value"] for e in env.container("node")["env"] if e["name"] == "PET_NPROC_PER_NODE"
        )

    assert nproc({"numProcPerNode": 2}) == "2"
    assert nproc({"resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}}) == "auto"
    assert nproc({"resourcesPerNode": {"requests": {"cpu": "3"}}}) == "3"
    assert nproc({"resourcesPerNode": {"limits": {"cpu": "500m"}}}) == "1"  # rounded up
    assert nproc({}) == "1"  # nothing asked for: one process
    # Without resourcesPerNode, the runtime's node container decides.
    rich = make_runtime(
        replicated_jobs=[
            replicated_job("node", "trainer", [container(resources={"requests": {"cpu": "8"}})])
        ]
    )
    assert nproc({}, rich) == "8"


def test_mpi_launcher_nodes_hostfile_and_ssh() -> None:
    info = info_for(make_trainjob(runtimeRef={"name": "mpi-runtime"}), mpi_runtime())
    assert info.policy.ml_policy == "mpi"
    assert [(p.name, p.count) for p in info.pod_sets] == [("launcher", 1), ("node", 2)]
    assert info.policy.extra_objects == [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "tj-mpi-hostfile", "namespace": "ns"},
            "data": {"hostfile": "tj-node-0-0.tj slots=4\ntj-node-0-1.tj slots=4\n"},
        }
    ]
    assert info.policy.ssh_secret_name == "tj-mpi-ssh-auth"
    launcher = info.pod_set("launcher").container("node")
    assert {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"} in launcher[
        "env"
    ]
    assert launcher["volumeMounts"] == [
        {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"},
        {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
    ]
    node = info.pod_set("node").container("node")
    assert node["volumeMounts"] == [{"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"}]
    assert "env" not in node


def test_mpi_launcher_as_node_lists_launcher_first() -> None:
    info = info_for(
        make_trainjob(runtimeRef={"name": "mpi-runtime"}, trainer={"numNodes": 3}),
        mpi_runtime(runLauncherAsNode=True, mpiImplementation="Intel"),
    )
    assert [(p.name, p.count) for p in info.pod_sets] == [("launcher", 1), ("node", 2)]
    assert info.policy.extra_objects[0]["data"]["hostfile"] == (
        "tj-launcher-0-0.tj:4\ntj-node-0-0.tj:4\ntj-node-0-1.tj:4\n"
    )


def test_initializers_get_storage_uri_env_and_secret_and_keep_depends_on() -> None:
    tj = make_trainjob(
        initializer={
            "dataset": {
                "storageUri": "hf://tatsu-lab/alpaca",
                "env": [{"name": "A", "value": "1"}],
                "secretRef": {"name": "hf-token"},
            },
            "model": {"storageUri": "hf://meta/llama"},
        }
    )
    info = info_for(tj, initializer_runtime())
    assert [(p.name, p.role, [d.name for d in p.depends_on]) for p in info.pod_sets] == [
        ("dataset-initializer", "dataset-initializer", []),
        ("model-initializer", "model-initializer", ["dataset-initializer"]),
        ("node", "trainer", ["model-initializer"]),
    ]
    dataset = info.pod_set("dataset-initializer").container("dataset-initializer")
    assert dataset == {
        "name": "dataset-initializer",
        "image": "dataset-init:1",
        "env": [
            {"name": "STORAGE_URI", "value": "hf://tatsu-lab/alpaca"},
            {"name": "A", "value": "1"},
        ],
        "envFrom": [{"secretRef": {"name": "hf-token"}}],
    }
    model = info.pod_set("model-initializer").container("model-initializer")
    assert model["env"] == [{"name": "STORAGE_URI", "value": "hf://meta/llama"}]


def test_runtime_without_trainer_step_is_refused_for_torch() -> None:
    runtime = make_runtime(replicated_jobs=[replicated_job("work", None, [container()])])
    with pytest.raises(RuntimeSpecError, match="trainjob-ancestor-step=trainer"):
        info_for(make_trainjob(), runtime)


def test_plain_runtime_runs_what_it_describes() -> None:
    runtime = make_runtime(
        ml_policy={"numNodes": 2},
        replicated_jobs=[
            replicated_job("node", "trainer", [container(resources={"limits": {"cpu": "500m"}})])
        ],
    )
    info = info_for(make_trainjob(), runtime)
    assert info.policy.ml_policy == "plain"
    assert info.pod_sets[0].count == 2
    assert info.pod_sets[0].container("node")["resources"] == {"limits": {"cpu": "500m"}}
    assert "env" not in info.pod_sets[0].container("node")


EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
OFFICIAL = {
    "TrainJob": TrainerV1alpha1TrainJob,
    "ClusterTrainingRuntime": TrainerV1alpha1ClusterTrainingRuntime,
}


# The tenants' examples and the runtimes they run on (examples/runtimes/), not the
# platform's queues and install files.
EXAMPLE_FILES = sorted([*EXAMPLES.glob("*.yaml"), *EXAMPLES.glob("runtimes/*.yaml")])
DIFFERENCES = (EXAMPLES.parent / "docs" / "operators" / "differences.md").read_text()
# Where examples/ still differs from Trainer v2.3's models, each with the words that name it in
# docs/operators/differences.md: v2.3 moved numProcPerNode from a runtime's torch policy to the
# TrainJob (trainer.numProcPerNode), and its models drop the runtime field, which our CRD still
# accepts and some examples still set (the framework reads the TrainJob's, as v2.3 does).
V23_DIFFERENCES = {("spec", "mlPolicy", "torch", "numProcPerNode"): "mlPolicy.torch.numProcPerNode"}


def _has(doc: Dict, path: tuple[str, ...]) -> bool:
    node: Any = doc
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def test_the_examples_are_found_and_each_known_difference_is_named_in_the_docs() -> None:
    assert len(EXAMPLE_FILES) >= 4, EXAMPLE_FILES
    for path, words in V23_DIFFERENCES.items():
        assert words in DIFFERENCES, (
            f"{'.'.join(path)} is not named in docs/operators/differences.md"
        )


def without(doc: Dict, paths: list[tuple[str, ...]]) -> Dict:
    out = copy.deepcopy(doc)
    for path in paths:
        parent = out
        for key in path[:-1]:
            parent = parent.get(key) or {}
        parent.pop(path[-1], None)
    return out


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_examples_round_trip_through_the_official_trainer_models(path: Path) -> None:
    """What examples/ shows users is what the upstream Python models (the Kubeflow SDK's)
    read and write back, field for field, and what our own models accept; the only fields
    the models drop are the differences docs/operators/differences.md names."""
    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] not in OFFICIAL:
            continue  # the Secrets, ConfigMaps and claims a job uses
        official = OFFICIAL[doc["kind"]].from_dict(doc)
        assert official is not None
        known = [p for p in V23_DIFFERENCES if _has(doc, p)]
        assert official.to_dict() == without(doc, known)
        parse = parse_trainjob if doc["kind"] == "TrainJob" else parse_runtime
        assert parse(doc).metadata.name == doc["metadata"]["name"]


def _scripts(value: Any) -> list[str]:
    """The Python scripts an example's commands write with a `<<'SCRIPT'` heredoc."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _scripts(v)]
    if isinstance(value, list):
        return [s for v in value for s in _scripts(v)]
    if isinstance(value, str) and "<<'SCRIPT'\n" in value:
        return [value.split("<<'SCRIPT'\n", 1)[1].split("\nSCRIPT", 1)[0]]
    return []


SCRIPTS = [
    (path.name, script)
    for path in EXAMPLE_FILES
    for doc in yaml.safe_load_all(path.read_text())
    for script in _scripts(doc)
]


def test_the_examples_with_scripts_are_found() -> None:
    """The examples that write a training script: the test below has something to read."""
    assert {name for name, _ in SCRIPTS} >= {
        "progress-sdk.yaml",
        "torch-ddp-cpu.yaml",
        "mpi-cpu.yaml",
    }, SCRIPTS


@pytest.mark.parametrize(("name", "script"), SCRIPTS, ids=[name for name, _ in SCRIPTS])
def test_the_scripts_in_the_examples_are_python(name: str, script: str) -> None:
    compile(script, f"{name} (heredoc)", "exec")


def test_our_factories_write_what_the_official_models_read() -> None:
    for doc in (make_trainjob(trainer={"numNodes": 2}), make_runtime()):
        official = OFFICIAL[doc["kind"]].from_dict(doc)
        assert official is not None and official.to_dict() == doc


def test_the_beds_demo_trainjob_runs_on_the_example_runtime() -> None:
    tj = yaml.safe_load(
        (EXAMPLES.parent / "clusters" / "manifests" / "trainjob-kwok.yaml").read_text()
    )
    edit(tj).namespace("ns").uid("u")
    runtime = yaml.safe_load((EXAMPLES / "runtimes" / "torch-distributed.yaml").read_text())
    info = info_for(tj, runtime)
    assert [(p.name, p.count) for p in info.pod_sets] == [("node", 3)]
    node = info.pod_sets[0].container("node")
    assert node["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}}
    assert node["command"] == ["torchrun", "train.py"]


@pytest.mark.parametrize("bad", ["lots", "-1Gi", "abc", "1.2.3", ""])
def test_bad_quantities_in_resources_per_node_name_the_field(bad: str) -> None:
    tj = make_trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": bad}}})
    with pytest.raises(RuntimeSpecError) as err:
        info_for(tj, make_runtime())
    assert f"spec.trainer.resourcesPerNode.requests[cpu]: {bad!r} is not a valid quantity" in str(
        err.value
    )


def test_bad_quantity_in_the_runtime_names_the_replicated_job_and_container() -> None:
    runtime = make_runtime(
        replicated_jobs=[
            replicated_job("node", "trainer", [container(resources={"limits": {"memory": "much"}})])
        ]
    )
    with pytest.raises(RuntimeSpecError, match=r"replicatedJob 'node' container 'node' "):
        info_for(make_trainjob(), runtime)


def test_depends_on_cycles_are_refused_naming_the_cycle() -> None:
    runtime = make_runtime(
        replicated_jobs=[
            replicated_job(
                "a", None, [container("a")], dependsOn=[{"name": "b", "status": "Complete"}]
            ),
            replicated_job(
                "b", None, [container("b")], dependsOn=[{"name": "a", "status": "Complete"}]
            ),
            replicated_job(
                "node", "trainer", [container()], dependsOn=[{"name": "b", "status": "Complete"}]
            ),
        ]
    )
    with pytest.raises(RuntimeSpecError, match="dependsOn form a cycle: a -> b -> a"):
        info_for(make_trainjob(), runtime)


def test_resolve_runtime_info_says_why_in_the_words_both_controllers_report() -> None:
    tj = parse_trainjob(make_trainjob())
    assert resolve_runtime_info(tj, None) == (
        None,
        RuntimeProblem(
            "RuntimeNotFound",
            "ClusterTrainingRuntime 'torch-distributed' not found; the TrainJob starts once it "
            "exists",
        ),
    )
    bad = make_runtime(replicated_jobs=[replicated_job("work", None, [container()])])
    info, problem = resolve_runtime_info(tj, RuntimeView(bad))
    assert info is None and problem is not None and problem.reason == "RuntimeInvalid"
    assert problem.message.startswith("ClusterTrainingRuntime 'torch-distributed' cannot run")
    info, problem = resolve_runtime_info(tj, RuntimeView(make_runtime()))
    assert info is not None and problem is None


def test_a_queued_trainjob_refuses_more_pod_sets_than_a_kueue_workload_holds() -> None:
    many = make_runtime(
        replicated_jobs=[replicated_job("node", "trainer", [container()])]
        + [replicated_job(f"aux-{i}", None, [container("aux")]) for i in range(18)]
    )
    unqueued = parse_trainjob(make_trainjob())
    info, problem = resolve_runtime_info(unqueued, RuntimeView(many))
    assert info is not None and len(info.pod_sets) == 19 and problem is None
    queued = parse_trainjob(TrainJobBuilder().queue("q").obj())
    info, problem = resolve_runtime_info(queued, RuntimeView(many))
    assert info is None and problem is not None and problem.reason == "RuntimeInvalid"
    assert "spec.template.spec.replicatedJobs has 19 entries" in problem.message
    assert "at most 18 PodSets" in problem.message


def test_resources_per_node_merge_into_the_runtime_containers_as_trainer_does() -> None:
    base = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}}
    runtime = make_runtime(
        replicated_jobs=[replicated_job("node", "trainer", [container(resources=base)])]
    )
    tj = make_trainjob(
        trainer={"resourcesPerNode": {"requests": {"cpu": "4", "nvidia.com/gpu": 1}}}
    )
    node = info_for(tj, runtime).pod_sets[0].container("node")
    assert node["resources"] == {
        "requests": {"cpu": "4", "memory": "2Gi", "nvidia.com/gpu": 1},
        "limits": {"memory": "4Gi"},
    }
    # A null removes what the runtime set; the runtime object itself is left as it was.
    tj = make_trainjob(trainer={"resourcesPerNode": {"limits": {"memory": None}}})
    node = info_for(tj, runtime).pod_sets[0].container("node")
    assert node["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}}
    assert (
        runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
            "spec"
        ]["containers"][0]["resources"]
        == base
    )


def test_a_bad_runtime_quantity_is_named_in_the_runtime_not_in_resources_per_node() -> None:
    bad = {"requests": {"memory": "lots"}}
    runtime = make_runtime(
        replicated_jobs=[replicated_job("node", "trainer", [container(resources=bad)])]
    )
    tj = make_trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "2"}}})
    with pytest.raises(RuntimeSpecError) as exc:
        info_for(tj, runtime)
    assert "replicatedJob 'node' container 'node' resources.requests[memory]" in str(exc.value)


def test_env_injection_gives_the_named_containers_the_pet_variables_too() -> None:
    node = replicated_job(
        "node",
        "trainer",
        [container(), container("sidecar")],
    )
    targets = [{"jobName": "node", "containerNames": ["wait", "sidecar"]}]
    runtime = make_runtime(
        ml_policy={"numNodes": 2, "torch": {"envInjection": {"targets": targets}}},
        replicated_jobs=[node],
    )
    edit(runtime).pod_spec("node", initContainers=[container("wait")])
    ps = info_for(make_trainjob(), runtime).pod_sets[0]
    spec = ps.pod_template["spec"]
    main = {e["name"]: e for e in ps.container("node")["env"]}
    for ctr in (spec["initContainers"][0], spec["containers"][1]):
        assert {e["name"]: e for e in ctr["env"]} == main, ctr["name"]
    assert "ports" not in spec["containers"][1]  # only the node container serves the master port
    missing = make_runtime(
        ml_policy={
            "numNodes": 1,
            "torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["x"]}]}},
        }
    )
    with pytest.raises(
        RuntimeSpecError, match="envInjection: target replicatedJob 'node' container 'x'"
    ):
        info_for(make_trainjob(), missing)


def test_torchruns_reserved_variables_in_trainer_env_are_refused_naming_them() -> None:
    tj = make_trainjob(
        trainer={"env": [{"name": "PET_NNODES", "value": "9"}, {"name": "EPOCHS", "value": "1"}]}
    )
    with pytest.raises(RuntimeSpecError, match=r"spec.trainer.env: PET_NNODES are set by"):
        info_for(tj, make_runtime())
    plain = make_runtime(ml_policy={"numNodes": 1})  # no torch: nothing reserved
    assert info_for(tj, plain).pod_sets[0].container("node")["env"][0]["value"] == "9"


@pytest.mark.parametrize(
    ("ml_policy", "variable", "refused"),
    [
        ({"mpi": {}}, "OMPI_MCA_orte_set_default_slots", True),
        ({"xgboost": {}}, "DMLC_NUM_WORKER", True),
        # Trainer v2.3 reserves none for JAX: admitted, and its value set over the user's
        ({"jax": {}}, "JAX_NUM_PROCESSES", "overwritten"),
        ({"torch": {}}, "RANK", False),  # torchrun's own names only
        ({"numNodes": 1}, "PET_MASTER_ADDR", False),
        ({"xgboost": {}}, "PET_NNODES", False),
    ],
)
def test_each_policy_refuses_only_the_variables_trainer_reserves_for_it(
    ml_policy: Dict, variable: str, refused: bool | str
) -> None:
    tj = make_trainjob(trainer={"env": [{"name": variable, "value": "9"}]})
    runtime = make_runtime(ml_policy=ml_policy)
    if "mpi" in ml_policy:
        runtime = make_runtime(
            ml_policy=ml_policy,
            replicated_jobs=[
                replicated_job("launcher", "trainer", [container()]),
                replicated_job("node", None, [container()]),
            ],
        )
    if refused == "overwritten":
        env = info_for(tj, runtime).pod_sets[0].container("node")["env"]
        assert [e for e in env if e["name"] == variable] == [{"name": variable, "value": "1"}]
    elif refused:
        with pytest.raises(RuntimeSpecError, match=rf"spec.trainer.env: {variable} are set by"):
            info_for(tj, runtime)
    else:
        env = info_for(tj, runtime).pod_sets[0].container("node")["env"]
        assert {"name": variable, "value": "9"} in env


def test_a_policy_this_controller_does_not_run_is_refused_never_run_plain() -> None:
    runtime = make_runtime(ml_policy={"flux": {"numProcPerNode": 1}})
    info, problem = resolve_runtime_info(parse_trainjob(make_trainjob()), RuntimeView(runtime))
    assert info is None and problem is not None and problem.reason == "RuntimeInvalid"
    assert "mlPolicy.flux is not supported by this controller" in problem.message


def test_torchtunes_tune_run_command_is_refused_not_run_without_its_rewriting() -> None:
    tj = make_trainjob(trainer={"command": ["tune", "run"]})
    with pytest.raises(RuntimeSpecError, match=r"spec.trainer.command: \[tune, run\]"):
        info_for(tj, make_runtime())


def pod_spec(job: Dict) -> Dict:
    spec: Dict = job["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("as_node", [True, False])
def test_a_launcher_run_as_a_node_gives_the_nodes_the_trainers_env_and_resources_only(
    as_node: bool,
) -> None:
    # Trainer's DeepSpeed shape: the launcher is the trainer step, `node` carries no step.
    runtime = make_runtime(
        "deepspeed",
        ml_policy={"numNodes": 3, "mpi": {"numProcPerNode": 1, "runLauncherAsNode": as_node}},
        replicated_jobs=[
            replicated_job("launcher", "trainer", [container(image="ds:1")]),
            replicated_job("node", None, [container(image="ds:1")]),
        ],
    )
    trainer = {
        "image": "mine:2",
        "env": [{"name": "A", "value": "1"}],
        "resourcesPerNode": {"limits": {"cpu": "2"}},
    }
    info = info_for(make_trainjob(runtimeRef={"name": "deepspeed"}, trainer=trainer), runtime)
    launcher, node = (
        info.pod_set("launcher").container("node"),
        info.pod_set("node").container("node"),
    )
    assert launcher is not None and node is not None
    assert launcher["image"] == "mine:2" and {"name": "A", "value": "1"} in launcher["env"]
    assert node["image"] == "ds:1"  # its own image whatever spec.trainer says
    if as_node:
        assert {"name": "A", "value": "1"} in node["env"]
        assert node["resources"] == {"limits": {"cpu": "2"}}
    else:
        assert "env" not in node and "resources" not in node


def test_a_success_policy_naming_a_replicated_job_the_runtime_lacks_is_refused() -> None:
    runtime = make_runtime()
    edit(runtime).template_spec(successPolicy={"operator": "All", "targetReplicatedJobs": ["nope"]})
    with pytest.raises(RuntimeSpecError, match="targets replicatedJob 'nope'"):
        info_for(make_trainjob(), runtime)


def test_a_replicated_job_with_a_null_pod_spec_is_read_as_an_empty_one() -> None:
    # Absent and null are one to the API: no container named node, which the ML policy needs.
    runtime = make_runtime()
    edit(runtime).job_spec("node", template={"spec": None})
    with pytest.raises(RuntimeSpecError, match="has no container named 'node'"):
        info_for(make_trainjob(), runtime)


def test_a_claim_volume_goes_only_to_the_pods_that_mount_it() -> None:
    """A ReadWriteOnce claim in pods that do not use it would hold them to its node."""
    mounted = container(volumeMounts=[{"name": "data", "mountPath": "/data"}])
    runtime = make_runtime(
        replicated_jobs=[
            replicated_job("node", "trainer", [mounted]),
            replicated_job("other", None, [container()]),
        ]
    )
    template = {"metadata": {"name": "data"}, "spec": {}}
    edit(runtime).template_spec(volumeClaimPolicies=[{"templates": [template]}])
    info = info_for(make_trainjob(), runtime)
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "data-tj"}}
    assert info.pod_set("node").pod_template["spec"]["volumes"] == [claim]
    assert "volumes" not in info.pod_set("other").pod_template["spec"]


def test_the_trainer_and_an_initializer_edit_containers_never_init_containers() -> None:
    """`node` only as an init container: the trainer's image is refused, not put on it; an
    initializer whose container is an init container only is refused too."""
    runtime = make_runtime(
        ml_policy={"numNodes": 1},
        replicated_jobs=[replicated_job("node", "trainer", [container("main")])],
    )
    edit(runtime).pod_spec("node", initContainers=[container("node", image="init:1")])
    tj = make_trainjob(trainer={"image": "mine:2"})
    with pytest.raises(RuntimeSpecError, match=r"spec\.trainer sets the training container, but"):
        info_for(tj, runtime)
    init = initializer_runtime()
    edit(init).pod_spec(
        "dataset-initializer",
        containers=[container("main")],
        initContainers=[container("dataset-initializer")],
    )
    dataset = make_trainjob(initializer={"dataset": {"storageUri": "hf://x/y"}})
    with pytest.raises(RuntimeSpecError, match="has no container of that name"):
        info_for(dataset, init)


@pytest.mark.parametrize("field", ["command", "args"])
def test_an_empty_trainer_command_or_args_clears_the_runtimes(field: str) -> None:
    """Trainer sets them when given (not nil), an empty list included."""
    runtime = make_runtime(
        ml_policy={"numNodes": 1},
        replicated_jobs=[replicated_job("node", "trainer", [container(**{field: ["run"]})])],
    )
    node = info_for(make_trainjob(trainer={field: []}), runtime).pod_sets[0].container("node")
    assert node is not None and node[field] == []


def test_a_patch_leaves_the_parsed_runtime_as_it_was_for_the_next_trainjob() -> None:
    """The caches keep one parsed runtime for every TrainJob on it: a patch on its JobSet's
    labels is the patched TrainJob's alone."""
    runtime = parse_runtime(edit(make_runtime()).template_metadata({"labels": {"a": "1"}}).obj())
    meta = {"labels": {"a": None, "patched": "yes"}}
    patch = {"manager": "user.example/p", "trainingRuntimeSpec": {"template": {"metadata": meta}}}
    patched = build_runtime_info(parse_trainjob(make_trainjob(runtimePatches=[patch])), runtime)
    assert patched.labels == {"patched": "yes"}
    plain = build_runtime_info(parse_trainjob(make_trainjob("other")), runtime)
    assert plain.labels == {"a": "1"}
