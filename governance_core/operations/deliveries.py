"""Deliveries (the delivery log and its dead letters): list, show with attempts, resend."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record, to_record
from governance_core.envelopes import details_envelope
from governance_core.errors import InvalidAction
from governance_core.fields import Fields
from governance_core.models.notifications import DELIVERY_STATUSES, Delivery, DeliveryAttempt
from governance_core.notifications import load_own
from governance_core.notifications.outbox import EVENT_TYPES
from governance_core.operations.common import equality_filters, list_response, tenant
from governance_core.registry import operation
from governance_core.repository import Filter, SortKey
from governance_core.views import view_of

__all__ = ["ATTEMPTS_SHOWN", "SORTABLE", "STATUSES", "delivery_details"]

SORTABLE = ("id", "status", "next_attempt_at", "inserted_at")
STATUSES = DELIVERY_STATUSES
ATTEMPTS_SHOWN = 50
"""How many of a delivery's latest attempts its details show."""


def delivery_details(delivery: Delivery) -> dict[str, Any]:
    """The interface's Delivery."""
    return view_of(delivery)


def _load(ctx: Context, fields: Fields) -> Delivery:
    return from_record(Delivery, load_own(ctx, ctx.tables.deliveries, fields.raw("delivery_id")))


@operation("deliveries/list", write=False)
def list_deliveries(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List deliveries; filters ``destination_id``, ``event_id``, ``status``, ``event_type``."""
    filters = equality_filters(
        fields, ids=("destination_id", "event_id"),
        choices={"status": STATUSES, "event_type": EVENT_TYPES},
    )
    return list_response(
        ctx, fields, ctx.tables.deliveries, sortable=SORTABLE, filters=filters,
        summarize=lambda record: delivery_details(from_record(Delivery, record)),
    )


@operation("deliveries/show", write=False)
def show_delivery(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Get a delivery with its latest attempts (status code, latency, error, response start)."""
    delivery = _load(ctx, fields)
    fields.done()
    attempts = ctx.tables.delivery_attempts.query(
        [tenant(ctx), Filter("delivery_id", "eq", delivery.id)],
        sort=[SortKey("attempted_at", descending=True)], limit=ATTEMPTS_SHOWN,
    )
    shown = [view_of(from_record(DeliveryAttempt, record))
             for record in attempts]
    return details_envelope({**delivery_details(delivery), "attempts": shown})


@operation("deliveries/resend", write=True)
def resend_delivery(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Send a delivered or dead delivery again, now, with a fresh round of attempts.

    The message keeps its ``webhook-id`` and body, so a receiver that has it already can
    tell. A pending delivery is sent as scheduled: resending it is ``invalid_action``.
    """
    delivery = _load(ctx, fields)
    fields.done()
    if delivery.status == "pending":
        raise InvalidAction("the delivery is pending: it is sent as scheduled")
    delivery = attrs.evolve(
        delivery, status="pending", round_attempts=0, next_attempt_at=ctx.now,
        updated_at=ctx.now,
    )
    ctx.tables.deliveries.put(to_record(delivery))
    return details_envelope(delivery_details(delivery))
