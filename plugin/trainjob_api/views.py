"""Typed views of the objects the controllers read: slotted classes over the JSON as the API
server sent it (nothing parsed ahead, nothing copied), one property per field read, in place
of `.get(...) or {}` chains. The typed cache reads (trainjob/caches.py) and the workers'
caches (dispatcher/workers/remote.py) hand them out; `raw` is the JSON, for writes and for builders
that copy it. TrainJob specs that are validated (runtime references, the trainer's counts) are
parsed by trainjob/models.py; a view reads what the dispatcher and the status paths need."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from kubebase.objects import Dict
from trainjob_api import conditions as cond
from trainjob_api import constants as c


def mapping(given: object) -> Dict:
    """A JSON object, or {} for anything else."""
    return given if isinstance(given, dict) else {}


def objects(given: object) -> list[Dict]:
    """The objects of a JSON list (anything else in it, or no list, counts as nothing)."""
    return [x for x in given if isinstance(x, dict)] if isinstance(given, list) else []


def whole(given: object) -> int:
    """A count as written: 0 for none, for a negative, and for anything that is not a number
    (an infinity included)."""
    if not isinstance(given, int | float | str):
        return 0
    try:
        return max(0, int(given))
    except (ValueError, OverflowError):
        return 0


class JsonView:
    """A view over one JSON object: `raw` is the JSON, read field by field."""

    __slots__ = ("raw",)

    def __init__(self, raw: Dict) -> None:
        self.raw = raw

    def _text(self, key: str) -> str:
        """A string field ("" when absent or null)."""
        return str(self.raw.get(key) or "")

    def _time(self, key: str) -> str | None:
        """A timestamp field (None when absent or empty)."""
        return self._text(key) or None


class StatusEntry(JsonView):
    """An entry of a status list with a message and a transition time: a condition, a
    Workload's admission check state."""

    __slots__ = ()

    @property
    def message(self) -> str:
        return self._text("message")

    @property
    def since(self) -> str | None:
        """lastTransitionTime, when set."""
        return self._time("lastTransitionTime")


class ConditionView(StatusEntry):
    """One status condition (metav1.Condition's fields)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"ConditionView({self.type}={self.status}, {self.reason})"

    @property
    def type(self) -> str:
        return self._text("type")

    @property
    def status(self) -> str:
        return self._text("status")

    @property
    def true(self) -> bool:
        return self.status == "True"

    @property
    def reason(self) -> str:
        return self._text("reason")


class ObjectView(JsonView):
    """What every object has: its metadata and its status conditions."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.namespace}/{self.name})"

    @property
    def meta(self) -> Dict:
        return self.raw.get("metadata") or {}

    @property
    def name(self) -> str:
        return str(self.meta.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.meta.get("namespace", ""))

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def created(self) -> str | None:
        return self.meta.get("creationTimestamp")

    @property
    def uid(self) -> str | None:
        return self.meta.get("uid")

    @property
    def resource_version(self) -> str | None:
        return self.meta.get("resourceVersion")

    @property
    def generation(self) -> int | None:
        return self.meta.get("generation")

    @property
    def deleting(self) -> bool:
        """metadata.deletionTimestamp is set."""
        return bool(self.meta.get("deletionTimestamp"))

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.meta.get("labels") or {})

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.meta.get("annotations") or {})

    @property
    def finalizers(self) -> list[str]:
        return list(self.meta.get("finalizers") or [])

    @property
    def owner_references(self) -> list[Dict]:
        return list(self.meta.get("ownerReferences") or [])

    @property
    def spec(self) -> Dict:
        return self.raw.get("spec") or {}

    @property
    def status(self) -> Dict:
        return self.raw.get("status") or {}

    @property
    def conditions(self) -> list[Dict]:
        return list(self.status.get("conditions") or [])

    @property
    def condition_views(self) -> list[ConditionView]:
        """Its conditions, each read in place."""
        return [ConditionView(x) for x in self.status.get("conditions") or []]

    def condition(self, ctype: str) -> ConditionView | None:
        """Its condition of type `ctype`, if any (read in place: no copy of the list)."""
        found = cond.find(self.status.get("conditions") or [], ctype)
        return None if found is None else ConditionView(found)

    def is_true(self, ctype: str) -> bool:
        found = self.condition(ctype)
        return found is not None and found.true


class PodSetPhases(JsonView):
    """One PodSet's pods by phase (a TrainJob's status.podsStatus[])."""

    __slots__ = ()

    PHASES = ("pending", "running", "succeeded", "failed", "unknown")

    @property
    def name(self) -> str:
        return self._text("name")

    def count(self, phase: str) -> int:
        return whole(self.raw.get(phase))


class ReplicatedJobStatusView(JsonView):
    """One replicatedJob's child Jobs by state (a TrainJob's status.jobsStatus[], JobSet's
    ReplicatedJobStatus)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self._text("name")

    def count(self, state: str) -> int:
        """How many are active, ready, succeeded, failed or suspended (0 when not a count)."""
        return whole(self.raw.get(state))


def replicated_job_statuses(given: object) -> list[ReplicatedJobStatusView]:
    """The entries of a jobsStatus list, whatever its shape."""
    return [ReplicatedJobStatusView(x) for x in objects(given)]


class TrainerStatusView(JsonView):
    """What the training last reported of itself (status.trainerStatus)."""

    __slots__ = ()

    @property
    def percent(self) -> int | None:
        found = self.raw.get("progressPercentage")
        return None if found is None else int(found)

    @property
    def seconds_left(self) -> int | None:
        found = self.raw.get("estimatedRemainingSeconds")
        return None if found is None else int(found)

    @property
    def reported_at(self) -> str | None:
        return self._time("lastUpdatedTime")

    @property
    def metrics(self) -> list[tuple[str, str]]:
        """Its (name, value) pairs; an entry that is not a pair of strings, as Trainer's schema
        has them, counts as none."""
        pairs = ((m.get("name"), m.get("value")) for m in objects(self.raw.get("metrics")))
        return [(n, v) for n, v in pairs if isinstance(n, str) and isinstance(v, str)]


class TrainJobView(ObjectView):
    """A TrainJob as the dispatcher, the status paths and `kubectl trainjob` read it."""

    __slots__ = ()

    @property
    def queue_name(self) -> str | None:
        """The Kueue LocalQueue its label names (None for none, or an empty one)."""
        return self.labels.get(c.KUEUE_QUEUE_NAME_LABEL) or None

    @property
    def prebuilt_workload(self) -> str | None:
        """The prebuilt Workload it names, as a MultiKueue copy does: Kueue 0.19's annotation
        (its WorkloadIdentifierAnnotations gate, on by default), else its label."""
        return (
            self.annotations.get(c.KUEUE_PREBUILT_WORKLOAD_ANNOTATION)
            or self.labels.get(c.KUEUE_PREBUILT_WORKLOAD_LABEL)
            or None
        )

    @property
    def queued(self) -> bool:
        """Queued by Kueue: a queue-name label, or a prebuilt Workload (a MultiKueue copy)."""
        return bool(self.queue_name or self.prebuilt_workload)

    @property
    def pods_status(self) -> list[PodSetPhases]:
        return [PodSetPhases(x) for x in self.status.get("podsStatus") or []]

    @property
    def trainer_status(self) -> TrainerStatusView | None:
        """None while the training reported nothing."""
        found = self.status.get("trainerStatus")
        return TrainerStatusView(found) if isinstance(found, dict) and found else None

    @property
    def running_somewhere(self) -> bool:
        """A worker or its Jobs say it runs (status.clusterName or status.jobsStatus)."""
        return bool(self.status.get("clusterName") or self.status.get("jobsStatus"))

    @property
    def runtime_ref(self) -> Dict:
        return mapping(self.spec.get("runtimeRef"))

    @property
    def runtime_patches(self) -> list[Dict]:
        """spec.runtimePatches as written (the CRD types each entry an object)."""
        return list(self.spec.get("runtimePatches") or [])

    @property
    def runtime_kind(self) -> str:
        """The kind its runtimeRef names (the API's default: ClusterTrainingRuntime)."""
        return str(self.runtime_ref.get("kind") or c.CLUSTER_TRAINING_RUNTIME_KIND)

    @property
    def runtime_name(self) -> str:
        return str(self.runtime_ref.get("name", ""))

    @property
    def managed_by(self) -> str | None:
        return self.spec.get("managedBy")

    @property
    def multikueue(self) -> bool:
        """MultiKueue's to dispatch (spec.managedBy)."""
        return self.managed_by == c.MANAGED_BY_MULTIKUEUE

    @property
    def suspended(self) -> bool:
        return bool(self.spec.get("suspend"))

    @property
    def cluster_name(self) -> str | None:
        """status.clusterName: the worker whose status it shows (MultiKueue's)."""
        return self.status.get("clusterName")

    @property
    def finished(self) -> bool:
        """Complete, or Failed for a reason that is final."""
        return cond.trainjob_finished(self.conditions)

    def with_kind(self) -> Dict:
        """The JSON with its apiVersion and kind (a cached object's are set by the informer;
        a built one's may not be)."""
        return c.TRAINJOB.stamped(self.raw)


class RuntimeView(ObjectView):
    """A ClusterTrainingRuntime or TrainingRuntime as the caches hold it: what the controllers
    read of it before a job is built from it (trainjob/models.py parses that)."""

    __slots__ = ()

    @property
    def template_spec(self) -> Dict:
        """spec.template.spec: the JobSet-shaped template its jobs are made from."""
        template = self.spec.get("template") or {}
        spec: Dict = template.get("spec") or {}
        return spec

    @property
    def gang(self) -> bool:
        """Whether its pods run as a gang (spec.podGroupPolicy)."""
        return bool(self.spec.get("podGroupPolicy"))

    @property
    def claim_templates(self) -> list[str]:
        """The names of the volume claim templates its volumeClaimPolicies make per job."""
        return [
            str(name)
            for policy in self.template_spec.get("volumeClaimPolicies") or []
            for template in (policy or {}).get("templates") or []
            if (name := ((template or {}).get("metadata") or {}).get("name"))
        ]


class JobView(ObjectView):
    """A batch/v1 Job as the worker controller reads it: its size, its counts, its end. Its
    cache keeps Jobs without their pods' image, command and environment
    (worker_controller/digests.py: job_digest)."""

    __slots__ = ()

    @property
    def parallelism(self) -> int:
        return int(self.spec.get("parallelism") or 0)

    def size(self, field: str) -> int | None:
        """spec.parallelism or completions, as written (None when absent or not a whole
        number)."""
        found = self.spec.get(field)
        return found if isinstance(found, int) and not isinstance(found, bool) else None

    @property
    def template(self) -> Dict:
        """Its pod template ({} when absent or not an object)."""
        return mapping(self.spec.get("template"))

    @property
    def template_spec(self) -> Dict:
        """Its pod template's spec: what its pods run with ({} when absent)."""
        return mapping(self.template.get("spec"))

    def template_strings(self, field: str) -> dict[str, str]:
        """Its pod template's labels or annotations whose values are strings: what its pods
        carry, which cannot change once the Job has run (its own can)."""
        found = mapping(mapping(self.template.get("metadata")).get(field))
        return {str(k): v for k, v in found.items() if isinstance(v, str)}

    @property
    def template_labels(self) -> dict[str, str]:
        return self.template_strings("labels")

    @property
    def started(self) -> bool:
        """The Job controller has set status.startTime (cleared again once it is suspended)."""
        return bool(self.status.get("startTime"))

    @property
    def suspended(self) -> bool:
        return bool(self.spec.get("suspend"))

    def count(self, field: str) -> int:
        """status.active, ready, succeeded or failed (0 when absent)."""
        return int(self.status.get(field) or 0)

    def ended(self, ctype: str) -> ConditionView | None:
        """Its Complete or Failed condition, when True."""
        found = self.condition(ctype)
        return found if found is not None and found.true else None

    @property
    def complete(self) -> bool:
        return self.ended("Complete") is not None

    @property
    def failure(self) -> ConditionView | None:
        """Its Failed condition, when it failed."""
        return self.ended("Failed")

    @property
    def finished(self) -> bool:
        return self.complete or self.failure is not None

    @property
    def ready(self) -> bool:
        """Complete, or as many pods ready or succeeded as it runs at once."""
        want = self.parallelism
        return self.complete or self.count("ready") + self.count("succeeded") >= want > 0

    @property
    def active(self) -> bool:
        return self.count("active") > 0 and not self.finished


class PodProblem(JsonView):
    """What is wrong with a pod (worker_controller/digests.py: pod_problem): a container the
    kubelet cannot start (`stuck`), one that exited non-zero, or the pod's own failure."""

    __slots__ = ()

    @property
    def stuck(self) -> bool:
        return bool(self.raw.get("stuck"))

    @property
    def container(self) -> str:
        return self._text("container")

    @property
    def reason(self) -> str:
        return self._text("reason")

    @property
    def message(self) -> str:
        return self._text("message")

    @property
    def finished_at(self) -> str:
        return self._text("finishedAt")


class PodView(ObjectView):
    """A pod of ours as the worker controller's cache keeps it (a digest: its TrainJob and
    replicatedJob labels, its phase, what is wrong with it)."""

    __slots__ = ()

    @property
    def replicated_job(self) -> str:
        return self.labels.get(c.REPLICATED_JOB_NAME_LABEL, "")

    @property
    def phase(self) -> str:
        return str(self.status.get("phase") or "Pending")

    @property
    def problem(self) -> PodProblem | None:
        found = self.status.get("problem")
        return None if not found else PodProblem(found)


class PodSeen(ObjectView):
    """A pod as the worker's API sends it (the story reads it; the worker controller's
    cache keeps digests instead, PodView): where it runs, its containers and their state."""

    __slots__ = ()

    @property
    def phase(self) -> str | None:
        return self.status.get("phase")

    @property
    def node_name(self) -> str | None:
        return self.spec.get("nodeName")

    @property
    def container_names(self) -> list[str]:
        return [str(x.get("name")) for x in self.spec.get("containers") or []]

    @property
    def _container_statuses(self) -> list[Dict]:
        return list(self.status.get("containerStatuses") or [])

    @property
    def ready(self) -> bool:
        """Every container ready (and it has one)."""
        found = self._container_statuses
        return bool(found) and all(s.get("ready") for s in found)

    @property
    def restarts(self) -> int:
        return sum(int(s.get("restartCount") or 0) for s in self._container_statuses)


class EventView(ObjectView):
    """A core/v1 Event: what it is about, why, how often and when (its `eventTime` standing in
    for the older timestamps an events.k8s.io writer leaves empty)."""

    __slots__ = ()

    @property
    def _involved(self) -> Dict:
        return mapping(self.raw.get("involvedObject"))

    @property
    def about_uid(self) -> str | None:
        return self._involved.get("uid")

    @property
    def about_kind(self) -> object:
        """The kind of the object it is about, as written."""
        return self._involved.get("kind")

    @property
    def about_name(self) -> str:
        return str(self._involved.get("name", ""))

    @property
    def about(self) -> str:
        """KIND/NAME of the object it is about."""
        return f"{self._involved.get('kind')}/{self._involved.get('name')}"

    @property
    def event_type(self) -> str | None:
        return self.raw.get("type")

    @property
    def reason(self) -> str | None:
        return self.raw.get("reason")

    @property
    def message(self) -> str:
        return self._text("message")

    @property
    def count(self) -> int:
        return int(self.raw.get("count") or 1)

    @property
    def first_seen(self) -> str | None:
        return self._time("firstTimestamp") or self._time("eventTime")

    @property
    def last_seen(self) -> str | None:
        return (
            self._time("lastTimestamp") or self._time("eventTime") or self._time("firstTimestamp")
        )


class PodMetricsView(ObjectView):
    """A metrics.k8s.io PodMetrics: each container's CPU and memory as measured, and when."""

    __slots__ = ()

    @property
    def usages(self) -> list[tuple[object, object]]:
        """(cpu, memory) of each container, as the metrics API wrote them (0 when absent);
        AttributeError for a container entry that is not an object."""
        found = []
        for container in self.raw.get("containers") or []:
            used = container.get("usage") or {}
            found.append((used.get("cpu", 0), used.get("memory", 0)))
        return found

    @property
    def timestamp(self) -> str | None:
        return self._time("timestamp")

    @property
    def window(self) -> str | None:
        return self._time("window")


class ConfigMapView(ObjectView):
    """A ConfigMap: its text entries (`data`; one that is not a string counts as absent)."""

    __slots__ = ()

    def text(self, key: str) -> str | None:
        found = mapping(self.raw.get("data")).get(key)
        return found if isinstance(found, str) else None


class FailedCreateView(ObjectView):
    """A FailedCreate Event of the Job controller as the worker controller's cache keeps it:
    the Job it is about (name and UID), its message, when it was last seen."""

    __slots__ = ()

    @property
    def job_name(self) -> str:
        return str((self.raw.get("job") or {}).get("name") or "")

    @property
    def job_uid(self) -> str:
        return str((self.raw.get("job") or {}).get("uid") or "")

    @property
    def message(self) -> str:
        return self._text("message")

    @property
    def last(self) -> str:
        return self._text("last")


# The states of an AdmissionCheck on a Workload (Kueue's CheckState).
CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]


class CheckView(StatusEntry):
    """One of a Workload's admission check states (status.admissionChecks[])."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self._text("name")

    @property
    def state(self) -> str:
        """Pending, Ready, Retry or Rejected (Kueue's CheckState)."""
        return self._text("state")

    @property
    def pod_set_updates(self) -> list[PodSetUpdateView]:
        """What the check adds to each PodSet's pods once it is Ready."""
        return [PodSetUpdateView(x) for x in self.raw.get("podSetUpdates") or []]


class PodSetUpdateView(JsonView):
    """What an admission check adds to one PodSet's pods (podSetUpdates[]): labels,
    annotations, a node selector and tolerations."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self._text("name")

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.raw.get("labels") or {})

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.raw.get("annotations") or {})

    @property
    def node_selector(self) -> dict[str, str]:
        return dict(self.raw.get("nodeSelector") or {})

    @property
    def tolerations(self) -> list[Dict]:
        return list(self.raw.get("tolerations") or [])


class PodSetAssignmentView(JsonView):
    """Where Kueue admitted one PodSet (status.admission.podSetAssignments[]): the flavour
    of each resource, and what the PodSet uses of each."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self._text("name")

    @property
    def flavors(self) -> dict[str, str]:
        """The ResourceFlavor of each resource."""
        return dict(self.raw.get("flavors") or {})

    @property
    def resource_usage(self) -> Dict:
        """What the PodSet's pods use of each resource, as quantities."""
        return dict(self.raw.get("resourceUsage") or {})


class WorkloadView(ObjectView):
    """A Kueue Workload read by field name: what the controllers read of one, each a property
    in place of a `.get(...) or {}` chain (absent fields read as Kueue leaves them: None,
    empty, or the API's default)."""

    __slots__ = ()

    @property
    def queue_name(self) -> str | None:
        return self.spec.get("queueName")

    @property
    def active(self) -> bool:
        """spec.active (Kueue's default: true); false once deactivated."""
        return self.spec.get("active", True) is not False

    @property
    def pod_sets(self) -> list[Dict]:
        return list(self.spec.get("podSets") or [])

    @property
    def cluster_name(self) -> str | None:
        """status.clusterName: the worker a MultiKueue manager Workload was dispatched to."""
        return self.status.get("clusterName")

    @property
    def nominated_clusters(self) -> list[str]:
        return list(self.status.get("nominatedClusterNames") or [])

    @property
    def admission(self) -> Dict:
        return self.status.get("admission") or {}

    @property
    def cluster_queue(self) -> str:
        """The ClusterQueue it was admitted to ("" before admission)."""
        return str(self.admission.get("clusterQueue", ""))

    @property
    def pod_set_assignments(self) -> list[PodSetAssignmentView]:
        """Where each PodSet was admitted (none before admission)."""
        return [PodSetAssignmentView(x) for x in self.admission.get("podSetAssignments") or []]

    @property
    def admission_checks(self) -> list[Dict]:
        return list(self.status.get("admissionChecks") or [])

    @property
    def checks(self) -> list[CheckView]:
        """Its admission checks' states, each read in place."""
        return [CheckView(x) for x in self.admission_checks]

    def check(self, name: str) -> CheckView | None:
        """The state of the admission check `name`, if the Workload has one."""
        found = next((s for s in self.admission_checks if s.get("name") == name), None)
        return None if found is None else CheckView(found)

    @property
    def reclaimable_pods(self) -> list[Dict]:
        return list(self.status.get("reclaimablePods") or [])

    # ---- its state, from its conditions ----------------------------------------------------

    @property
    def has_quota(self) -> bool:
        return self.is_true("QuotaReserved")

    @property
    def evicted(self) -> bool:
        return self.is_true("Evicted")

    @property
    def admitted(self) -> bool:
        """Admitted and not evicted."""
        return self.is_true("Admitted") and not self.evicted

    @property
    def finished(self) -> bool:
        return self.is_true("Finished")

    @property
    def finished_reason(self) -> str | None:
        """The reason of a Finished Workload (Succeeded, Failed, OutOfSync ...); None if not."""
        found = self.condition("Finished")
        return found.reason if found is not None and found.true else None

    @property
    def admitted_at(self) -> str | None:
        """When it was admitted (its Admitted condition's last change), while it is."""
        found = self.condition("Admitted")
        return (found.since or "") if found is not None and found.true else None

    @property
    def eviction_message(self) -> str:
        evicted = self.condition("Evicted")
        if evicted is not None and evicted.true:
            return f"{evicted.reason or 'Evicted'}: {evicted.message}".strip()
        return "the Workload is no longer admitted"

    def gated_by(self, gate: str) -> bool:
        """Whether its spec holds the preemption gate `gate` (Kueue's preemptionGates)."""
        gates = self.spec.get("preemptionGates")
        return isinstance(gates, list) and any(
            isinstance(g, dict) and g.get("name") == gate for g in gates
        )

    @property
    def gate_states(self) -> list[Dict]:
        """Where its preemption gates stand (status.preemptionGates: name, position, time)."""
        return objects(self.status.get("preemptionGates"))

    def gate_opened_at(self, gate: str) -> str | None:
        """When the preemption gate `gate` was opened, while it is open (its status entry's
        lastTransitionTime; "" when it has none); None while it is closed."""
        for state in self.gate_states:
            if state.get("name") == gate:
                opened = state.get("position") == "Open"
                return str(state.get("lastTransitionTime") or "") if opened else None
        return None

    @property
    def blocked_on_gates_since(self) -> str | None:
        """Since when its Kueue would preempt to admit it but a closed gate keeps it from
        doing so (its BlockedOnPreemptionGates condition, while True; "" without a time)."""
        found = self.condition(c.KUEUE_BLOCKED_ON_PREEMPTION_GATES)
        return (found.since or "") if found is not None and found.true else None

    def reserved_for(self, now: dt.datetime) -> float | None:
        """Seconds since its QuotaReserved condition last changed (None: it has none)."""
        found = self.condition("QuotaReserved")
        since = found.since if found is not None else None
        return max(0.0, (now - cond.parse_time(since)).total_seconds()) if since else None
