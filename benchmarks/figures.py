"""How the benchmarks print a figure measured several times: its median, then its range."""

from __future__ import annotations

import statistics


def spread(values: list[float], digits: int = 2, unit: str = "") -> str:
    """ "median<unit> (min-max)", each with `digits` decimals; "-" when there are none."""
    if not values:
        return "-"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f}{unit} ({low:.{digits}f}-{high:.{digits}f})"
