"""Admission decisions for TrainJobs (pure): what the mutating and validating webhooks do
(their answer is a `kubecontrol.admission.Verdict`), over the TrainJob under admission read
as a view (`Admitted`)."""

from __future__ import annotations

import datetime as dt
from typing import TypedDict

from kubebase.objects import Dict
from kubecontrol.schema_bounds import bounds_problem
from trainjob.models import InvalidObject, parse_trainjob
from trainjob.runtime import resolve_runtime_info
from trainjob_api import conditions as cond
from trainjob_api import constants as c
from trainjob_api.views import RuntimeView, TrainJobView


class Admitted(TrainJobView):
    """A TrainJob under admission: the object of an AdmissionReview's request, in the
    namespace the request names (a new object's metadata need not say it). Not parsed
    further: the API server has checked it against the CRD's schema, and what a webhook
    refuses is the runtime's business (`runtime_refusal`)."""

    __slots__ = ("_namespace",)

    def __init__(self, request: Dict) -> None:
        super().__init__(request.get("object") or {})
        self._namespace = str(request.get("namespace") or self.meta.get("namespace") or "")

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def has_spec(self) -> bool:
        return isinstance(self.raw.get("spec"), dict)

    @property
    def has_labels(self) -> bool:
        return isinstance(self.meta.get("labels"), dict)

    @property
    def managed_by_routable(self) -> bool:
        """managedBy unset, or the built-in value Trainer's own CRD stamps as its default:
        any other value ("" included) is the user's, and the API judges it."""
        return "managedBy" not in self.spec or self.spec["managedBy"] == c.MANAGED_BY_BUILTIN


def stamp_patch_times(patches: list[Dict], now: str) -> list[Dict]:
    """`patches` as Trainer v2.3's webhook leaves them on create: an entry without a `time`
    gets `now`. (On update Trainer also re-stamps changed entries; our webhooks run on create
    only, so that a replica being down never blocks a TrainJob's updates.)"""
    return [p if p.get("time") else {**p, "time": now} for p in patches]


# Kueue's shipped managedJobsNamespaceSelector leaves these out, so its default LocalQueue
# is never applied there.
UNMANAGED_NAMESPACES = frozenset({"kube-system", "kueue-system"})


def defaults_to_queue(tj: TrainJobView, default_queue_exists: bool) -> str | None:
    """Kueue's LocalQueue defaulting: a TrainJob without a queue-name label, in a namespace
    that has a LocalQueue named `default` (and that Kueue's shipped namespace selector
    manages), is queued to it. The queue to label it with, or None."""
    if tj.queue_name is not None or not default_queue_exists:
        return None
    if tj.prebuilt_workload:  # a MultiKueue copy: its Workload is made
        return None
    return None if tj.namespace in UNMANAGED_NAMESPACES else c.DEFAULT_LOCAL_QUEUE


def held_without_queue(tj: TrainJobView, manage_without_queue: bool) -> bool:
    """Kueue's manageJobsWithoutQueueName: a TrainJob that names no queue (and is no
    MultiKueue copy) is Kueue's all the same, in the namespaces its shipped selector manages,
    and waits suspended."""
    return (
        manage_without_queue
        and tj.queue_name is None
        and not tj.prebuilt_workload
        and tj.namespace not in UNMANAGED_NAMESPACES
    )


class SpecChanges(TypedDict, total=False):
    """The spec fields the mutating webhook sets on a new TrainJob (`mutate_on_create`)."""

    suspend: bool
    runtimePatches: list[Dict]
    managedBy: str


def mutate_on_create(
    tj: Admitted,
    now: dt.datetime,
    *,
    multikueue_queue: bool = False,
    queue: str | None = None,
    hold: bool = False,
) -> SpecChanges:
    """The spec fields to set on a new TrainJob: queued ones start suspended; runtimePatches
    entries without a time get `now` (Trainer's webhook does that on create); and on a manager
    whose queue leads to a MultiKueue check a managedBy that is unset, or the built-in value
    (which Trainer's own CRD stamps as its default), becomes MultiKueue, as Kueue's webhook
    does."""
    queue = queue or tj.queue_name  # `queue`: one the webhook defaults it to
    changes = SpecChanges()
    if (queue or hold) and not tj.suspended:  # `hold`: held_without_queue
        changes["suspend"] = True
    patches = tj.runtime_patches
    stamped = stamp_patch_times(patches, cond.now_rfc3339(now))
    if stamped != patches:
        changes["runtimePatches"] = stamped
    if multikueue_queue and queue and tj.managed_by_routable:
        changes["managedBy"] = c.MANAGED_BY_MULTIKUEUE
    return changes


def trainjob_patch(
    tj: Admitted, spec: SpecChanges, finalizers: list[str] | None = None, queue: str | None = None
) -> tuple[Dict, ...]:
    """JSON patch operations that set the `spec` fields given (and `metadata.finalizers`, and
    the queue-name label to a defaulted `queue`).
    "add" on an object member replaces a value already there (RFC 6902), so one operation per
    field serves both; a missing `spec` is added whole."""
    ops: list[Dict] = []
    if spec and not tj.has_spec:
        ops.append({"op": "add", "path": "/spec", "value": spec})
    else:
        ops += [{"op": "add", "path": f"/spec/{_pointer(k)}", "value": v} for k, v in spec.items()]
    if finalizers is not None:
        ops.append({"op": "add", "path": "/metadata/finalizers", "value": finalizers})
    if queue is not None:
        if not tj.has_labels:
            ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
        label = _pointer(c.KUEUE_QUEUE_NAME_LABEL)
        ops.append({"op": "add", "path": f"/metadata/labels/{label}", "value": queue})
    return tuple(ops)


def _pointer(key: str) -> str:
    """One JSON pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


# What a TrainJob is held to when the installed CRD's schema could not be read (yet): the
# limit judging grows fastest with (every patch is applied to every replicatedJob), as the
# product's CRD and Kubeflow Trainer v2.3's state it.
MAX_RUNTIME_PATCHES = 16
FALLBACK_SCHEMA: Dict = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {"runtimePatches": {"type": "array", "maxItems": MAX_RUNTIME_PATCHES}},
        }
    },
}


def object_problem(tj: Admitted, schema: Dict | None) -> str | None:
    """Where the TrainJob under admission breaks a limit of the installed CRD (`schema`), or
    the product's own count of runtimePatches (an older or another CRD may not have it), or
    None. Asked before any judging: an object that reaches the webhook's port may never have
    been checked against the CRD."""
    problem = bounds_problem(tj.raw, FALLBACK_SCHEMA) or bounds_problem(tj.raw, schema)
    return None if problem is None else f"TrainJob {problem.lstrip('.')}"


def runtime_refusal(tj: Admitted, runtime: RuntimeView | None) -> str | None:
    """Why a TrainJob under admission cannot run on its runtime, as Trainer's webhook refuses
    it on create (it resolves the runtime there): reserved env names, node counts, names too
    long for their Jobs and pods, an MPI hostfile no ConfigMap holds. None when it fits, or
    when the runtime does not exist yet (the TrainJob waits for it, and a runtime made or
    changed later is judged by the controllers, as a condition)."""
    if runtime is None:
        return None
    meta = {**tj.meta, "namespace": tj.namespace}
    if not tj.name:  # generateName: the API server adds 5 characters
        meta["name"] = f"{meta.get('generateName') or ''}xxxxx"
    try:
        trainjob = parse_trainjob({**tj.raw, "metadata": meta})
    except InvalidObject as exc:
        return str(exc)
    _, problem = resolve_runtime_info(trainjob, runtime)
    return None if problem is None else problem.message
