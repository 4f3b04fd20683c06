"""The pod group plugins: gang scheduling on a worker, the PodGroup a runtime's
`podGroupPolicy` asks for, one scheduler a module (as Trainer v2.3 lays out its coscheduling
and volcano plugins), and the registry that picks one from the policy.

A plugin is a class with
- `name`: the podGroupPolicy member that asks for it (`coscheduling`, `volcano`);
- `kind`: its PodGroup's API, and `serves`: who serves that API, for messages;
- `pod_key` and `on_labels`: how each pod names its group (a label or an annotation);
- `applies(policy)`, `check(info)` (refuse what the scheduler would: RuntimeSpecError), and
  `spec(info)`: the fields of the PodGroup's spec that are this scheduler's own.
A new gang scheduler is a module here and a line in PLUGINS.

What every PodGroup has (its name, the TrainJob's; `minMember`, every pod of the job;
`minResources`, what they all request) is built here, once for all of them. The group is owned
by the TrainJob (deleted with it by the garbage collector), made once before its Jobs, and
never written over when someone else's holds the name (NameTaken). The pods' `schedulerName`
is the runtime's, as with Trainer: a cluster that runs the coscheduling plugin or Volcano as a
second scheduler names it in the runtime's pod template. Only where the worker's API serves
the PodGroup (the worker controller asks discovery) are the pods grouped; elsewhere they run
ungrouped and the TrainJob says so (PodGroupPolicyIgnored).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

from kubebase.kinds import Kind
from kubebase.objects import Dict
from trainjob.models import PodGroupPolicy
from trainjob.queues import Amounts, add, pod_requests
from trainjob.runtime.info import RuntimeInfo
from trainjob.runtime.podgroups.coscheduling import CoschedulingPlugin
from trainjob.runtime.podgroups.volcano import VolcanoPlugin
from trainjob_api.pods import PodSpecView
from trainjob_api.quantity import format_quantity
from trainjob_api.views import JobView


class PodGroupPlugin(Protocol):
    """One gang scheduler's PodGroup: where its API is, how a pod names its group, and the
    fields of the group's spec that are this scheduler's own."""

    name: str
    kind: Kind
    pod_key: str
    on_labels: bool
    serves: str

    def applies(self, policy: PodGroupPolicy) -> bool: ...

    def check(self, info: RuntimeInfo) -> None: ...

    def spec(self, info: RuntimeInfo) -> Dict: ...


PLUGINS: list[PodGroupPlugin] = [CoschedulingPlugin(), VolcanoPlugin()]
BY_NAME: dict[str, PodGroupPlugin] = {p.name: p for p in PLUGINS}


def select_plugin(policy: PodGroupPolicy | None) -> PodGroupPlugin | None:
    """The plugin the runtime's podGroupPolicy asks for (None: no gang scheduling, also for
    `podGroupPolicy: {}`). The policy's model refuses two members at once."""
    if policy is None:
        return None
    return next((p for p in PLUGINS if p.applies(policy)), None)


def check(info: RuntimeInfo) -> None:
    """What the chosen scheduler would refuse in the built runtime, refused here."""
    plugin = select_plugin(info.policy.pod_group)
    if plugin is not None:
        plugin.check(info)


def ignored_message(plugin: PodGroupPlugin) -> str:
    return (
        f"podGroupPolicy.{plugin.name} asks for a PodGroup "
        f"({plugin.kind.group}/{plugin.kind.version}), which this worker's API does not serve "
        f"({plugin.serves} is not installed): the pods are scheduled one by one, without a pod "
        "group (Kueue still admits the TrainJob whole)"
    )


def mark_pods(info: RuntimeInfo, plugin: PodGroupPlugin) -> None:
    """Every pod of the TrainJob names its group (a label or an annotation, as Trainer sets)."""
    field = "labels" if plugin.on_labels else "annotations"
    for ps in info.pod_sets:
        ps.pod.metadata.put(field, plugin.pod_key, info.trainjob)


def names_group(job: JobView, plugin: PodGroupPlugin, trainjob: str) -> bool:
    """Whether a Job's pod template puts its pods in the TrainJob's group."""
    field = "labels" if plugin.on_labels else "annotations"
    return job.template_strings(field).get(plugin.pod_key) == trainjob


def _totals(info: RuntimeInfo) -> tuple[int, Amounts]:
    """Every pod of the TrainJob, and what they request together."""
    members: int = 0
    total = Amounts()
    for ps in info.pod_sets:
        members += ps.count
        # as Trainer v2.3 counts them: the pod template's requests as written
        pod = PodSpecView.of_template(ps.pod_template)
        add(total, pod_requests(pod, limits_as_requests=False), ps.count)
    return members, total


def build_pod_group(info: RuntimeInfo, plugin: PodGroupPlugin) -> Dict:
    """The PodGroup, named after the TrainJob (its owner and labels are added as to every
    object the job needs, by the worker controller)."""
    members, total = _totals(info)
    spec: Dict = {"minMember": members}
    resources = {n: format_quantity(q) for n, q in sorted(total.items()) if q > Decimal(0)}
    if resources:
        spec["minResources"] = resources
    spec.update(plugin.spec(info))
    return {
        "apiVersion": plugin.kind.api_version,
        "kind": plugin.kind.kind,
        "metadata": {"name": info.trainjob, "namespace": info.namespace},
        "spec": spec,
    }
