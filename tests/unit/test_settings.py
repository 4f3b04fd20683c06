"""Controller settings and the command line derived from them (pure)."""

from __future__ import annotations

from itertools import islice

import pytest

from dispatcher.settings import DispatcherSettings
from trainjob.operator import RetryForever
from worker_controller.settings import WorkerSettings


def test_unset_flags_take_the_models_defaults_and_set_ones_are_typed() -> None:
    settings, verbose = DispatcherSettings.from_argv(
        ["--strategy", "Incremental", "--incremental-batch", "2", "--verbose"], "d", None
    )
    assert settings.strategy == "Incremental" and settings.incremental_batch == 2 and verbose
    assert settings.resync_seconds == 30.0 and settings.cluster_name == "manager"
    worker, verbose = WorkerSettings.from_argv([], "w", None)
    assert worker.cluster_name == "worker" and worker.resync_seconds == 10.0 and not verbose


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--resync-seconds", "0"], "--resync-seconds: Input should be greater than 0"),
        (["--workers", "many"], "--workers: Input should be a valid integer"),
        (["--webhook-port", "9443"], "--webhook-port needs --webhook-cert and --webhook-key"),
        (["--kubeconfig", "/no/such/file"], "--kubeconfig /no/such/file does not exist"),
    ],
)
def test_bad_values_are_refused_naming_the_flag(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        WorkerSettings.from_argv(argv, "w", None)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_strategy_outside_the_choices_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        DispatcherSettings.from_argv(["--strategy", "Random"], "d", None)
    assert "invalid choice: 'Random'" in capsys.readouterr().err


def test_kopf_retries_a_failing_watch_forever() -> None:
    backoffs = RetryForever()
    first = list(islice(iter(backoffs), 100))
    assert first[:6] == [1.0, 1.0, 2.0, 3.0, 5.0, 10.0] and first[-1] == 10.0
    assert list(islice(iter(backoffs), 3)) == [1.0, 1.0, 2.0]  # every request starts afresh
