"""Alert writes on a run (decisions 7 and 8), in the caller's transaction.

A run has at most one alert per name. Raising creates it (version 1), updates a raised one
(the version moves only when something changed) or raises a cleared one again; clearing
moves it to cleared. Every raise and clear is also recorded as an alert-purpose span, which
no span metric counts, and the run's ``raised_alert_count`` is kept on each write.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record, to_record
from governance_core.domain.runs import PreparedChecks, schema_entry, system_span
from governance_core.errors import AlertAlreadyCleared
from governance_core.models.agents import Alert
from governance_core.notifications.outbox import alert_event
from governance_core.repository import Filter, Record, tenant_filter
from governance_core.rules.states import ALERT, advance, initial
from governance_core.rules.templates import render_template

__all__ = ["ALERT_SCHEMAS", "AlertWrite", "clear_alert", "find_alert", "raise_alert"]

ALERT_SCHEMAS = "alert_schemas"
"""The schema version's map of alert schemas."""


@attrs.frozen
class AlertWrite:
    """What a raise or clear stored: the alert and its run's instance record."""

    alert: Alert
    instance: Record


def find_alert(ctx: Context, instance_id: str, name: str) -> Alert | None:
    """Return the run's alert ``name``, or None."""
    found = ctx.tables.alerts.query([
        tenant_filter(ctx.account_id),
        Filter("agent_instance_id", "eq", instance_id),
        Filter("name", "eq", name),
    ], limit=1)
    return from_record(Alert, found[0]) if found else None


def _record_event(
    ctx: Context,
    instance: Record,
    alert: Alert,
    event: str,
    count_change: int,
    prepared: PreparedChecks | None = None,
) -> AlertWrite:
    """Store ``alert``, move the run's ``raised_alert_count``, and write the event's span."""
    ctx.tables.alerts.put(to_record(alert))
    # The outbox: the event and its deliveries commit (or roll back) with the alert.
    alert_event(ctx, alert, event)
    count = int(instance.get("raised_alert_count") or 0) + count_change
    stored = system_span(
        ctx, {**instance, "raised_alert_count": count}, purpose="alert", group=ALERT_SCHEMAS,
        name=alert.name, payload=alert.payload,
        result_payload={
            "event": event, "alert_id": alert.id, "status": alert.status,
            "severity": alert.severity, "version": alert.version,
        },
        at=ctx.now, prepared=prepared,
    )
    return AlertWrite(alert, stored)


def raise_alert(
    ctx: Context,
    instance: Record,
    name: str,
    severity: str,
    payload: dict[str, Any],
    *,
    raised_at: datetime | None = None,
    sensitive_encoding: bool = False,
    prepared: PreparedChecks | None = None,
) -> AlertWrite:
    """Raise the alert ``name`` on the run ``instance``, in the caller's transaction.

    Creates it (version 1), updates a raised one (version + 1 only when severity, payload or
    its encoding changed) or raises a cleared one again (version + 1, ``cleared_at`` null).
    The event is recorded as an alert-purpose span. Use the returned instance record for any
    further write of the run: it holds the new ``raised_alert_count``. ``prepared`` holds
    the payload's check and summary when they were made before the transaction.
    """
    existing = find_alert(ctx, instance["id"], name)
    entry = schema_entry(ctx, instance, ALERT_SCHEMAS, name) or {}
    checked = None if prepared is None else prepared.for_run(instance, ALERT_SCHEMAS, name)
    content: dict[str, Any] = {
        "title": entry.get("title") or name,
        "summary": (
            checked["summary"] if checked is not None
            else render_template(entry.get("template"), payload)
        ),
        "severity": severity,
        "payload": payload,
        "payload_sensitive_encoding": sensitive_encoding,
    }
    at = raised_at or ctx.now
    if existing is None:
        alert = Alert(
            id=ctx.new_id(), account_id=instance["account_id"], agent_id=instance["agent_id"],
            agent_instance_id=instance["id"], environment_id=instance["environment_id"],
            name=name, status=initial(ALERT), raised_at=at, inserted_at=ctx.now, updated_at=ctx.now,
            **content,
        )
        return _record_event(ctx, instance, alert, "raised", 1, prepared)
    status = advance(ALERT, existing.status, "raise", what="alert")
    if existing.status == "cleared":
        alert = attrs.evolve(
            existing, status=status, raised_at=at, cleared_at=None,
            version=existing.version + 1, updated_at=ctx.now, **content,
        )
        return _record_event(ctx, instance, alert, "raised", 1, prepared)
    alert = attrs.evolve(existing, **content)
    if alert == existing:
        return _record_event(ctx, instance, alert, "unchanged", 0, prepared)
    alert = attrs.evolve(alert, version=existing.version + 1, updated_at=ctx.now)
    return _record_event(ctx, instance, alert, "updated", 0, prepared)


def clear_alert(ctx: Context, instance: Record, alert: Alert) -> AlertWrite:
    """Clear a raised alert (version + 1, ``cleared_at`` now).

    A cleared one is ``alert_already_cleared``.
    """
    if alert.status == "cleared":
        raise AlertAlreadyCleared(f"the alert {alert.name!r} is already cleared")
    status = advance(ALERT, alert.status, "clear", what="alert")
    cleared = attrs.evolve(
        alert, status=status, cleared_at=ctx.now, version=alert.version + 1, updated_at=ctx.now
    )
    return _record_event(ctx, instance, cleared, "cleared", -1)
