"""Controller settings and the command line derived from them (pure)."""

from __future__ import annotations

import pytest

from dispatcher.settings import DispatcherSettings
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
