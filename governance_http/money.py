"""The one way the console and the ``governance`` command write an amount of US dollars.

From $1 on: two decimals with thousands separators (``$1,234.57``). Below $1: four
significant digits, trailing zeros dropped down to two decimals (``$0.0419``, ``$0.00961``,
``$0.50``), so two runs whose costs differ in the fourth significant digit read differently
and a cost of a few millionths of a dollar never reads as ``$0.00``. Zero is ``$0``; a
negative amount has its sign before the dollar (``-$0.0303``). Halves round up (away from
zero). Anything that is not a number is ``—`` (the console) or what the caller passes as
``missing``.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext

__all__ = ["SIGNIFICANT_DIGITS", "format_money"]

SIGNIFICANT_DIGITS = 4
"""How many significant digits an amount under $1 keeps."""

_CENT = Decimal("0.01")
_ONE = Decimal(1)


def _amount(value: object) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal, str)):
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return None
    return amount if amount.is_finite() else None


def format_money(value: object, missing: str = "—") -> str:
    """Write ``value`` (a number, or its decimal text) in dollars; ``missing`` otherwise."""
    amount = _amount(value)
    if amount is None:
        return missing
    if amount == 0:
        return "$0"
    sign = "-" if amount < 0 else ""
    size = abs(amount)
    with localcontext() as context:
        # Enough digits for the whole amount to the cent, however large.
        context.prec = max(40, size.adjusted() + 10)
        context.rounding = ROUND_HALF_UP
        if size < _ONE:
            # Four significant digits: quantize to the decimal place of the fourth one.
            place = size.adjusted() - (SIGNIFICANT_DIGITS - 1)
            rounded = size.quantize(Decimal(1).scaleb(place))
            if rounded < _ONE:
                text = f"{rounded:f}".rstrip("0")
                if len(text.partition(".")[2]) < 2:
                    text = f"{rounded:.2f}"
                return f"{sign}${text}"
            size = rounded
        return f"{sign}${size.quantize(_CENT):,.2f}"
