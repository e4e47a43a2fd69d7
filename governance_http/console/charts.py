"""Chart geometry for the server-rendered SVG plots and the run waterfall (pure functions).

Templates draw what these return: rectangles in a fixed ``viewBox`` with numbers only, so no
value written by an agent ever reaches an SVG attribute unescaped or a style rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal

import attrs

from governance_core.clock import parse_timestamp
from governance_http.money import format_money

__all__ = ["Bar", "BarChart", "bar_chart", "stacked_chart", "waterfall_bar"]

RISK_LEVELS = ("low", "medium", "high", "critical")


@attrs.frozen
class Bar:
    """One rectangle of a chart, with its label, value text and CSS class."""

    x: float
    y: float
    width: float
    height: float
    css: str
    label: str
    value: str


@attrs.frozen
class BarChart:
    """A chart: its bars, axis labels under each column, and the largest value shown."""

    width: int
    height: int
    bars: tuple[Bar, ...]
    columns: tuple[tuple[float, str], ...]
    top: str


def _amount(value: Decimal, unit: str) -> str:
    """A chart label: dollars as everywhere else (:func:`format_money`), else two decimals."""
    if unit == "$":
        return format_money(value)
    return f"{unit}{value:,.2f}" if abs(value) >= 1 else f"{unit}{value:.4g}"


def bar_chart(
    points: Sequence[tuple[str, Decimal]], *, width: int = 560, height: int = 160, unit: str = ""
) -> BarChart:
    """Vertical bars, one per ``(label, value)``, scaled to the largest value."""
    plot = height - 20
    step = width / max(1, len(points))
    top = max((value for _, value in points), default=Decimal(0))
    bars = []
    columns = []
    for index, (label, value) in enumerate(points):
        share = float(value / top) if top > 0 else 0.0
        bar_height = plot * share
        x = index * step + step * 0.15
        bars.append(Bar(round(x, 2), round(plot - bar_height, 2), round(step * 0.7, 2),
                        round(bar_height, 2), "bar", label, _amount(value, unit)))
        columns.append((round(index * step + step / 2, 2), label))
    return BarChart(width, height, tuple(bars), tuple(columns), _amount(top, unit))


def stacked_chart(
    points: Sequence[tuple[str, Mapping[str, int]]],
    keys: Sequence[str] = RISK_LEVELS,
    *,
    width: int = 560,
    height: int = 160,
) -> BarChart:
    """Stacked vertical bars: per column, one segment per key (``risk-<key>`` classes)."""
    plot = height - 20
    step = width / max(1, len(points))
    top = max((sum(counts.values()) for _, counts in points), default=0)
    bars = []
    columns = []
    for index, (label, counts) in enumerate(points):
        y = float(plot)
        x = index * step + step * 0.15
        for key in keys:
            count = counts.get(key, 0)
            if count <= 0 or top == 0:
                continue
            segment = plot * count / top
            y -= segment
            bars.append(Bar(round(x, 2), round(y, 2), round(step * 0.7, 2), round(segment, 2),
                            f"risk-{key}", f"{label} {key}", str(count)))
        columns.append((round(index * step + step / 2, 2), label))
    return BarChart(width, height, tuple(bars), tuple(columns), str(top))


def waterfall_bar(
    start: str | None, end: str | None, window: tuple[datetime, datetime]
) -> tuple[float, float]:
    """A span's bar as ``(left, width)`` percentages of the run's time window.

    A running span (no end) reaches the window's end; bars are at least 0.4% wide so an
    instant span stays visible; everything is clamped to the window.
    """
    if not start:
        return 0.0, 0.4
    first, last = window
    total = max((last - first).total_seconds(), 1e-6)
    begin = (parse_timestamp(start) - first).total_seconds() / total
    finish = (parse_timestamp(end) - first).total_seconds() / total if end else 1.0
    left = min(max(begin, 0.0), 1.0) * 100
    right = min(max(finish, 0.0), 1.0) * 100
    width = max(right - left, 0.4)
    left = min(left, 100 - width)
    return round(left, 3), round(width, 3)
