"""Monitors: create, list, show, update, delete, evaluate.

A monitor measures a metric of the runs of an agent or environment (or the whole account)
over a window and compares it with a warning and a critical threshold; see
:mod:`governance_core.notifications.monitors` for the rule and the alert it raises.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.converter import from_record, to_record
from governance_core.envelopes import details_envelope, success
from governance_core.fields import Fields
from governance_core.models.notifications import MONITOR_STATUSES, Monitor
from governance_core.notifications import load_own
from governance_core.notifications.monitors import COMPARISONS, LEVELS, METRICS, evaluate
from governance_core.operations.common import equality_filters, list_response, resolve_ref, tenant
from governance_core.registry import operation
from governance_core.repository import Filter
from governance_core.views import view_of

__all__ = ["SORTABLE", "STATUSES", "monitor_details"]

SORTABLE = ("id", "name", "metric", "level", "inserted_at")
STATUSES = MONITOR_STATUSES
NAME_MAX = 150
WINDOW_MAX = 90 * 24 * 3600
EVERY_MIN = 10
EVERY_MAX = 24 * 3600


def monitor_details(monitor: Monitor) -> dict[str, Any]:
    """The interface's Monitor."""
    return view_of(monitor)


def _number(fields: Fields, name: str) -> float | None:
    """A finite number member (null allowed), or an error on it."""
    value = fields.raw(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        fields.errors.invalid(name, f"{name} must be a finite number")
        return None
    return float(value)


def _scope(ctx: Context, fields: Fields) -> dict[str, Any]:
    """``agent_id`` and ``environment_id`` as sent (each must exist in the account)."""
    scope: dict[str, Any] = {}
    for name, kind in (("agent_id", "agent"), ("environment_id", "environment")):
        if fields.has(name):
            value = fields.id(name)
            scope[name] = value
            if value is not None:
                resolve_ref(ctx, fields, name, kind, value)
    return scope


def _settings(ctx: Context, fields: Fields, *, creating: bool) -> dict[str, Any]:
    """The members a create or update sets, read and checked; absent ones are left out."""
    read: dict[str, Any] = {
        "name": fields.str("name", required=creating, nullable=False, max_length=NAME_MAX),
        "metric": fields.str("metric", required=creating, nullable=False, choices=METRICS),
        "comparison": fields.str("comparison", nullable=False, choices=COMPARISONS,
                                 default="gt" if creating else None),
        "window_seconds": fields.int("window_seconds", required=creating, nullable=False,
                                     minimum=60, maximum=WINDOW_MAX),
        "evaluate_every_seconds": fields.int(
            "evaluate_every_seconds", nullable=False, minimum=EVERY_MIN, maximum=EVERY_MAX,
            default=60 if creating else None,
        ),
        "status": fields.str("status", nullable=False, choices=STATUSES),
        "hysteresis": _number(fields, "hysteresis"),
        **_scope(ctx, fields),
    }
    for name in ("warning", "critical", "description"):
        if fields.has(name):
            read[name] = (
                fields.str(name, max_length=2000) if name == "description"
                else _number(fields, name)
            )
    if read["hysteresis"] is not None and read["hysteresis"] < 0:
        fields.errors.invalid("hysteresis", "hysteresis may not be negative")
    nullable = {"warning", "critical", "description", "agent_id", "environment_id"}
    return {
        key: value for key, value in read.items()
        if value is not None or (key in nullable and fields.has(key))
    }


def _check_thresholds(fields: Fields, monitor: Monitor) -> None:
    if monitor.warning is None and monitor.critical is None:
        fields.errors.required("warning", "a monitor needs a warning or a critical threshold")
    elif monitor.warning is not None and monitor.critical is not None:
        upward = monitor.comparison in ("gt", "ge")
        if (monitor.critical < monitor.warning) if upward else (
            monitor.critical > monitor.warning
        ):
            fields.errors.invalid(
                "critical", "critical must lie beyond warning in the comparison's direction"
            )


def _load(ctx: Context, fields: Fields) -> Monitor:
    return from_record(Monitor, load_own(ctx, ctx.tables.monitors, fields.raw("monitor_id")))


@operation("monitors/create", write=True)
def create_monitor(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create a monitor: a metric over a window, a comparison, warning and critical levels."""
    settings = _settings(ctx, fields, creating=True)
    fields.done()
    monitor = Monitor(
        id=ctx.new_id(), account_id=ctx.account_id, level="unknown",
        status=settings.pop("status", "active"), inserted_at=ctx.now, updated_at=ctx.now,
        next_evaluation_at=ctx.now, **settings,
    )
    _check_thresholds(fields, monitor)
    fields.done()
    ctx.tables.monitors.put(to_record(monitor))
    return details_envelope(monitor_details(monitor))


@operation("monitors/list", write=False)
def list_monitors(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List monitors; filters ``agent_id``, ``environment_id``, ``metric``, ``level``."""
    filters = equality_filters(
        fields, ids=("agent_id", "environment_id"),
        choices={"metric": METRICS, "level": LEVELS, "status": STATUSES},
    )
    return list_response(
        ctx, fields, ctx.tables.monitors, sortable=SORTABLE, filters=filters,
        summarize=lambda record: monitor_details(from_record(Monitor, record)),
    )


@operation("monitors/show", write=False)
def show_monitor(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Get a monitor with its level and last value."""
    monitor = _load(ctx, fields)
    fields.done()
    return details_envelope(monitor_details(monitor))


@operation("monitors/update", write=True)
def update_monitor(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Change a monitor; a change of what it measures is evaluated at the next pass."""
    monitor = _load(ctx, fields)
    settings = _settings(ctx, fields, creating=False)
    fields.done()
    changes = {key: value for key, value in settings.items() if getattr(monitor, key) != value}
    if changes:
        monitor = attrs.evolve(
            monitor, **changes, version=monitor.version + 1, updated_at=ctx.now,
            next_evaluation_at=ctx.now,
        )
        _check_thresholds(fields, monitor)
        fields.done()
        ctx.tables.monitors.put(to_record(monitor))
    return details_envelope(monitor_details(monitor))


@operation("monitors/delete", write=True)
def delete_monitor(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Delete a monitor (an alert it raised stays, to be cleared by hand)."""
    monitor = _load(ctx, fields)
    fields.done()
    ctx.tables.monitors.delete(monitor.id)
    return details_envelope(monitor_details(monitor))


@operation("monitors/evaluate", write=True)
def evaluate_monitors(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Evaluate the account's active monitors that are due (or ``monitor_id``, due or not).

    The sender calls this on its schedule; a caller may too. Answers ``{evaluated}``: the
    monitors as they stand after.
    """
    monitor_id = fields.id("monitor_id")
    fields.done()
    if monitor_id is not None:
        monitors = [from_record(Monitor, load_own(ctx, ctx.tables.monitors, monitor_id))]
    else:
        due = ctx.tables.monitors.query([
            tenant(ctx), Filter("status", "eq", "active"),
            Filter("next_evaluation_at", "le", format_timestamp(ctx.now)),
        ])
        monitors = [from_record(Monitor, record) for record in due]
    evaluated = [monitor_details(evaluate(ctx, monitor)) for monitor in monitors]
    return success(evaluated=evaluated)

