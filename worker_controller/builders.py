"""Pure builders: the Indexed Jobs and the headless Service a TrainJob's RuntimeInfo asks for."""

from __future__ import annotations

from kubecontrol.objects import Dict
from trainjob import constants as c
from trainjob.jsondoc import json_copy
from trainjob.naming import controlled_by, job_name
from trainjob.queues import resources_key
from trainjob.runtime import PodSet, RuntimeInfo
from trainjob.views import JobView

# Pod-template fields the API server lets us change on a suspended Job (and Kueue relies on).
SCHEDULING_FIELDS = ("nodeSelector", "tolerations", "schedulingGates", "affinity")


def trainjob_labels(trainjob: str) -> dict[str, str]:
    """Labels on everything we create for a TrainJob (JobSet's, so clients find the pods)."""
    return {
        c.JOBSET_NAME_LABEL: trainjob,
        c.TRAINJOB_NAME_LABEL: trainjob,
        c.MANAGED_LABEL: c.MANAGED_LABEL_VALUE,
    }


def build_job(
    info: RuntimeInfo, ps: PodSet, index: int, owner: Dict, *, suspend: bool, attempt: int = 0
) -> Dict:
    """One Indexed Job of a PodSet: `parallelism = completions` pods with stable hostnames,
    made for restart `attempt` (trainjob/runtime/failure.py)."""
    template = json_copy(ps.job_template)
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    pod_template = spec.pop("template", {}) or {}
    labels = {
        **info.labels,
        **(meta.get("labels") or {}),
        **trainjob_labels(info.trainjob),
        c.REPLICATED_JOB_NAME_LABEL: ps.name,
        c.JOB_INDEX_LABEL: str(index),
        c.PODSET_LABEL: ps.name,
        c.RESTART_ATTEMPT_LABEL: str(attempt),
    }
    pod_meta = pod_template.get("metadata") or {}
    pod_spec = pod_template.get("spec") or {}
    pod_spec["subdomain"] = info.trainjob
    pod_spec.setdefault("restartPolicy", "OnFailure")  # as JobSet defaults it
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(info.trainjob, ps.name, index),
            "namespace": info.namespace,
            "labels": labels,
            "annotations": {
                **info.annotations,
                **(meta.get("annotations") or {}),
                c.PODS_ASK_ANNOTATION: pods_ask(ps),
            },
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
                    "labels": {**(pod_meta.get("labels") or {}), **labels},
                    "annotations": dict(pod_meta.get("annotations") or {}),
                },
                "spec": pod_spec,
            },
        },
    }


def pods_ask(ps: PodSet) -> str:
    """What a pod of the PodSet's Jobs asks for (trainjob.queues.resources_key), as a Job made
    now says in its PODS_ASK_ANNOTATION (what build_job adds to the pod spec takes nothing)."""
    return resources_key(ps.pod_template.get("spec") or {})


def asked_by(job: JobView) -> str:
    """What a Job's pods ask for as it was made: its annotation, else (a Job made before Jobs
    said so) its stored pod template."""
    made = job.annotations.get(c.PODS_ASK_ANNOTATION)
    return made or resources_key((job.spec.get("template") or {}).get("spec") or {})


def build_jobs(
    info: RuntimeInfo, ps: PodSet, owner: Dict, *, suspend: bool, attempt: int = 0
) -> list[Dict]:
    return [
        build_job(info, ps, i, owner, suspend=suspend, attempt=attempt) for i in range(ps.replicas)
    ]


def attempt_of(job: JobView) -> int:
    """The restart a Job was made for (0: the first run, or made before restarts were), as
    its pod template says: that cannot change once the Job has run, its own labels can
    (`kubectl label`)."""
    template = job.spec.get("template")
    meta = template.get("metadata") if isinstance(template, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    found = labels.get(c.RESTART_ATTEMPT_LABEL) if isinstance(labels, dict) else None
    if not isinstance(found, str):
        found = job.labels.get(c.RESTART_ATTEMPT_LABEL, "0")
    return int(found) if found.isascii() and found.isdigit() else 0


def build_service(info: RuntimeInfo, owner: Dict) -> Dict:
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


def build_extra_object(obj: Dict, owner: Dict | None, trainjob: str) -> Dict:
    """An object the pods need, with our labels; owned by the TrainJob unless `owner` is
    None (a claim the runtime keeps after the job, marked with the TrainJob it was made for)."""
    out = json_copy(obj)
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **trainjob_labels(trainjob)}
    if owner is not None:
        meta["ownerReferences"] = [owner]
        # the marker is ours to set, on kept claims only: one a runtime's template carries
        # would let another TrainJob of the namespace take this claim for its own (is_ours)
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


def is_ours(obj: Dict, trainjob: Dict) -> bool:
    """Whether an object found under a name we want was made by us for this TrainJob: it has
    the TrainJob (this very UID) as controller owner, or it is a kept claim marked as made
    for a TrainJob of this name (one that outlives its job is meant for the next)."""
    meta = trainjob["metadata"]
    if controlled_by(obj, str(meta.get("uid", ""))):
        return True
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    made_for = annotations.get(c.CLAIM_MADE_FOR_ANNOTATION)
    return obj.get("kind") == "PersistentVolumeClaim" and made_for == (
        f"{meta['namespace']}/{meta['name']}"
    )


def job_needs_update(desired: Dict, actual: JobView) -> bool:
    """True when `actual` differs from `desired` in what we may change on a live Job."""
    if bool(desired["spec"].get("suspend")) != actual.suspended:
        return True
    want = desired["spec"]["template"]
    have = actual.spec.get("template") or {}
    return any(want["spec"].get(f) != have.get("spec", {}).get(f) for f in SCHEDULING_FIELDS)
