"""The runtime framework's tests (trainjob/runtime/), and what they share: a TrainJob and a
runtime, as the API would hold them, made into the RuntimeInfo."""

from __future__ import annotations

from kubebase.objects import Dict
from trainjob.models import parse_runtime, parse_trainjob
from trainjob.runtime import RuntimeInfo, build_runtime_info


def info_for(trainjob: Dict, runtime: Dict) -> RuntimeInfo:
    spec = runtime["spec"]["template"].get("spec", {})
    return build_runtime_info(parse_trainjob(trainjob), parse_runtime(runtime), spec)
