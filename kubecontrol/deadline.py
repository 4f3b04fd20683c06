"""A deadline handed to work that runs in a thread, which nothing can stop from outside: the
work checks it between its steps and bounds each API call by what is left of it, so work
whose caller has given up (an admission review answered 503) stops costing soon after."""

from __future__ import annotations

import threading
import time


class DeadlinePassed(Exception):
    """The deadline passed, or its caller gave up, before the work was done. Not a
    TimeoutError: a call that meets it is never tried again (kubecontrol/cluster.py)."""


class Deadline:
    """`seconds` from now (time.monotonic), or sooner when `give_up()` is called."""

    def __init__(self, seconds: float) -> None:
        self._at = time.monotonic() + seconds
        self._gone = threading.Event()

    def left(self) -> float:
        """Seconds left, 0 once passed or given up."""
        return 0.0 if self._gone.is_set() else max(self._at - time.monotonic(), 0.0)

    def check(self, doing: str) -> None:
        """Raise DeadlinePassed, naming what was about to be done, when no time is left."""
        if self.left() <= 0:
            raise DeadlinePassed(f"out of time before {doing}")

    def give_up(self) -> None:
        """The caller no longer waits: the work stops at its next check."""
        self._gone.set()

    def sleep(self, seconds: float) -> None:
        """Sleep `seconds`, but no longer than is left; woken by `give_up()`."""
        self._gone.wait(min(seconds, self.left()))
