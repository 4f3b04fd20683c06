"""`kube.io_retry`: a plain first attempt, then tenacity's backoff for transient failures."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tenacity import wait_none

from kubecontrol import cluster as kube
from kubecontrol.client import ApiException


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube, "_RETRYING", kube._RETRYING.copy(wait=wait_none()))


def flaky(*failures: BaseException) -> tuple[list[int], Callable[[int], int]]:
    """A call that raises `failures` in turn, then returns its argument; and its call count."""
    calls = [0]

    @kube.io_retry
    def call(value: int) -> int:
        calls[0] += 1
        if calls[0] <= len(failures):
            raise failures[calls[0] - 1]
        return value

    return calls, call


def test_success_is_one_call() -> None:
    calls, call = flaky()
    assert call(7) == 7
    assert calls == [1]


def test_transient_failures_are_retried_with_the_same_arguments() -> None:
    calls, call = flaky(ApiException(503, "Service Unavailable"), ConnectionResetError())
    assert call(7) == 7
    assert calls == [3]


def test_other_answers_are_the_callers_at_once() -> None:
    calls, call = flaky(ApiException(404, "Not Found"))
    with pytest.raises(ApiException) as raised:
        call(7)
    assert raised.value.status == 404
    assert calls == [1]


def test_five_attempts_in_all_then_the_last_failure() -> None:
    failures = [ApiException(429, f"Too Many Requests {i}") for i in range(6)]
    calls, call = flaky(*failures)
    with pytest.raises(ApiException) as raised:
        call(7)
    assert calls == [5]
    assert raised.value is failures[4]


def test_a_failure_after_retries_began_is_retried_too() -> None:
    calls, call = flaky(TimeoutError(), TimeoutError(), ApiException(409, "Conflict"))
    with pytest.raises(ApiException) as raised:
        call(7)
    assert raised.value.status == 409
    assert calls == [3]
