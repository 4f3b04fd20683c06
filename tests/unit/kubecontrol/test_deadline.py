"""A deadline handed to work in a thread (kubecontrol/deadline.py): the work checks it between
steps and stops once it has passed or its caller gave up."""

from __future__ import annotations

import threading
import time

import pytest

from clusters.helpers.waiting import sooner_than
from kubecontrol.deadline import Deadline, DeadlinePassed


def test_time_left_counts_down_and_stops_at_zero() -> None:
    deadline = Deadline(60)
    assert 59 < deadline.left() <= 60
    deadline.check("a step")  # time left: nothing raised
    past = Deadline(-1)
    assert past.left() == 0.0
    with pytest.raises(DeadlinePassed, match="out of time before reading the runtime"):
        past.check("reading the runtime")


def test_a_caller_that_gives_up_stops_the_work_at_its_next_check() -> None:
    deadline = Deadline(60)
    deadline.give_up()
    assert deadline.left() == 0.0
    with pytest.raises(DeadlinePassed):
        deadline.check("the next step")


def test_it_is_not_a_timeout_a_retry_would_catch() -> None:
    """kubecontrol/cluster.py retries TimeoutError; a passed deadline is never tried again."""
    assert not issubclass(DeadlinePassed, TimeoutError)


def test_a_sleep_ends_when_the_caller_gives_up() -> None:
    deadline = Deadline(3600)
    threading.Timer(0.05, deadline.give_up).start()
    started = time.monotonic()
    deadline.sleep(1800)
    sooner_than(time.monotonic() - started, 1800, "the sleep asked for, had nothing woken it")


def test_a_sleep_is_no_longer_than_the_time_left() -> None:
    deadline = Deadline(0.05)
    started = time.monotonic()
    deadline.sleep(1800)
    sooner_than(time.monotonic() - started, 1800, "the sleep asked for, past the deadline")
    assert deadline.left() == 0.0
