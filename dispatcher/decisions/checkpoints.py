"""Checkpoint-aware moves (pure): a job that is sent to another worker resumes from the last
checkpoint it reported, not from step 0.

- **Where checkpoints go.** A TrainJob names it in its `trainjob.dev/checkpoints` annotation
  (a directory on a volume every worker mounts, or an object-store prefix: `s3://bucket/run`);
  or its runtime names a root in the same annotation and each job's place is
  `<root>/<namespace>/<name>`. Every copy of such a job gets `TRAINJOB_CHECKPOINTS=<place>`
  in its trainer's environment (as `spec.trainer.env` sets it: the `node` container of the
  trainer step), on a worker running Kubeflow Trainer as on one running ours.
- **What a run reports.** After it saves one, the training script names the checkpoint in its
  progress report (Trainer's TrainJobStatus): the metric `checkpoint` holds its name relative
  to the place (`step-000400.pt`), and `checkpoint_step` the step it holds. The dispatcher
  brings reports back to the manager TrainJob's `status.trainerStatus`, and records the last
  one of each run that ends before the job does (dispatcher/decisions/placements.py).
- **Where a new run starts.** The copy sent after a move gets `TRAINJOB_RESUME_FROM=<place>/
  <checkpoint>` and `TRAINJOB_RESUME_STEP=<step>`: the checkpoint the manager's status still
  names (the run just ended reported it), else the last one the record holds (an earlier run
  reported it, and the run since ended before reporting one). The story shows each run's
  start step.

A report is the tenant's own word about its own job: its checkpoint is checked for shape (a
relative name, no `..`, bounded) and goes nowhere but into that job's own environment.
The Kueue Workload is not changed: Kueue compares a prebuilt Workload with its job by counts
and resources only, so the added variables keep the copy in sync on every worker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubebase.objects import Dict
from trainjob.jsondoc import json_copy
from trainjob_api import constants as c
from trainjob_api.views import (
    ObjectView,
    RuntimeView,
    TrainerStatusView,
    TrainJobView,
    mapping,
    objects,
)

ANNOTATION = f"{c.DOMAIN}/checkpoints"
ENV_PLACE = "TRAINJOB_CHECKPOINTS"
ENV_RESUME_FROM = "TRAINJOB_RESUME_FROM"
ENV_RESUME_STEP = "TRAINJOB_RESUME_STEP"
METRIC = "checkpoint"
METRIC_STEP = "checkpoint_step"
MAX_PLACE = 512
# A checkpoint's name, relative to its place: path segments of letters, digits, '.', '_', '-'
# (a report's metric holds at most 64 characters: trainjob/progress.py).
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$")
# A place: no whitespace, no control characters, not ending in '/' (names are joined with one).
PLACE = re.compile(r"^[^\s\x00-\x1f\x7f]+$")


class CheckpointsError(ValueError):
    """The checkpoints annotation cannot be used (the message names it)."""


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint a run reported: its name under the job's place, and its step if said."""

    name: str
    step: int | None = None


def check_place(value: str, where: str = f"metadata.annotations[{ANNOTATION}]") -> str:
    """`value` as a place (trailing '/' dropped), or CheckpointsError naming `where`."""
    place = value.strip().rstrip("/")
    if not place or len(place) > MAX_PLACE or not PLACE.match(place):
        raise CheckpointsError(
            f"{where}: must name a directory or object-store prefix (no spaces or control "
            f"characters, at most {MAX_PLACE} characters), got {value[:80]!r}"
        )
    return place


def place_of(
    trainjob_annotations: Mapping[str, str],
    runtime_annotations: Mapping[str, str],
    namespace: str,
    name: str,
) -> str | None:
    """Where the job keeps its checkpoints (None: it does not say, nor does its runtime).
    Raises CheckpointsError when the annotation that applies cannot be read."""
    own = trainjob_annotations.get(ANNOTATION)
    if own is not None:
        return check_place(own)
    root = runtime_annotations.get(ANNOTATION)
    if root is None:
        return None
    return f"{check_place(root, f'the runtime: {ANNOTATION}')}/{namespace}/{name}"


def place_for(trainjob: ObjectView, runtime: RuntimeView | None) -> str | None:
    """`place_of` a TrainJob (its annotations, namespace and name) and its runtime."""
    return place_of(
        trainjob.annotations,
        {} if runtime is None else runtime.annotations,
        trainjob.namespace,
        trainjob.name,
    )


def as_copied(trainjob: TrainJobView, place: str) -> Dict:
    """A TrainJob as its copies are sent (a deep copy, with the variables): what the workers
    judge, so what admission on the manager judges too."""
    return with_environment(json_copy(trainjob.raw), place, None)


def reported(trainer_status: TrainerStatusView | None) -> Checkpoint | None:
    """The checkpoint a progress report names (None: none, or not of a checkpoint's shape)."""
    if trainer_status is None:
        return None
    values = dict(trainer_status.metrics)
    return checkpoint(values.get(METRIC), values.get(METRIC_STEP))


def checkpoint(name: object, step: object = None) -> Checkpoint | None:
    """A checkpoint from what was reported or recorded, if it has a checkpoint's shape."""
    if not isinstance(name, str) or not NAME.match(name) or ".." in name.split("/"):
        return None
    # "²" is a digit too; more than 18 digits is no step (and past 4,300 int() refuses)
    if isinstance(step, str) and step.isascii() and step.isdigit() and len(step) <= 18:
        step = int(step)
    return Checkpoint(name, step if isinstance(step, int) and step >= 0 else None)


def last_recorded(entries: Iterable[Dict]) -> Checkpoint | None:
    """The last checkpoint a TrainJob's record of ended runs holds (placements.py)."""
    found = None
    for entry in entries:
        found = checkpoint(entry.get("checkpoint"), entry.get("checkpoint_step")) or found
    return found


def environment(place: str, resume: Checkpoint | None) -> list[Dict]:
    """The variables a copy's trainer is given."""
    env = [{"name": ENV_PLACE, "value": place}]
    if resume is not None:
        env.append({"name": ENV_RESUME_FROM, "value": f"{place}/{resume.name}"})
        if resume.step is not None:
            env.append({"name": ENV_RESUME_STEP, "value": str(resume.step)})
    return env


def with_environment(trainjob_copy: Dict, place: str, resume: Checkpoint | None) -> Dict:
    """The TrainJob copy with the variables in `spec.trainer.env` (replacing any of the same
    names the job set, as Trainer's merge by name does)."""
    env = environment(place, resume)
    names = {e["name"] for e in env}
    spec = trainjob_copy["spec"]
    trainer = dict(spec.get("trainer") or {})
    trainer["env"] = [e for e in trainer.get("env") or [] if e.get("name") not in names] + env
    spec["trainer"] = trainer
    return trainjob_copy


def resume_of(trainjob_copy: TrainJobView) -> Checkpoint | None:
    """The resume point a TrainJob's copy was given (None: it starts afresh)."""
    trainer = mapping(trainjob_copy.spec.get("trainer"))
    env = {e.get("name"): e.get("value") for e in objects(trainer.get("env"))}
    place, whole = env.get(ENV_PLACE), env.get(ENV_RESUME_FROM)
    if not isinstance(place, str) or not isinstance(whole, str):
        return None
    return checkpoint(whole.removeprefix(f"{place}/"), env.get(ENV_RESUME_STEP))
