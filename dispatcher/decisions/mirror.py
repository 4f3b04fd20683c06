"""Which worker Events show on the manager TrainJob, and as what (pure).

A user on the manager sees what happens on the worker that runs their TrainJob: the Events of
its TrainJob there and the warnings of its pods, each recorded again on the manager TrainJob
with the worker's name in front (`worker1: Back-off pulling image ...`). Each worker Event is
recorded once per count (its name on the manager is derived from the worker Event's UID and
count, so a restart or a second look never records it twice).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from trainjob.naming import owning_trainjob
from trainjob_api.views import EventView


@dataclass(frozen=True)
class Mirrored:
    trainjob: str  # the manager TrainJob's name (same namespace as the worker Event)
    name: str  # the Event's name on the manager
    type: str
    reason: str
    message: str


def mirror(
    event: EventView, cluster: str, trainjobs: Iterable[str], warnings_only: bool
) -> Mirrored | None:
    """What to record on the manager for a worker Event (None: nothing). `trainjobs` are the
    names of our TrainJobs in the Event's namespace on that worker."""
    etype = str(event.event_type or "Normal")
    if warnings_only and etype != "Warning":
        return None
    names = list(trainjobs)
    kind, name = event.about_kind, event.about_name
    if kind == "TrainJob":
        trainjob = name if name in names else None
        what = ""
    elif kind == "Pod" and etype == "Warning":
        trainjob = owning_trainjob(name, names)
        what = f"pod {name}: "
    else:
        return None
    if trainjob is None:
        return None
    # the worker Event's identity as written (a name made from it must never change)
    meta = event.meta
    key = f"{cluster}/{meta.get('uid', meta.get('name'))}/{event.raw.get('count', 1)}"
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return Mirrored(
        trainjob=trainjob,
        name=f"{trainjob[:200]}.{cluster[:30]}.{digest}",
        type=etype,
        reason=str(event.reason or "Event"),
        message=f"{cluster}: {what}{event.message}",
    )
