"""Webhook destinations: create, list, show, update, delete, rotate_secret, test.

A destination's secret is shown once, when it is created or rotated; a rotation keeps the
previous secret signing for a grace period (``grace_seconds``). The URL is checked when saved
(:func:`~governance_core.notifications.addresses.check_url`) and again on every send.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record, to_record
from governance_core.credentials import ShownOnce
from governance_core.envelopes import details_envelope
from governance_core.errors import InvalidAction
from governance_core.fields import Fields
from governance_core.models.notifications import DESTINATION_STATUSES, Destination
from governance_core.notifications import load_own
from governance_core.notifications.addresses import (
    UnsafeDestination,
    check_url,
    parse_networks,
)
from governance_core.notifications.outbox import BODY_FORMATS, EVENT_TYPES, emit
from governance_core.notifications.secrets import new_webhook_secret, rotated, sealed
from governance_core.operations.common import list_response
from governance_core.registry import operation
from governance_core.views import view_of

__all__ = ["DEFAULT_GRACE", "GRACE_MAX", "SORTABLE", "STATUSES", "destination_details"]

SORTABLE = ("id", "name", "status", "inserted_at")
STATUSES = DESTINATION_STATUSES
NAME_MAX = 200
GRACE_MAX = 7 * 24 * 3600
"""The longest a rotated secret keeps signing: a week."""
DEFAULT_GRACE = 24 * 3600
"""How long a rotated secret keeps signing unless told: a day."""


def destination_details(destination: Destination) -> dict[str, Any]:
    """The interface's Destination: every field but its secrets."""
    return view_of(destination)


def _url(ctx: Context, fields: Fields, *, required: bool) -> str | None:
    url = fields.str("url", required=required, nullable=False, max_length=2000)
    if url is None:
        return None
    try:
        check_url(url, parse_networks(ctx.config.webhook_allowed_networks))
    except UnsafeDestination as error:
        fields.errors.invalid("url", str(error))
        return None
    return url


def _event_types(fields: Fields) -> list[str] | None:
    """``event_types``: a list of known event types; empty means every type."""
    if not fields.has("event_types"):
        return None
    value = fields.raw("event_types")
    if value is None:
        return []
    if not isinstance(value, list):
        fields.errors.invalid("event_types", "event_types must be a list of event types")
        return None
    chosen: list[str] = []
    for index, item in enumerate(value):
        if item not in EVENT_TYPES:
            fields.errors.invalid(
                ("event_types", index), f"must be one of: {', '.join(EVENT_TYPES)}"
            )
        elif item not in chosen:
            chosen.append(item)
    return chosen


def _load(ctx: Context, fields: Fields) -> Destination:
    record = load_own(ctx, ctx.tables.destinations, fields.raw("destination_id"))
    return from_record(Destination, record)


@operation("destinations/create", write=True)
def create_destination(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create a webhook destination; its signing secret is answered this once."""
    name = fields.str("name", required=True, max_length=NAME_MAX)
    url = _url(ctx, fields, required=True)
    body_format = fields.str("body_format", choices=BODY_FORMATS, default="standard")
    event_types = _event_types(fields)
    description = fields.str("description", max_length=2000)
    fields.done()
    assert name is not None and url is not None and body_format is not None
    secret = new_webhook_secret()
    destination = Destination(
        id=ctx.new_id(), account_id=ctx.account_id, name=name, url=url, status="active",
        body_format=body_format, inserted_at=ctx.now, updated_at=ctx.now,
        event_types=event_types or [], secrets=[sealed(secret, ctx.config.cipher)],
        description=description,
    )
    ctx.tables.destinations.put(to_record(destination))
    return details_envelope(destination_details(destination), secret=ShownOnce(secret))


@operation("destinations/list", write=False)
def list_destinations(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List the account's webhook destinations."""
    return list_response(
        ctx, fields, ctx.tables.destinations, sortable=SORTABLE,
        summarize=lambda record: destination_details(from_record(Destination, record)),
    )


@operation("destinations/show", write=False)
def show_destination(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Get a webhook destination (never its secrets)."""
    destination = _load(ctx, fields)
    fields.done()
    return details_envelope(destination_details(destination))


@operation("destinations/update", write=True)
def update_destination(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Change a destination's name, URL, format, event types, description or status."""
    destination = _load(ctx, fields)
    changes: dict[str, Any] = {
        "name": fields.str("name", nullable=False, max_length=NAME_MAX),
        "url": _url(ctx, fields, required=False),
        "body_format": fields.str("body_format", nullable=False, choices=BODY_FORMATS),
        "status": fields.str("status", nullable=False, choices=STATUSES),
        "event_types": _event_types(fields),
    }
    if fields.has("description"):
        changes["description"] = fields.str("description", max_length=2000)
    fields.done()
    changes = {
        key: value for key, value in changes.items()
        if (value is not None or key == "description") and value != getattr(destination, key)
    }
    if changes:
        destination = attrs.evolve(
            destination, **changes, version=destination.version + 1, updated_at=ctx.now
        )
        ctx.tables.destinations.put(to_record(destination))
    return details_envelope(destination_details(destination))


@operation("destinations/delete", write=True)
def delete_destination(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Delete a destination; its pending deliveries become dead letters when next picked up."""
    destination = _load(ctx, fields)
    fields.done()
    ctx.tables.destinations.delete(destination.id)
    return details_envelope(destination_details(destination))


@operation("destinations/rotate_secret", write=True)
def rotate_secret(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Make a new signing secret (answered this once); the old ones sign on for the grace.

    ``grace_seconds`` (default a day, at most a week; 0 stops the old secrets at once):
    meanwhile every message carries a signature by each secret, so a receiver may switch to
    the new one at any time within it.
    """
    destination = _load(ctx, fields)
    grace = fields.int("grace_seconds", minimum=0, maximum=GRACE_MAX, default=DEFAULT_GRACE)
    fields.done()
    assert grace is not None
    secret = new_webhook_secret()
    destination = attrs.evolve(
        destination,
        secrets=rotated(
            destination.secrets, secret, ctx.config.cipher, ctx.now, timedelta(seconds=grace)
        ),
        version=destination.version + 1, updated_at=ctx.now,
    )
    ctx.tables.destinations.put(to_record(destination))
    return details_envelope(destination_details(destination), secret=ShownOnce(secret))


@operation("destinations/test", write=True)
def test_destination(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Queue a ``destination.test`` event for this destination only (whatever its types)."""
    destination = _load(ctx, fields)
    fields.done()
    if destination.status != "active":
        raise InvalidAction("the destination is disabled: activate it first")
    emit(
        ctx, ctx.account_id, "destination.test", {"destination_id": destination.id},
        subject_id=destination.id, destination_id=destination.id,
    )
    return details_envelope(destination_details(destination))
