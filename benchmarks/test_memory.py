"""benchmarks/memory.py's goals: ours against the peer's, run by run, and a loud failure when
a goal's median is not met (a test of the benchmark, beside it: the suite never imports the
benchmarks)."""

from __future__ import annotations

import argparse

import pytest

from benchmarks import memory
from benchmarks.memory import CONTROLLERS, Fit
from benchmarks.multikueue import PIPELINES


def _runs(*fits: tuple[float, float]) -> list[memory.Figures]:
    """Runs whose pipeline controllers grew by `slope` per 1,000 and peaked at `peak`."""
    return [
        {CONTROLLERS: Fit(200.0, slope, peak), "every Kueue": Fit(1, 1, 1)} for slope, peak in fits
    ]


def test_goals_met_by_the_median_pass_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    results = {
        "ours": _runs((55, 260), (60, 270), (50, 250)),
        "peer-shipped": _runs((55, 220), (55, 220), (55, 220)),
    }
    assert memory.report_goals(results) == 0
    out = capsys.readouterr().out
    assert (
        "slope per 1,000 TrainJobs in flight, ours/peer <= 1.0: 1.00 (0.91-1.09); met in 2/3" in out
    )
    assert "peak resident, ours/peer <= 1.25: 1.18 (1.14-1.23); met in 3/3" in out
    assert "GOAL NOT MET" not in out


def test_a_goal_whose_median_is_missed_fails_loudly(capsys: pytest.CaptureFixture[str]) -> None:
    results = {
        "ours": _runs((56, 313), (57, 315)),
        "peer-shipped": _runs((55, 218), (56, 225)),
    }
    assert memory.report_goals(results) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "GOAL NOT MET: peak resident: ours/peer 1.42x > 1.25x"
    assert "peak resident, ours: 314.0 (313.0-315.0)" in "\n".join(lines)
    # the slope: 1.02 and 1.02 over 1.0, the median missed too
    assert lines[-2].startswith(
        "GOAL NOT MET: slope per 1,000 TrainJobs in flight: ours/peer 1.02x"
    )


def test_the_pipeline_argument_is_one_or_both() -> None:
    assert memory.pipelines_arg("ours,peer-shipped") == ["ours", "peer-shipped"]
    assert memory.pipelines_arg("peer-shipped") == ["peer-shipped"]
    for wrong in ("peer-lifted", "peer-shipped,ours", "ours,ours", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            memory.pipelines_arg(wrong)


def test_each_run_is_set_against_the_peers_run_of_the_same_round(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Runs of one round share the machine's state of the moment: ratios are taken round by
    round, never across rounds."""
    results = {
        "ours": _runs((55, 260), (60, 260), (50, 260)),
        "peer-shipped": _runs((50, 220), (55, 220), (60, 220)),
    }
    memory.report_goals(results)
    out = capsys.readouterr().out
    assert "ours/peer <= 1.0: 1.09 (0.83-1.10); met in 1/3" in out


def test_one_goal_missed_is_enough_to_fail_and_a_goal_no_run_met_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The median, not the mean: two runs of three over the bound miss the goal, however far
    under it the third is."""
    results = {
        "ours": _runs((25, 330), (60, 330), (60, 330)),
        "peer-shipped": _runs((50, 300), (50, 300), (50, 300)),
    }
    assert memory.report_goals(results) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == (
        "GOAL NOT MET: slope per 1,000 TrainJobs in flight: ours/peer 1.20x > 1.0x"
    )
    assert "peak resident, ours/peer <= 1.25: 1.10 (1.10-1.10); met in 3/3" in out
    assert "slope per 1,000 TrainJobs in flight, peer-shipped: 50.0 (50.0-50.0)" in out
    assert "peak resident, peer-shipped: 300.0 (300.0-300.0)" in out
    worse = {"ours": _runs((80, 400)), "peer-shipped": _runs((50, 300))}
    memory.report_goals(worse)
    assert "met in 0/1" in capsys.readouterr().out


def test_the_runs_rotate_and_the_goals_decide_the_exit_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[str] = []

    def run(name: str, _args: argparse.Namespace) -> memory.Figures:
        ran.append(name)
        return {}

    monkeypatch.setattr(memory, "run", run)
    monkeypatch.setattr(memory, "report_goals", lambda results: len(results["ours"]))
    argv = ["memory.py", "--pipeline", "ours,peer-shipped", "--repeat", "3"]
    monkeypatch.setattr("sys.argv", argv)
    assert memory.main() == 3
    assert ran == ["ours", "peer-shipped", "peer-shipped", "ours", "ours", "peer-shipped"]
    ran.clear()
    monkeypatch.setattr("sys.argv", ["memory.py", "--repeat", "2"])
    assert memory.main() == 0 and ran == ["ours", "ours"]  # one pipeline: no goals


def test_a_run_brings_up_the_pipeline_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The peer's run is the peer's: its bed runs the peer's pipeline, and what is measured
    there is measured as the peer's."""
    seen: list[object] = []

    class Config:
        def model_copy(self, update: dict[str, object]) -> dict[str, object]:
            return update

    class FakeBed:
        def __init__(self, config: dict[str, object]) -> None:
            seen.append(config["pipeline"])

        def is_up(self) -> bool:
            return False

        def up(self) -> None:
            pass

        def down(self) -> None:
            pass

    monkeypatch.setattr(memory, "load_config", Config)
    monkeypatch.setattr(memory, "Bed", FakeBed)

    def measure(_bed: object, name: str, _args: argparse.Namespace) -> memory.Figures:
        seen.append(name)
        return {}

    monkeypatch.setattr(memory, "measure", measure)
    args = argparse.Namespace(pods_ready_timeout=1800, replicas=1)
    memory.run("peer-shipped", args)
    assert seen == [PIPELINES["peer-shipped"], "peer-shipped"]


def test_runs_of_ours_and_the_peer_must_pair_up() -> None:
    with pytest.raises(ValueError):
        memory.report_goals({"ours": _runs((55, 260), (55, 260)), "peer-shipped": _runs((55, 220))})
