"""benchmarks/compare.py's report: the targets against every repeat, and its last two lines (a
test of the benchmark, beside it: the suite never imports the benchmarks)."""

from __future__ import annotations

import pytest

from benchmarks import compare
from benchmarks.multikueue import WITHOUT_LEASES, sustained_key


def _run(burst: float, one: float, rates: dict[float, bool]) -> dict[str, float]:
    figures = {
        compare.BURST: burst,
        "one (a) p50 s": one,
        "burst (b) p99 s": 0.5,
        f"CPU ms per TrainJob: {compare.LEADER}": 30.0,
        "run on two workers at the same time": 0.0,
        **{WITHOUT_LEASES + c: 10.0 for c in ("manager", "worker1", "worker2")},
    }
    figures.update({sustained_key(rate): float(ok) for rate, ok in rates.items()})
    return figures


def test_rates_tried_and_sustained_are_read_back_from_the_figures() -> None:
    figures = _run(1, 1, {2: True, 5: True, 10: False})
    assert sorted(compare.tried_rates(figures)) == [2, 5, 10]
    assert compare.best_rate(figures) == 5
    assert compare.best_rate(_run(1, 1, {2: False})) == 0


def test_the_report_ends_with_the_burst_ratio_to_each_peer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    results = {
        "ours": [_run(20, 0.3, {2: True, 5: True, 10: False}), _run(22, 0.3, {2: True, 5: False})],
        "peer-shipped": [_run(60, 0.6, {2: False}), _run(62, 0.6, {2: True, 5: False})],
        "peer-lifted": [_run(25, 0.4, {2: True, 5: False}), _run(20, 0.5, {2: True, 5: False})],
    }
    compare.report(results)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-2] == "burst total ratio ours/peer-shipped: 0.34 (0.33-0.35)"
    assert lines[-1] == "burst total ratio ours/peer-lifted: 0.95 (0.80-1.10)"
    by_target = {line.split("  ")[1].strip(): line for line in lines if line.startswith("  ")}
    # Met in one repeat of two: 20/25 <= 1.0, 22/20 > 1.0.
    assert by_target["burst total, ours/peer-lifted <= 1.0"].endswith("1/2")
    # Repeat 1: the shipped peer sustained none of 2/s, so its rate stands at 2: 1.5 x 2 / 5.
    # Repeat 2: it sustained 2/s as ours did: 1.5 x 2 / 2, not met.
    sustained = by_target["sustained rate, peer-shipped x 1.5 / ours <= 1"]
    assert "0.60" in sustained and "1.50" in sustained and sustained.endswith("1/2")
