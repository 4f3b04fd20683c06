"""How a TrainJob's objects are named and the owner they name: one rule each, used by the
builders, the status readers, the pods' DNS names and the Kueue integration (whether an object
is ours: ownership.py). Pure."""

from __future__ import annotations

from collections.abc import Iterable

from kubebase.objects import OwnerReference
from trainjob.ownership import owner_refs
from trainjob_api import constants as c
from trainjob_api.views import ObjectView


def job_name(trainjob: str, replicated_job: str, index: int) -> str:
    """The Job for `index` of a replicatedJob: `<trainjob>-<replicatedJob>-<index>` (JobSet's)."""
    return f"{trainjob}-{replicated_job}-{index}"


def owning_trainjob(child: str, trainjobs: Iterable[str]) -> str | None:
    """The TrainJob a Job or pod of ours belongs to, by name: Jobs are named
    `<trainjob>-<replicatedJob>-<index>` and their pods after them; the longest TrainJob name
    that prefixes the child's wins."""
    found = [t for t in trainjobs if child.startswith(f"{t}-")]
    return max(found, key=len) if found else None


# The longest DNS label: a Job's name and a pod's hostname are one, so a TrainJob whose pods
# run has a name no longer (runtime/limits.py: check_names).
MAX_DNS_LABEL = 63


def name_prefixes(child: str) -> list[str]:
    """Every name `owning_trainjob` could find for `child` among TrainJobs whose pods run: each
    part of it before a dash, up to MAX_DNS_LABEL characters. Looked up one by one, they find
    its TrainJob among any number in a few reads; a name of any length (an Event's
    involvedObject is anyone's to write) costs at most MAX_DNS_LABEL of them."""
    return [child[:i] for i in range(1, min(len(child), MAX_DNS_LABEL + 1)) if child[i] == "-"]


def pod_dns_name(trainjob: str, replicated_job: str, job_index: int, pod_index: int) -> str:
    """Stable DNS name of a pod: hostname `<job>-<pod index>` under the TrainJob's subdomain
    (its headless Service)."""
    return f"{job_name(trainjob, replicated_job, job_index)}-{pod_index}.{trainjob}"


def owner_reference(trainjob: str, uid: str, *, controller: bool = True) -> OwnerReference:
    """An ownerReference to the TrainJob `trainjob` (uid `uid`)."""
    return {
        "apiVersion": c.TRAINER_API,
        "kind": c.TRAINJOB.kind,
        "name": trainjob,
        "uid": uid,
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def owner_of(trainjob: ObjectView) -> OwnerReference:
    """The controller ownerReference to a TrainJob as the API holds it."""
    return owner_reference(trainjob.name, str(trainjob.uid or ""))


def owner_name(
    obj: ObjectView | None, kind: str = "TrainJob", *, controller: bool = False
) -> str | None:
    """Name of the first owner of `kind` in an object's ownerReferences (with `controller`,
    of its controller owner of that kind)."""
    return next(
        (
            str(r["name"])
            for r in owner_refs(None if obj is None else obj.raw)
            if r.get("kind") == kind and (r.get("controller") or not controller)
        ),
        None,
    )
