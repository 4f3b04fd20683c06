"""The dispatcher's configuration: the shared controller settings plus MultiKueue's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kubecontrol.exec_credentials import ExecPlugin
from kubecontrol.settings import ConfigFileError, ControllerSettings, read_yaml_mapping
from trainjob_api import constants as c


class AccessProvider(BaseModel):
    """One of Kueue's multiKueue.clusterProfile.accessProviders: a provider name a
    ClusterProfile may offer, and the exec credential plugin that gets its token."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")
    name: str = Field(min_length=1)
    exec_config: dict[str, Any] = Field(alias="execConfig")

    @model_validator(mode="after")
    def _runnable(self) -> Self:
        ExecPlugin.from_kubeconfig(self.exec_config, {}, f"provider {self.name!r}")
        return self


class DispatcherSettings(ControllerSettings):
    kubeconfig: Path | None = Field(
        default=None,
        description="kubeconfig of the manager cluster (default: $KUBECONFIG, then "
        "in-cluster, then ~/.kube/config)",
    )
    cluster_name: str = Field(default="manager", description="name used in every log line")
    # A pass mostly waits on API servers (the manager's and the workers'), so more threads
    # than the worker controller's keep the queue short under a burst.
    workers: int = Field(default=16, ge=1, le=64, description="threads reconciling TrainJobs")
    urgent_workers: int = Field(
        default=2,
        ge=0,
        le=16,
        description="more threads that take only TrainJobs whose run on a worker just ended "
        "(their end and the manager quota it frees), so those never wait behind other passes",
    )
    namespace: str = Field(
        default="kueue-system",
        description="where MultiKueueCluster kubeconfig Secrets live (Kueue's config namespace)",
    )
    mode: Literal["Replace", "Coexist"] = Field(
        default="Replace",
        description="Replace: Kueue's own MultiKueue is off (its MultiKueue gate) and we serve "
        "its kueue.x-k8s.io/multikueue checks and the MultiKueueClusters' Active condition; "
        "Coexist: Kueue's MultiKueue runs too (for Jobs, JobSets, ...) and keeps those, and we "
        f"serve our own controllerName ({c.COEXIST_CONTROLLER_NAME}) and origin "
        f"({c.COEXIST_ORIGIN})",
    )
    controller_name: str = Field(
        default=c.MANAGED_BY_MULTIKUEUE,
        description="AdmissionCheck controllerName we serve "
        f"(Coexist: {c.COEXIST_CONTROLLER_NAME})",
    )
    kubeconfig_path_prefix: Path = Field(
        default=Path("/etc/multikueue/kubeconfigs"),
        description="with --kubeconfig-path-validation, MultiKueueClusters with "
        "kubeConfig.locationType Path may only name files under this directory (Kueue's rule)",
    )
    kubeconfig_path_validation: bool = Field(
        default=False,
        description="Kueue's MultiKueueKubeConfigPathValidation gate (alpha, off in Kueue "
        "0.19): kubeconfig files must be absolute paths under --kubeconfig-path-prefix. Off, "
        "any file is read and the MultiKueueCluster gets Kueue's DeprecatedPathUsage Warning",
    )
    cluster_profiles: bool = Field(
        default=False,
        description="Kueue's MultiKueueClusterProfile gate (alpha, off in Kueue 0.19; from "
        "--kueue-config's featureGates): MultiKueueClusters may name a ClusterProfile "
        "(spec.clusterSource.clusterProfileRef) in --namespace, reached through "
        "--cluster-profile-providers",
    )
    cluster_profile_providers: list[AccessProvider] = Field(
        default_factory=list,
        description="with --cluster-profiles, the exec credential plugin of each access "
        "provider a ClusterProfile may offer, as Kueue's multiKueue.clusterProfile."
        "accessProviders (from --kueue-config): [{name, execConfig: {apiVersion, command, "
        "args, env, provideClusterInfo}}] (a flag takes it as JSON); the first the profile "
        "offers is used",
    )
    origin: str = Field(
        default=c.KUEUE_DEFAULT_ORIGIN,
        description="value of the multikueue-origin label on everything we create on workers "
        f"(Coexist: {c.COEXIST_ORIGIN})",
    )
    kueue_origin: str = Field(
        default=c.KUEUE_DEFAULT_ORIGIN,
        description="Coexist: the origin label of Kueue's own MultiKueue (from --kueue-config "
        "when given), which ours must differ from",
    )
    strategy: Literal["AllAtOnce", "Incremental", "External"] = Field(
        default="AllAtOnce",
        description="which workers get a copy of a Workload, and when (External: the ones "
        "another controller nominates in the manager Workload's status.nominatedClusterNames)",
    )
    capacity_aware: bool = Field(
        default=True,
        description="send copies only to workers whose ClusterQueue (for the copy's "
        "LocalQueue) has room for the PodSets now (free quota, borrowing limits, flavours), "
        "read from watches of their queues; when none has, to all the strategy picks. "
        "Not with External",
    )
    check_runtimes: bool = Field(
        default=True,
        description="send copies only to workers whose (Cluster)TrainingRuntime named by the "
        "TrainJob is the manager's (same spec); drift (missing, or different) is the "
        "TrainJob's RuntimeDrift condition and the MultiKueueCluster's RuntimesInSync "
        "condition. Needs read access to the workers' runtimes; unknown counts as the same",
    )
    data_placement: Literal["Exists", "Bound", "Off"] = Field(
        default="Exists",
        description="send copies only to workers that hold the job's data: every "
        "PersistentVolumeClaim its pods mount (but those its runtime's volumeClaimPolicies "
        "make) exists there in its namespace (Exists; Bound: and is bound), and the "
        "MultiKueueCluster is labelled dataset.trainjob.dev/<name>=true for each dataset its "
        "trainjob.dev/datasets annotation names; when no chosen worker does, the TrainJob's "
        "DataUnavailable condition says so and it waits. Claims are read from the workers' "
        "watches (unknown without read access: then labels only). Off: neither",
    )
    copy_dependencies: bool = Field(
        default=True,
        description="in manager namespaces labelled trainjob.dev/copy-dependencies=true, copy "
        "the Secrets and ConfigMaps a TrainJob's pods reference to the worker that runs it "
        "(owned by its Workload copy there, updated while it runs) and hold it back while one "
        "is missing. Needs read access to Secrets, ConfigMaps and Namespaces on the manager "
        "(the chart grants it from this key of its config, not from a flag in extraArgs; "
        "without it such jobs wait, saying so), and the workers' identity to write Secrets "
        "and ConfigMaps (the worker chart's multikueueIdentity.dependencies)",
    )
    dependency_copies_per_second: float = Field(
        default=10.0,
        gt=0,
        description="with copyDependencies, the copies of Secrets and ConfigMaps one manager "
        "namespace may have made or brought up to date per second on average, across its "
        "jobs and workers (each a read on the worker, then a read on the manager and a write "
        "when the copy is missing or differs; a copy found current, as after a restart or "
        "failover, spends none): a namespace that changes its objects faster waits for its "
        "turn, the others' copies go on. One copy on a worker serves every job there that "
        "references the object",
    )
    dependency_copies_burst: int = Field(
        default=100,
        ge=32,
        description="with copyDependencies, the copies one manager namespace may have made or "
        "brought up to date at once before dependencyCopiesPerSecond holds it (at least 32, "
        "the most one TrainJob takes along); copies found current spend none",
    )
    mirror_events: Literal["Warning", "All", "None"] = Field(
        default="Warning",
        description="which Events of the worker that runs a TrainJob are recorded again on "
        "the manager TrainJob, prefixed with the worker's name: Warning (those of its "
        "TrainJob there and its pods), All (its TrainJob's every Event, and its pods' "
        "warnings), None",
    )
    job_story_api: bool = Field(
        default=True,
        description="serve the view.trainjob.dev API beside the webhooks (a TrainJob's logs "
        "and story for whoever RBAC lets read them; the chart's APIService routes to it). It "
        "asks callers for a client certificate, which the front proxy's CA must verify",
    )
    log_tails_kept: int = Field(
        default=1000,
        ge=0,
        description="keep the last lines of a TrainJob's pods, read just before its copy leaves "
        "the worker, for this many TrainJobs at most (a TrainJob's go with it; beyond this or "
        "logTailsBytes, the namespace holding the most bytes loses its oldest): ConfigMaps in "
        "our namespace on the manager, at most 160 KiB each, served by the view.trainjob.dev "
        "API once the pods are gone. 0: none kept",
    )
    log_tails_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1,
        description="the bytes all kept log tails may hold in the manager's etcd (the default, "
        "32 MiB, is a 64th of etcd's default 2 GiB quota)",
    )
    log_tails_per_namespace: int = Field(
        default=20,
        ge=1,
        description="the log tails kept for one namespace's TrainJobs: its newest this many",
    )
    placements_per_namespace: int = Field(
        default=1000,
        ge=1,
        description="the records of where TrainJobs ran before, and why each run ended, kept "
        "for one namespace (one ConfigMap in our namespace per TrainJob sent back, at most 50 "
        "runs each; its last checkpoint is where a job sent on resumes from): its newest this "
        "many. A namespace's ResourceQuota on count/trainjobs bounds them first",
    )
    give_up_never_fits: bool = Field(
        default=True,
        description="a TrainJob whose PodSets no worker's ClusterQueue could ever hold "
        "(nominal quota plus borrowing limit, for every worker of its MultiKueueConfig, each "
        "reachable with its queues readable) fails at once (reason NoClusterFits): its check "
        "turns Rejected, so Kueue deactivates the Workload and frees the manager's quota",
    )
    give_up_after_seconds: float = Field(
        default=0.0,
        ge=0,
        description="a TrainJob that no worker admitted within this many seconds of the "
        "manager's quota reservation fails (reason NotAdmittedInTime), as above (0: never)",
    )
    incremental_batch: int = Field(
        default=3, ge=1, description="Incremental: clusters added to the dispatch each round"
    )
    incremental_round_seconds: float = Field(
        default=300.0, gt=0, description="Incremental: seconds a round waits for an admission"
    )
    orchestrated_preemption: bool = Field(
        default=False,
        description="Kueue's orchestrated preemption (its feature gate "
        "MultiKueueOrchestratedPreemption, alpha): each Workload copy is made with the "
        "kueue.x-k8s.io/multikueue preemption gate, so that a worker's Kueue (with the gate on) "
        "that would have to preempt to admit it says so instead; the gate is opened on one "
        "such worker at a time, the first to say so first, and on the next only after "
        "--single-cluster-preemption-timeout. Copies made with the gate have it opened "
        "whatever this says",
    )
    preemption_order: Literal["Cost", "Kueue"] = Field(
        default="Cost",
        description="orchestrated preemption: which blocked worker is let preempt first. "
        "Cost: the one whose preemption loses the least training (its Kueue's victims "
        "estimated from every Workload holding quota there, which the dispatcher then "
        "watches, and each victim's training since its last reported checkpoint, or since "
        "its admission), Kueue's order where that cannot be estimated; Kueue: the first to "
        "say it is blocked, as Kueue's own MultiKueue",
    )
    preemption_cost_wait: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="orchestrated preemption by cost: seconds the choice waits, once a worker "
        "says it must preempt, for another whose Kueue has not judged the job yet while the "
        "estimate says that one would admit it as it is, or by preempting at a lower cost "
        "(its Kueue judges a copy only once a preemption under way in its queue has ended), "
        "or for a worker not connected or listed yet; a worker whose cost cannot be "
        "estimated is waited for 10 seconds",
    )
    single_cluster_preemption_timeout: float = Field(
        default=300.0,
        gt=0,
        description="orchestrated preemption: seconds after a worker was let preempt before "
        "the next may (Kueue's, 5 minutes)",
    )
    worker_lost_timeout: float = Field(
        default=900.0,
        gt=0,
        description="seconds a worker may be unreachable "
        "before its TrainJobs are dispatched elsewhere",
    )
    resync_seconds: float = Field(
        default=30.0, gt=0, description="safety-net pass over the TrainJobs in flight"
    )
    gc_interval: float = Field(
        default=60.0, ge=0, description="seconds between orphan sweeps on workers (0: none)"
    )
    manager_runs_trainjobs: bool = Field(
        default=False,
        description="a worker controller runs on this manager too: TrainJobs that MultiKueue "
        "does not dispatch are left to it (otherwise they are marked Failed, NotDispatched)",
    )
    kueue_config: Path | None = Field(
        default=None,
        description="Kueue's Configuration file (its controller_manager_config.yaml): its "
        "namespace, multiKueue settings (origin, gcInterval, workerLostTimeout, "
        "dispatcherName, incrementalDispatcherConfig) and MultiKueue feature gates "
        "(MultiKueueClusterProfile, MultiKueueOrchestratedPreemption) become our defaults; "
        "our flags and --config still win",
    )
    retention_seconds: float = Field(
        default=0.0,
        ge=0,
        description="how long finished remote TrainJobs and Workloads are kept on the worker",
    )
    status_coalesce_seconds: float = Field(
        default=2.0,
        ge=0,
        description="status brought back from a worker that changes only pod counts which do "
        "not move PodsReady (active, suspended) or other minor fields is written to the "
        "manager TrainJob at most once in this many seconds; the first status from a worker "
        "(its clusterName) waits for the first count that matters, at most 30 s; conditions, "
        "ready, succeeded and failed counts, a new trainerStatus and a change of cluster go at "
        "once (0: write every change at once)",
    )
    health_port: int = Field(
        default=8081,
        ge=1,
        le=65535,
        description="/healthz and /readyz on http://ADDRESS:PORT (and /metrics, when "
        "--metrics-port is 0)",
    )
    leader_election_id: str = Field(
        default="trainjob-dispatcher", min_length=1, description="name of the Lease"
    )

    @property
    def prices_preemption(self) -> bool:
        """Orchestrated preemption by cost: every Workload holding quota on the workers is
        watched, and what a preemption there would cost estimated."""
        return self.orchestrated_preemption and self.preemption_order == "Cost"

    @model_validator(mode="before")
    @classmethod
    def _coexist_defaults(cls, data: Any) -> Any:
        """In Coexist mode the controllerName and origin not chosen are our own, not Kueue's."""
        if isinstance(data, dict) and data.get("mode") == "Coexist":
            data = {
                "controller_name": c.COEXIST_CONTROLLER_NAME,
                "origin": c.COEXIST_ORIGIN,
                **data,
            }
        return data

    @field_validator("cluster_profile_providers", mode="before")
    @classmethod
    def _providers_json(cls, value: object) -> object:
        """From a flag: JSON text."""
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not JSON: {exc}") from None
        return value

    @model_validator(mode="after")
    def _coexist_apart(self) -> Self:
        if self.mode != "Coexist":
            return self
        if self.controller_name == c.MANAGED_BY_MULTIKUEUE:
            raise ValueError(
                f"--controller-name: in Coexist mode Kueue's own MultiKueue serves "
                f"{c.MANAGED_BY_MULTIKUEUE}; ours needs a name of its own (default "
                f"{c.COEXIST_CONTROLLER_NAME})"
            )
        if self.origin == self.kueue_origin:
            raise ValueError(
                f"--origin: in Coexist mode ours must differ from Kueue's origin "
                f"{self.kueue_origin!r} (--kueue-origin), or each controller would take the "
                f"other's copies on the workers for its own (watches, garbage collection)"
            )
        return self

    @classmethod
    def layers_below(cls, chosen: dict[str, object]) -> dict[str, object]:
        """Kueue's own MultiKueue settings, when --kueue-config names its Configuration. In
        Coexist mode its origin is Kueue's own: ours must differ from it, so it is not ours."""
        path = chosen.get("kueue_config")
        if not path:
            return {}
        try:
            below = kueue_multikueue_settings(read_yaml_mapping(Path(str(path))))
        except ConfigFileError as exc:
            raise ConfigFileError(f"--kueue-config {path}: {exc}") from None
        if chosen.get("mode") == "Coexist" and "origin" in below:
            below["kueue_origin"] = below.pop("origin")
        return below


# Kueue's dispatcher names (its Configuration's multiKueue.dispatcherName) -> our strategies.
KUEUE_DISPATCHERS = {
    "kueue.x-k8s.io/multikueue-dispatcher-all-at-once": "AllAtOnce",
    "kueue.x-k8s.io/multikueue-dispatcher-incremental": "Incremental",
}


# Kueue's feature gates (its Configuration's featureGates) -> our settings.
KUEUE_GATES = {
    "MultiKueueClusterProfile": "cluster_profiles",
    "MultiKueueOrchestratedPreemption": "orchestrated_preemption",
}


def kueue_multikueue_settings(cfg: dict[str, Any]) -> dict[str, object]:
    """Our settings from a Kueue v1beta2 Configuration (only what it sets; Kueue's defaults
    are ours too). Raises ConfigFileError naming the field it cannot use."""
    out: dict[str, object] = {}
    if cfg.get("namespace"):
        out["namespace"] = str(cfg["namespace"])
    mk = cfg.get("multiKueue") or {}
    if not isinstance(mk, dict):
        raise ConfigFileError("multiKueue must be a mapping")
    if mk.get("origin"):
        out["origin"] = str(mk["origin"])
    for key, name in (("gcInterval", "gc_interval"), ("workerLostTimeout", "worker_lost_timeout")):
        if mk.get(key) is not None:
            out[name] = go_duration_seconds(mk[key], f"multiKueue.{key}")
    dispatcher = mk.get("dispatcherName")
    if dispatcher:  # any other name is an external dispatcher's, as in Kueue
        out["strategy"] = KUEUE_DISPATCHERS.get(str(dispatcher), "External")
    step = (mk.get("incrementalDispatcherConfig") or {}).get("stepSize")
    if step is not None:
        out["incremental_batch"] = step
    gates = cfg.get("featureGates") or {}
    if not isinstance(gates, dict):
        raise ConfigFileError("featureGates must be a mapping")
    for gate, name in KUEUE_GATES.items():
        if gate in gates:
            if not isinstance(gates[gate], bool):
                raise ConfigFileError(f"featureGates.{gate}: {gates[gate]!r} is not true or false")
            out[name] = gates[gate]
    profiles = mk.get("clusterProfile") or {}
    if not isinstance(profiles, dict):
        raise ConfigFileError("multiKueue.clusterProfile must be a mapping")
    # Kueue: accessProviders, else the deprecated credentialsProviders (never both)
    providers = profiles.get("accessProviders") or profiles.get("credentialsProviders")
    if providers:
        out["cluster_profile_providers"] = providers
    return out


_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration_seconds(value: object, field: str) -> float:
    """Seconds in a Go duration string as Kubernetes configs write them ("1m30s", "15m0s",
    "0s", "250ms"); a plain number is seconds. Raises ConfigFileError naming the field."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    if text in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    for match in _GO_DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match[1]) * _GO_UNITS[match[2]]
        pos = match.end()
    if pos != len(text) or not text:
        raise ConfigFileError(f"{field}: {value!r} is not a duration (e.g. 30s, 15m, 1h30m)")
    return total
