"""Typed views of TrainJob and (Cluster)TrainingRuntime: the fields we read, parsed at the boundary.

We keep our own lean models rather than the generated `kubeflow-trainer-api` ones for the
objects we rebuild manifests from: those coerce resource quantities to floats (`2` -> `2.0`)
and drop pod-template fields they do not know, so they cannot round-trip a manifest
faithfully. Tests check that our example manifests also parse as the official models.
Kubernetes sub-objects we only copy (env entries, resources, pod templates) stay plain dicts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kubebase.objects import Dict
from trainjob.lru import LRU
from trainjob_api import constants as c
from trainjob_api.views import TrainJobView


class _Model(BaseModel):
    # Unknown fields are ignored: newer API fields must not break parsing.
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


class ObjectMeta(_Model):
    name: str
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    creation_timestamp: str | None = Field(default=None, alias="creationTimestamp")
    deletion_timestamp: str | None = Field(default=None, alias="deletionTimestamp")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class RuntimeRef(_Model):
    name: str = Field(min_length=1)
    api_group: str = Field(default=c.TRAINER_GROUP, alias="apiGroup")
    kind: Literal["TrainingRuntime", "ClusterTrainingRuntime"] = "ClusterTrainingRuntime"


class InitializerStep(_Model):
    storage_uri: str | None = Field(default=None, alias="storageUri")
    env: list[Dict] = Field(default_factory=list)
    secret_ref: Dict | None = Field(default=None, alias="secretRef")


class Initializer(_Model):
    dataset: InitializerStep | None = None
    model: InitializerStep | None = None


class Trainer(_Model):
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[Dict] = Field(default_factory=list)
    num_nodes: int | None = Field(default=None, alias="numNodes", ge=1)
    num_proc_per_node: int | str | None = Field(default=None, alias="numProcPerNode")
    resources_per_node: Dict | None = Field(default=None, alias="resourcesPerNode")


class RuntimePatch(_Model):
    manager: str = Field(min_length=1)
    time: str | None = None
    training_runtime_spec: Dict | None = Field(default=None, alias="trainingRuntimeSpec")


class TrainJobSpec(_Model):
    runtime_ref: RuntimeRef = Field(alias="runtimeRef")
    initializer: Initializer | None = None
    trainer: Trainer | None = None
    runtime_patches: list[RuntimePatch] = Field(default_factory=list, alias="runtimePatches")
    suspend: bool = False
    active_deadline_seconds: int | None = Field(default=None, alias="activeDeadlineSeconds")
    managed_by: str | None = Field(default=None, alias="managedBy")


class TrainJob(_Model):
    metadata: ObjectMeta
    spec: TrainJobSpec
    status: Dict = Field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    def conditions(self) -> list[Dict]:
        return list(self.status.get("conditions") or [])

    @property
    def meta_view(self) -> TrainJobView:
        """Its metadata as the views read it: one rule for its queue, its prebuilt Workload and
        whether Kueue queues it, whichever form the TrainJob is in."""
        m = self.metadata
        meta = {"name": m.name, "uid": m.uid, "labels": m.labels, "annotations": m.annotations}
        return TrainJobView({"metadata": meta})

    @property
    def queue_name(self) -> str | None:
        """The LocalQueue its Kueue queue-name label names, if any."""
        return self.meta_view.queue_name

    @property
    def prebuilt_workload(self) -> str | None:
        """The Workload made for it by someone else (a MultiKueue copy's), as Kueue names it."""
        return self.meta_view.prebuilt_workload

    @property
    def queued(self) -> bool:
        """Kueue's: a queue-name label, or a prebuilt Workload (a MultiKueue copy)."""
        return self.meta_view.queued


class EnvInjectionTarget(_Model):
    job_name: str = Field(alias="jobName", min_length=1)
    container_names: list[str] = Field(alias="containerNames", min_length=1)


class EnvInjection(_Model):
    targets: list[EnvInjectionTarget] = Field(default_factory=list)


class TorchPolicy(_Model):
    # Not in Trainer v2.3 (it moved to the TrainJob's trainer.numProcPerNode); accepted, unused.
    num_proc_per_node: int | str | None = Field(default=None, alias="numProcPerNode")
    env_injection: EnvInjection | None = Field(default=None, alias="envInjection")


class MPIPolicy(_Model):
    num_proc_per_node: int = Field(default=1, alias="numProcPerNode", ge=1)
    mpi_implementation: Literal["OpenMPI", "Intel", "MPICH"] = Field(
        default="OpenMPI", alias="mpiImplementation"
    )
    ssh_auth_mount_path: str = Field(default=c.MPI_DEFAULT_SSH_PATH, alias="sshAuthMountPath")
    run_launcher_as_node: bool = Field(default=False, alias="runLauncherAsNode")


class MLPolicy(_Model):
    num_nodes: int = Field(default=1, alias="numNodes", ge=1)
    torch: TorchPolicy | None = None
    mpi: MPIPolicy | None = None
    # Trainer v2.3's other policies: jax and xgboost have no fields; flux is not implemented
    # here (a runtime that names it is RuntimeInvalid, saying so).
    jax: Dict | None = None
    xgboost: Dict | None = None
    flux: Dict | None = None

    @property
    def named(self) -> list[str]:
        """The policies the runtime sets (Trainer allows at most one)."""
        return [
            n for n in ("torch", "mpi", "jax", "xgboost", "flux") if getattr(self, n) is not None
        ]


class Coscheduling(_Model):
    # Trainer's CRD defaults it to 60 (ours stamps no defaults: the coscheduling plugin,
    # trainjob/runtime/podgroups/coscheduling.py, does); int32.
    schedule_timeout_seconds: int | None = Field(
        default=None, alias="scheduleTimeoutSeconds", ge=0, le=2**31 - 1
    )


class NetworkTopology(_Model):
    """Volcano's network-topology constraint (its NetworkTopologySpec, with its defaults)."""

    mode: Literal["hard", "soft"] | None = None  # hard
    highest_tier_allowed: int | None = Field(
        default=None, alias="highestTierAllowed", ge=0, le=2**31 - 1
    )  # 1


class Volcano(_Model):
    network_topology: NetworkTopology | None = Field(default=None, alias="networkTopology")


class PodGroupPolicy(_Model):
    """Gang scheduling: the scheduler-plugins' coscheduling or Volcano (at most one)."""

    coscheduling: Coscheduling | None = None
    volcano: Volcano | None = None

    @model_validator(mode="after")
    def _one(self) -> PodGroupPolicy:
        if self.coscheduling is not None and self.volcano is not None:
            raise ValueError("podGroupPolicy sets both coscheduling and volcano; set one")
        return self


class DependsOn(_Model):
    name: str
    status: Literal["Ready", "Complete"]


class ReplicatedJob(_Model):
    name: str
    replicas: int = Field(default=1, ge=1)
    depends_on: list[DependsOn] = Field(default_factory=list, alias="dependsOn")
    template: Dict  # a batch/v1 JobTemplateSpec, kept as the user wrote it


class JobSetSpec(_Model):
    replicated_jobs: list[ReplicatedJob] = Field(alias="replicatedJobs", min_length=1)


class JobSetTemplate(_Model):
    metadata: Dict = Field(default_factory=dict)
    spec: JobSetSpec


class TrainingRuntimeSpec(_Model):
    ml_policy: MLPolicy = Field(default_factory=MLPolicy, alias="mlPolicy")
    pod_group_policy: PodGroupPolicy | None = Field(default=None, alias="podGroupPolicy")
    template: JobSetTemplate


class TrainingRuntime(_Model):
    """A TrainingRuntime or ClusterTrainingRuntime (same spec)."""

    kind: str = c.CLUSTER_TRAINING_RUNTIME_KIND
    metadata: ObjectMeta
    spec: TrainingRuntimeSpec


class InvalidObject(ValueError):
    """A manifest that does not parse; the message names the field and what is wrong."""


# What a refusal says of a manifest's errors: a line per field and problem (a list's entries
# counted on the first one's line), the first few fields, each path kept to its two ends (its
# keys may be a tenant's, and one body can hold as many errors as it has list entries).
EXPLAINED_FIELDS = 5
EXPLAINED_PATH = 256


def _explain(kind: str, exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    fields: dict[tuple[str, str], tuple[str, int]] = {}  # (field, problem) -> (first path, count)
    for err in errors:
        path = ".".join(str(p) for p in err["loc"])
        field = ".".join("*" if isinstance(p, int) else str(p) for p in err["loc"])
        first, count = fields.get((field, err["msg"]), (path, 0))
        fields[(field, err["msg"])] = (first, count + 1)
    parts = []
    for (_, problem), (path, count) in list(fields.items())[:EXPLAINED_FIELDS]:
        entries = f" (and {count - 1} more entries)" if count > 1 else ""
        parts.append(f"{_shortened(path)}: {problem}{entries}")
    more = len(fields) - EXPLAINED_FIELDS
    return f"invalid {kind}: " + "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _shortened(path: str) -> str:
    """A field's path of at most EXPLAINED_PATH characters: its start and its end, which names
    the field itself."""
    if len(path) <= EXPLAINED_PATH:
        return path
    head = (EXPLAINED_PATH - 3) // 2
    return path[:head] + "..." + path[-(EXPLAINED_PATH - 3 - head) :]


def parse_trainjob(body: Dict, *, stored: bool = False) -> TrainJob:
    """`stored`: the body is an object as the API server stores it (from a watch cache), so
    its uid and resourceVersion name its content and an earlier parse of it can serve. Only
    for the reconcile passes: an object being admitted may carry an old resourceVersion with
    new content, and test bodies are edited in place."""
    meta = body.get("metadata") or {}
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    if stored and uid and version:
        parsed = _PARSED.get_or_make((str(uid), str(version)), lambda: _parse_trainjob(body))
    else:
        parsed = _parse_trainjob(body)
    if isinstance(parsed, InvalidObject):
        raise InvalidObject(str(parsed))  # a new one: a kept one's traceback would grow
    return parsed


# Models are frozen; the reconcile passes parse the same version again and again (one that
# does not parse too: its refusal is kept as well).
_PARSED: LRU[tuple[str, str], TrainJob | InvalidObject] = LRU(512)


def _parse_trainjob(body: Dict) -> TrainJob | InvalidObject:
    try:
        return TrainJob.model_validate(body)
    except ValidationError as exc:
        return InvalidObject(_explain("TrainJob", exc))


def parse_runtime(body: Dict) -> TrainingRuntime:
    kind = str(body.get("kind") or "TrainingRuntime")
    try:
        return TrainingRuntime.model_validate(body)
    except ValidationError as exc:
        name = (body.get("metadata") or {}).get("name", "?")
        raise InvalidObject(_explain(f"{kind} {name}", exc)) from exc
