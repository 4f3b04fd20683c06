"""Pure builders: the Indexed Jobs and the headless Service a TrainJob's RuntimeInfo asks for."""

from __future__ import annotations

from kubebase.objects import Dict, OwnerReference
from trainjob.jsondoc import json_copy
from trainjob.naming import job_name
from trainjob.queues import resources_key
from trainjob.runtime import PodSet, RuntimeInfo
from trainjob.runtime.templates import JobTemplateEdit
from trainjob_api import constants as c
from trainjob_api.pods import PodSpecView
from trainjob_api.views import JobView

# Pod-template fields the API server lets us change on a suspended Job (and Kueue relies on).
SCHEDULING_FIELDS = ("nodeSelector", "tolerations", "schedulingGates", "affinity")
# A Job's size, which an Indexed Job lets change (both together, equal) at any time.
SIZE_FIELDS = ("parallelism", "completions")


def trainjob_labels(trainjob: str) -> dict[str, str]:
    """Labels on everything we create for a TrainJob (JobSet's, so clients find the pods)."""
    return {
        c.JOBSET_NAME_LABEL: trainjob,
        c.TRAINJOB_NAME_LABEL: trainjob,
        c.MANAGED_LABEL: c.MANAGED_LABEL_VALUE,
    }


def build_job(
    info: RuntimeInfo,
    ps: PodSet,
    index: int,
    owner: OwnerReference,
    *,
    suspend: bool,
    attempt: int = 0,
) -> Dict:
    """One Indexed Job of a PodSet: `parallelism = completions` pods with stable hostnames,
    made for restart `attempt` (trainjob/runtime/failure.py)."""
    job = JobTemplateEdit(json_copy(ps.job_template))  # edits of this copy are its own
    meta, pod = job.metadata, job.pod_template
    spec = {k: v for k, v in job.raw["spec"].items() if k != "template"}
    labels = {
        **info.labels,
        **meta.labels,
        **trainjob_labels(info.trainjob),
        c.REPLICATED_JOB_NAME_LABEL: ps.name,
        c.JOB_INDEX_LABEL: str(index),
        c.PODSET_LABEL: ps.name,
        c.RESTART_ATTEMPT_LABEL: str(attempt),
    }
    pod_spec = pod.spec.raw
    pod_spec["subdomain"] = info.trainjob
    pod_spec.setdefault("restartPolicy", "OnFailure")  # as JobSet defaults it
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(info.trainjob, ps.name, index),
            "namespace": info.namespace,
            "labels": labels,
            "annotations": {**info.annotations, **meta.annotations},
            "ownerReferences": [owner],
        },
        "spec": {
            **spec,
            "completionMode": "Indexed",
            "parallelism": ps.parallelism,
            "completions": ps.parallelism,
            "suspend": suspend,
            "template": {
                "metadata": {
                    "labels": {**pod.metadata.labels, **labels},
                    "annotations": dict(pod.metadata.annotations),
                },
                "spec": pod_spec,
            },
        },
    }


def pods_ask(ps: PodSet) -> str:
    """What a pod of the PodSet's Jobs asks for (trainjob.queues.resources_key), as a Job made
    now would (what build_job adds to the pod spec takes nothing)."""
    return resources_key(PodSpecView.of_template(ps.pod_template))


def asked_by(job: JobView) -> str:
    """What a Job's pods ask for: its stored pod template, what they run with. Nothing a
    tenant can write on the Job (an annotation) stands in for it."""
    return resources_key(PodSpecView(job.template_spec))


def build_jobs(
    info: RuntimeInfo, ps: PodSet, owner: OwnerReference, *, suspend: bool, attempt: int = 0
) -> list[Dict]:
    return [
        build_job(info, ps, i, owner, suspend=suspend, attempt=attempt) for i in range(ps.replicas)
    ]


def attempt_of(job: JobView) -> int:
    """The restart a Job was made for (0: the first run, or made before restarts were), as
    its pod template says: that cannot change once the Job has run, its own labels can
    (`kubectl label`)."""
    found = job.template_labels.get(c.RESTART_ATTEMPT_LABEL)
    if found is None:
        found = job.labels.get(c.RESTART_ATTEMPT_LABEL, "0")
    return int(found) if found.isascii() and found.isdigit() else 0


def build_service(info: RuntimeInfo, owner: OwnerReference) -> Dict:
    """The headless Service that gives every pod `<tj>-<rj>-<job>-<pod>.<tj>` in DNS."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": info.trainjob,
            "namespace": info.namespace,
            "labels": trainjob_labels(info.trainjob),
            "ownerReferences": [owner],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {c.JOBSET_NAME_LABEL: info.trainjob},
        },
    }


def build_extra_object(obj: Dict, owner: OwnerReference | None, trainjob: str) -> Dict:
    """An object the pods need, with our labels; owned by the TrainJob unless `owner` is
    None (a claim the runtime keeps after the job, marked with the TrainJob it was made for)."""
    out = json_copy(obj)
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **trainjob_labels(trainjob)}
    if owner is not None:
        meta["ownerReferences"] = [owner]
        # the marker is ours to set, on kept claims only: one a runtime's template carries
        # would let another TrainJob of the namespace take this claim for its own
        # (ownership.made_for_trainjob)
        annotations = {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if k != c.CLAIM_MADE_FOR_ANNOTATION
        }
        if annotations:
            meta["annotations"] = annotations
        else:
            meta.pop("annotations", None)
    else:
        made_for = f"{meta.get('namespace')}/{trainjob}"
        meta["annotations"] = {
            **(meta.get("annotations") or {}),
            c.CLAIM_MADE_FOR_ANNOTATION: made_for,
        }
    return out


def job_patch(desired: JobView, actual: JobView) -> Dict | None:
    """The write that makes a live Job what `desired` says of its size, suspension and
    placement, or None: a JSON merge patch of what the API server lets change, naming the Job's
    UID (a Job made again under the name since it was read is not changed: 422).

    - Its size (parallelism and completions, which whoever may edit Jobs can change on an
      Indexed Job): of a running Job, each grown past what the TrainJob asks is made that
      again (the quota was taken for that many pods; one asked bigger since is not grown
      while its pods run); a suspended one is made the size the TrainJob asks now.
    - A running Job is suspended by `spec.suspend` alone (suspend_patch): its pod template
      cannot change, and a write that tried, or a size the API server refused with it, would
      leave it running.
    - A suspended one (its pods gone) takes the desired SCHEDULING_FIELDS, and resumes, in one
      write, as Kueue resumes a Job on a flavor. That write names the resourceVersion it was
      planned from: a placement someone wrote on the suspended Job since is never resumed with
      (409; the next pass reads it), and none may be written once it runs. While the Job
      controller has not yet cleared a just-suspended Job's startTime, the API server refuses
      a placement: none is written (nor the resume) until it has."""
    suspend = desired.suspended
    if not actual.suspended:
        if suspend:  # alone: a size the API server refused would keep it running
            return suspend_patch(actual)
        # Running: each of its sizes made no more than asked (never grown under its pods).
        over: Dict = {
            f: want
            for f in SIZE_FIELDS
            if (have := actual.size(f)) is not None
            and isinstance(want := desired.spec.get(f), int)
            and have > want
        }
        if "completions" in over:  # changed only with parallelism equal to it (Indexed)
            over = {f: desired.spec.get(f) for f in SIZE_FIELDS}
        return _patch_of(actual, over) if over else None
    spec: Dict = {
        f: desired.spec.get(f) for f in SIZE_FIELDS if desired.spec.get(f) != actual.spec.get(f)
    }
    had = actual.template_spec
    wanted = desired.template_spec
    placed = {
        f: merge_patch_to(had.get(f), wanted.get(f))
        for f in SCHEDULING_FIELDS
        if wanted.get(f) != had.get(f)
    }
    guarded = False
    if not (placed and actual.started):
        if placed:
            spec["template"] = {"spec": placed}
        if not suspend:
            spec["suspend"] = False
        guarded = bool(placed) or not suspend
    if not spec:
        return None
    write = _patch_of(actual, spec)
    if guarded and actual.resource_version:
        write["metadata"]["resourceVersion"] = actual.resource_version
    return write


def suspend_patch(actual: JobView) -> Dict:
    """The write that suspends a running Job: `spec.suspend` alone, naming its UID, so that
    nothing else of what it says, or of what the runtime says now, can have it refused."""
    return _patch_of(actual, {"suspend": True})


def _patch_of(actual: JobView, spec: Dict) -> Dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": actual.name,
            "namespace": actual.namespace,
            **({"uid": actual.uid} if actual.uid else {}),
        },
        "spec": spec,
    }


def merge_patch_to(have: object, want: object) -> object:
    """The JSON merge patch value (RFC 7386) that turns `have` into exactly `want`: a key
    `want` lacks is removed (null), an object is patched key by key, anything else replaced."""
    if isinstance(have, dict) and isinstance(want, dict):
        gone = {k: None for k in have if k not in want}
        return {**gone, **{k: merge_patch_to(have.get(k), v) for k, v in want.items()}}
    return want
