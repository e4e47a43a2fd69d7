"""Retention of the outbox: old events, their deliveries and attempts are purged in batches.

An event is looked at once it is older than the retention window (counted from when it
occurred). A delivery of it that was delivered is then purged with its attempts; a dead one
(a dead letter) is kept longer, until the event is older than the dead-letter window, so
that it can still be looked at and sent again; the event goes with its last delivery. An
event with a pending delivery (waiting for an attempt, being attempted, or sent again) is
left whole, however old.

:func:`purge_batch` purges at most ``batch`` events in one transaction; the sender runs one
batch a pass while there is more to purge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta

import attrs

from governance_core.clock import format_timestamp
from governance_core.ids import encode_pfid
from governance_core.repository import Filter, SortKey, Tables
from governance_core.storage.protocol import Store

__all__ = [
    "DEAD_RETENTION_VARIABLE",
    "DEFAULT_DAYS",
    "DEFAULT_DEAD_DAYS",
    "MAX_DAYS",
    "RETENTION_VARIABLE",
    "Purged",
    "Retention",
    "environment_number",
    "purge_batch",
]

RETENTION_VARIABLE = "GOVERNANCE_NOTIFICATION_RETENTION_DAYS"
DEAD_RETENTION_VARIABLE = "GOVERNANCE_NOTIFICATION_DEAD_RETENTION_DAYS"
DEFAULT_DAYS = 30.0
DEFAULT_DEAD_DAYS = 90.0
MAX_DAYS = 36500.0
"""A hundred years: the longest window (keeping things for good, in practice)."""


def _days_in_range(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0 < value <= MAX_DAYS:
        raise ValueError(
            f"{attribute.name} must be more than 0 days and at most {MAX_DAYS:g}, not {value!r}"
        )


@attrs.frozen
class Retention:
    """How long delivered events and deliveries (``days``) and dead letters are kept.

    ``dead_days`` may not be shorter than ``days``: a dead letter is kept at least as long
    as what was delivered, by default three times as long.
    """

    days: float = attrs.field(default=DEFAULT_DAYS, validator=_days_in_range)
    dead_days: float = attrs.field(default=DEFAULT_DEAD_DAYS, validator=_days_in_range)

    def __attrs_post_init__(self) -> None:
        if self.dead_days < self.days:
            raise ValueError(
                f"dead letters are kept at least as long as delivered events: dead_days "
                f"({self.dead_days:g}) is less than days ({self.days:g})"
            )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Retention:
        """The windows the environment sets, each a number of days.

        ``$GOVERNANCE_NOTIFICATION_RETENTION_DAYS`` (default 30) and
        ``$GOVERNANCE_NOTIFICATION_DEAD_RETENTION_DAYS`` (default 90, or the first if longer).
        A value that is not a number of days above 0 is a ``ValueError`` naming its variable.
        """
        days = _days(environ, RETENTION_VARIABLE)
        dead_days = _days(environ, DEAD_RETENTION_VARIABLE)
        chosen = DEFAULT_DAYS if days is None else days
        try:
            return cls(chosen, max(chosen, DEFAULT_DEAD_DAYS) if dead_days is None else dead_days)
        except ValueError as error:
            raise ValueError(f"{DEAD_RETENTION_VARIABLE}: {error}") from None


def environment_number(
    environ: Mapping[str, str], name: str, unit: str, *, above_zero: bool, maximum: float
) -> float | None:
    """The number ``environ[name]`` holds (None when unset), within its bounds.

    From 0 (above it with ``above_zero``) to ``maximum``; else a ``ValueError`` naming the
    variable and its ``unit``.
    """
    text = environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan  # refused below, with the variable's name
    if not (value > 0 if above_zero else value >= 0) or not value <= maximum:
        lowest = "above 0" if above_zero else "0 or more"
        raise ValueError(
            f"{name} must be a number of {unit} {lowest} and at most {maximum:g}, not {text!r}"
        )
    return value


def _days(environ: Mapping[str, str], name: str) -> float | None:
    return environment_number(environ, name, "days", above_zero=True, maximum=MAX_DAYS)


@attrs.frozen
class Purged:
    """What one batch purged, and where the next batch starts (after ``last_id``)."""

    events: int = 0
    deliveries: int = 0
    attempts: int = 0
    looked_at: int = 0
    last_id: str | None = None


def purge_batch(
    store: Store,
    now: datetime,
    retention: Retention,
    *,
    after: str | None = None,
    batch: int = 100,
) -> Purged:
    """Purge what is past retention among the next ``batch`` old events, in one transaction.

    Events are taken in id order (ids are time-ordered) after ``after``; ``looked_at`` less
    than ``batch`` means no older event follows.
    """
    cutoff = now - timedelta(days=retention.days)
    dead_cutoff = format_timestamp(now - timedelta(days=retention.dead_days))
    # Every id made before the cutoff's millisecond sorts below this one.
    bound = encode_pfid(max(0, int(cutoff.timestamp() * 1000)), 0, 0)
    filters = [Filter("id", "lt", bound)]
    if after is not None:
        filters.append(Filter("id", "gt", after))
    tables = Tables(store)
    events = deliveries = attempts = 0
    with store.transaction():
        old = tables.notification_events.query(filters, sort=[SortKey("id")], limit=batch)
        for event in old:
            if event["occurred_at"] >= format_timestamp(cutoff):
                continue
            its = tables.deliveries.query([Filter("event_id", "eq", event["id"])])
            if any(delivery["status"] == "pending" for delivery in its):
                continue
            dead_expired = event["occurred_at"] < dead_cutoff
            kept = 0
            for delivery in its:
                if delivery["status"] == "dead" and not dead_expired:
                    kept += 1
                    continue
                for attempt in tables.delivery_attempts.query(
                    [Filter("delivery_id", "eq", delivery["id"])]
                ):
                    attempts += tables.delivery_attempts.delete(attempt["id"])
                deliveries += tables.deliveries.delete(delivery["id"])
            if not kept:
                events += tables.notification_events.delete(event["id"])
    return Purged(events, deliveries, attempts, len(old), old[-1]["id"] if old else None)
