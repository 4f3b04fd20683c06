"""Placement that follows a job's data (pure): a TrainJob goes only to workers that hold what
its pods mount and the datasets it names.

- **Claims.** Every PersistentVolumeClaim the pods mount (`volumes[].persistentVolumeClaim`
  in the manager Workload's pod templates), but those the job makes itself (its runtime's
  `volumeClaimPolicies`), must exist on the worker in the job's namespace; with the
  `dataPlacement: Bound` setting, bound too (`Exists`, the default, takes a Pending claim
  too: one whose StorageClass binds on first use is Pending until a pod mounts it).
- **Datasets.** A TrainJob may name the datasets it reads in its `trainjob.dev/datasets`
  annotation (comma-separated); a worker holds one when its MultiKueueCluster carries the
  label `dataset.trainjob.dev/<name>: "true"` (the platform's word for what is where: a
  cache, a local copy, a bucket in its region).

A worker that lacks either gets no copy, and the check's message says why; when no chosen
worker has the data, the TrainJob says so (`DataUnavailable=True`) and waits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubebase.kinds import LABEL_NAME
from kubebase.objects import Dict
from trainjob.queues import PodSetView
from trainjob_api import constants as c
from trainjob_api.views import RuntimeView

DATASETS_ANNOTATION = f"{c.DOMAIN}/datasets"
DATASET_LABEL_PREFIX = f"dataset.{c.DOMAIN}/"
MAX_DATASETS = 16
# A label name's segment (what follows the prefix): Kubernetes' own rule.
DATASET_NAME = LABEL_NAME


class DatasetsError(ValueError):
    """The datasets annotation cannot be read (the message names it)."""


@dataclass(frozen=True)
class DataNeeds:
    """What a job's pods read that must be where it runs."""

    claims: tuple[tuple[str, str], ...] = ()  # (claim name, the field that mounts it)
    datasets: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.claims or self.datasets)


@dataclass(frozen=True)
class Claims:
    """A worker's claims in one namespace as its watch sees them (`phase(name)`: the claim's
    status.phase, "" when it has none, None when there is no such claim)."""

    phase: Callable[[str], str | None]
    require_bound: bool = False


def datasets_of(annotations: dict[str, str]) -> tuple[str, ...]:
    """The datasets a TrainJob names, in order, each once."""
    text = annotations.get(DATASETS_ANNOTATION)
    if text is None:
        return ()
    names = [n.strip() for n in text.split(",") if n.strip()]
    if len(names) > MAX_DATASETS:
        raise DatasetsError(
            f"annotation {DATASETS_ANNOTATION} names {len(names)} datasets; at most {MAX_DATASETS}"
        )
    for name in names:
        if not DATASET_NAME.fullmatch(name):
            raise DatasetsError(
                f"annotation {DATASETS_ANNOTATION}: {name[:70]!r} is not a dataset name (what "
                f"may follow {DATASET_LABEL_PREFIX} in a label: letters, digits, '-', '_', '.', "
                "at most 63)"
            )
    return tuple(dict.fromkeys(names))


def needs(pod_sets: list[Dict], annotations: dict[str, str], made_by_job: set[str]) -> DataNeeds:
    """What a Workload's pods mount (claims not made by the job itself) and the datasets its
    TrainJob names (DatasetsError when that annotation cannot be read)."""
    claims: dict[str, str] = {}
    for ps in map(PodSetView, pod_sets):
        for volume in ps.pod_spec.volumes:
            name = volume.claim_name
            if name and name not in made_by_job and name not in claims:
                claims[name] = f"spec.podSets[{ps.name}].template.spec.volumes[{volume.at}]"
    return DataNeeds(tuple(claims.items()), datasets_of(annotations))


def made_by_job(runtime: RuntimeView | None, trainjob: str) -> set[str]:
    """The claims a TrainJob's runtime makes for it (volumeClaimPolicies: `<template>-<job>`)."""
    return set() if runtime is None else {f"{name}-{trainjob}" for name in runtime.claim_templates}


def problem(needs: DataNeeds, cluster_labels: dict[str, str], claims: Claims | None) -> str | None:
    """Why a worker cannot serve the job's data (None: it can, or its claims are not known and
    its labels name every dataset)."""
    missing = [d for d in needs.datasets if cluster_labels.get(DATASET_LABEL_PREFIX + d) != "true"]
    notes = []
    if missing:
        notes.append(f"no dataset {', '.join(missing)} there (label {DATASET_LABEL_PREFIX}<name>)")
    if claims is not None:
        for name, where in needs.claims:
            phase = claims.phase(name)
            if phase is None:
                notes.append(f"PersistentVolumeClaim {name} ({where}) is not there")
            elif claims.require_bound and phase != "Bound":
                notes.append(f"PersistentVolumeClaim {name} there is {phase or 'not bound'}")
    return "; ".join(notes) or None
