"""Agents and their runs: versions, schema versions, deployments, instances, spans, alerts.

Aggregates a read needs (``instance_counts``, ``span_counts``, ``span_schema_counts``,
``token_groups``, ``raised_alert_count``, ``last_activity_span_at``) live on the records and
are updated on write, in the same transaction as the change that moves them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from governance_core.models.description import described, enum, resource
from governance_core.rules.states import ALERT, INSTANCE, SPAN, states

__all__ = [
    "AGENT_STATUSES",
    "ALERT_SEVERITIES",
    "Agent",
    "AgentDeployment",
    "AgentInstance",
    "AgentSchemaVersion",
    "AgentSpan",
    "AgentVersion",
    "Alert",
    "RUN_PURPOSES",
    "SPAN_PURPOSES",
    "SPAN_STATUSES",
    "empty_instance_counts",
    "empty_span_counts",
]

AGENT_STATUSES = ("pending", "active", "dormant", "retired")
"""Every status an agent shows, in lifecycle order (``dormant`` is derived on read)."""

RUN_PURPOSES = ("live", "smoke_test", "eval")
"""What a run is for."""

SPAN_STATUSES = states(SPAN)
"""Every status a span is stored with."""

SPAN_PURPOSES = ("activity", "quality", "alert")
"""A span of the agent's activity, or a system span of a quality result or an alert."""

ALERT_SEVERITIES = ("critical", "error", "warning", "info")
"""An alert's severities, gravest first."""


def empty_instance_counts() -> dict[str, int]:
    """Instance counts of an agent with no runs (``finished`` is derived on read)."""
    return dict.fromkeys(
        ("pending", "active", "complete", "failed", "cancelled", "terminated", "total"), 0
    )


def empty_span_counts() -> dict[str, int]:
    """Span counts of a run with no activity spans (``finished``/``pending`` derived on read)."""
    return dict.fromkeys(("active", "complete", "failed", "cancelled", "total"), 0)


@resource("agent", available_actions="obj", risk_rollup="~obj")
@attrs.frozen
class Agent:
    """An agent. Stored status is pending, active or retired; dormant is computed on read.

    ``last_instance_at`` is when its latest instance was registered: with
    ``last_activity_span_at`` it tells how long the agent has been quiet.
    """

    id: str
    account_id: str
    name: str = attrs.field(metadata=described(column=True))
    status: str = attrs.field(
        metadata=described(notation=enum(*AGENT_STATUSES), column=True, managed=True)
    )
    inserted_at: datetime
    updated_at: datetime
    description: str | None = None
    external_identifier: str | None = attrs.field(default=None, metadata=described(column=True))
    owner_person_id: str | None = attrs.field(default=None, metadata=described(column=True))
    risk_profile_id: str | None = attrs.field(default=None, metadata=described(column=True))
    team_id: str | None = attrs.field(default=None, metadata=described(column=True))
    last_activity_span_at: datetime | None = attrs.field(
        default=None, metadata=described(column=True, managed=True)
    )
    last_instance_at: datetime | None = attrs.field(default=None, metadata=described(shown=False))
    instance_counts: dict[str, int] = attrs.field(
        factory=empty_instance_counts, metadata=described(managed=True)
    )


@resource("agent_version", current_agent_deployment_refs="ids")
@attrs.frozen
class AgentVersion:
    """A version of an agent, found by (agent, external_identifier)."""

    id: str
    account_id: str
    agent_id: str = attrs.field(metadata=described(column=True))
    agent_schema_version_id: str = attrs.field(metadata=described(column=True))
    external_identifier: str = attrs.field(metadata=described(column=True))
    inserted_at: datetime
    updated_at: datetime
    name: str | None = None
    description: str | None = None
    runtime_environment: dict[str, Any] | None = None


@resource("agent_schema_version", current_version="~bool", current_agent_deployment_refs="~ids")
@attrs.frozen
class AgentSchemaVersion:
    """The span type, alert and quality schemas of an agent, found by content.

    ``environment_id`` is the environment of the registration that first declared them.
    """

    id: str
    account_id: str
    agent_id: str = attrs.field(metadata=described(column=True))
    external_identifier: str = attrs.field(metadata=described(column=True))
    content_hash: str = attrs.field(metadata=described(column=True, shown=False))
    inserted_at: datetime
    updated_at: datetime
    # Absent from the full form (the playground's), which names no environment.
    environment_id: str | None = attrs.field(default=None, metadata=described(notation="~id?"))
    span_type_schemas: dict[str, Any] = attrs.field(
        factory=dict, metadata=described(notation="map:obj")
    )
    alert_schemas: dict[str, Any] = attrs.field(
        factory=dict, metadata=described(notation="map:obj")
    )
    quality_schemas: dict[str, Any] = attrs.field(
        factory=dict, metadata=described(notation="map:obj")
    )


@resource("agent_deployment")
@attrs.frozen
class AgentDeployment:
    """An agent bound to an environment, naming its current version."""

    id: str
    account_id: str
    agent_id: str = attrs.field(metadata=described(column=True))
    environment_id: str = attrs.field(metadata=described(column=True))
    inserted_at: datetime
    updated_at: datetime
    current_version_id: str | None = attrs.field(default=None, metadata=described(column=True))


@resource("agent_instance", quality_summaries="map:str", cost_breakdown="obj?", risk_score="obj?")
@attrs.frozen
class AgentInstance:
    """One run of an agent."""

    id: str
    account_id: str
    agent_id: str = attrs.field(metadata=described(column=True))
    agent_version_id: str = attrs.field(metadata=described(column=True))
    agent_deployment_id: str = attrs.field(metadata=described(column=True))
    environment_id: str = attrs.field(metadata=described(column=True))
    agent_schema_version_id: str
    purpose: str = attrs.field(metadata=described(notation=enum(*RUN_PURPOSES), column=True))
    status: str = attrs.field(
        metadata=described(notation=enum(*states(INSTANCE)), column=True, managed=True)
    )
    inserted_at: datetime
    updated_at: datetime
    external_identifier: str | None = attrs.field(default=None, metadata=described(column=True))
    termination_reason: str | None = None
    started_at: datetime | None = attrs.field(default=None, metadata=described(column=True))
    finished_at: datetime | None = attrs.field(default=None, metadata=described(column=True))
    last_activity_span_at: datetime | None = attrs.field(
        default=None, metadata=described(column=True, managed=True)
    )
    quality_payloads: dict[str, Any] = attrs.field(
        factory=dict, metadata=described(notation="map:obj")
    )
    span_counts: dict[str, int] = attrs.field(
        factory=empty_span_counts, metadata=described(managed=True)
    )
    span_schema_counts: dict[str, int] = attrs.field(factory=dict, metadata=described(managed=True))
    token_groups: list[dict[str, Any]] = attrs.field(factory=list, metadata=described(shown=False))
    raised_alert_count: int = attrs.field(default=0, metadata=described(managed=True))
    risk_critical_raised: bool = attrs.field(default=False, metadata=described(shown=False))
    # Rollups for figures over many runs (governance_core.domain.insights), not in views.
    risk_level: str | None = attrs.field(default=None, metadata=described(column=True, shown=False))
    total_cost: float | None = attrs.field(
        default=None, metadata=described(column=True, shown=False)
    )
    started_day: str | None = attrs.field(
        default=None, metadata=described(column=True, shown=False)
    )
    duration_ms: int | None = attrs.field(
        default=None, metadata=described(column=True, shown=False)
    )
    duration_bucket: int | None = attrs.field(
        default=None, metadata=described(column=True, shown=False)
    )
    span_total: int = attrs.field(default=0, metadata=described(column=True, shown=False))
    # The span count's bucket (span_count_bucket in governance_core.domain.runs): the runs
    # list's sort by span count reads it from an index that moves a few dozen times in a
    # run's life, where the count itself moves on every span.
    span_bucket: int = attrs.field(default=100, metadata=described(column=True, shown=False))
    quality_score: float | None = attrs.field(
        default=None, metadata=described(column=True, shown=False)
    )
    # The conversation and the end user the run belongs to (the console's sessions and
    # users), not in views: set once, by the first span that names them.
    session_id: str | None = attrs.field(
        default=None, metadata=described(notation="str?", column=True, shown=False)
    )
    user_id: str | None = attrs.field(
        default=None, metadata=described(notation="str?", column=True, shown=False)
    )


@resource("agent_span", data_risk="obj?", risk_score="~num?", risk_level="~str?")
@attrs.frozen
class AgentSpan:
    """One step of a run."""

    id: str
    account_id: str
    agent_id: str = attrs.field(metadata=described(column=True))
    agent_instance_id: str = attrs.field(metadata=described(column=True))
    schema_name: str = attrs.field(metadata=described(column=True))
    schema_title: str = attrs.field(metadata=described(managed=True))
    status: str = attrs.field(metadata=described(notation=enum(*SPAN_STATUSES), column=True))
    purpose: str = attrs.field(metadata=described(notation=enum(*SPAN_PURPOSES), column=True))
    started_at: datetime = attrs.field(metadata=described(column=True))
    inserted_at: datetime
    updated_at: datetime
    payload: dict[str, Any] = attrs.field(factory=dict, metadata=described(sensitive=True))
    result_payload: dict[str, Any] | None = attrs.field(
        default=None, metadata=described(sensitive=True)
    )
    parent_span_id: str | None = attrs.field(default=None, metadata=described(column=True))
    finished_at: datetime | None = attrs.field(default=None, metadata=described(column=True))
    sensitive_encoding: bool = False
    summary: str | None = attrs.field(default=None, metadata=described(managed=True))
    size_bytes: int = attrs.field(default=0, metadata=described(managed=True))
    schema_known: bool = attrs.field(default=True, metadata=described(managed=True))
    payload_validation: dict[str, Any] | None = attrs.field(
        default=None, metadata=described(managed=True)
    )
    result_payload_validation: dict[str, Any] | None = attrs.field(
        default=None, metadata=described(managed=True)
    )
    # The digest of the create that stored it, where the OTLP ingest stored it: an export
    # sent again is compared with what it sent (governance_core.otel.ingest).
    create_digest: str | None = attrs.field(
        default=None, metadata=described(managed=True, shown=False)
    )


@resource("alert")
@attrs.frozen
class Alert:
    """An alert on a run: one per (instance, name), raised and cleared."""

    id: str
    account_id: str
    agent_id: str = attrs.field(metadata=described(column=True))
    agent_instance_id: str = attrs.field(metadata=described(column=True))
    environment_id: str = attrs.field(metadata=described(column=True))
    name: str = attrs.field(metadata=described(column=True))
    title: str
    severity: str = attrs.field(metadata=described(notation=enum(*ALERT_SEVERITIES), column=True))
    status: str = attrs.field(
        metadata=described(notation=enum(*states(ALERT)), column=True, managed=True)
    )
    raised_at: datetime = attrs.field(metadata=described(column=True))
    inserted_at: datetime
    updated_at: datetime
    version: int = attrs.field(default=1, metadata=described(managed=True))
    payload: dict[str, Any] = attrs.field(factory=dict, metadata=described(sensitive=True))
    payload_sensitive_encoding: bool = False
    summary: str | None = None
    cleared_at: datetime | None = attrs.field(default=None, metadata=described(column=True))
