"""Where a TrainJob ran before, and why each run there ended: a lasting record on the manager.

A TrainJob's status says where it runs now; Events say what happened for an hour. When a run
on a worker ends before the job does (the worker lost, the copy evicted or gone, out of sync,
or the job evicted on the manager: preempted, deactivated, not ready in time), the leader adds
one entry to the TrainJob's record, a ConfigMap `placements-<manager TrainJob UID>` in its own
namespace (never the tenant's, who could rewrite it): the worker, when the run started there
(as the worker's status said), when and why it ended. A job that runs once where it was sent
costs nothing. The record is bounded (`MAX_ENTRIES`), written again only by the same end's
second telling (the same worker and start are one entry), and deleted with its TrainJob by
the resync loop. The view.trainjob.dev story shows it with the current run.

What a record holds and how it grows, here; its reads and writes:
dispatcher/controller/placements_io.py.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import orjson
from pydantic import ValidationError

from dispatcher.decisions import checkpoints
from kubebase.objects import Dict
from trainjob_api import constants as c
from trainjob_api.story import Run
from trainjob_api.views import ConfigMapView

if TYPE_CHECKING:
    from trainjob_api.views import TrainJobView

PREFIX = "placements-"
LABEL = f"{c.DOMAIN}/placements-of"  # the manager TrainJob's UID
TRAINJOB_ANNOTATION = f"{c.DOMAIN}/placements-trainjob"  # NAMESPACE/NAME, for people
KEY = "placements.json"
MAX_ENTRIES = 50  # the latest; a job sent back more often than this keeps its last runs


@dataclass(frozen=True)
class Ended:
    """One run on a worker that ended before the job did."""

    worker: str
    started: str | None  # when it started there (the copy's resume), if known
    ended: str
    reason: str  # ClusterLost, RemoteEvicted, ..., or the manager's eviction reason
    message: str
    # The last checkpoint the run reported (checkpoints.py), if any
    checkpoint: str | None = None
    checkpoint_step: int | None = None
    restarts: int | None = None  # its Jobs' restarts there (failurePolicy), if any

    @property
    def key(self) -> tuple[str, str | None]:
        """One run: the same worker and start are told once."""
        return (self.worker, self.started)


def started_on(trainjob: TrainJobView | None, worker: str) -> str | None:
    """When the run on `worker` started, as the status brought back from it says (the copy's
    `Suspended` condition turned False)."""
    if trainjob is None or trainjob.cluster_name != worker:
        return None
    found = trainjob.condition(c.COND_SUSPENDED)
    return found.since if found is not None and found.status == "False" else None


def ended(
    trainjob: TrainJobView | None,
    worker: str,
    reason: str,
    message: str,
    now: dt.datetime,
    since: str | None = None,
) -> Ended:
    """The run on `worker` ended now; it started `since` (when its Workload was admitted, or
    its copy was sent there), else when the worker's status says (None: not known)."""
    started = since or started_on(trainjob, worker)
    saved, restarts = None, None
    if trainjob is not None and trainjob.cluster_name == worker:  # its status is that run's
        saved = checkpoints.reported(trainjob.trainer_status)
        restarts = restarts_of(trainjob)
    return Ended(
        worker,
        started,
        now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        reason,
        message,
        saved.name if saved else None,
        saved.step if saved else None,
        restarts,
    )


def restarts_of(trainjob: TrainJobView) -> int | None:
    """The restarts its status counts (None: none)."""
    found = trainjob.status.get("restarts")
    return found if isinstance(found, int) and found > 0 else None


def name_of(trainjob_uid: str) -> str:
    return f"{PREFIX}{trainjob_uid}"


def entries_of(config_map: ConfigMapView | None) -> list[Dict]:
    """The entries of a TrainJob's record of ended runs (none where it is not of their shape)."""
    if config_map is None:
        return []
    try:
        found = orjson.loads(config_map.text(KEY) or "[]")
    except orjson.JSONDecodeError:
        return []
    return [e for e in found if isinstance(e, dict)] if isinstance(found, list) else []


def with_entry(entries: list[Dict], entry: Ended) -> list[Dict] | None:
    """`entries` with `entry` added (the latest `MAX_ENTRIES`), or None when it is there:
    the same worker and start already ended."""
    new = asdict(entry)
    if any((e.get("worker"), e.get("started")) == entry.key for e in entries):
        return None
    return [*entries, new][-MAX_ENTRIES:]


def runs(entries: list[Dict], trainjob: TrainJobView, admitted_at: str | None) -> list[Run]:
    """The TrainJob's runs, oldest first: those recorded as ended (`entries`; one not of that
    shape is left out), then, while its Workload is admitted (since `admitted_at`), the run its
    status names (`current`: running there, or how the job ended there), unless that run is
    the last recorded (sent back, and Kueue has not evicted it yet). Each run says where it
    started from: the checkpoint the runs before it reported last (checkpoints.py)."""
    ended_runs = []
    for entry in entries:
        try:
            ended_runs.append(Run.model_validate(entry))
        except ValidationError:
            continue
    worker = trainjob.cluster_name
    if (
        worker
        and admitted_at
        and (
            not ended_runs
            or (ended_runs[-1].worker, ended_runs[-1].started) != (worker, admitted_at)
        )
    ):
        now = Run(worker=worker, started=admitted_at, current=True, restarts=restarts_of(trainjob))
        saved = checkpoints.reported(trainjob.trainer_status)
        if saved is not None:
            now = now.model_copy(update={"checkpoint": saved.name, "checkpoint_step": saved.step})
        for ctype in (c.COND_COMPLETE, c.COND_FAILED):
            found = trainjob.condition(ctype)
            if found is not None and found.true:
                now = now.model_copy(
                    update={
                        "ended": found.since,
                        "reason": ctype if ctype == c.COND_COMPLETE else f"{ctype}: {found.reason}",
                        "message": found.message,
                    }
                )
        ended_runs.append(now)
    keeps = checkpoints.ANNOTATION in trainjob.annotations or any(r.checkpoint for r in ended_runs)
    out, last = [], None
    for run in ended_runs:
        if last is not None:
            run = run.model_copy(update={"resumed_from": last.name, "start_step": last.step})
        elif keeps:
            run = run.model_copy(update={"start_step": 0})
        last = checkpoints.checkpoint(run.checkpoint, run.checkpoint_step) or last
        out.append(run)
    return out
