"""Notifications: monitors, webhook destinations, the events of the outbox and their deliveries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

__all__ = ["Delivery", "DeliveryAttempt", "Destination", "Monitor", "NotificationEvent"]


@attrs.frozen
class Destination:
    """A webhook endpoint of an account, with the secrets its messages are signed with.

    ``secrets`` holds ``{"value", "expires_at"}`` entries, newest first: every entry not yet
    expired signs each message (the Standard Webhooks signature header carries several), so a
    rotated secret keeps working for its grace period.
    """

    id: str
    account_id: str
    name: str
    url: str
    status: str
    body_format: str
    inserted_at: datetime
    updated_at: datetime
    version: int = 1
    event_types: list[str] = attrs.field(factory=list)
    secrets: list[dict[str, Any]] = attrs.field(factory=list)
    description: str | None = None


@attrs.frozen
class NotificationEvent:
    """One event of the outbox: written in the transaction of what caused it.

    Its ``id`` is the ``webhook-id`` of every message that carries it, and ``body`` the exact
    JSON payload every generic delivery sends, so a receiver de-duplicates by id.
    """

    id: str
    account_id: str
    event_type: str
    occurred_at: datetime
    inserted_at: datetime
    data: dict[str, Any] = attrs.field(factory=dict)
    subject_id: str | None = None


@attrs.frozen
class Delivery:
    """One event on its way to one destination: pending, delivered or dead (the dead letter)."""

    id: str
    account_id: str
    destination_id: str
    event_id: str
    event_type: str
    status: str
    next_attempt_at: datetime
    inserted_at: datetime
    updated_at: datetime
    attempt_count: int = 0
    round_attempts: int = 0
    last_status_code: int | None = None
    last_error: str | None = None
    last_attempt_at: datetime | None = None
    delivered_at: datetime | None = None
    latency_ms: float | None = None


@attrs.frozen
class DeliveryAttempt:
    """One HTTP attempt of a delivery, as the delivery log shows it."""

    id: str
    account_id: str
    delivery_id: str
    destination_id: str
    attempted_at: datetime
    inserted_at: datetime
    succeeded: bool
    latency_ms: float
    status_code: int | None = None
    error: str | None = None
    response_prefix: str | None = None


@attrs.frozen
class Monitor:
    """A metric over a time window, compared with a warning and a critical threshold.

    ``level`` is the monitor's state (``ok``, ``warning``, ``critical``; ``unknown`` before
    its first evaluation); ``alert_instance_id`` is the run its alert was raised on, if any.
    """

    id: str
    account_id: str
    name: str
    metric: str
    comparison: str
    window_seconds: int
    status: str
    level: str
    inserted_at: datetime
    updated_at: datetime
    version: int = 1
    agent_id: str | None = None
    environment_id: str | None = None
    warning: float | None = None
    critical: float | None = None
    hysteresis: float = 0.0
    evaluate_every_seconds: int = 60
    last_value: float | None = None
    last_evaluated_at: datetime | None = None
    next_evaluation_at: datetime | None = None
    alert_instance_id: str | None = None
    description: str | None = None
