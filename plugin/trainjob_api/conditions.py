"""metav1.Condition helpers: find, set (keeping lastTransitionTime when unchanged), remove, and
`Conditions`, the one way both controllers change an object's conditions and announce it."""

from __future__ import annotations

import datetime as dt
from enum import Enum

from kubebase.events import Event
from kubebase.objects import Dict
from trainjob_api import constants as c

# A condition's message at most, as the CRDs allow it (metav1.Condition's maxLength) and as
# Kueue cuts its own: a message quoting a tenant's text past it would make every status write
# of the object fail.
MAX_MESSAGE = 32 * 1024
CUT = "..."


def truncate_message(message: str) -> str:
    """`message`, cut to MAX_MESSAGE characters (ending in CUT) when it is longer."""
    if len(message) <= MAX_MESSAGE:
        return message
    return message[: MAX_MESSAGE - len(CUT)] + CUT


def now_rfc3339(now: dt.datetime) -> str:
    return now.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def find(conditions: list[Dict], ctype: str) -> Dict | None:
    return next((cond for cond in conditions if cond.get("type") == ctype), None)


def is_true(conditions: list[Dict], ctype: str) -> bool:
    cond = find(conditions, ctype)
    return cond is not None and cond.get("status") == "True"


def set_condition(
    conditions: list[Dict],
    ctype: str,
    status: bool,
    reason: str,
    message: str,
    now: dt.datetime,
    generation: int | None = None,
) -> list[Dict]:
    """A new list with `ctype` set; lastTransitionTime moves only when the status flips."""
    new_status = "True" if status else "False"
    old = find(conditions, ctype)
    cond: Dict = {
        "type": ctype,
        "status": new_status,
        "reason": reason,
        "message": truncate_message(message),
        "lastTransitionTime": now_rfc3339(now),
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    if old is not None and old.get("status") == new_status:
        cond["lastTransitionTime"] = old.get("lastTransitionTime", cond["lastTransitionTime"])
    out = [dict(x) for x in conditions if x.get("type") != ctype]
    out.append(cond)
    return out


def remove_condition(conditions: list[Dict], ctype: str) -> list[Dict]:
    return [dict(x) for x in conditions if x.get("type") != ctype]


class Change(Enum):
    """What setting a condition changed."""

    NONE = "none"  # it said this already
    NEW = "new"  # there was no condition of that type
    STATE = "state"  # its status or reason changed
    MESSAGE = "message"  # only its message changed
    GENERATION = "generation"  # only the generation it was set for (`track_generation`)


class Conditions:
    """An object's conditions being changed in one pass: each set only when it says something
    new, the Events that announce the changes, and the list to write (`changed`)."""

    def __init__(
        self,
        conditions: list[Dict],
        now: dt.datetime,
        generation: int | None = None,
        *,
        track_generation: bool = False,
        events: list[Event] | None = None,
    ) -> None:
        """`track_generation`: a condition set again for a newer generation of the object
        takes that observedGeneration, whatever else changed (the worker's own TrainJob
        conditions, as Trainer keeps them). `events`: where the Events go (a plan's own list),
        in the order the changes are made."""
        self.before = conditions
        self.list = list(conditions)
        self.now, self.generation = now, generation
        self.track_generation = track_generation
        self.events: list[Event] = [] if events is None else events

    def find(self, ctype: str) -> Dict | None:
        return find(self.list, ctype)

    def set(
        self,
        ctype: str,
        status: bool,
        reason: str,
        message: str,
        *,
        event: str | None = None,
        announce: frozenset[Change] = frozenset({Change.NEW, Change.STATE, Change.MESSAGE}),
        keep_message: bool = False,
    ) -> Change:
        """Set `ctype` unless it says this already. `event` ("Normal", "Warning"): the Event
        type that announces the changes in `announce`. `keep_message`: a condition whose
        status and reason are unchanged is left as it is (its message may vary from pass to
        pass: elapsed times, lists of workers)."""
        message = truncate_message(message)  # as stored, so an unchanged one compares equal
        old = self.find(ctype)
        new_status = "True" if status else "False"
        if old is None:
            change = Change.NEW
        elif old.get("status") != new_status or old.get("reason") != reason:
            change = Change.STATE
        elif old.get("message") != message and not keep_message:
            change = Change.MESSAGE
        elif self.track_generation and old.get("observedGeneration") != self.generation:
            change = Change.GENERATION
        else:
            return Change.NONE
        self.list = set_condition(
            self.list, ctype, status, reason, message, self.now, self.generation
        )
        if event is not None and change in announce:
            self.events.append(Event(event, reason, message))
        return change

    def remove(self, ctype: str) -> bool:
        """Drop `ctype`; whether it was there."""
        if self.find(ctype) is None:
            return False
        self.list = remove_condition(self.list, ctype)
        return True

    @property
    def changed(self) -> bool:
        return self.list != self.before


def trainjob_finished(conditions: list[Dict]) -> bool:
    """Complete, or Failed for a reason that is final (not a missing or invalid runtime)."""
    if is_true(conditions, c.COND_COMPLETE):
        return True
    failed = find(conditions, c.COND_FAILED)
    return bool(
        failed
        and failed.get("status") == "True"
        and failed.get("reason") not in c.RECOVERABLE_FAILURE_REASONS
    )


def final_outcome(conditions: list[Dict]) -> tuple[bool, str, str] | None:
    """(succeeded, reason, message) of a finished TrainJob, else None."""
    if not trainjob_finished(conditions):
        return None
    done = find(conditions, c.COND_COMPLETE)
    if done and done.get("status") == "True":
        return True, str(done.get("reason")), str(done.get("message", ""))
    failed = find(conditions, c.COND_FAILED) or {}
    return False, str(failed.get("reason")), str(failed.get("message", ""))
