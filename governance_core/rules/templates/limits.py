"""What one render may spend and write, shared by the Liquid and the Jinja2 renderers.

A render runs inside :func:`metered`, which gives it an operation budget: code that does work
in proportion to the size of its data calls :func:`spend` (or :func:`charge_deep`) first, and
an exhausted budget raises :class:`BudgetExceeded`, which fails the render. Output goes to a
:class:`SummaryBuffer`, which stops the render once the summary is longer than
:data:`MAX_OUTPUT_CHARS` and cuts it to that length.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from contextvars import Token as ContextToken
from io import StringIO
from typing import Final

__all__ = [
    "CHARS_PER_UNIT",
    "MAX_INT_BITS",
    "MAX_OUTPUT_CHARS",
    "MAX_RANGE",
    "MAX_TEMPLATE_CHARS",
    "OPERATION_BUDGET",
    "BudgetExceeded",
    "NotRendering",
    "OutputFull",
    "SummaryBuffer",
    "charge_deep",
    "check_int_product",
    "metered",
    "spend",
    "units",
]

MAX_OUTPUT_CHARS: Final = 4096
"""Longest summary; longer output is cut to this length, ending in an ellipsis."""

MAX_TEMPLATE_CHARS: Final = 16384
"""Longest template accepted; a longer one is invalid."""

OPERATION_BUDGET: Final = 250_000
"""Work units one render may spend (about one unit per node evaluated or item touched)."""

MAX_RANGE: Final = 10_000
"""Most items a range may produce, and most iterations of nested loops (Liquid)."""

MAX_INT_BITS: Final = 4096
"""Largest integer a multiplication or a power may produce."""

CHARS_PER_UNIT: Final = 64
"""Characters of a string that cost one work unit."""

_ELLIPSIS: Final = "\u2026"


class BudgetExceeded(Exception):
    """The render spent its operation budget."""


class NotRendering(Exception):
    """Raised by metered code outside a render, so Jinja never folds it at compile time."""


class OutputFull(Exception):
    """The summary reached its length cap; the render stops there."""


class _Budget:
    __slots__ = ("remaining",)

    def __init__(self, units: int) -> None:
        self.remaining = units


# The budget of the render in progress on this thread or task; None outside renders.
_BUDGET: ContextVar[_Budget | None] = ContextVar("governance_template_budget", default=None)


class metered:
    """Give the render run inside the block a fresh :data:`OPERATION_BUDGET`.

    A class rather than a generator-based context manager: it is entered on every render.
    """

    __slots__ = ("_token",)
    _token: ContextToken[_Budget | None]

    def __enter__(self) -> None:
        self._token = _BUDGET.set(_Budget(OPERATION_BUDGET))

    def __exit__(self, kind: object, error: object, tb: object) -> None:
        _BUDGET.reset(self._token)


def spend(units: int) -> None:
    """Spend ``units`` of the current render's budget (:class:`NotRendering` outside one)."""
    budget = _BUDGET.get()
    if budget is None:
        raise NotRendering
    budget.remaining -= units
    if budget.remaining < 0:
        raise BudgetExceeded("the template exceeded its operation budget")


def units(value: object) -> int:
    """Charge for touching a value shallowly: its characters or its items."""
    if isinstance(value, str):
        return len(value) // CHARS_PER_UNIT
    if isinstance(value, (list, tuple, dict, set, frozenset, range)):
        return len(value)
    return 0


def charge_deep(value: object) -> None:
    """Charge for every item and character of a nested value, stopping when over budget."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            spend(1 + len(item) // CHARS_PER_UNIT)
        elif isinstance(item, Mapping):
            spend(1 + len(item))
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset, range)):
            spend(1 + len(item))
            if not isinstance(item, range):
                stack.extend(item)


def check_int_product(left: object, right: object) -> None:
    """Refuse a product of integers larger than :data:`MAX_INT_BITS` before computing it."""
    if (
        isinstance(left, int)
        and isinstance(right, int)
        and left.bit_length() + right.bit_length() > MAX_INT_BITS
    ):
        raise BudgetExceeded("the product is too large")


class SummaryBuffer(StringIO):
    """Collects a render's output; :class:`OutputFull` once it exceeds the cap."""

    def __init__(self) -> None:
        super().__init__()
        self.length = 0

    def write(self, text: str, /) -> int:
        """Keep ``text``, or as much of it as still fits, and stop the render when full."""
        if self.length > MAX_OUTPUT_CHARS:
            raise OutputFull
        kept = text[: MAX_OUTPUT_CHARS + 1 - self.length]
        self.length += len(kept)
        super().write(kept)
        if self.length > MAX_OUTPUT_CHARS:
            raise OutputFull
        return len(text)

    def summary(self) -> str:
        """Return the output, cut to :data:`MAX_OUTPUT_CHARS` ending in an ellipsis if longer."""
        text = self.getvalue()
        if len(text) > MAX_OUTPUT_CHARS:
            return text[: MAX_OUTPUT_CHARS - 1] + _ELLIPSIS
        return text
