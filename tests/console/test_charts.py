"""The chart and waterfall geometry the console draws."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from governance_http.console.charts import bar_chart, stacked_chart, waterfall_bar

START = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW = (START, START + timedelta(seconds=100))


def at(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).isoformat()


def test_a_span_bar_sits_at_its_start_and_lasts_its_duration() -> None:
    assert waterfall_bar(at(10), at(30), WINDOW) == (10.0, 20.0)


def test_a_running_span_reaches_the_end_and_bars_stay_inside() -> None:
    assert waterfall_bar(at(90), None, WINDOW) == (90.0, 10.0)
    assert waterfall_bar(at(-50), at(-40), WINDOW) == (0.0, 0.4)
    left, width = waterfall_bar(at(150), at(160), WINDOW)
    assert left + width <= 100 and width == 0.4


def test_an_instant_span_stays_visible() -> None:
    assert waterfall_bar(at(50), at(50), WINDOW)[1] == 0.4


def test_bars_scale_to_the_largest_value() -> None:
    chart = bar_chart([("a", Decimal(1)), ("b", Decimal(4)), ("c", Decimal(0))], unit="$")
    heights = [bar.height for bar in chart.bars]
    assert heights[1] == chart.height - 20 and heights[0] == heights[1] / 4 and heights[2] == 0
    assert chart.top == "$4.00"
    assert bar_chart([("a", Decimal(0))]).bars[0].height == 0


def test_stacked_segments_add_up_to_the_column() -> None:
    chart = stacked_chart([("d1", {"low": 1, "high": 3}), ("d2", {"medium": 2})])
    first = [bar for bar in chart.bars if bar.label.startswith("d1")]
    assert [bar.css for bar in first] == ["risk-low", "risk-high"]
    assert sum(bar.height for bar in first) == chart.height - 20
    assert chart.top == "4"
