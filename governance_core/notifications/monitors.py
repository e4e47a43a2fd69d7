"""Monitors: a metric of an agent's (or environment's) runs over a window, against thresholds.

:func:`level_after` is the pure rule: a level is entered when the value passes its threshold
and left only when the value comes back past the threshold by the monitor's ``hysteresis``,
so a value hovering at a threshold does not flap. :func:`measure` computes a metric from the
stored runs, alerts and policy decisions of the window, and :func:`evaluate` applies both to a
monitor in the caller's transaction: a change of level is a ``monitor.state_changed`` event,
raises (or updates) the monitor's alert on the latest run in its scope, and clears it on
return to ok.
Time comes from the context only.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import attrs

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.converter import to_record
from governance_core.domain.alerts import clear_alert, find_alert, raise_alert
from governance_core.domain.insights import run_insights
from governance_core.domain.risk import Rulesets
from governance_core.models.notifications import (
    MONITOR_COMPARISONS,
    MONITOR_LEVELS,
    MONITOR_METRICS,
    Monitor,
)
from governance_core.notifications.outbox import emit
from governance_core.repository import Filter, GroupBy, Record, SortKey, tenant_filter
from governance_core.rules.token_groups import stored_token_groups
from governance_core.views import view_of

__all__ = [
    "COMPARISONS",
    "LEVELS",
    "METRICS",
    "alert_name",
    "evaluate",
    "level_after",
    "measure",
]

METRICS = MONITOR_METRICS
COMPARISONS = MONITOR_COMPARISONS
LEVELS = MONITOR_LEVELS
_RANK = {"unknown": 0, "ok": 0, "warning": 1, "critical": 2}
_FAILED = ("failed", "terminated")
_FINISHED = ("complete", "failed", "cancelled", "terminated")
_BY_STATUS = frozenset({"run_count", "failed_runs", "error_rate"})
"""Metrics told from the runs' count per status: counted by the store, no run read."""
_MS_IN_SECONDS = 1000


def _passes(value: float, threshold: float, comparison: str) -> bool:
    if comparison == "gt":
        return value > threshold
    if comparison == "ge":
        return value >= threshold
    if comparison == "lt":
        return value < threshold
    return value <= threshold


def level_after(
    previous: str,
    value: float | None,
    comparison: str,
    warning: float | None,
    critical: float | None,
    hysteresis: float = 0.0,
) -> str:
    """The level after measuring ``value``, from ``previous``.

    A level is entered when ``value`` passes its threshold (``gt``: above it); a level held
    already is kept while ``value`` still passes the threshold moved back by ``hysteresis``
    (``gt`` 50 with hysteresis 5 is left only at 45 or below). No value (no data in the
    window) keeps the previous level, ``ok`` before any.
    """
    if value is None:
        return "ok" if previous == "unknown" else previous
    toward_ok = -hysteresis if comparison in ("gt", "ge") else hysteresis
    level = "ok"
    for name, threshold in (("warning", warning), ("critical", critical)):
        if threshold is None:
            continue
        entered = _passes(value, threshold, comparison)
        held = _RANK[previous] >= _RANK[name] and _passes(
            value, threshold + toward_ok, comparison
        )
        if entered or held:
            level = name if _RANK[name] > _RANK[level] else level
    return level


def _percentile(counted: list[tuple[int, int]], fraction: float) -> int | None:
    """The nearest-rank percentile of values given with how many times each occurs."""
    total = sum(count for _, count in counted)
    if not total:
        return None
    rank = max(1, math.ceil(fraction * total))
    for value, count in sorted(counted):
        rank -= count
        if rank <= 0:
            return value
    raise AssertionError("unreachable: the rank is within the total")


def _scope(monitor: Monitor) -> list[Filter]:
    filters = [tenant_filter(monitor.account_id)]
    if monitor.agent_id is not None:
        filters.append(Filter("agent_id", "eq", monitor.agent_id))
    if monitor.environment_id is not None:
        filters.append(Filter("environment_id", "eq", monitor.environment_id))
    return filters


def measure(ctx: Context, monitor: Monitor) -> float | None:
    """The monitor's metric over its window ending now.

    Over the live runs started in the window, but for ``critical_alerts`` (alerts raised in
    it) and ``policy_denials`` (decisions denied in it, each counted in the store).

    None when the metric has no value (an error rate with no finished run, a duration
    percentile with none, an average of nothing).
    """
    since = format_timestamp(ctx.now - timedelta(seconds=monitor.window_seconds))
    if monitor.metric == "critical_alerts":
        return float(ctx.tables.alerts.count([
            *_scope(monitor), Filter("severity", "eq", "critical"),
            Filter("raised_at", "ge", since),
        ]))
    if monitor.metric == "policy_denials":
        # Only enforce-mode denials: an observe-mode deny is kept as ``observed_outcome``
        # on an allowed decision and blocked nothing.
        return float(ctx.tables.decisions.count([
            *_scope(monitor), Filter("outcome", "eq", "deny"),
            Filter("decided_at", "ge", since),
        ]))
    live = [*_scope(monitor), Filter("purpose", "eq", "live"), Filter("started_at", "ge", since)]
    if monitor.metric in _BY_STATUS:
        counts = {
            row.key[0]: row.count
            for row in ctx.tables.agent_instances.aggregate([GroupBy("status")], filters=live)
        }
        return _status_metric(monitor.metric, counts)
    if monitor.metric == "cost_usd":
        # The runs' kept cost, priced as each usage was recorded: the figure the console
        # and the policies read.
        rows = ctx.tables.agent_instances.aggregate(sums=["total_cost"], filters=live)
        return float(rows[0].sums[0] or 0) if rows else 0.0
    if monitor.metric == "p95_duration_seconds":
        finished = [*live, Filter("status", "in", list(_FINISHED))]
        rows = ctx.tables.agent_instances.aggregate([GroupBy("duration_ms")], filters=finished)
        p95 = _percentile([(r.key[0], r.count) for r in rows if r.key[0] is not None], 0.95)
        return None if p95 is None else p95 / _MS_IN_SECONDS
    return _run_metric(ctx, monitor.metric, ctx.tables.agent_instances.query(live))


def _status_metric(metric: str, counts: dict[str, int]) -> float | None:
    """A metric of :data:`_BY_STATUS` from the window's runs counted per status."""
    failed = sum(counts.get(status, 0) for status in _FAILED)
    if metric == "run_count":
        return float(sum(counts.values()))
    if metric == "failed_runs":
        return float(failed)
    finished = sum(counts.get(status, 0) for status in _FINISHED)
    return failed / finished if finished else None


def _run_metric(ctx: Context, metric: str, runs: list[Record]) -> float | None:
    """A metric that reads each run of the window: its token usage, risk or quality."""
    if metric == "tokens":
        return float(sum(
            group.input + group.output + group.cache_read
            for run in runs for group in stored_token_groups(run)
        ))
    if metric == "high_risk_runs":
        rulesets = Rulesets(ctx)
        levels = [
            ((run_insights(ctx, run, rulesets)["risk_score"] or {}).get("risk_level"))
            for run in runs
        ]
        return float(sum(level in ("high", "critical") for level in levels))
    scores = [
        float(payload["score"])
        for run in runs
        for payload in (run.get("quality_payloads") or {}).values()
        if isinstance(payload, dict) and isinstance(payload.get("score"), (int, float))
        and not isinstance(payload.get("score"), bool)
    ]
    return sum(scores) / len(scores) if scores else None


def alert_name(monitor: Monitor) -> str:
    """The name of the alert a monitor raises on a run."""
    return f"monitor:{monitor.name}"


def _latest_run(ctx: Context, monitor: Monitor) -> Record | None:
    found = ctx.tables.agent_instances.query(
        _scope(monitor),
        sort=[SortKey("started_at", descending=True, nulls="last")], limit=1,
    )
    return found[0] if found else None


def _threshold(monitor: Monitor, level: str) -> float | None:
    return monitor.critical if level == "critical" else monitor.warning


def evaluate(ctx: Context, monitor: Monitor) -> Monitor:
    """Measure, move the level, and write what changed; the monitor as stored.

    Runs in the caller's transaction. The next evaluation is due ``evaluate_every_seconds``
    from now.
    """
    value = measure(ctx, monitor)
    level = level_after(
        monitor.level, value, monitor.comparison, monitor.warning, monitor.critical,
        monitor.hysteresis,
    )
    changed = level != monitor.level
    updated = attrs.evolve(
        monitor, level=level, last_value=value, last_evaluated_at=ctx.now,
        next_evaluation_at=ctx.now + timedelta(seconds=monitor.evaluate_every_seconds),
        updated_at=ctx.now, version=monitor.version + (1 if changed else 0),
    )
    # The first evaluation finding all well is no news: it only leaves ``unknown``.
    if changed and not (monitor.level == "unknown" and level == "ok"):
        updated = _move_alert(ctx, updated, value)
        emit(ctx, monitor.account_id, "monitor.state_changed", {
            "monitor": view_of(updated), "previous_level": monitor.level,
            "level": level, "value": value, "threshold": _threshold(updated, level),
        }, subject_id=monitor.id)
    ctx.tables.monitors.put(to_record(updated))
    return updated


def _move_alert(ctx: Context, monitor: Monitor, value: float | None) -> Monitor:
    """Raise, update or clear the monitor's alert for its new level."""
    name = alert_name(monitor)
    held = (
        ctx.tables.agent_instances.get(monitor.alert_instance_id)
        if monitor.alert_instance_id else None
    )
    if monitor.level in ("ok", "unknown"):
        if held is not None:
            alert = find_alert(ctx, held["id"], name)
            if alert is not None and alert.status == "raised":
                clear_alert(ctx, held, alert)
        return attrs.evolve(monitor, alert_instance_id=None)
    instance = held or _latest_run(ctx, monitor)
    if instance is None:
        # No run to hang it on: the monitor's own state change event is the record.
        return monitor
    payload: dict[str, Any] = {
        "monitor_id": monitor.id, "metric": monitor.metric, "value": value,
        "comparison": monitor.comparison, "threshold": _threshold(monitor, monitor.level),
        "window_seconds": monitor.window_seconds,
    }
    raise_alert(ctx, instance, name, monitor.level, payload)
    return attrs.evolve(monitor, alert_instance_id=instance["id"])
