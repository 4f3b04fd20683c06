"""The scheduler-plugins' coscheduling (Trainer v2.3's coscheduling plugin): a PodGroup of
`scheduling.x-k8s.io/v1alpha1` with `scheduleTimeoutSeconds` (60 unless the runtime sets it),
each pod labelled `scheduling.x-k8s.io/pod-group: <TrainJob>`."""

from __future__ import annotations

from kubebase.objects import Dict
from trainjob.models import PodGroupPolicy
from trainjob.runtime.info import RuntimeInfo
from trainjob_api import constants as c

DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 60  # Trainer's CRD default


class CoschedulingPlugin:
    name = "coscheduling"
    kind = c.COSCHEDULING_POD_GROUP
    pod_key = c.COSCHEDULING_POD_GROUP_LABEL
    on_labels = True
    serves = "the scheduler-plugins' coscheduling"

    def applies(self, policy: PodGroupPolicy) -> bool:
        return policy.coscheduling is not None

    def check(self, info: RuntimeInfo) -> None:
        """Nothing beyond the policy's own model (a timeout that is not negative)."""

    def spec(self, info: RuntimeInfo) -> Dict:
        policy = info.policy.pod_group
        assert policy is not None and policy.coscheduling is not None
        timeout = policy.coscheduling.schedule_timeout_seconds
        default = DEFAULT_SCHEDULE_TIMEOUT_SECONDS
        return {"scheduleTimeoutSeconds": default if timeout is None else timeout}
