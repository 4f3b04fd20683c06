"""Each pod group plugin's table tests (trainjob/runtime/podgroups/), and what they share: a
runtime with a podGroupPolicy and a TrainJob on it, made into the RuntimeInfo."""

from __future__ import annotations

from typing import Any

from kubebase.objects import Dict
from tests.support.builders import container, edit, make_runtime, make_trainjob, replicated_job
from trainjob.models import parse_trainjob
from trainjob.runtime import RuntimeInfo, RuntimeProblem, resolve_runtime_info
from trainjob_api.views import RuntimeView

# How each scheduler's pods name their group: (podGroupPolicy member, metadata field, key).
GROUP_NAMED_BY = [
    ("coscheduling", "labels", "scheduling.x-k8s.io/pod-group"),
    ("volcano", "annotations", "scheduling.k8s.io/group-name"),
]
RESOURCES = {"requests": {"cpu": "1500m", "memory": "2Gi"}, "limits": {"cpu": "2"}}


def gang_runtime(policy: Dict | None, **meta: Any) -> Dict:
    """A launcher (1 pod, its own requests, an init container, a priority class) and a
    trainer step; `meta` the JobSet template's metadata."""
    launcher = replicated_job(
        "launcher", None, [container("launcher", resources={"requests": {"cpu": "250m"}})]
    )
    extra = {} if policy is None else {"podGroupPolicy": policy}
    runtime = make_runtime(
        replicated_jobs=[launcher, replicated_job("node", "trainer", [container()])], **extra
    )
    edit(runtime).pod_spec(
        "launcher",
        initContainers=[container("wait", resources={"requests": {"cpu": "500m"}})],
        priorityClassName="research",
    )
    if meta:
        edit(runtime).template_metadata(meta)
    return runtime


def gang_trainjob(nodes: int = 3, resources: Dict | None = RESOURCES) -> Dict:
    """`nodes` nodes, each asking for `resources` (None: resourcesPerNode unset)."""
    trainer: Dict = {"numNodes": nodes}
    if resources is not None:
        trainer["resourcesPerNode"] = resources
    return make_trainjob(trainer=trainer)


def resolved(runtime: Dict, nodes: int = 3) -> tuple[RuntimeInfo | None, RuntimeProblem | None]:
    return resolve_runtime_info(parse_trainjob(gang_trainjob(nodes)), RuntimeView(runtime))


def info_of(runtime: Dict, nodes: int = 3) -> RuntimeInfo:
    info, problem = resolved(runtime, nodes)
    assert info is not None, problem
    return info
