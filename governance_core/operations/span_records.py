"""Writing spans and everything a span write moves, shared by spans, alerts and quality.

A span write stores the span, moves its instance's aggregates through
:func:`governance_core.rules.aggregates.apply_span` (a pending instance is started by its
first activity span), and moves the agent's ``last_activity_span_at``, all in the operation's
one transaction, so no read ever scans spans.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from governance_core.clock import format_timestamp
from governance_core.converter import to_record
from governance_core.errors import NotFound
from governance_core.fields import Fields
from governance_core.models.agents import AgentSpan
from governance_core.operations.agent_activity import follow_run_activity
from governance_core.operations.agent_instances import advance_instance
from governance_core.operations.common import resolve_ref
from governance_core.registry import Context
from governance_core.rules.aggregates import ACTIVITY, apply_span
from governance_core.rules.payload_validation import validate_payload
from governance_core.rules.templates import render_template
from governance_core.storage.protocol import Record

__all__ = [
    "control",
    "entry_in",
    "in_reach",
    "payload_size",
    "read_instance_ref",
    "record_span",
    "record_span_and_agent",
    "run_schema_version",
    "schema_entry",
    "system_span",
]

NAME_MAX = 200


def in_reach(ctx: Context, instance: Record) -> bool:
    """Tell whether the caller may touch ``instance``.

    An ingestion token reaches only the runs of its own agent in its own environment.
    """
    principal = ctx.principal
    assert principal is not None
    return not principal.is_ingestion or (
        instance["agent_id"] == principal.agent_id
        and instance["environment_id"] == principal.environment_id
    )


def read_instance_ref(
    ctx: Context, fields: Fields, name: str = "agent_instance_id"
) -> Record | None:
    """Read the instance a body member names (required).

    A malformed or unknown id is a field error on ``name`` (``invalid_value``; another kind
    of resource: ``unexpected_ref_type``); an instance outside an ingestion token's reach is
    ``not_found``, as if it did not exist.
    """
    instance_id = fields.id(name, required=True)
    instance = resolve_ref(ctx, fields, name, "agent_instance", instance_id)
    if instance is not None and not in_reach(ctx, instance):
        raise NotFound("agent_instance not found")
    return instance


def schema_entry(ctx: Context, instance: Record, group: str, name: str) -> dict[str, Any] | None:
    """Return the entry ``name`` of a map of the run's schema version, or None.

    ``group`` is ``span_type_schemas``, ``alert_schemas`` or ``quality_schemas``.
    """
    return entry_in(run_schema_version(ctx, instance), group, name)


def run_schema_version(ctx: Context, instance: Record) -> Record | None:
    """Return the schema version the run ``instance`` was registered with."""
    return ctx.caches.schema_version(ctx.store, instance["agent_schema_version_id"])


def entry_in(schema_version: Record | None, group: str, name: str) -> dict[str, Any] | None:
    """Return the entry ``name`` of the map ``group`` of ``schema_version``, or None."""
    if schema_version is None:
        return None
    entry = (schema_version.get(group) or {}).get(name)
    return entry if isinstance(entry, dict) else None


def payload_size(*payloads: object) -> int:
    """Estimate the stored size of payloads: their compact JSON text in UTF-8 bytes."""
    return sum(
        len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
        for payload in payloads
        if payload is not None
    )


def control(instance: Record) -> dict[str, Any]:
    """Return the ``control`` member of a span write's response (only once terminated)."""
    if instance["status"] != "terminated":
        return {}
    return {"control": {"terminate": True, "reason": instance.get("termination_reason")}}


def record_span(
    ctx: Context,
    instance: Record,
    span: AgentSpan,
    before: AgentSpan | None = None,
    *,
    record: Record | None = None,
) -> Record:
    """Store ``span`` (new when ``before`` is None) and what it moves; the instance as stored.

    The instance's aggregates follow the span; a pending run is started by an activity span
    (its ``started_at`` is that span's); the agent's ``last_activity_span_at`` follows the
    instance's. ``record`` is the span's stored form when the caller has made it already.
    """
    return record_span_and_agent(ctx, instance, span, before, record=record)[0]


def record_span_and_agent(
    ctx: Context,
    instance: Record,
    span: AgentSpan,
    before: AgentSpan | None = None,
    *,
    record: Record | None = None,
) -> tuple[Record, Record | None]:
    """:func:`record_span`, also answering the agent when the write read it (else None)."""
    after_record = to_record(span) if record is None else record
    ctx.store.put("agent_spans", after_record)
    updated = apply_span(instance, None if before is None else to_record(before), after_record)
    if span.purpose == ACTIVITY and updated["status"] == "pending":
        updated = advance_instance(ctx, updated, "span", started_at=span.started_at)
    else:
        updated = {**updated, "updated_at": format_timestamp(ctx.now)}
        ctx.store.put("agent_instances", updated)
    moved = updated.get("last_activity_span_at")
    agent = None
    if moved != instance.get("last_activity_span_at"):
        agent = follow_run_activity(ctx, instance["agent_id"], moved)
    return updated, agent


def system_span(
    ctx: Context,
    instance: Record,
    *,
    purpose: str,
    group: str,
    name: str,
    payload: dict[str, Any],
    result_payload: dict[str, Any],
    at: datetime,
) -> Record:
    """Record a quality or alert lifecycle event as a finished span of that ``purpose``.

    The span is named after the quality or alert schema entry ``name`` of ``group``;
    ``payload`` is checked against that entry's schema and flagged, never refused, and
    summarised by its template. Returns the instance as stored (system spans leave its
    aggregates alone).
    """
    entry = schema_entry(ctx, instance, group, name) or {}
    known = bool(entry)
    span = AgentSpan(
        id=ctx.new_id(), account_id=instance["account_id"], agent_id=instance["agent_id"],
        agent_instance_id=instance["id"], schema_name=name,
        schema_title=entry.get("title") or name, status="complete", purpose=purpose,
        started_at=at, finished_at=at, inserted_at=ctx.now, updated_at=ctx.now,
        payload=payload, result_payload=result_payload,
        size_bytes=payload_size(payload, result_payload), schema_known=known,
        payload_validation=validate_payload(entry.get("schema"), payload) if known else None,
        summary=render_template(entry.get("template"), payload) if known else None,
    )
    return record_span(ctx, instance, span)
