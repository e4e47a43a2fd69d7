"""Chart geometry for the server-rendered SVG plots and the run waterfall (pure functions).

Templates draw what these return: rectangles in a fixed ``viewBox`` with numbers only, so no
value written by an agent ever reaches an SVG attribute unescaped or a style rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal

import attrs

from governance_core.clock import parse_timestamp
from governance_http.money import format_money

__all__ = [
    "Bar", "BarChart", "Line", "Mark", "Tick", "TrendChart", "bar_chart", "nice_step",
    "stacked_chart", "time_axis", "trend_bars", "trend_lines", "waterfall_bar",
]

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


_STEPS = (
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30,
    60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
)
"""Tick steps in seconds: round numbers of milliseconds, seconds, minutes, hours."""


@attrs.frozen
class Tick:
    """One tick of a time axis: where it sits (percent of the window) and its label."""

    at: float
    label: str


def _tick_label(seconds: float, step: float) -> str:
    if seconds == 0:
        return "0"
    if step < 1:
        return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.{len(str(step)) - 2}f} s"
    if step < 60:
        return f"{seconds:.0f} s"
    if step < 3600:
        return f"{seconds / 60:.0f} min"
    if step < 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} d"


def time_axis(window: tuple[datetime, datetime], most: int = 5) -> list[Tick]:
    """Ticks for a waterfall's time window: the time since its start, at a round step.

    The step is the smallest of :data:`_STEPS` giving at most ``most`` intervals (a window
    longer than ``most`` days steps by whole days).
    """
    first, last = window
    total = max((last - first).total_seconds(), 1e-6)
    step = next((s for s in _STEPS if total / s <= most), float(math.ceil(total / most / 86400)
                                                                  * 86400))
    # A hair over the division, so 0.3 s by 0.1 s steps counts 3 (floating point gives 2.99).
    count = int(total / step + 1e-9)
    return [
        Tick(round(index * step / total * 100, 3), _tick_label(index * step, step))
        for index in range(count + 1)
    ]


@attrs.frozen
class Mark:
    """A point of a line chart, at ``(x, y)``, with the text its hover shows."""

    x: float
    y: float
    label: str


@attrs.frozen
class Line:
    """One series of a line chart: its name, CSS class, polyline and points."""

    name: str
    css: str
    path: str
    marks: tuple[Mark, ...]


@attrs.frozen
class TrendChart:
    """A chart over days with axes: bars or lines in a plot area right of the value axis.

    ``y_ticks`` are ``(y, label)`` of the value axis, ``columns`` ``(x, label)`` of the day
    axis (thinned to at most a dozen labels); every bar and point carries its value as text.
    """

    width: int
    height: int
    left: int
    bottom: int
    bars: tuple[Bar, ...]
    lines: tuple[Line, ...]
    columns: tuple[tuple[float, str], ...]
    y_ticks: tuple[tuple[float, str], ...]


def nice_step(top: float, most: int = 4) -> float:
    """The least of 1, 2 and 5 times a power of ten that covers ``top`` in ``most`` steps."""
    if top <= 0:
        return 1.0
    rough = top / most
    power = 10 ** math.floor(math.log10(rough))
    return float(next(factor * power for factor in (1, 2, 5, 10) if factor * power >= rough))


PLOT_TOP = 10
"""Room above a trend chart's plot for its top tick label."""


def _frame(
    count: int, top: float, width: int, height: int, left: int, bottom: int,
    fmt: Callable[[float], str], whole: bool,
) -> tuple[float, float, tuple[tuple[float, str], ...]]:
    """The column step, the value a full plot height stands for, and the value axis ticks.

    ``whole``: the values are counts, so the ticks step by whole numbers.
    """
    step = nice_step(top)
    if whole:
        step = max(1.0, step)
    ticks = max(1, math.ceil(top / step)) if top > 0 else 1
    scale_top = step * ticks
    plot = height - bottom - PLOT_TOP
    y_ticks = tuple(
        (round(PLOT_TOP + plot - plot * index / ticks, 2), fmt(step * index))
        for index in range(ticks + 1)
    )
    return (width - left) / max(1, count), scale_top, y_ticks


def _columns(labels: Sequence[str], left: int, step: float) -> tuple[tuple[float, str], ...]:
    every = max(1, math.ceil(len(labels) / 12))
    return tuple(
        (round(left + index * step + step / 2, 2), label)
        for index, label in enumerate(labels) if index % every == 0
    )


def trend_bars(
    labels: Sequence[str],
    stacks: Sequence[Mapping[str, float]],
    keys: Sequence[str],
    *,
    css: str = "series",
    indexed: bool = False,
    fmt: Callable[[float], str] = lambda value: f"{value:,.0f}",
    width: int = 640,
    height: int = 200,
) -> TrendChart:
    """Stacked bars per day: one segment per key present (class ``<css>-<key>``).

    ``indexed`` names the class after the key's position instead (``<css>-<n>``, n below 6),
    for keys an agent writes (model names).

    Each segment's hover text is ``<day> · <key>: <value>`` and the column's total.
    """
    left, bottom = 64, 20
    top = max((sum(stack.get(key, 0) for key in keys) for stack in stacks), default=0)
    whole = all(isinstance(value, int) for stack in stacks for value in stack.values())
    step, scale_top, y_ticks = _frame(
        len(labels), float(top), width, height, left, bottom, fmt, whole
    )
    plot = height - bottom - PLOT_TOP
    bars = []
    for index, (label, stack) in enumerate(zip(labels, stacks, strict=True)):
        y = float(PLOT_TOP + plot)
        x = left + index * step + step * 0.15
        total = sum(stack.get(key, 0) for key in keys)
        for number, key in enumerate(keys):
            value = stack.get(key, 0)
            if value <= 0:
                continue
            segment = plot * float(value) / scale_top
            y -= segment
            bars.append(Bar(
                round(x, 2), round(y, 2), round(step * 0.7, 2), round(segment, 2),
                f"{css}-{number % 6 if indexed else key}", f"{label} · {key}",
                f"{fmt(value)} of {fmt(total)}",
            ))
    return TrendChart(width, height, left, bottom, tuple(bars), (), _columns(labels, left, step),
                      y_ticks)


def trend_lines(
    labels: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    css: str = "line",
    fmt: Callable[[float], str] = lambda value: f"{value:,.2f}",
    width: int = 640,
    height: int = 200,
) -> TrendChart:
    """Lines over days, one per series (class ``<css>-<index>``); a None value is a gap.

    Each point's hover text is ``<day> · <series>: <value>``.
    """
    left, bottom = 64, 20
    top = max((value for values in series.values() for value in values if value is not None),
              default=0.0)
    step, scale_top, y_ticks = _frame(
        len(labels), float(top), width, height, left, bottom, fmt, False
    )
    plot = height - bottom - PLOT_TOP
    lines = []
    for number, (name, values) in enumerate(series.items()):
        marks = []
        pieces: list[list[str]] = [[]]
        for index, value in enumerate(values):
            if value is None:
                pieces.append([])
                continue
            x = round(left + index * step + step / 2, 2)
            y = round(PLOT_TOP + plot - plot * float(value) / scale_top, 2)
            marks.append(Mark(x, y, f"{labels[index]} · {name}: {fmt(value)}"))
            pieces[-1].append(f"{x},{y}")
        path = " ".join(
            f"M{' L'.join(piece)}" for piece in pieces if piece
        )
        lines.append(Line(name, f"{css}-{number % 6}", path, tuple(marks)))
    return TrendChart(width, height, left, bottom, (), tuple(lines),
                      _columns(labels, left, step), y_ticks)
