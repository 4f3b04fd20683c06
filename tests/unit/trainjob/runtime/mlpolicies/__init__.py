"""Each ML policy plugin's table tests (trainjob/runtime/mlpolicies/), and what they share:
a TrainJob and a runtime made into the RuntimeInfo the plugin edits."""

from __future__ import annotations

from typing import Any

from kubebase.objects import Dict
from tests.support.builders import make_runtime, make_trainjob
from trainjob.models import TrainJob, parse_runtime, parse_trainjob
from trainjob.runtime.framework import build_runtime_info
from trainjob.runtime.info import RuntimeInfo
from trainjob_api import constants as c

# Where a rank is read from: the pod's completion index
RANK = {"fieldRef": {"fieldPath": f"metadata.annotations['{c.JOB_COMPLETION_INDEX}']"}}


def trainjob(**trainer: Any) -> TrainJob:
    return parse_trainjob(make_trainjob(trainer=trainer))


def built(ml_policy: Dict, **trainer: Any) -> RuntimeInfo:
    """The RuntimeInfo of a TrainJob (`trainer`: its spec.trainer) on a runtime of one
    `node` replicatedJob with `ml_policy`, every plugin's edits made."""
    runtime = make_runtime(ml_policy=ml_policy)
    spec = runtime["spec"]["template"]["spec"]
    return build_runtime_info(
        parse_trainjob(make_trainjob(trainer=trainer)), parse_runtime(runtime), spec
    )


def node_env(info: RuntimeInfo) -> dict[str, Any]:
    """The trainer node container's env, by name: a value, or where it is read from. A name
    set twice fails here: the kubelet would keep the last, and a dict would hide the first."""
    ctr = info.pod_sets[0].container("node")
    assert ctr is not None
    names = [e["name"] for e in ctr.get("env") or []]
    assert len(names) == len(set(names)), f"env names set twice: {names}"
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in ctr.get("env") or []}
