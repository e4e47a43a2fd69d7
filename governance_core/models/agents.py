"""Agents and their runs: versions, schema versions, deployments, instances, spans, alerts.

Aggregates a read needs (``instance_counts``, ``span_counts``, ``span_schema_counts``,
``token_groups``, ``raised_alert_count``, ``last_activity_span_at``) live on the records and
are updated on write, in the same transaction as the change that moves them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

__all__ = [
    "Agent",
    "AgentDeployment",
    "AgentInstance",
    "AgentSchemaVersion",
    "AgentSpan",
    "AgentVersion",
    "Alert",
    "empty_instance_counts",
    "empty_span_counts",
]


def empty_instance_counts() -> dict[str, int]:
    """Instance counts of an agent with no runs (``finished`` is derived on read)."""
    return dict.fromkeys(
        ("pending", "active", "complete", "failed", "cancelled", "terminated", "total"), 0
    )


def empty_span_counts() -> dict[str, int]:
    """Span counts of a run with no activity spans (``finished``/``pending`` derived on read)."""
    return dict.fromkeys(("active", "complete", "failed", "cancelled", "total"), 0)


@attrs.frozen
class Agent:
    """An agent. Stored status is pending, active or retired; dormant is computed on read.

    ``last_instance_at`` is when its latest instance was registered: with
    ``last_activity_span_at`` it tells how long the agent has been quiet.
    """

    id: str
    account_id: str
    name: str
    status: str
    inserted_at: datetime
    updated_at: datetime
    description: str | None = None
    external_identifier: str | None = None
    owner_person_id: str | None = None
    risk_profile_id: str | None = None
    team_id: str | None = None
    last_activity_span_at: datetime | None = None
    last_instance_at: datetime | None = None
    instance_counts: dict[str, int] = attrs.field(factory=empty_instance_counts)


@attrs.frozen
class AgentVersion:
    """A version of an agent, found by (agent, external_identifier)."""

    id: str
    account_id: str
    agent_id: str
    agent_schema_version_id: str
    external_identifier: str
    inserted_at: datetime
    updated_at: datetime
    name: str | None = None
    description: str | None = None
    runtime_environment: dict[str, Any] | None = None


@attrs.frozen
class AgentSchemaVersion:
    """The span type, alert and quality schemas of an agent, found by content.

    ``environment_id`` is the environment of the registration that first declared them.
    """

    id: str
    account_id: str
    agent_id: str
    external_identifier: str
    content_hash: str
    inserted_at: datetime
    updated_at: datetime
    environment_id: str | None = None
    span_type_schemas: dict[str, Any] = attrs.field(factory=dict)
    alert_schemas: dict[str, Any] = attrs.field(factory=dict)
    quality_schemas: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class AgentDeployment:
    """An agent bound to an environment, naming its current version."""

    id: str
    account_id: str
    agent_id: str
    environment_id: str
    inserted_at: datetime
    updated_at: datetime
    current_version_id: str | None = None


@attrs.frozen
class AgentInstance:
    """One run of an agent."""

    id: str
    account_id: str
    agent_id: str
    agent_version_id: str
    agent_deployment_id: str
    environment_id: str
    agent_schema_version_id: str
    purpose: str
    status: str
    inserted_at: datetime
    updated_at: datetime
    external_identifier: str | None = None
    termination_reason: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    last_activity_span_at: datetime | None = None
    quality_payloads: dict[str, Any] = attrs.field(factory=dict)
    span_counts: dict[str, int] = attrs.field(factory=empty_span_counts)
    span_schema_counts: dict[str, int] = attrs.field(factory=dict)
    token_groups: list[dict[str, Any]] = attrs.field(factory=list)
    raised_alert_count: int = 0
    risk_critical_raised: bool = False
    # Rollups for figures over many runs (governance_core.domain.insights), not in views.
    risk_level: str | None = None
    total_cost: float | None = None
    started_day: str | None = None
    duration_ms: int | None = None
    duration_bucket: int | None = None
    span_total: int = 0
    # The span count's bucket (span_count_bucket in governance_core.domain.runs): the runs
    # list's sort by span count reads it from an index that moves a few dozen times in a
    # run's life, where the count itself moves on every span.
    span_bucket: int = 100
    quality_score: float | None = None
    # The conversation and the end user the run belongs to (the console's sessions and
    # users), not in views: set once, by the first span that names them.
    session_id: str | None = None
    user_id: str | None = None


@attrs.frozen
class AgentSpan:
    """One step of a run."""

    id: str
    account_id: str
    agent_id: str
    agent_instance_id: str
    schema_name: str
    schema_title: str
    status: str
    purpose: str
    started_at: datetime
    inserted_at: datetime
    updated_at: datetime
    payload: dict[str, Any] = attrs.field(factory=dict)
    result_payload: dict[str, Any] | None = None
    parent_span_id: str | None = None
    finished_at: datetime | None = None
    sensitive_encoding: bool = False
    summary: str | None = None
    size_bytes: int = 0
    schema_known: bool = True
    payload_validation: dict[str, Any] | None = None
    result_payload_validation: dict[str, Any] | None = None


@attrs.frozen
class Alert:
    """An alert on a run: one per (instance, name), raised and cleared."""

    id: str
    account_id: str
    agent_id: str
    agent_instance_id: str
    environment_id: str
    name: str
    title: str
    severity: str
    status: str
    raised_at: datetime
    inserted_at: datetime
    updated_at: datetime
    version: int = 1
    payload: dict[str, Any] = attrs.field(factory=dict)
    payload_sensitive_encoding: bool = False
    summary: str | None = None
    cleared_at: datetime | None = None
