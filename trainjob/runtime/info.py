"""The typed result of the runtime framework: PodSets and the RuntimePolicy."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubebase.objects import Dict
from trainjob.jsondoc import json_copy
from trainjob.models import DependsOn, MLPolicy, PodGroupPolicy
from trainjob.queues import resources_key
from trainjob.runtime.failure import FailurePolicy
from trainjob.runtime.templates import PodSpecEdit, PodTemplateEdit
from trainjob_api.pods import PodSpecView
from trainjob_api.views import mapping


class RuntimeSpecError(ValueError):
    """The runtime (or a runtimePatch) cannot be applied to this TrainJob; says why."""


@dataclass(frozen=True)
class PodSetShape:
    """What Kueue counts of a PodSet: its name, `replicas` Jobs of `parallelism` pods, and
    what each pod asks for (`trainjob.queues.resources_key` of its template). The lean form
    the queueing decisions read once the Workload exists (no templates)."""

    name: str
    replicas: int
    parallelism: int
    resources: str = ""

    @property
    def count(self) -> int:
        return self.replicas * self.parallelism


@dataclass
class PodSet:
    """One role of a TrainJob: `replicas` Indexed Jobs of `parallelism` pods each."""

    name: str  # the runtime's replicatedJob name
    role: str | None  # trainer.kubeflow.org/trainjob-ancestor-step, if the runtime labels it
    replicas: int
    parallelism: int
    job_template: Dict  # batch/v1 JobTemplateSpec with all merges applied
    depends_on: list[DependsOn] = field(default_factory=list)
    # The pod template before the ML policy's plugin added what its pods get to run (PET_*
    # env, ports, MPI's volumes): what Kueue's own TrainJob integration puts in a Workload's
    # PodSet, so that a Workload made here is one Kueue's integration on a worker takes as its
    # TrainJob's (a prebuilt Workload must match it, or Kueue finishes it as out of sync).
    kueue_template: Dict | None = None

    @property
    def count(self) -> int:
        """Pods in this PodSet (what Kueue reserves quota for)."""
        return self.replicas * self.parallelism

    @property
    def pod_template(self) -> Dict:
        template: Dict = self.job_template["spec"]["template"]
        return template

    @property
    def queued_template(self) -> Dict:
        """The pod template a Workload's PodSet holds (`kueue_template` once made)."""
        return self.kueue_template if self.kueue_template is not None else self.pod_template

    def workload_template(self) -> Dict:
        """A copy of `queued_template` as Kueue sees it: the pods' spec as the Jobs will run it
        (requests decide quota, nodeSelector and tolerations placement), of its metadata only
        the labels and annotations."""
        template = self.queued_template
        meta = mapping(template.get("metadata"))
        kept = {k: dict(mapping(meta.get(k))) for k in ("labels", "annotations")}
        return {
            "metadata": {k: v for k, v in kept.items() if v},
            "spec": json_copy(mapping(template.get("spec"))),
        }

    @property
    def queued_spec(self) -> Dict:
        spec: Dict = self.queued_template.get("spec") or {}
        return spec

    @property
    def pod(self) -> PodTemplateEdit:
        """Its pod template, to edit in place."""
        return PodTemplateEdit(self.pod_template)

    @property
    def pod_spec(self) -> PodSpecEdit:
        """Its pods' spec, to edit in place."""
        return self.pod.spec

    def container(self, name: str) -> Dict | None:
        """The JSON of its container `name` (for reading; `pod_spec` edits)."""
        found = self.pod_spec.container(name)
        return found.raw if found is not None else None


@dataclass
class RuntimePolicy:
    """What the runtime asks for beyond pods: the ML policy and the pod-group policy."""

    ml_policy: str  # name of the ML policy plugin that applied: torch, mpi or plain
    num_nodes: int
    ml: MLPolicy
    pod_group: PodGroupPolicy | None = None
    # Fields of the runtime the framework does not do (trainjob/runtime/fields.py: ignored).
    ignored: list[str] = field(default_factory=list)
    # The success policy of the runtime's JobSet template: which PodSets must complete.
    success_operator: str = "All"
    success_targets: list[str] = field(default_factory=list)
    # Objects besides Jobs and the Service the pods need (e.g. the MPI hostfile ConfigMap).
    extra_objects: list[Dict] = field(default_factory=list)
    # PersistentVolumeClaims from the runtime's volumeClaimPolicies, and the names of those
    # the TrainJob owns (retentionPolicy Delete); the others outlive it, as JobSet's do.
    claims: list[Dict] = field(default_factory=list)
    owned_claims: set[str] = field(default_factory=set)
    # A Secret with a freshly generated SSH key pair the pods need (MPI), created once.
    ssh_secret_name: str | None = None
    # The JobSet template's failurePolicy (trainjob/runtime/failure.py; None: a failed Job
    # fails the TrainJob).
    failure: FailurePolicy | None = None


@dataclass
class RuntimeInfo:
    trainjob: str
    namespace: str
    pod_sets: list[PodSet]
    policy: RuntimePolicy
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[PodSetShape, ...]:
        return tuple(
            PodSetShape(
                ps.name, ps.replicas, ps.parallelism, resources_key(PodSpecView(ps.queued_spec))
            )
            for ps in self.pod_sets
        )

    def pod_set(self, name: str) -> PodSet:
        for ps in self.pod_sets:
            if ps.name == name:
                return ps
        raise KeyError(name)
