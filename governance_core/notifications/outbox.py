"""The outbox: events written in the transaction of what caused them, one delivery each.

:func:`emit` stores a :class:`NotificationEvent` and, for every active destination of the
same account subscribed to its type, a pending :class:`Delivery`, all in the caller's
transaction: an alert raise that commits has its deliveries committed with it, and one that
rolls back leaves none. Destinations of other accounts are never looked at.

:func:`message_body` renders the exact bytes a delivery sends, from the stored event only, so
every attempt of a delivery sends the same body under the same ``webhook-id``.
"""

from __future__ import annotations

import json
from typing import Any

from governance_core.context import Context
from governance_core.converter import to_record
from governance_core.models.agents import Alert
from governance_core.models.notifications import BODY_FORMATS, Delivery, NotificationEvent
from governance_core.repository import Filter, tenant_filter
from governance_core.views import view_of

__all__ = [
    "BODY_FORMATS",
    "EVENT_TYPES",
    "alert_event",
    "emit",
    "message_body",
]

EVENT_TYPES = (
    "alert.raised", "alert.updated", "alert.cleared", "monitor.state_changed", "destination.test",
)
"""Every event type a destination may subscribe to."""


_ALERT_EVENTS = {"raised": "alert.raised", "updated": "alert.updated", "cleared": "alert.cleared"}


def emit(
    ctx: Context,
    account_id: str,
    event_type: str,
    data: dict[str, Any],
    *,
    subject_id: str | None = None,
    destination_id: str | None = None,
) -> NotificationEvent:
    """Store an event and a pending delivery per subscribed active destination of the account.

    ``destination_id`` limits the deliveries to that destination (a test message).
    """
    event = NotificationEvent(
        id=ctx.new_id(), account_id=account_id, event_type=event_type, occurred_at=ctx.now,
        inserted_at=ctx.now, data=data, subject_id=subject_id,
    )
    ctx.tables.notification_events.put(to_record(event))
    filters = [tenant_filter(account_id), Filter("status", "eq", "active")]
    if destination_id is not None:
        filters.append(Filter("id", "eq", destination_id))
    for destination in ctx.tables.destinations.query(filters):
        wanted = destination.get("event_types") or []
        if wanted and event_type not in wanted and destination_id is None:
            continue
        delivery = Delivery(
            id=ctx.new_id(), account_id=account_id, destination_id=destination["id"],
            event_id=event.id, event_type=event_type, status="pending",
            next_attempt_at=ctx.now, inserted_at=ctx.now, updated_at=ctx.now,
        )
        ctx.tables.deliveries.put(to_record(delivery))
    return event


def alert_event(ctx: Context, alert: Alert, change: str) -> NotificationEvent | None:
    """Emit ``alert.raised``, ``alert.updated`` or ``alert.cleared`` for a stored alert.

    An unchanged alert (``change`` is ``unchanged``) emits nothing. The event carries the
    alert as the API shows it; a payload held with sensitive encoding carries its
    placeholders, never the values.
    """
    event_type = _ALERT_EVENTS.get(change)
    if event_type is None:
        return None
    data = {"alert": view_of(alert)}
    return emit(ctx, alert.account_id, event_type, data, subject_id=alert.id)


def message_body(event: dict[str, Any], body_format: str) -> bytes:
    """The bytes a delivery of the stored ``event`` record sends in ``body_format``.

    ``standard`` is ``{type, timestamp, data}`` (the Standard Webhooks payload structure);
    ``slack`` is ``{text}`` for an incoming webhook. Keys are sorted, so the same event always
    gives the same bytes.
    """
    if body_format == "slack":
        payload: dict[str, Any] = {"text": _slack_text(event)}
    else:
        payload = {
            "type": event["event_type"],
            "timestamp": event["occurred_at"],
            "data": event.get("data") or {},
        }
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def _slack_text(event: dict[str, Any]) -> str:
    data = event.get("data") or {}
    event_type = event["event_type"]
    if event_type.startswith("alert."):
        alert = data.get("alert") or {}
        verb = event_type.removeprefix("alert.")
        text = (
            f"[{alert.get('severity')}] Alert {verb}: {alert.get('title')} "
            f"(agent {alert.get('agent_id')}, run {alert.get('agent_instance_id')})"
        )
        summary = alert.get("summary")
        return f"{text}\n{summary}" if summary else text
    if event_type == "monitor.state_changed":
        monitor = data.get("monitor") or {}
        return (
            f"Monitor {monitor.get('name')}: {data.get('previous_level')} -> "
            f"{data.get('level')} ({monitor.get('metric')} = {data.get('value')})"
        )
    return f"{event_type} at {event['occurred_at']}"
