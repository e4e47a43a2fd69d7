"""The one money format of the console and the CLI, with properties (Hypothesis)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governance_http.cli import reads
from governance_http.console.web import templates
from governance_http.money import format_money

# Costs as the core computes them: exact decimals, from millionths of a cent to millions.
amounts = st.decimals(
    min_value=Decimal("-1e7"), max_value=Decimal("1e7"), allow_nan=False, allow_infinity=False,
    places=12,
)


def shown(text: str) -> Decimal:
    """The amount a formatted text reads as."""
    sign = -1 if text.startswith("-") else 1
    return sign * Decimal(text.lstrip("-").removeprefix("$").replace(",", ""))


@pytest.mark.parametrize(("value", "text"), [
    (Decimal("0.0303"), "$0.0303"),
    (Decimal("0.00961"), "$0.00961"),
    (0.041949, "$0.04195"),
    (Decimal("0.5"), "$0.50"),
    (Decimal("0.03"), "$0.03"),
    (Decimal("0.99996"), "$1.00"),
    (Decimal("0.99994"), "$0.9999"),
    (1234.567, "$1,234.57"),
    (Decimal("0.000000251"), "$0.000000251"),
    (0, "$0"),
    (Decimal("-0.0303"), "-$0.0303"),
    ("0.125", "$0.125"),
])
def test_examples(value: object, text: str) -> None:
    assert format_money(value) == text


@pytest.mark.parametrize("value", [None, True, "dollars", float("nan"), float("inf"), [1]])
def test_what_is_not_an_amount_is_missing(value: object) -> None:
    assert format_money(value) == "—"
    assert format_money(value, missing="-") == "-"


@given(amounts)
def test_never_zero_for_a_nonzero_amount(value: Decimal) -> None:
    text = format_money(value)
    assert (shown(text) == 0) == (value == 0)
    assert text == "$0" or "." in text


@given(amounts)
def test_close_to_the_amount(value: Decimal) -> None:
    # Four significant digits below $1 (half a unit of the fourth), cents from $1 on.
    error = abs(shown(format_money(value)) - value)
    if abs(value) < 1:
        assert error <= abs(value) * Decimal("0.0005")
    else:
        assert error <= Decimal("0.005")


@given(amounts, amounts)
def test_monotone(first: Decimal, second: Decimal) -> None:
    low, high = sorted((first, second))
    assert shown(format_money(low)) <= shown(format_money(high))


@given(amounts)
def test_sign_is_symmetric(value: Decimal) -> None:
    if value != 0:
        assert format_money(-abs(value)) == "-" + format_money(abs(value))


@given(amounts)
def test_thousands_are_separated_and_cents_shown_from_one_dollar(value: Decimal) -> None:
    text = format_money(abs(value)).removeprefix("$")
    if abs(value) >= 1:
        whole, _, cents = text.partition(".")
        assert len(cents) == 2
        groups = whole.split(",")
        assert all(len(group) == 3 for group in groups[1:]) and 1 <= len(groups[0]) <= 3


@given(st.floats(min_value=0, max_value=1e6), st.floats(min_value=0, max_value=1e6))
def test_floats_are_written_as_their_decimals(first: float, second: float) -> None:
    assert format_money(first) == format_money(Decimal(repr(first)))
    if format_money(first) == format_money(second):
        assert abs(first - second) <= max(first, second) * 0.001 + 0.01


def test_the_console_and_the_cli_share_it() -> None:
    env = templates()
    assert env.filters["money"] is format_money
    assert env.from_string("{{ 0.0419 | money }}").render() == "$0.0419"
    assert reads._money(Decimal("0.04189")) == format_money(Decimal("0.04189")) == "$0.04189"
    assert reads._money(None) == "-"
