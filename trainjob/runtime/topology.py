"""Kueue's Topology Aware Scheduling request of a TrainJob's PodSet (pure)."""

from __future__ import annotations

from kubebase.objects import Dict
from trainjob.runtime.info import PodSet, RuntimeSpecError
from trainjob_api import constants as c

_BOOLEANS = {"true": True, "t": True, "1": True, "false": False, "f": False, "0": False}


def topology_request(ps: PodSet) -> Dict:
    """A PodSet's topologyRequest as Kueue 0.19 builds it for a TrainJob's replicatedJob (its
    TopologyAwareScheduling gate is on by default): the pod and Job index labels always; a
    required, preferred or unconstrained topology, a slice topology and size, and a PodSet
    group name from the pod template's annotations (Kueue's keys)."""
    ann = (ps.pod_template.get("metadata") or {}).get("annotations") or {}
    req: Dict = {}
    if c.TAS_REQUIRED in ann:
        req["required"] = ann[c.TAS_REQUIRED]
    elif c.TAS_PREFERRED in ann:
        req["preferred"] = ann[c.TAS_PREFERRED]
    elif c.TAS_UNCONSTRAINED in ann:
        value = _BOOLEANS.get(str(ann[c.TAS_UNCONSTRAINED]).lower())
        if value is None:
            raise RuntimeSpecError(
                f"replicatedJob {ps.name!r}: pod annotation {c.TAS_UNCONSTRAINED}="
                f"{ann[c.TAS_UNCONSTRAINED]!r} is not a boolean"
            )
        req["unconstrained"] = value
    if c.TAS_SLICE_REQUIRED in ann and c.TAS_SLICE_SIZE in ann:
        try:
            size = int(ann[c.TAS_SLICE_SIZE])
        except ValueError:
            raise RuntimeSpecError(
                f"replicatedJob {ps.name!r}: pod annotation {c.TAS_SLICE_SIZE}="
                f"{ann[c.TAS_SLICE_SIZE]!r} is not a whole number"
            ) from None
        req["podSetSliceRequiredTopology"] = ann[c.TAS_SLICE_REQUIRED]
        req["podSetSliceSize"] = size
    req["podIndexLabel"] = c.JOB_COMPLETION_INDEX
    req["subGroupIndexLabel"] = c.JOB_INDEX_LABEL
    req["subGroupCount"] = ps.replicas
    if c.TAS_GROUP_NAME in ann and ("required" in req or "preferred" in req):
        req["podSetGroupName"] = ann[c.TAS_GROUP_NAME]
    return req
