"""Notification events (the outbox, as written): list and show."""

from __future__ import annotations

from typing import Any

from governance_core.context import Context
from governance_core.converter import from_record
from governance_core.envelopes import details_envelope
from governance_core.fields import Fields
from governance_core.models.notifications import NotificationEvent
from governance_core.notifications import load_own
from governance_core.notifications.outbox import EVENT_TYPES
from governance_core.operations.common import equality_filters, list_response
from governance_core.registry import operation
from governance_core.views import view_of

__all__ = ["SORTABLE", "event_details"]

SORTABLE = ("id", "occurred_at", "event_type")


def event_details(event: NotificationEvent) -> dict[str, Any]:
    """The interface's NotificationEvent."""
    return view_of(event)


@operation("notification_events/list", write=False)
def list_events(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List the account's notification events; filters ``event_type`` and ``subject_id``."""
    filters = equality_filters(fields, ids=("subject_id",), choices={"event_type": EVENT_TYPES})
    return list_response(
        ctx, fields, ctx.tables.notification_events, sortable=SORTABLE, filters=filters,
        summarize=lambda record: event_details(from_record(NotificationEvent, record)),
    )


@operation("notification_events/show", write=False)
def show_event(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Get a notification event."""
    event = from_record(
        NotificationEvent,
        load_own(ctx, ctx.tables.notification_events, fields.raw("notification_event_id")),
    )
    fields.done()
    return details_envelope(event_details(event))
