"""Kubernetes resource quantities ("500m", "4Gi", "1e3") as exact Decimals.

Written out here, from apimachinery's grammar, so that the controllers need not import the
kubernetes client's package (see `kubecontrol.client`):

    quantity ::= signedNumber suffix
    suffix   ::= binarySI (Ki Mi Gi Ti Pi Ei) | decimalSI (n u m "" k M G T P E)
               | decimalExponent ("e" or "E", then a signed integer)
    number   ::= digits | digits "." digits | digits "." | "." digits
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, DecimalException

_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>[eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$"
)
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# Kubernetes holds no quantity greater than 2^63-1 in magnitude; one beyond it is refused here
# (and no arithmetic grows with the digits a user writes).
MAX_QUANTITY = Decimal(2**63 - 1)
_MAX_DIGITS = 64


def parse_quantity(quantity: object) -> Decimal:
    """The value of a quantity (a string, or a number as JSON gives it); ValueError when it is
    not one, or lies beyond Kubernetes' range (2^63-1 in magnitude)."""
    if isinstance(quantity, bool):
        raise ValueError(f"{quantity!r} is not a quantity")
    if isinstance(quantity, int | float | Decimal):
        text = str(quantity)
        if len(text) > _MAX_DIGITS:
            raise ValueError(f"{text[:20]}... is out of range")
        value = Decimal(text)
        if not value.is_finite():
            raise ValueError(f"{quantity!r} is not a quantity")
        return _in_range(value, text)
    text = str(quantity).strip()
    match = _QUANTITY.match(text) if len(text) <= _MAX_DIGITS else None
    if match is None:
        shown = text if len(text) <= _MAX_DIGITS else f"{text[:20]}..."
        raise ValueError(f"{shown!r} is not a quantity")
    number, suffix = Decimal(match["number"]), match["suffix"]
    if not suffix:
        return _in_range(number, text)
    if suffix in _BINARY_SI:
        return _in_range(number * (1 << _BINARY_SI[suffix]), text)
    exponent = int(suffix[1:]) if len(suffix) > 1 else _DECIMAL_SI[suffix]
    if number and number.adjusted() + exponent > MAX_QUANTITY.adjusted():
        raise ValueError(f"{text!r} is out of range (at most {MAX_QUANTITY})")
    try:
        scaled: Decimal = number.scaleb(exponent)
    except DecimalException as exc:  # an exponent far below any quantity's precision
        raise ValueError(f"{text!r} is out of range") from exc
    return _in_range(scaled, text)


def _in_range(value: Decimal, text: str) -> Decimal:
    if abs(value) > MAX_QUANTITY:
        raise ValueError(f"{text!r} is out of range (at most {MAX_QUANTITY})")
    return value


def format_quantity(value: Decimal) -> str:
    """`value` written as a quantity the API server reads back as the same value: a whole
    number as is, else in milli- or, finer, nano-units rounded up (the API's precision)."""
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return f"{int((value * 10**9).to_integral_value(rounding=ROUND_CEILING))}n"
