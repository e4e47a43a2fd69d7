"""The trends page: per day over 7, 30 or 90 days, for an agent and environment or all.

Runs by status, error rate, p50 and p95 duration, tokens and cost per model, risk levels,
the mean quality score per agent and alerts. Every figure comes from
:func:`~governance_core.domain.insights.run_trends`, grouped queries of the store whatever
the number of runs; this module only lays them out.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from governance_core.domain.insights import RunFilter, run_trends
from governance_http.console.charts import RISK_LEVELS, TrendChart, trend_bars, trend_lines
from governance_http.console.web import Visit, chosen_window
from governance_http.money import format_money

__all__ = ["WINDOWS", "trends_page"]

WINDOWS = (7, 30, 90)
"""The windows the page offers, in days (the last of them today, UTC)."""
DEFAULT_WINDOW = 30
STATUSES = ("pending", "active", "complete", "failed", "cancelled", "terminated")
SEVERITIES = ("critical", "error", "warning", "info")
SCAN_LIMIT = 1000


def _choices(visit: Visit, operation: str) -> dict[str, str]:
    """Names of up to :data:`SCAN_LIMIT` agents or environments, by id."""
    names: dict[str, str] = {}
    offset: int | None = 0
    while offset is not None and len(names) < SCAN_LIMIT:
        page = visit.call(operation, sorting="name", **{
            "pagination[offset]": offset, "pagination[page_size]": 100,
        })
        names.update((row["id"], row["name"]) for row in page["summaries"])
        offset = page["pagination"]["next_page_offset"]
    return names


def _seconds(milliseconds: float) -> str:
    if milliseconds < 1000:
        return f"{milliseconds:,.0f} ms"
    if milliseconds < 120_000:
        return f"{milliseconds / 1000:,.1f} s"
    if milliseconds < 7_200_000:
        return f"{milliseconds / 60_000:,.1f} min"
    return f"{milliseconds / 3_600_000:,.1f} h"


def _percent(value: float) -> str:
    return f"{value:.1f}%"


def _money(value: float) -> str:
    return format_money(Decimal(repr(value)))


def _scored_agents(trends: dict[str, Any], agents: dict[str, str]) -> dict[str, str]:
    """The agents with a quality score in the window, by id, with their names (sorted)."""
    ids = {agent for day in trends["days"] for agent in day["quality"]}
    return dict(sorted(((id_, agents.get(id_, id_)) for id_ in ids), key=lambda item: item[1]))


def _charts(trends: dict[str, Any], scored: dict[str, str]) -> dict[str, TrendChart]:
    days = trends["days"]
    labels = [day["day"][5:] for day in days]
    models = trends["models"]
    return {
        "quality": trend_lines(
            labels,
            {name: [None if agent not in day["quality"] else day["quality"][agent]["mean"]
                    for day in days] for agent, name in scored.items()},
            fmt=lambda value: f"{value:,.3g}",
        ),
        "runs": trend_bars(labels, [day["statuses"] for day in days], STATUSES, css="status"),
        "errors": trend_lines(
            labels,
            {"error rate": [None if day["error_rate"] is None else day["error_rate"] * 100
                            for day in days]},
            fmt=_percent,
        ),
        "durations": trend_lines(
            labels, {"p50": [day["p50_ms"] for day in days],
                     "p95": [day["p95_ms"] for day in days]},
            fmt=_seconds,
        ),
        "tokens": trend_bars(
            labels,
            [{model: usage["input"] + usage["output"] for model, usage in day["models"].items()}
             for day in days],
            models, css="model", indexed=True,
        ),
        "cost": trend_bars(
            labels,
            [{model: float(usage["cost"]) for model, usage in day["models"].items()
              if usage["cost"] is not None} for day in days],
            models, css="model", indexed=True, fmt=_money,
        ),
        "risk": trend_bars(labels, [day["risk"] for day in days], RISK_LEVELS, css="risk"),
        "alerts": trend_bars(labels, [day["alerts"] for day in days], SEVERITIES,
                             css="severity"),
    }


def _totals(trends: dict[str, Any]) -> dict[str, Any]:
    """The window's totals: runs, failed among finished, cost, and per model."""
    days = trends["days"]
    finished = sum(day["statuses"].get(status, 0) for day in days
                   for status in ("complete", "failed", "cancelled", "terminated"))
    failed = sum(day["statuses"].get("failed", 0) for day in days)
    costs = [day["total_cost"] for day in days if day["total_cost"] is not None]
    models: dict[str, dict[str, Any]] = {}
    for day in days:
        for model, usage in day["models"].items():
            entry = models.setdefault(model, {"input": 0, "output": 0, "cost": None})
            entry["input"] += usage["input"]
            entry["output"] += usage["output"]
            if usage["cost"] is not None:
                entry["cost"] = (entry["cost"] or Decimal(0)) + usage["cost"]
    return {
        "runs": sum(day["runs"] for day in days),
        "error_rate": failed / finished if finished else None,
        "total_cost": sum(costs, Decimal(0)) if costs else None,
        "models": models,
        "alerts": sum(sum(day["alerts"].values()) for day in days),
    }


def trends_page(visit: Visit) -> None:
    """``/trends``: the chosen window's figures per day, as charts and as tables.

    ``window`` is 7, 30 or 90 (days, default 30); ``agent_id`` and ``environment_id`` narrow
    it. A window the page does not offer is answered 400 with a message naming it.
    """
    agents = _choices(visit, "agents/list")
    environments = _choices(visit, "environments/list")
    window, error = chosen_window(visit.query("window"), WINDOWS, DEFAULT_WINDOW)
    agent_id = visit.query("agent_id")
    environment_id = visit.query("environment_id")
    last_day = visit.now.date()
    first_day = last_day - timedelta(days=window - 1)
    chosen = RunFilter(agent_ids=None if agent_id is None else (agent_id,),
                       environment_id=environment_id)
    trends = run_trends(visit.context(), first_day, last_day, chosen)
    scored = _scored_agents(trends, agents)
    visit.render(
        "trends.html", 400 if error else 200, error=error, window=window, windows=WINDOWS,
        agents=agents, environments=environments, agent_id=agent_id,
        environment_id=environment_id, first_day=first_day, last_day=last_day,
        days=trends["days"], models=trends["models"], charts=_charts(trends, scored),
        scored=scored,
        totals=_totals(trends), statuses=STATUSES, risk_levels=RISK_LEVELS,
        severities=SEVERITIES, seconds=_seconds,
    )
