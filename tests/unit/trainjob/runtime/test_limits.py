"""trainjob/runtime/limits.py and the bounds it puts on the runtime framework, the quantity
parser's range, and trainjob/admission.py's runtime_refusal (pure)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from tests.support.builders import (
    ObjectEdit,
    container,
    edit,
    make_runtime,
    make_trainjob,
    mpi_runtime,
    replicated_job,
)
from trainjob.admission import Admitted, runtime_refusal
from trainjob.models import parse_trainjob
from trainjob.runtime import resolve_runtime_info
from trainjob.runtime.limits import CONFIGMAP_MAX_BYTES, MAX_NODES, digits_below
from trainjob.runtime.mlpolicies.mpi import hostfile_size
from trainjob_api.quantity import MAX_QUANTITY, parse_quantity
from trainjob_api.views import RuntimeView

Dict = dict[str, Any]


@pytest.mark.parametrize("n", [0, 1, 9, 10, 11, 99, 100, 101, 12345, 100000])
def test_digits_below_counts_the_digits_of_every_index(n: int) -> None:
    assert digits_below(n) == sum(len(str(i)) for i in range(n))


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel"])
@pytest.mark.parametrize("as_node", [False, True])
@pytest.mark.parametrize("nodes", [1, 2, 10, 11, 123])
def test_hostfile_size_is_the_size_of_the_hostfile_built(
    implementation: str, as_node: bool, nodes: int
) -> None:
    runtime = mpi_runtime(mpiImplementation=implementation, runLauncherAsNode=as_node)
    tj = make_trainjob("a-job", runtimeRef={"name": "mpi-runtime"}, trainer={"numNodes": nodes})
    info, problem = resolve_runtime_info(parse_trainjob(tj), RuntimeView(runtime))
    assert problem is None and info is not None
    hostfile = info.policy.extra_objects[0]["data"]["hostfile"]
    node_pods = max(nodes - 1, 1) if as_node else nodes
    line_end = " slots=4\n" if implementation == "OpenMPI" else ":4\n"
    launcher = "launcher" if as_node else None
    assert hostfile_size("a-job", "node", node_pods, launcher, line_end) == len(hostfile)


def _problem(trainjob: Dict, runtime: Dict) -> str:
    info, problem = resolve_runtime_info(parse_trainjob(trainjob), RuntimeView(runtime))
    assert info is None and problem is not None
    assert problem.reason == "RuntimeInvalid"
    return problem.message


def test_a_million_mpi_nodes_are_refused_without_building_anything_per_node() -> None:
    tj = make_trainjob(runtimeRef={"name": "mpi-runtime"}, trainer={"numNodes": 1_000_000})
    tracemalloc.start()
    message = _problem(tj, mpi_runtime())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert f"spec.trainer.numNodes: 1000000 is over {MAX_NODES}" in message
    # Without the bound, one pass built a 1,000,000-line hostfile (about 220 MiB): what is
    # allocated does not depend on the machine's load, so it is checked here; the time it
    # takes is a figure of benchmarks/tenant_limits.py.
    assert peak < 5 * 1024 * 1024, peak


def test_an_mpi_hostfile_over_the_configmap_limit_is_refused_by_its_size() -> None:
    tj = make_trainjob(runtimeRef={"name": "mpi-runtime"}, trainer={"numNodes": 90_000})
    message = _problem(tj, mpi_runtime())
    assert f"over the {CONFIGMAP_MAX_BYTES} a ConfigMap holds" in message
    assert "the MPI hostfile for 90000 hosts would be" in message


def test_names_too_long_for_their_jobs_and_pods_are_refused_naming_by_how_much() -> None:
    name = "n" * 55
    tj = make_trainjob(name, runtimeRef={"name": "torch-distributed"}, trainer={"numNodes": 2})
    message = _problem(tj, make_runtime())
    # `<55>-node-0` is 62: the Job fits; its pod `<55>-node-0-1` is 64.
    assert message.endswith(
        f"the pod hostname '{name}-node-0-1' of replicatedJob 'node' is 64 characters, over "
        "63; shorten the TrainJob's name by 1 or more"
    )
    ok = make_trainjob("n" * 54, runtimeRef={"name": "torch-distributed"}, trainer={"numNodes": 2})
    assert resolve_runtime_info(parse_trainjob(ok), RuntimeView(make_runtime()))[1] is None


def test_too_many_jobs_are_refused() -> None:
    runtime = make_runtime()
    edit(runtime).replicated_job("node", replicas=1001)
    tj = make_trainjob(runtimeRef={"name": "torch-distributed"})
    assert "1001 Jobs in all (the sum of replicas) is over 1000" in _problem(tj, runtime)


@pytest.mark.parametrize(
    "quantity", ["1e5000", "1e999999999", "9223372036854775808", "8Ei", "1e-99999999", 2**70]
)
def test_quantities_beyond_kubernetes_range_are_refused_not_computed(quantity: object) -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_quantity(quantity)


def test_quantities_within_range_keep_their_value() -> None:
    assert parse_quantity("9223372036854775807") == MAX_QUANTITY
    assert parse_quantity("500m") * 1000 == 500
    assert parse_quantity("7Ei") == 7 * 2**60


def test_a_huge_quantity_in_resources_per_node_is_a_condition_naming_the_field() -> None:
    tj = make_trainjob(
        runtimeRef={"name": "torch-distributed"},
        trainer={"resourcesPerNode": {"requests": {"cpu": "1e5000"}}},
    )
    message = _problem(tj, make_runtime())
    assert "spec.trainer.resourcesPerNode.requests[cpu]: '1e5000' is not a valid quantity" in (
        message
    )


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("resources", {"limits": {"cpu": "1e5000"}}, "pod resources.limits[cpu]: '1e5000'"),
        ("resources", {"requests": ["cpu"]}, "pod: resources.requests must be a map"),
        ("overhead", {"memory": "-1Gi"}, "pod overhead[memory]: '-1Gi'"),
    ],
)
def test_a_bad_quantity_of_the_pod_itself_is_a_condition_naming_the_field(
    field: str, value: object, named: str
) -> None:
    """The pod's own resources and its overhead count in `pod_requests` (the fit, a
    PodGroup's minResources) as its containers' do: a tenant's runtime with an unreadable one
    failed every worker pass that built its PodGroup, with a traceback and no condition."""
    runtime = make_runtime()
    edit(runtime).pod_spec("node", **{field: value})
    tj = make_trainjob(runtimeRef={"name": "torch-distributed"})
    assert f"replicatedJob 'node' {named}" in _problem(tj, runtime)


@pytest.mark.parametrize(
    ("policy", "env"),
    [
        ({"numNodes": 1, "torch": {}}, "PET_NNODES"),
        ({"numNodes": 1, "xgboost": {}}, "DMLC_NUM_WORKER"),
    ],
)
def test_admission_refuses_env_the_runtime_sets_itself(policy: Dict, env: str) -> None:
    tj = make_trainjob(
        runtimeRef={"name": "torch-distributed"}, trainer={"env": [{"name": env, "value": "9"}]}
    )
    why = runtime_refusal(
        Admitted({"object": tj, "namespace": "ns"}), RuntimeView(make_runtime(ml_policy=policy))
    )
    assert why is not None and f"spec.trainer.env: {env} are set by the" in why


def test_admission_accepts_a_trainjob_whose_runtime_is_not_there_yet_or_fits() -> None:
    tj = make_trainjob(runtimeRef={"name": "torch-distributed"}, trainer={"numNodes": 2})
    assert runtime_refusal(Admitted({"object": tj, "namespace": "ns"}), None) is None
    assert (
        runtime_refusal(Admitted({"object": tj, "namespace": "ns"}), RuntimeView(make_runtime()))
        is None
    )


def test_admission_judges_a_trainjob_without_a_name_yet() -> None:
    tj = make_trainjob(runtimeRef={"name": "torch-distributed"})
    edit(tj).metadata({"generateName": "job-"})
    assert (
        runtime_refusal(Admitted({"object": tj, "namespace": "ns"}), RuntimeView(make_runtime()))
        is None
    )


def test_admission_counts_the_five_characters_the_api_server_adds_to_a_generated_name() -> None:
    # 49 + 5 characters make the pod hostname "<name>-node-0-0" 63 long: the most that fits.
    tj = make_trainjob(runtimeRef={"name": "torch-distributed"})
    edit(tj).metadata({"generateName": "g" * 49})
    assert (
        runtime_refusal(Admitted({"object": tj, "namespace": "ns"}), RuntimeView(make_runtime()))
        is None
    )
    edit(tj).metadata({"generateName": "g" * 50})
    why = runtime_refusal(Admitted({"object": tj, "namespace": "ns"}), RuntimeView(make_runtime()))
    assert why == (
        "ClusterTrainingRuntime 'torch-distributed' cannot run this TrainJob: metadata.name: "
        f"the pod hostname '{'g' * 50}xxxxx-node-0-0' of replicatedJob 'node' is 64 "
        "characters, over 63; shorten the TrainJob's name by 1 or more"
    )


def test_admission_refuses_a_trainjob_the_models_cannot_read_naming_the_field() -> None:
    tj = make_trainjob(runtimeRef={"name": "torch-distributed"}, trainer={"numNodes": "two"})
    why = runtime_refusal(Admitted({"object": tj, "namespace": "ns"}), RuntimeView(make_runtime()))
    assert why is not None
    assert why.startswith("invalid TrainJob: spec.trainer.numNodes: Input should be a valid")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda rt: ObjectEdit(rt).job_spec("node", template=[]), "spec.template must be"),
        (lambda rt: ObjectEdit(rt).job_spec("node", parallelism="2"), "spec.parallelism"),
        (
            lambda rt: ObjectEdit(rt).pod_spec("node", containers={}),
            "spec.template.spec.containers must be a list",
        ),
        (
            lambda rt: ObjectEdit(rt).pod_spec("node", containers=[container(env=[1])]),
            "spec.template.spec.containers[0].env[0] must be an object",
        ),
    ],
)
def test_a_runtime_template_of_the_wrong_shape_is_a_problem_naming_the_field(
    edit: Any, field: str
) -> None:
    """Shapes the fuzzer (test_fuzz_admission.py) found raising in the framework before."""
    runtime = make_runtime()
    edit(runtime)
    tj = make_trainjob(runtimeRef={"name": "torch-distributed"})
    message = _problem(tj, runtime)
    assert f"replicatedJob 'node' template.{field}" in message, message


def _chain(n: int, *, loop: bool = False) -> Dict:
    """A runtime whose replicatedJobs r0 .. r{n-1} each depend on the next (the last on r0
    when `loop`), beside the trainer's node."""
    rjs = [
        replicated_job(
            f"r{i}",
            None,
            [container("c")],
            dependsOn=[{"name": f"r{(i + 1) % n}", "status": "Complete"}]
            if i < n - 1 or loop
            else [],
        )
        for i in range(n)
    ]
    return make_runtime(replicated_jobs=[*rjs, replicated_job("node", "trainer", [container()])])


def test_a_chain_of_dependencies_longer_than_pythons_recursion_limit_is_judged() -> None:
    """A tenant's runtime with a 998-long dependsOn chain raised RecursionError in every pass."""
    tj = parse_trainjob(make_trainjob(runtimeRef={"name": "torch-distributed"}))
    info, problem = resolve_runtime_info(tj, RuntimeView(_chain(998)))
    assert problem is None and info is not None and len(info.pod_sets) == 999
    message = _problem(
        make_trainjob(runtimeRef={"name": "torch-distributed"}), _chain(998, loop=True)
    )
    assert message.endswith(
        "the replicatedJobs' dependsOn form a cycle: "
        + " -> ".join([*(f"r{i}" for i in range(998)), "r0"])
    )


def test_numnodes_over_the_limit_names_whose_number_it_is() -> None:
    runtime = mpi_runtime()
    edit(runtime).spec(mlPolicy={**runtime["spec"]["mlPolicy"], "numNodes": 200_000})
    message = _problem(make_trainjob(runtimeRef={"name": "mpi-runtime"}), runtime)
    assert "the runtime's mlPolicy.numNodes: 200000 is over 100000" in message


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("overhead", ["cpu"], "pod: overhead must be a map"),
        ("resources", ["cpu"], "pod: resources.requests must be a map"),
    ],
)
def test_a_pod_field_that_is_no_map_is_a_condition_not_a_traceback(
    field: str, value: object, named: str
) -> None:
    runtime = make_runtime()
    edit(runtime).pod_spec("node", **{field: value})
    tj = make_trainjob(runtimeRef={"name": "torch-distributed"})
    assert f"replicatedJob 'node' {named}" in _problem(tj, runtime)


def test_a_bad_pod_level_quantity_is_named_where_the_runtime_wrote_it() -> None:
    runtime = make_runtime()
    edit(runtime).pod_spec("node", resources={"requests": {"cpu": "1e5000"}})
    tj = make_trainjob(
        runtimeRef={"name": "torch-distributed"},
        trainer={"resourcesPerNode": {"requests": {"cpu": "2"}}},
    )
    message = _problem(tj, runtime)
    assert "replicatedJob 'node' pod resources.requests[cpu]: '1e5000'" in message
    assert "resourcesPerNode" not in message
