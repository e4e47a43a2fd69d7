"""Agent instances (runs): register, start, finish, terminate, show, list.

Every status change goes through :func:`advance_instance`, which follows
:data:`governance_core.rules.states.INSTANCE` and moves the agent's ``instance_counts`` in the
same transaction. An ingestion (``agent_deployment``) token reaches only the instances of its
own agent in its own environment; any other is ``not_found``.
"""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.converter import from_record
from governance_core.envelopes import details_envelope
from governance_core.errors import NotFound
from governance_core.fields import Fields
from governance_core.models.agents import (
    Agent,
    AgentInstance,
    AgentSpan,
    empty_instance_counts,
    empty_span_counts,
)
from governance_core.operations.agent_activity import follow_run_activity
from governance_core.operations.common import (
    equality_filters,
    list_response,
    load_record,
    reach_filters,
    save,
    tenant,
)
from governance_core.operations.run_insights import run_insights
from governance_core.operations.run_risk import Rulesets
from governance_core.registry import ANY_SCOPE, Context, operation
from governance_core.rules.aggregates import apply_span
from governance_core.rules.states import (
    FINISH_STATUSES,
    INSTANCE,
    SPAN,
    advance,
    allowed,
    states,
)
from governance_core.storage.protocol import Filter, Record

__all__ = [
    "FINISH_STATUSES",
    "PURPOSES",
    "SORTABLE",
    "STATUSES",
    "advance_instance",
    "instance_details",
    "load_instance",
    "span_counts_output",
]

PURPOSES = ("live", "smoke_test", "eval")
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

    ``rulesets`` shares risk ruleset lookups across the rows of a list.
    """
    instance = from_record(AgentInstance, record)
    insights = run_insights(ctx, record, rulesets)
    return {
        "id": instance.id,
        "account_id": instance.account_id,
        "agent_id": instance.agent_id,
        "agent_version_id": instance.agent_version_id,
        "agent_deployment_id": instance.agent_deployment_id,
        "agent_schema_version_id": instance.agent_schema_version_id,
        "environment_id": instance.environment_id,
        "external_identifier": instance.external_identifier,
        "purpose": instance.purpose,
        "status": instance.status,
        "termination_reason": instance.termination_reason,
        "started_at": instance.started_at,
        "finished_at": instance.finished_at,
        "last_activity_span_at": instance.last_activity_span_at,
        "inserted_at": instance.inserted_at,
        "updated_at": instance.updated_at,
        "raised_alert_count": instance.raised_alert_count,
        "quality_payloads": instance.quality_payloads,
        "quality_summaries": insights["quality_summaries"],
        "span_counts": span_counts_output(instance.span_counts),
        "span_schema_counts": {"by_name": instance.span_schema_counts},
        "cost_breakdown": insights["cost_breakdown"],
        "risk_score": insights["risk_score"],
        "type": "agent_instance",
    }


def load_instance(ctx: Context, instance_id: object) -> Record:
    """Return the caller's stored instance.

    ``not_found`` when the id is malformed or missing, or names another account's instance,
    or (for an ingestion token) another agent's or environment's.
    """
    record = load_record(ctx, "agent_instance", instance_id)
    principal = ctx.principal
    assert principal is not None
    if principal.is_ingestion and (
        record["agent_id"] != principal.agent_id
        or record["environment_id"] != principal.environment_id
    ):
        raise NotFound("agent_instance not found")
    return record


def advance_instance(ctx: Context, record: Record, trigger: str, **changes: Any) -> Record:
    """Fire ``trigger`` on a stored instance and return the stored result.

    ``invalid_action`` when the INSTANCE table has no such transition. The instance is stored
    with ``changes`` (model-typed values), and the agent's ``instance_counts`` move from the
    old status to the new one.
    """
    instance = from_record(AgentInstance, record)
    status = advance(INSTANCE, instance.status, trigger, what="agent instance")
    stored = save(
        ctx, "agent_instance",
        attrs.evolve(instance, status=status, updated_at=ctx.now, **changes),
    )
    if status != instance.status:
        _move_instance_count(ctx, instance.agent_id, instance.status, status)
    return stored


def _move_instance_count(ctx: Context, agent_id: str, old: str, new: str) -> None:
    record = ctx.store.get("agents", agent_id)
    assert record is not None, "an instance's agent is never deleted"
    agent = from_record(Agent, record)
    counts = {**empty_instance_counts(), **agent.instance_counts}
    counts[old] -= 1
    counts[new] += 1
    save(ctx, "agent", attrs.evolve(agent, instance_counts=counts))


def _cancel_active_spans(ctx: Context, record: Record) -> Record:
    """Cancel the run's active spans (SPAN ``terminate``), moving the run's span aggregates."""
    spans = ctx.store.query(
        "agent_spans",
        [
            tenant(ctx),
            Filter("agent_instance_id", "eq", record["id"]),
            Filter("status", "eq", "active"),
        ],
    )
    if not spans:
        return record
    for before in spans:
        span = from_record(AgentSpan, before)
        status = advance(SPAN, span.status, "terminate", what="agent span")
        after = save(
            ctx, "agent_span",
            attrs.evolve(span, status=status, finished_at=ctx.now, updated_at=ctx.now),
        )
        record = apply_span(record, before, after)
    ctx.store.put("agent_instances", record)
    follow_run_activity(ctx, record["agent_id"], record.get("last_activity_span_at"))
    return record


@operation("agent_instances/start", write=True, scopes=ANY_SCOPE)
def start_instance(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Start a pending run; any other run answers as it is (clients send start late)."""
    record = load_instance(ctx, fields.raw("agent_instance_id"))
    at = fields.timestamp("timestamp")
    fields.done()
    if allowed(INSTANCE, record["status"], "start"):
        record = advance_instance(ctx, record, "start", started_at=at or ctx.now)
    return details_envelope(instance_details(ctx, record))


@operation("agent_instances/finish", write=True, scopes=ANY_SCOPE)
def finish_instance(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Finish a pending or active run as complete (default), failed or cancelled."""
    record = load_instance(ctx, fields.raw("agent_instance_id"))
    status = fields.str("status", choices=FINISH_STATUSES) or "complete"
    at = fields.timestamp("timestamp")
    fields.done()
    record = advance_instance(ctx, record, status, finished_at=at or ctx.now)
    return details_envelope(instance_details(ctx, record))


@operation("agent_instances/terminate", write=True)
def terminate_instance(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Terminate a pending or active run with a ``reason``; its active spans are cancelled."""
    record = load_instance(ctx, fields.raw("agent_instance_id"))
    reason = fields.str("reason", required=True, max_length=REASON_MAX)
    fields.done()
    record = advance_instance(
        ctx, record, "terminate", termination_reason=reason, finished_at=ctx.now
    )
    record = _cancel_active_spans(ctx, record)
    return details_envelope(instance_details(ctx, record))


@operation("agent_instances/show", write=False, scopes=ANY_SCOPE)
def show_instance(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch an agent instance."""
    record = load_instance(ctx, fields.raw("agent_instance_id"))
    return details_envelope(instance_details(ctx, record))


@operation("agent_instances/list", write=False, scopes=ANY_SCOPE)
def list_instances(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List agent instances.

    Filters ``agent_id``, ``environment_id``, ``agent_deployment_id``, ``status``,
    ``purpose``, ``external_identifier``. An ingestion token sees its own agent and
    environment only.
    """
    filters = equality_filters(
        fields,
        ids=("agent_id", "environment_id", "agent_deployment_id"),
        choices={"status": STATUSES, "purpose": PURPOSES},
    ) + reach_filters(ctx)
    external_identifier = fields.str("external_identifier", max_length=REASON_MAX)
    if external_identifier:
        filters.append(Filter("external_identifier", "eq", external_identifier))
    rulesets = Rulesets(ctx)
    return list_response(
        ctx, fields, "agent_instances", sortable=SORTABLE, filters=filters,
        summarize=lambda record: instance_details(ctx, record, rulesets),
    )
