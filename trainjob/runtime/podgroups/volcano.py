"""Volcano (Trainer v2.3's volcano plugin): a PodGroup of `scheduling.volcano.sh/v1beta1` with
the queue the runtime's template annotation `scheduling.volcano.sh/queue-name` names (a
TrainJob overrides it with a runtimePatch), the pods' priorityClassName and the policy's
`networkTopology`; each pod annotated `scheduling.k8s.io/group-name: <TrainJob>`."""

from __future__ import annotations

from kubebase.objects import Dict
from trainjob.models import PodGroupPolicy
from trainjob.runtime.info import RuntimeInfo, RuntimeSpecError
from trainjob_api import constants as c


class VolcanoPlugin:
    name = "volcano"
    kind = c.VOLCANO_POD_GROUP
    pod_key = c.VOLCANO_GROUP_NAME_ANNOTATION
    on_labels = False
    serves = "Volcano"

    def applies(self, policy: PodGroupPolicy) -> bool:
        return policy.volcano is not None

    def check(self, info: RuntimeInfo) -> None:
        if info.annotations.get(c.VOLCANO_QUEUE_ANNOTATION) == "":
            raise RuntimeSpecError(  # Trainer's webhook refuses it too
                f"template.metadata.annotations[{c.VOLCANO_QUEUE_ANNOTATION}] is empty: it "
                "names the Volcano queue of the job's PodGroup"
            )

    def spec(self, info: RuntimeInfo) -> Dict:
        policy = info.policy.pod_group
        assert policy is not None and policy.volcano is not None
        spec: Dict = {}
        queue = info.annotations.get(c.VOLCANO_QUEUE_ANNOTATION)
        if queue is not None:
            spec["queue"] = queue
        # The pods' class (the last role that names one, as Trainer reads it).
        for ps in info.pod_sets:
            name = (ps.pod_template.get("spec") or {}).get("priorityClassName")
            if name:
                spec["priorityClassName"] = name
        topology = policy.volcano.network_topology
        if topology is not None:
            spec["networkTopology"] = {
                "mode": topology.mode or "hard",
                "highestTierAllowed": (
                    1 if topology.highest_tier_allowed is None else topology.highest_tier_allowed
                ),
            }
        return spec
