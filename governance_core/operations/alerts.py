"""Alerts: raise, clear, show, list, count (decisions 7 and 8).

A run has at most one alert per name. Raising creates it (version 1), updates a raised one
(the version moves only when something changed) or raises a cleared one again; clearing
moves it to cleared. Every raise and clear is also recorded as an alert-purpose span, which
no span metric counts, and the run's ``raised_alert_count`` is kept on each write.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from governance_core.converter import from_record, to_record
from governance_core.domain.runs import NAME_MAX, in_reach, schema_entry, system_span
from governance_core.domain.sensitive_values import (
    SplitValues,
    keep_values,
    may_reveal,
    reveal,
    split_member,
)
from governance_core.envelopes import details_envelope, success
from governance_core.errors import AlertAlreadyCleared, AlertUnknown, InvalidValue, NotFound
from governance_core.fields import Fields
from governance_core.models.agents import Alert
from governance_core.operations.common import (
    equality_filters,
    list_response,
    load_record,
    reach_filters,
    read_instance_ref,
    tenant,
)
from governance_core.registry import ANY_SCOPE, Context, operation
from governance_core.repository import Filter, Record
from governance_core.rules.states import ALERT, advance, initial, states
from governance_core.rules.templates import render_template

__all__ = [
    "SEVERITIES",
    "SORTABLE",
    "STATUSES",
    "AlertWrite",
    "alert_details",
    "clear_alert",
    "raise_alert",
]

SEVERITIES = ("critical", "error", "warning", "info")
STATUSES = states(ALERT)
SORTABLE = ("id", "raised_at", "cleared_at", "severity", "name")
ALERT_SCHEMAS = "alert_schemas"


@attrs.frozen
class AlertWrite:
    """What a raise or clear stored: the alert and its run's instance record."""

    alert: Alert
    instance: Record


def alert_details(alert: Alert) -> dict[str, Any]:
    """Return the interface's Alert details."""
    return {
        "id": alert.id,
        "account_id": alert.account_id,
        "agent_id": alert.agent_id,
        "agent_instance_id": alert.agent_instance_id,
        "environment_id": alert.environment_id,
        "name": alert.name,
        "title": alert.title,
        "summary": alert.summary,
        "severity": alert.severity,
        "status": alert.status,
        "payload": alert.payload,
        "payload_sensitive_encoding": alert.payload_sensitive_encoding,
        "raised_at": alert.raised_at,
        "cleared_at": alert.cleared_at,
        "inserted_at": alert.inserted_at,
        "updated_at": alert.updated_at,
        "version": alert.version,
        "type": "alert",
    }


def _find(ctx: Context, instance_id: str, name: str) -> Alert | None:
    found = ctx.store.query(
        "alerts",
        [tenant(ctx), Filter("agent_instance_id", "eq", instance_id), Filter("name", "eq", name)],
        limit=1,
    )
    return from_record(Alert, found[0]) if found else None


def _record_event(
    ctx: Context, instance: Record, alert: Alert, event: str, count_change: int
) -> AlertWrite:
    """Store ``alert``, move the run's ``raised_alert_count``, and write the event's span."""
    ctx.store.put("alerts", to_record(alert))
    count = int(instance.get("raised_alert_count") or 0) + count_change
    stored = system_span(
        ctx, {**instance, "raised_alert_count": count}, purpose="alert", group=ALERT_SCHEMAS,
        name=alert.name, payload=alert.payload,
        result_payload={
            "event": event, "alert_id": alert.id, "status": alert.status,
            "severity": alert.severity, "version": alert.version,
        },
        at=ctx.now,
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
) -> AlertWrite:
    """Raise the alert ``name`` on the run ``instance``, in the caller's transaction.

    Creates it (version 1), updates a raised one (version + 1 only when severity, payload or
    its encoding changed) or raises a cleared one again (version + 1, ``cleared_at`` null).
    The event is recorded as an alert-purpose span. Use the returned instance record for any
    further write of the run: it holds the new ``raised_alert_count``.
    """
    existing = _find(ctx, instance["id"], name)
    entry = schema_entry(ctx, instance, ALERT_SCHEMAS, name) or {}
    content: dict[str, Any] = {
        "title": entry.get("title") or name,
        "summary": render_template(entry.get("template"), payload),
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
        return _record_event(ctx, instance, alert, "raised", 1)
    status = advance(ALERT, existing.status, "raise", what="alert")
    if existing.status == "cleared":
        alert = attrs.evolve(
            existing, status=status, raised_at=at, cleared_at=None,
            version=existing.version + 1, updated_at=ctx.now, **content,
        )
        return _record_event(ctx, instance, alert, "raised", 1)
    alert = attrs.evolve(existing, **content)
    if alert == existing:
        return _record_event(ctx, instance, alert, "unchanged", 0)
    alert = attrs.evolve(alert, version=existing.version + 1, updated_at=ctx.now)
    return _record_event(ctx, instance, alert, "updated", 0)


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


@operation("alerts/raise", write=True, scopes=ANY_SCOPE)
def raise_operation(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Raise an alert on a run (one per name: created, updated or raised again)."""
    instance = read_instance_ref(ctx, fields)
    name = fields.str("name", required=True, max_length=NAME_MAX)
    severity = fields.str("severity", required=True, choices=SEVERITIES)
    payload = fields.object("payload") or {}
    raised_at = fields.timestamp("raised_at")
    sensitive = fields.bool("payload_sensitive_encoding")
    values: SplitValues = {}
    if sensitive:
        payload, values = split_member(fields, "payload", payload)
    fields.done()
    assert instance is not None and name is not None and severity is not None
    written = raise_alert(
        ctx, instance, name, severity, payload, raised_at=raised_at, sensitive_encoding=sensitive
    )
    # Values kept for an earlier payload of the alert are replaced, or forgotten.
    keep_values(ctx, written.alert.id, {"payload": values})
    return details_envelope(alert_details(written.alert))


def _instance_of_bare_body(ctx: Context, body: object) -> Record:
    """Return the run a bare JSON body names; errors stand at the top level (no field)."""
    if not isinstance(body, str):
        raise InvalidValue("the body must be an agent instance id, or an object")
    # The run the operation acts on, so answered like a path id: unknown is not_found.
    instance = load_record(ctx, "agent_instance", body.strip())
    if not in_reach(ctx, instance):
        raise NotFound("agent_instance not found")
    return instance


@operation("alerts/clear", write=True, scopes=ANY_SCOPE)
def clear_operation(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Clear a raised alert.

    The body is ``{agent_instance_id, name}``, or a bare instance id with the name in the
    query; without a name, the run's only raised alert is cleared.
    """
    if fields.body is not None:
        instance: Record | None = _instance_of_bare_body(ctx, fields.body)
    else:
        instance = read_instance_ref(ctx, fields)
    name = fields.str("name", max_length=NAME_MAX)
    fields.done()
    assert instance is not None
    if name is not None:
        alert = _find(ctx, instance["id"], name)
        if alert is None:
            raise AlertUnknown(f"the run has no alert named {name!r}")
    else:
        raised = ctx.store.query(
            "alerts",
            [tenant(ctx), Filter("agent_instance_id", "eq", instance["id"]),
             Filter("status", "eq", "raised")],
            limit=2,
        )
        if not raised:
            raise AlertUnknown("the run has no raised alert")
        if len(raised) > 1:
            fields.errors.required("name", "the run has several raised alerts: name one")
            fields.done()
        alert = from_record(Alert, raised[0])
    return details_envelope(alert_details(clear_alert(ctx, instance, alert).alert))


def _load_alert(ctx: Context, alert_id: object) -> Alert:
    record = load_record(ctx, "alert", alert_id)
    principal = ctx.principal
    assert principal is not None
    if principal.is_ingestion and (
        record["agent_id"] != principal.agent_id
        or record["environment_id"] != principal.environment_id
    ):
        raise NotFound("alert not found")
    return from_record(Alert, record)


def _filters(ctx: Context, fields: Fields) -> list[Filter]:
    """Read the list and count filters; an ingestion token is held to its own reach."""
    filters = equality_filters(
        fields,
        ids=("agent_instance_id", "agent_id", "environment_id"),
        choices={"status": STATUSES, "severity": SEVERITIES},
    )
    alert_name = fields.str("name", max_length=NAME_MAX)
    if alert_name:
        filters.append(Filter("name", "eq", alert_name))
    return filters + reach_filters(ctx)


@operation("alerts/show", write=False, scopes=ANY_SCOPE)
def show_alert(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch an alert (``redacted`` withholds sensitive values)."""
    alert = _load_alert(ctx, fields.raw("alert_id"))
    redacted = fields.bool("redacted")
    fields.done()
    details = alert_details(alert)
    if alert.payload_sensitive_encoding and may_reveal(ctx, redacted):
        details.update(reveal(ctx, alert.id, {"payload": alert.payload}))
    return details_envelope(details)


@operation("alerts/list", write=False, scopes=ANY_SCOPE)
def list_alerts(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List alerts.

    Filters ``agent_instance_id``, ``agent_id``, ``environment_id``, ``status``, ``severity``,
    ``name``.
    """
    return list_response(
        ctx, fields, "alerts", sortable=SORTABLE, filters=_filters(ctx, fields),
        summarize=lambda record: alert_details(from_record(Alert, record)),
    )


@operation("alerts/count", write=False, scopes=ANY_SCOPE)
def count_alerts(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Count alerts, with the list's filters: ``{status, count}``."""
    filters = _filters(ctx, fields)
    fields.done()
    return success(count=ctx.store.count("alerts", [tenant(ctx), *filters]))
