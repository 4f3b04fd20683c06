"""One worker pass's plan: everything the pass writes, decided before anything is written
and carried out by `execute.execute_pass` alone, in order: the Kueue integration's writes
(trainjob/jobframework.py) or the hold of a TrainJob that names no queue (Kueue's
manageJobsWithoutQueueName), then the TrainJob's own (decide.py: its objects, Jobs, status,
Events). A pass that changes the TrainJob's spec (started, stopped, held) plans nothing
after that: the watch event of its write brings the next pass, from the new spec. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from trainjob.jobframework import QueuePlan
from worker_controller.decide import Plan


@dataclass(frozen=True)
class Hold:
    """A TrainJob with no queue, on a cluster whose Kueue manages such jobs all the same: it
    waits suspended until it names a LocalQueue."""

    tell: bool  # a Warning says why (once per TrainJob)
    suspend: bool  # it was running: suspended now


@dataclass
class PassPlan:
    queue: QueuePlan | None = None
    hold: Hold | None = None
    trainjob: Plan | None = None  # None: the TrainJob's spec changes first

    @property
    def changes_trainjob(self) -> bool:
        """Whether the pass writes the TrainJob's spec (its own part then waits)."""
        return (self.queue is not None and self.queue.changes_trainjob) or (
            self.hold is not None and self.hold.suspend
        )
