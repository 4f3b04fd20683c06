"""Resource quantities (plugin/trainjob_api/quantity.py), read as apimachinery reads them and
written back so that the API server reads the same value."""

from __future__ import annotations

from decimal import Decimal

import pytest

from trainjob_api.quantity import MAX_QUANTITY, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", "2"),
        ("500m", "0.5"),
        ("1500m", "1.5"),
        ("250u", "0.00025"),
        ("3n", "0.000000003"),
        ("4k", "4000"),
        ("4Ki", "4096"),
        ("4Gi", str(4 * 2**30)),
        ("1.5Gi", str(3 * 2**29)),
        ("2M", "2000000"),
        ("1e3", "1000"),
        ("1E-3", "0.001"),
        ("1e+2", "100"),
        (".5", "0.5"),
        ("1.", "1"),
        ("+1", "1"),
        ("-1", "-1"),  # parsed; callers refuse a negative where the API does
        (" 2 ", "2"),
        (3, "3"),
        (0.5, "0.5"),
        ("8Ei", None),  # 2^63 exactly: one past the largest
        ("9223372036854775807", str(2**63 - 1)),
    ],
)
def test_a_quantity_reads_as_apimachinery_reads_it(text: object, value: str | None) -> None:
    if value is None:
        with pytest.raises(ValueError, match="out of range"):
            parse_quantity(text)
    else:
        assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "lots",
        "1.2.3",
        "1Zi",  # not a suffix
        "1mi",
        "1K",  # decimal kilo is a lower-case k
        "1Kb",
        "Gi",
        "1 Gi",
        "0x10",
        "1e",
        True,  # JSON's true is no quantity, though Python counts it as 1
        float("nan"),
        float("inf"),
        None,
    ],
)
def test_what_is_not_a_quantity_is_refused(text: object) -> None:
    with pytest.raises(ValueError, match="is not a quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(
    "text",
    ["1e19", "-1e19", "9300P", "1" * 20, "1e999999999", 10**19],
)
def test_beyond_kubernetes_range_is_refused(text: object) -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_quantity(text)


def test_a_tenants_long_string_costs_no_arithmetic_and_is_not_echoed_whole() -> None:
    """A value of many digits is refused by its length, and the message shows its start."""
    long = "9" * 10_000
    with pytest.raises(ValueError) as err:
        parse_quantity(long)
    assert len(str(err.value)) < 100
    with pytest.raises(ValueError):
        parse_quantity("1e-99999999999")  # an exponent no Decimal context takes


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("2", "2"),
        ("0", "0"),
        ("1.5", "1500m"),
        ("0.001", "1m"),
        ("0.0005", "500000n"),
        ("0.0000000001", "1n"),  # finer than a nano: rounded up, never to nothing
        ("0.0000000015", "2n"),
        (str(2**63 - 1), str(2**63 - 1)),
    ],
)
def test_a_value_is_written_as_the_api_reads_it_back(value: str, text: str) -> None:
    assert format_quantity(Decimal(value)) == text
    assert parse_quantity(text) >= Decimal(value)  # the same, or rounded up


def test_the_range_is_kubernetes_int64() -> None:
    assert MAX_QUANTITY == 2**63 - 1
