"""Every API group, label, annotation, condition and reason the product uses, in one place."""

from __future__ import annotations

from kubebase.kinds import CONFIG_MAP as CONFIG_MAP
from kubebase.kinds import CUSTOM_RESOURCE_DEFINITION as CUSTOM_RESOURCE_DEFINITION
from kubebase.kinds import EVENT as EVENT
from kubebase.kinds import LEASE as LEASE
from kubebase.kinds import NAMESPACE as NAMESPACE
from kubebase.kinds import POD as POD
from kubebase.kinds import SECRET as SECRET
from kubebase.kinds import Kind

# Our own domain: keys we invent live under it and nowhere else.
DOMAIN = "trainjob.dev"

# --- Trainer API -----------------------------------------------------------------------------
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_VERSION = "v1alpha1"
TRAINER_API = f"{TRAINER_GROUP}/{TRAINER_VERSION}"
TRAINJOB_PLURAL = "trainjobs"
TRAINING_RUNTIME_KIND = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME_KIND = "ClusterTrainingRuntime"

MANAGED_BY_BUILTIN = "trainer.kubeflow.org/trainjob-controller"
MANAGED_BY_MULTIKUEUE = "kueue.x-k8s.io/multikueue"

# Label on a runtime's replicatedJob template saying which TrainJob step it implements.
ANCESTOR_STEP_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
STEP_DATASET_INITIALIZER = "dataset-initializer"
STEP_MODEL_INITIALIZER = "model-initializer"
STEP_TRAINER = "trainer"
# Container names the TrainJob's trainer / initializer settings are merged into.
NODE_CONTAINER = "node"
LAUNCHER_REPLICATED_JOB = "launcher"
NODE_REPLICATED_JOB = "node"

# --- labels clients use to find pods (kept exactly as JobSet sets them) ----------------------
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# Kueue's default LocalQueue: takes jobs without a queue-name label in its namespace.
DEFAULT_LOCAL_QUEUE = "default"
REPLICATED_JOB_NAME_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
# The restart a Job (and its pods) was made for: the TrainJob's status.restarts then (JobSet's)
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

# --- our labels ------------------------------------------------------------------------------
TRAINJOB_NAME_LABEL = f"{DOMAIN}/trainjob-name"
PODSET_LABEL = f"{DOMAIN}/podset"
MANAGED_LABEL = f"{DOMAIN}/managed-by"
MANAGED_LABEL_VALUE = "worker-controller"
# On a PersistentVolumeClaim we made that outlives its TrainJob (retentionPolicy Retain): the
# TrainJob it was made for, `<namespace>/<name>`. A later TrainJob of that name uses it as it
# is; a claim without it is someone else's, never used or changed.
CLAIM_MADE_FOR_ANNOTATION = f"{DOMAIN}/claim-made-for"
# On a TrainJob: "off", and the dispatcher keeps none of its pods' log tails.
LOG_TAILS_ANNOTATION = f"{DOMAIN}/log-tails"
# Server-side apply field managers, one per controller.
WORKER_FIELD_MANAGER = "trainjob-worker-controller"
DISPATCHER_FIELD_MANAGER = "trainjob-dispatcher"

# --- Kueue -----------------------------------------------------------------------------------
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
KUEUE_API = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
MULTIKUEUE_CONFIG_KIND = "MultiKueueConfig"
KUEUE_QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
# The label Kueue puts on a job's Workload naming the job's uid (selectable server-side).
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
KUEUE_PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
KUEUE_PREBUILT_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/prebuilt-workload-name"  # Kueue 0.19
# Kueue's Topology Aware Scheduling requests, as pod template annotations.
TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TAS_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
TAS_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
TAS_SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
TAS_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
TAS_GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
# On the pods of an admitted PodSet, as Kueue's job framework sets them.
KUEUE_PODSET_LABEL = "kueue.x-k8s.io/podset"
KUEUE_LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
KUEUE_CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
KUEUE_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
KUEUE_MULTIKUEUE_WORKER_POD_LABEL = "kueue.x-k8s.io/multikueue-worker-workload-pod"
# Held by manager TrainJobs dispatched by MultiKueue until their remote objects are gone.
DISPATCHER_FINALIZER = f"{DOMAIN}/dispatcher-cleanup"
KUEUE_MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
KUEUE_DEFAULT_ORIGIN = "multikueue"
# Coexist mode (Kueue's own MultiKueue runs beside us): the AdmissionCheck controllerName we
# serve and the origin label of our copies, both our own.
COEXIST_CONTROLLER_NAME = f"{DOMAIN}/multikueue"
COEXIST_ORIGIN = "trainjob-multikueue"
# On remote copies: the UID of the manager object they copy (Kueue's, for tracing).
KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION = "kueue.x-k8s.io/multikueue-origin-uid"
# Kueue's orchestrated preemption (feature gate MultiKueueOrchestratedPreemption): the gate a
# Workload copy is made with, and the condition a worker's Kueue sets on a copy it would have
# to preempt for while the gate is closed.
KUEUE_MULTIKUEUE_PREEMPTION_GATE = "kueue.x-k8s.io/multikueue"
KUEUE_BLOCKED_ON_PREEMPTION_GATES = "BlockedOnPreemptionGates"
KUEUE_RUNTIME_PATCH_MANAGER = "kueue.x-k8s.io/manager"
# Kueue's Finished reason for a prebuilt Workload that no longer matches its job.
KUEUE_FINISHED_OUT_OF_SYNC = "OutOfSync"
# Why Kueue evicts a Workload whose admission check turned Retry (or Rejected).
KUEUE_EVICTED_BY_ADMISSION_CHECK = "AdmissionCheck"

# --- conditions and reasons (Trainer's names where Trainer has one) -------------------------
COND_SUSPENDED = "Suspended"
COND_COMPLETE = "Complete"
COND_FAILED = "Failed"
COND_SERVICE_CONFLICT = "ServiceConflict"
# Ours: some pod of the TrainJob cannot start (image, configuration) or keeps crashing; the
# reason is the kubelet's, or PodCreateFailed when the API refuses the pods.
COND_PODS_STUCK = "PodsStuck"
# Ours: an object the TrainJob needs cannot be made: its name is taken by an object this
# TrainJob did not make (never adopted or overwritten), or the API refuses it. The TrainJob
# waits, and the condition clears once the object is made.
COND_OBJECTS_BLOCKED = "ObjectsBlocked"
REASON_NAME_TAKEN = "NameTaken"
REASON_REFUSED_BY_API = "RefusedByAPI"
REASON_OBJECTS_CREATED = "ObjectsCreated"

REASON_SUSPENDED = "Suspended"
REASON_RESUMED = "Resumed"
# A TrainJob's Complete condition as Trainer v2.3 passes on JobSet's (its pkg/constants), so
# that a job ends with the same words on either kind of worker.
REASON_COMPLETED = "AllJobsCompleted"
MESSAGE_COMPLETED = "jobset completed successfully"
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"
REASON_RUNTIME_NOT_FOUND = "RuntimeNotFound"
REASON_RUNTIME_INVALID = "RuntimeInvalid"
# Jobs of a later restart than status.restarts says (the status lost it): not restarted again
REASON_RESTARTS_LOST = "RestartsLost"
REASON_SERVICE_CONFLICT = "MultipleServices"
REASON_SERVICE_NAME_TAKEN = "ServiceNameTaken"
REASON_SERVICE_OK = "ServiceReady"
REASON_PODS_STARTED = "PodsStarted"
REASON_POD_CREATE_FAILED = "PodCreateFailed"

# Failed reasons that are about configuration: the controller keeps checking and clears the
# condition once the runtime exists / is valid. Every other Failed reason is final.
# A MultiKueue TrainJob on the manager with no queue: nobody dispatches it until it has one.
REASON_NO_QUEUE = "NoQueueName"
# The Warning Event (no condition) of a TrainJob that does not parse as the models read it.
EVENT_INVALID_TRAINJOB = "InvalidTrainJob"
# On the manager (the dispatcher's)
COND_CLUSTERS_SELECTED = "ClustersSelected"  # False: the TrainJob's choice leaves no cluster
REASON_NO_CLUSTER_SELECTED = "NoClusterSelected"
COND_RUNTIME_DRIFT = "RuntimeDrift"  # True: some chosen workers' runtime is not the manager's
# True: a Secret or ConfigMap its pods need is missing on the manager, or may not leave it
# (reasons in dispatcher/decisions/dependencies.py); it is not dispatched until that is over.
COND_DEPENDENCIES_MISSING = "DependenciesMissing"
REASON_DEPENDENCY_MISSING = "DependencyMissing"
REASON_DEPENDENCY_REFUSED = "DependencyRefused"
REASON_REMOTE_DEPENDENCY_REFUSED = "RemoteDependencyRefused"  # a worker refused the copy
# True: no chosen worker holds the claims its pods mount or the datasets it names
# (dispatcher/decisions/data.py); it waits until one does.
COND_DATA_UNAVAILABLE = "DataUnavailable"
REASON_NO_CLUSTER_HAS_DATA = "NoClusterHasData"
REASON_NOT_DISPATCHABLE = "NotDispatchable"
REASON_NOT_DISPATCHED = "NotDispatched"  # not MultiKueue's, on a manager that runs no TrainJobs
REASON_NO_CLUSTER_FITS = "NoClusterFits"
REASON_NOT_ADMITTED_IN_TIME = "NotAdmittedInTime"
# On a worker: the runtime's podGroupPolicy, with no PodGroup made since the worker does not
# serve that PodGroup's API (condition and reason)
COND_POD_GROUP_IGNORED = "PodGroupPolicyIgnored"
# What puts a pod in its group: the scheduler-plugins' label, Volcano's annotation (Trainer's)
COSCHEDULING_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
# The Volcano queue of a job's PodGroup, from the runtime's template annotations (Trainer's)
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# A runtime field the framework does not do (trainjob/runtime/fields.py: reported).
COND_RUNTIME_FIELDS_IGNORED = "RuntimeFieldsIgnored"
# PodsStuck=True gives the kubelet's own reason for the first stuck pod (no constant of ours)
REASON_KUBELET = "(the kubelet's reason)"
RECOVERABLE_FAILURE_REASONS = frozenset(
    {REASON_RUNTIME_NOT_FOUND, REASON_RUNTIME_INVALID, REASON_NO_QUEUE}
)

# --- ML policy defaults ---------------------------------------------------------------------
TORCH_MASTER_PORT = 29500
MPI_HOSTFILE_DIR = "/etc/mpi"
MPI_HOSTFILE_NAME = "hostfile"
MPI_DEFAULT_SSH_PATH = "/root/.ssh"
MPI_SSH_PORT = 22


# --- the kinds we read and write: one coordinate each ----------------------------------------
TRAINJOB = Kind(TRAINER_GROUP, TRAINER_VERSION, TRAINJOB_PLURAL, "TrainJob", True)
TRAINING_RUNTIME = Kind(
    TRAINER_GROUP, TRAINER_VERSION, "trainingruntimes", TRAINING_RUNTIME_KIND, True
)
CLUSTER_TRAINING_RUNTIME = Kind(
    TRAINER_GROUP, TRAINER_VERSION, "clustertrainingruntimes", CLUSTER_TRAINING_RUNTIME_KIND, False
)
WORKLOAD = Kind(KUEUE_GROUP, KUEUE_VERSION, "workloads", "Workload", True)
RESOURCE_FLAVOR = Kind(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", "ResourceFlavor", False)
ADMISSION_CHECK = Kind(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", "AdmissionCheck", False)
MULTIKUEUE_CONFIG = Kind(
    KUEUE_GROUP, KUEUE_VERSION, "multikueueconfigs", MULTIKUEUE_CONFIG_KIND, False
)
MULTIKUEUE_CLUSTER = Kind(
    KUEUE_GROUP, KUEUE_VERSION, "multikueueclusters", "MultiKueueCluster", False
)
# The Cluster Inventory API's name for a cluster of a fleet (a MultiKueueCluster may name one).
CLUSTER_PROFILE = Kind(
    "multicluster.x-k8s.io", "v1alpha1", "clusterprofiles", "ClusterProfile", True
)
LOCAL_QUEUE = Kind(KUEUE_GROUP, KUEUE_VERSION, "localqueues", "LocalQueue", True)
CLUSTER_QUEUE = Kind(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "ClusterQueue", False)
WORKLOAD_PRIORITY_CLASS = Kind(
    KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", "WorkloadPriorityClass", False
)
JOB = Kind("batch", "v1", "jobs", "Job", True)
SERVICE = Kind("", "v1", "services", "Service", True)
PERSISTENT_VOLUME_CLAIM = Kind("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
PRIORITY_CLASS = Kind("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
# Gang scheduling on a worker (trainjob/runtime/podgroups/): the scheduler-plugins'
# coscheduling PodGroup and Volcano's, one kind name in two groups.
COSCHEDULING_POD_GROUP = Kind("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True)
VOLCANO_POD_GROUP = Kind("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True)
# Every kind above by its `kind` (the objects we build name theirs): their coordinates are
# looked up here, never guessed from the name.
KINDS: dict[str, Kind] = {
    k.kind: k
    for k in (
        TRAINJOB,
        TRAINING_RUNTIME,
        CLUSTER_TRAINING_RUNTIME,
        WORKLOAD,
        RESOURCE_FLAVOR,
        ADMISSION_CHECK,
        MULTIKUEUE_CONFIG,
        MULTIKUEUE_CLUSTER,
        LOCAL_QUEUE,
        CLUSTER_QUEUE,
        WORKLOAD_PRIORITY_CLASS,
        JOB,
        SERVICE,
        PERSISTENT_VOLUME_CLAIM,
        PRIORITY_CLASS,
        CONFIG_MAP,
        CUSTOM_RESOURCE_DEFINITION,
        EVENT,
        LEASE,
        NAMESPACE,
        POD,
        SECRET,
    )
}


# Kinds whose name more than one group uses, by (apiVersion, kind).
_BY_VERSION: dict[tuple[str, str], Kind] = {
    (k.api_version, k.kind): k for k in (COSCHEDULING_POD_GROUP, VOLCANO_POD_GROUP)
}


def kind_of(obj: dict[str, object]) -> Kind:
    """The coordinates of an object we built, by its apiVersion and `kind` (KeyError for a
    kind not above)."""
    found = _BY_VERSION.get((str(obj.get("apiVersion")), str(obj["kind"])))
    return found if found is not None else KINDS[str(obj["kind"])]
