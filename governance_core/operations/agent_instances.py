"""Agent instances (runs): register, start, finish, terminate, show, list.

Every status change goes through :func:`governance_core.domain.runs.advance_instance`, which
follows :data:`governance_core.rules.states.INSTANCE` and moves the agent's
``instance_counts`` in the same transaction. An ingestion (``agent_deployment``) token
reaches only the instances of its own agent in its own environment; any other is
``not_found``.
"""

from __future__ import annotations

from typing import Any

from governance_core.context import Context
from governance_core.converter import json_ready
from governance_core.domain.insights import run_insights
from governance_core.domain.risk import Rulesets
from governance_core.domain.runs import advance_instance, cancel_active_spans
from governance_core.domain.sensitive_values import may_reveal, reveal_quality
from governance_core.envelopes import ready_envelope
from governance_core.errors import NotFound
from governance_core.fields import Fields
from governance_core.models.agents import (
    RUN_PURPOSES,
    AgentInstance,
    empty_span_counts,
)
from governance_core.operations.common import (
    equality_filters,
    list_response,
    load_record,
    reach_filters,
    started_between,
)
from governance_core.registry import ANY_SCOPE, operation
from governance_core.repository import Filter, Record
from governance_core.rules.risk import RISK_LEVELS
from governance_core.rules.states import (
    FINISH_STATUSES,
    INSTANCE,
    allowed,
    states,
)
from governance_core.views import model_view

__all__ = [
    "FINISH_STATUSES",
    "PURPOSES",
    "SORTABLE",
    "STATUSES",
    "instance_details",
    "load_instance",
    "span_counts_output",
]

PURPOSES = RUN_PURPOSES
STATUSES = states(INSTANCE)
SORTABLE = ("id", "status", "started_at", "finished_at", "inserted_at")
REASON_MAX = 2000


def span_counts_output(counts: dict[str, int]) -> dict[str, int]:
    """Return stored span counts with every key: ``finished`` derived, ``pending`` 0."""
    full = {**empty_span_counts(), **counts}
    full["finished"] = full["complete"] + full["failed"] + full["cancelled"]
    full["pending"] = 0
    return full


def instance_details(
    ctx: Context, record: Record, rulesets: Rulesets | None = None
) -> dict[str, Any]:
    """Return the interface's AgentInstance_Details of a stored instance.

    The run's rollups and its session and user are the store's, for the console: not shown.
    ``rulesets`` shares risk ruleset lookups across the rows of a list.
    """
    insights = json_ready(run_insights(ctx, record, rulesets))
    return model_view(
        AgentInstance, record,
        span_counts=span_counts_output(record.get("span_counts") or {}),
        span_schema_counts={"by_name": record.get("span_schema_counts") or {}},
        **insights,
    )


def load_instance(ctx: Context, instance_id: object) -> Record:
    """Return the caller's stored instance.

    ``not_found`` when the id is malformed or missing, or names another account's instance,
    or (for an ingestion token) another agent's or environment's.
    """
    record = load_record(ctx, ctx.tables.agent_instances, instance_id)
    principal = ctx.principal
    assert principal is not None
    if principal.is_ingestion and (
        record["agent_id"] != principal.agent_id
        or record["environment_id"] != principal.environment_id
    ):
        raise NotFound("agent_instance not found")
    return record


@operation("agent_instances/start", write=True, scopes=ANY_SCOPE)
def start_instance(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Start a pending run; any other run answers as it is (clients send start late)."""
    record = load_instance(ctx, fields.raw("agent_instance_id"))
    at = fields.timestamp("timestamp")
    fields.done()
    if allowed(INSTANCE, record["status"], "start"):
        record = advance_instance(ctx, record, "start", started_at=at or ctx.now)
    return ready_envelope(instance_details(ctx, record))


@operation("agent_instances/finish", write=True, scopes=ANY_SCOPE)
def finish_instance(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Finish a pending or active run as complete (default), failed or cancelled."""
    record = load_instance(ctx, fields.raw("agent_instance_id"))
    status = fields.str("status", choices=FINISH_STATUSES) or "complete"
    at = fields.timestamp("timestamp")
    fields.done()
    record = advance_instance(ctx, record, status, finished_at=at or ctx.now)
    return ready_envelope(instance_details(ctx, record))


@operation("agent_instances/terminate", write=True)
def terminate_instance(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Terminate a pending or active run with a ``reason``; its active spans are cancelled."""
    record = load_instance(ctx, fields.raw("agent_instance_id"))
    reason = fields.str("reason", required=True, max_length=REASON_MAX)
    fields.done()
    record = advance_instance(
        ctx, record, "terminate", termination_reason=reason, finished_at=ctx.now
    )
    record = cancel_active_spans(ctx, record)
    return ready_envelope(instance_details(ctx, record))


@operation("agent_instances/show", write=False, scopes=ANY_SCOPE)
def show_instance(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch an agent instance (``redacted`` withholds sensitive quality values)."""
    record = load_instance(ctx, fields.raw("agent_instance_id"))
    details = instance_details(ctx, record)
    if may_reveal(ctx, fields.bool("redacted")):
        details["quality_payloads"] = reveal_quality(ctx, record["id"], details["quality_payloads"])
    return ready_envelope(details)


@operation("agent_instances/list", write=False, scopes=ANY_SCOPE)
def list_instances(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List agent instances.

    Filters ``agent_id``, ``environment_id``, ``agent_deployment_id``, ``status``,
    ``purpose``, ``risk_level`` (of ``risk_score``; a run without one never matches),
    ``external_identifier``, ``start_time`` and ``end_time`` (on ``started_at``, both
    inclusive). An ingestion token sees its own agent and environment only.
    """
    filters = equality_filters(
        fields,
        ids=("agent_id", "environment_id", "agent_deployment_id"),
        choices={"status": STATUSES, "purpose": PURPOSES, "risk_level": RISK_LEVELS},
    ) + reach_filters(ctx)
    external_identifier = fields.str("external_identifier", max_length=REASON_MAX)
    if external_identifier:
        filters.append(Filter("external_identifier", "eq", external_identifier))
    filters += started_between(fields)
    rulesets = Rulesets(ctx)
    return list_response(
        ctx, fields, ctx.tables.agent_instances, sortable=SORTABLE, filters=filters,
        summarize=lambda record: instance_details(ctx, record, rulesets),
    )
