"""Notifications: monitors, webhook destinations, the events of the outbox and their deliveries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from governance_core.models.description import described, enum, resource

__all__ = [
    "BODY_FORMATS",
    "DELIVERY_STATUSES",
    "DESTINATION_STATUSES",
    "Delivery",
    "DeliveryAttempt",
    "Destination",
    "MONITOR_COMPARISONS",
    "MONITOR_LEVELS",
    "MONITOR_METRICS",
    "MONITOR_STATUSES",
    "Monitor",
    "NotificationEvent",
]

DESTINATION_STATUSES = ("active", "disabled")
"""A destination receives messages while active."""

BODY_FORMATS = ("standard", "slack")
"""``standard``: the Standard Webhooks JSON payload; ``slack``: a Slack incoming-webhook body."""

DELIVERY_STATUSES = ("pending", "delivered", "dead")
"""A delivery waits, has arrived, or gave up (the dead letter)."""

MONITOR_METRICS = (
    "run_count", "failed_runs", "error_rate", "cost_usd", "tokens", "p95_duration_seconds",
    "critical_alerts", "high_risk_runs", "quality_score_average", "policy_denials",
)
"""What a monitor may measure over its window (see docs/notifications.md)."""

MONITOR_COMPARISONS = ("gt", "ge", "lt", "le")
"""How a monitor compares its value with its thresholds."""

MONITOR_STATUSES = ("active", "paused")
"""A monitor is evaluated while active."""

MONITOR_LEVELS = ("unknown", "ok", "warning", "critical")
"""A monitor's state; ``unknown`` before its first evaluation."""


@resource("destination")
@attrs.frozen
class Destination:
    """A webhook endpoint of an account, with the secrets its messages are signed with.

    ``secrets`` holds ``{"value", "expires_at"}`` entries, newest first: every entry not yet
    expired signs each message (the Standard Webhooks signature header carries several), so a
    rotated secret keeps working for its grace period.
    """

    id: str
    account_id: str
    name: str = attrs.field(metadata=described(column=True))
    url: str = attrs.field(metadata=described(column=True))
    status: str = attrs.field(metadata=described(notation=enum(*DESTINATION_STATUSES), column=True))
    body_format: str = attrs.field(metadata=described(notation=enum(*BODY_FORMATS)))
    inserted_at: datetime
    updated_at: datetime
    version: int = attrs.field(default=1, metadata=described(managed=True))
    event_types: list[str] = attrs.field(factory=list)
    secrets: list[dict[str, Any]] = attrs.field(factory=list, metadata=described(shown=False))
    description: str | None = None


@resource("notification_event")
@attrs.frozen
class NotificationEvent:
    """One event of the outbox: written in the transaction of what caused it.

    Its ``id`` is the ``webhook-id`` of every message that carries it, and ``body`` the exact
    JSON payload every generic delivery sends, so a receiver de-duplicates by id.
    """

    id: str
    account_id: str
    event_type: str = attrs.field(metadata=described(column=True))
    occurred_at: datetime = attrs.field(metadata=described(column=True))
    inserted_at: datetime
    data: dict[str, Any] = attrs.field(factory=dict)
    subject_id: str | None = attrs.field(default=None, metadata=described(column=True))


@resource("delivery", attempts="~list:obj")
@attrs.frozen
class Delivery:
    """One event on its way to one destination: pending, delivered or dead (the dead letter)."""

    id: str
    account_id: str
    destination_id: str = attrs.field(metadata=described(column=True))
    event_id: str = attrs.field(metadata=described(column=True))
    event_type: str = attrs.field(metadata=described(column=True))
    status: str = attrs.field(
        metadata=described(notation=enum(*DELIVERY_STATUSES), column=True, managed=True)
    )
    next_attempt_at: datetime = attrs.field(metadata=described(column=True, managed=True))
    inserted_at: datetime
    updated_at: datetime
    attempt_count: int = attrs.field(default=0, metadata=described(managed=True))
    round_attempts: int = attrs.field(default=0, metadata=described(managed=True))
    last_status_code: int | None = attrs.field(default=None, metadata=described(managed=True))
    last_error: str | None = attrs.field(default=None, metadata=described(managed=True))
    last_attempt_at: datetime | None = attrs.field(default=None, metadata=described(managed=True))
    delivered_at: datetime | None = attrs.field(default=None, metadata=described(managed=True))
    latency_ms: float | None = attrs.field(default=None, metadata=described(managed=True))


@resource("delivery_attempt")
@attrs.frozen
class DeliveryAttempt:
    """One HTTP attempt of a delivery, as the delivery log shows it."""

    id: str
    account_id: str
    delivery_id: str = attrs.field(metadata=described(column=True))
    destination_id: str = attrs.field(metadata=described(column=True))
    attempted_at: datetime = attrs.field(metadata=described(column=True))
    inserted_at: datetime
    succeeded: bool
    latency_ms: float
    status_code: int | None = None
    error: str | None = None
    response_prefix: str | None = None


@resource("monitor")
@attrs.frozen
class Monitor:
    """A metric over a time window, compared with a warning and a critical threshold.

    ``level`` is the monitor's state (``ok``, ``warning``, ``critical``; ``unknown`` before
    its first evaluation); ``alert_instance_id`` is the run its alert was raised on, if any.
    """

    id: str
    account_id: str
    name: str = attrs.field(metadata=described(column=True))
    metric: str = attrs.field(metadata=described(notation=enum(*MONITOR_METRICS), column=True))
    comparison: str = attrs.field(metadata=described(notation=enum(*MONITOR_COMPARISONS)))
    window_seconds: int
    status: str = attrs.field(metadata=described(notation=enum(*MONITOR_STATUSES), column=True))
    level: str = attrs.field(
        metadata=described(notation=enum(*MONITOR_LEVELS), column=True, managed=True)
    )
    inserted_at: datetime
    updated_at: datetime
    version: int = attrs.field(default=1, metadata=described(managed=True))
    agent_id: str | None = attrs.field(default=None, metadata=described(column=True))
    environment_id: str | None = attrs.field(default=None, metadata=described(column=True))
    warning: float | None = None
    critical: float | None = None
    hysteresis: float = 0.0
    evaluate_every_seconds: int = 60
    last_value: float | None = attrs.field(default=None, metadata=described(managed=True))
    last_evaluated_at: datetime | None = attrs.field(default=None, metadata=described(managed=True))
    next_evaluation_at: datetime | None = attrs.field(
        default=None, metadata=described(column=True, managed=True)
    )
    alert_instance_id: str | None = attrs.field(default=None, metadata=described(managed=True))
    description: str | None = None
