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
from decimal import Decimal

_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>[eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$"
)
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


def parse_quantity(quantity: object) -> Decimal:
    """The value of a quantity (a string, or a number as JSON gives it); ValueError when it is
    not one."""
    if isinstance(quantity, bool):
        raise ValueError(f"{quantity!r} is not a quantity")
    if isinstance(quantity, int | float | Decimal):
        value = Decimal(str(quantity))
        if not value.is_finite():
            raise ValueError(f"{quantity!r} is not a quantity")
        return value
    match = _QUANTITY.match(str(quantity).strip())
    if match is None:
        raise ValueError(f"{quantity!r} is not a quantity")
    number, suffix = Decimal(match["number"]), match["suffix"]
    if not suffix:
        return number
    if suffix in _BINARY_SI:
        return number * (1 << _BINARY_SI[suffix])
    exponent = int(suffix[1:]) if len(suffix) > 1 else _DECIMAL_SI[suffix]
    scaled: Decimal = number.scaleb(exponent)
    return scaled
