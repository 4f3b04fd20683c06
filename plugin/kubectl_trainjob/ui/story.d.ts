// The job story's types, written by `./run manifests` from plugin/trainjob_api/story.py:
// do not edit. The page's scripts are checked against them
// (tests/local/test_story_contract.py).

/** One of a worker's ClusterQueues, its quota and use as the dispatcher last watched. */
export interface ClusterQueueUse {
  /** The ClusterQueue. */
  name: string;
  /** Its cohort, if any. */
  cohort: string | null;
  /** Whether Kueue says it is active. */
  active: boolean;
  /** Workloads pending in it. */
  pendingWorkloads: number;
  /** Workloads holding a quota reservation in it. */
  reservingWorkloads: number;
  /** Workloads admitted in it. */
  admittedWorkloads: number;
  /** Its quota and use by flavour. */
  flavors: FlavorUse[];
}

/** A condition of the TrainJob's status, as its controllers wrote it. */
export interface Condition {
  /** The condition's type: Created, Suspended, Complete, Failed, ... (docs/users/user-guide.md). */
  type: string;
  /** True, False or Unknown. */
  status: string;
  /** Why, in one CamelCase word. */
  reason: string | null;
  /** Why, for a person. */
  message: string | null;
  /** When the status last changed (RFC 3339). */
  lastTransitionTime: string | null;
}

/** Our copy of the TrainJob on the worker that runs it. */
export interface Copy {
  /** Its status there. */
  status: CopyStatus;
}

/** The status of our copy of the TrainJob on its worker, as the dispatcher last watched it. Fields other than these are kept as the worker wrote them. */
export interface CopyStatus {
  /** The copy's conditions on the worker. */
  conditions: Condition[];
  /** Its Jobs by replicated job. */
  jobsStatus: JobCounts[];
  [field: string]: unknown;
}

/** An Event about the TrainJob, its Workload, or (on the worker) its copy, Jobs and pods. */
export interface Event {
  /** Where it was recorded: `manager`, or the worker's name. */
  source: string;
  /** Normal or Warning. */
  type: string | null;
  /** Why, in one CamelCase word. */
  reason: string | null;
  /** What happened (its first 1,024 characters). */
  message: string;
  /** The object it is about, as KIND/NAME. */
  object: string;
  /** How many times it happened. */
  count: number;
  /** When it first happened. */
  firstTimestamp: string | null;
  /** When it last happened. */
  lastTimestamp: string | null;
}

/** A ResourceFlavor of a worker's ClusterQueue and its resources. */
export interface FlavorUse {
  /** The ResourceFlavor. */
  name: string;
  /** Its resources. */
  resources: ResourceUse[];
}

/** One replicated job's Jobs on the worker, as its copy's status counts them. */
export interface JobCounts {
  /** The replicated job (a role of the runtime: node, launcher, ...). */
  name: string;
  /** Its Jobs running. */
  active: number;
  /** Its Jobs whose pods are ready. */
  ready: number;
  /** Its Jobs done. */
  succeeded: number;
  /** Its Jobs failed. */
  failed: number;
  /** Its Jobs suspended. */
  suspended: number;
}

/** One of the TrainJob's pods on its worker, or, once they are gone, as kept with its log tail. */
export interface Pod {
  /** The pod's name on the worker. */
  name: string;
  /** The worker it runs on (its MultiKueueCluster). */
  worker: string;
  /** Its role: the runtime's replicated job (node, launcher, ...). */
  replicatedJob: string | null;
  /** Its completion index in that role. */
  index: string | null;
  /** Pending, Running, Succeeded, Failed or Unknown. */
  phase: string | null;
  /** The node it was scheduled to. */
  node: string | null;
  /** When it was made. */
  creationTimestamp: string | null;
  /** Whether all its containers are ready. */
  ready: boolean;
  /** Its containers' restarts, summed. */
  restarts: number;
  /** Its containers' names (the log reads one of them). */
  containers: string[];
  /** Its CPU and memory use while it runs; null when not measured (see usageProblem). */
  usage: PodUsage | null;
  /** True when the pod is gone and this is how it ended, kept with its log tail. */
  kept: boolean;
}

/** A pod's CPU and memory use, summed over its containers, as the worker's metrics API (metrics.k8s.io) last measured them: what `kubectl top pod` shows there. */
export interface PodUsage {
  /** CPU in thousandths of a core. */
  cpuMillicores: number;
  /** Memory (working set) in bytes. */
  memoryBytes: number;
  /** When it was measured. */
  timestamp: string | null;
  /** Over how long (a duration: 15s). */
  window: string | null;
}

/** While the job waits: one worker it is sent to, its copy's state there and how busy the queue it waits in is, as that worker's Kueue counts in the queues' status. */
export interface QueueWait {
  /** The worker (a nominated cluster of its Workload). */
  worker: string;
  /** The copy's Workload there: `waiting`, `admitted` or `no copy yet`. */
  copy: string | null;
  /** Why there is nothing to say: the worker not connected, a queue that does not exist. */
  problem: string | null;
  /** The LocalQueue it waits in there. */
  localQueue: string | null;
  /** Workloads pending in that LocalQueue. */
  pendingInLocalQueue: number | null;
  /** That LocalQueue's ClusterQueue. */
  clusterQueue: string | null;
  /** Workloads pending in that ClusterQueue. */
  pendingInClusterQueue: number | null;
  /** Workloads admitted in that ClusterQueue. */
  admittedInClusterQueue: number | null;
}

/** One resource of a flavour in a worker's ClusterQueue. */
export interface ResourceUse {
  /** The resource (cpu, memory, nvidia.com/gpu, ...). */
  name: string;
  /** Its quota in the ClusterQueue. */
  nominalQuota: string;
  /** Reserved by admitted Workloads. */
  reserved: string;
  /** In use by running Workloads. */
  used: string;
  /** The reserved share of the quota, 0 to 1. */
  share: number;
}

/** One run of the TrainJob on a worker: those that ended before the job did, then the current one. */
export interface Run {
  /** Where it ran. */
  worker: string;
  /** When its pods were started there, as the worker said (null when it never said). */
  started: string | null;
  /** When the run ended (null while it goes on). */
  ended: string | null;
  /** Why it ended: the dispatcher's reason for sending it back (ClusterLost, RemoteEvicted, ...), Kueue's eviction reason, or Complete / `Failed: REASON`. */
  reason: string | null;
  /** Why it ended, for a person. */
  message: string | null;
  /** True for the run the TrainJob's status names. */
  current: boolean;
  /** The checkpoint it was started from (its name under the job's checkpoint place), when it was sent there after a move; null when it started afresh. */
  resumedFrom: string | null;
  /** The step it started from: the checkpoint's step, 0 for a run of a job that keeps checkpoints started afresh (null: not known). */
  startStep: number | null;
  /** The last checkpoint it reported (the `checkpoint` metric of its progress reports). */
  checkpoint: string | null;
  /** The step that checkpoint holds (the `checkpoint_step` metric). */
  checkpointStep: number | null;
  /** How many times its Jobs were made again there by the runtime's failurePolicy (the worker's Events say why each time); null when none was. */
  restarts: number | null;
}

/** Which TrainJob of the manager the story is of. */
export interface StoryMeta {
  /** The TrainJob's name. */
  name: string;
  /** Its namespace. */
  namespace: string;
  /** Its UID on the manager. */
  uid: string | null;
}

/** Where a TrainJob of the manager runs and ran, its pods there, its Events on the manager and on that worker, and while it waits, the queues it waits in. */
export interface TrainJobStory {
  /** view.trainjob.dev/v1alpha1. */
  apiVersion: "view.trainjob.dev/v1alpha1";
  /** TrainJobStory. */
  kind: "TrainJobStory";
  /** The TrainJob the story is of. */
  metadata: StoryMeta;
  /** The worker that runs it (null while it runs nowhere). */
  worker: string | null;
  /** Why its worker could not be read, when it could not. */
  workerProblem: string | null;
  /** The manager TrainJob's conditions. */
  conditions: Condition[];
  /** Where it ran, oldest first, then where it runs. */
  placements: Run[];
  /** While its Workload is not admitted: each worker it is sent to. */
  queues: QueueWait[];
  /** Our copy on that worker (null when there is none: not made yet, or removed once it ended). */
  copy: Copy | null;
  /** Its pods on that worker (at most 500), by role and index. */
  pods: Pod[];
  /** True when the worker has more of its pods than the story lists. */
  morePods: boolean;
  /** Why the running pods carry no CPU and memory use, when the worker cannot say. */
  usageProblem: string | null;
  /** Events about it on the manager and on its worker, oldest first (at most 500 an object). */
  events: Event[];
}

/** A worker as the dispatcher replica that answers sees it, from the caches it keeps for placement. */
export interface Worker {
  /** view.trainjob.dev/v1alpha1. */
  apiVersion: "view.trainjob.dev/v1alpha1";
  /** Worker. */
  kind: "Worker";
  /** Named after its MultiKueueCluster. */
  metadata: WorkerMeta;
  /** Whether the dispatcher reaches it. */
  connection: "Connected" | "Connecting" | "Disconnected" | "NoKubeconfig";
  /** Why it is not connected. */
  problem: string | null;
  /** Since when it has not been reached. */
  downSince: string | null;
  /** Our TrainJob copies there. */
  trainJobCopies: number | null;
  /** Its ClusterQueues; null while not known (the worker unreachable, or its ClusterQueues not readable with the manager's identity there). */
  clusterQueues: ClusterQueueUse[] | null;
}

/** The worker's name. */
export interface WorkerMeta {
  /** The worker's MultiKueueCluster. */
  name: string;
}
