"""Kubernetes resource quantities ("500m", "4Gi", "1e3") as exact Decimals and back."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_PATTERN = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a quantity; raises ValueError naming the bad value."""
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _PATTERN.match(value.strip())
    if not match:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 500m, 2, 4Gi)")
    try:
        number = Decimal(match[1])
    except InvalidOperation as exc:
        raise ValueError(f"{value!r} is not a Kubernetes quantity") from exc
    suffix = match[2] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix[:1] in ("e", "E"):
        return number * Decimal(10) ** int(suffix[1:])
    return number * _DECIMAL[suffix]


def format_quantity(value: Decimal) -> str:
    """Canonical-enough form: whole numbers plain, fractions in milli-units."""
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return str(value.normalize())
