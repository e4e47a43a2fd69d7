"""Agent spans: create, finish, show, list.

Spans are never refused for arriving late or out of order (decisions 7): a span may come
before its run's start (it starts a pending run), after its run's finish, or after its run's
termination (then the response carries ``control``), and before its parent (OpenTelemetry
exports a child when it ends, before its parent has ended). Payloads are checked against the span
type's schemas and the result is recorded on the span, never refused (decisions 13).
"""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.clock import format_timestamp
from governance_core.converter import from_record, to_record
from governance_core.envelopes import details_envelope
from governance_core.errors import NotFound
from governance_core.fields import Fields
from governance_core.ids import extract_partition
from governance_core.models.agents import AgentSpan
from governance_core.operations.common import (
    KIND_TABLES,
    equality_filters,
    list_response,
    load_record,
    resolve_ref,
)
from governance_core.operations.risk_alerts import raise_if_critical
from governance_core.operations.run_risk import Rulesets, span_risk_fields
from governance_core.operations.sensitive_values import (
    SplitValues,
    keep_values,
    may_reveal,
    reveal,
    split_member,
)
from governance_core.operations.span_records import (
    NAME_MAX,
    control,
    entry_in,
    in_reach,
    payload_size,
    read_instance_ref,
    record_span,
    run_schema_version,
    schema_entry,
)
from governance_core.operations.supplied_ids import claim_id, read_supplied_id
from governance_core.registry import ANY_SCOPE, Context, operation
from governance_core.rules.aggregates import ACTIVITY
from governance_core.rules.payload_validation import validate_payload
from governance_core.rules.states import (
    FINISH_STATUSES,
    SPAN,
    SPAN_CREATE_STATES,
    advance,
    states,
)
from governance_core.rules.templates import render_template
from governance_core.storage.protocol import Filter, Record

__all__ = [
    "FINISH_STATUSES",
    "PURPOSES",
    "SORTABLE",
    "STATUSES",
    "SpanTypes",
    "SpanView",
    "load_span",
    "span_details",
]

STATUSES = states(SPAN)
PURPOSES = ("activity", "quality", "alert")
SORTABLE = ("id", "started_at", "finished_at", "status")
SPAN_TYPES = "span_type_schemas"


@attrs.frozen
class SpanView:
    """How a read shows spans.

    ``redacted`` withholds sensitive values; ``include_summary`` shows ``summary`` (lists show
    it only when ``include_summaries`` is asked for); ``include_risk`` asks for each span's
    risk fields (``include_risk_level``).
    """

    redacted: bool = True
    include_summary: bool = True
    include_risk: bool = False


class SpanTypes:
    """The span type entries of the runs one read shows; each schema version is read once."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._by_instance: dict[str, dict[str, Any]] = {}

    def entry(self, record: Record) -> dict[str, Any] | None:
        """Return the span type entry of an activity span.

        None for a type the run's schema version does not declare, and for system spans.
        """
        if record.get("purpose") != ACTIVITY:
            return None
        instance_id = record["agent_instance_id"]
        if instance_id not in self._by_instance:
            instance = self._ctx.store.get("agent_instances", instance_id)
            version = instance and self._ctx.store.get(
                "agent_schema_versions", instance["agent_schema_version_id"]
            )
            self._by_instance[instance_id] = (version or {}).get(SPAN_TYPES) or {}
        entry = self._by_instance[instance_id].get(record["schema_name"])
        return entry if isinstance(entry, dict) else None


def span_details(
    ctx: Context,
    record: Record,
    view: SpanView,
    span_type: dict[str, Any] | None,
    rulesets: Rulesets | None = None,
) -> dict[str, Any]:
    """Return the interface's Agent span details of a stored span, with its check results.

    ``span_type`` is the span's entry in its run's ``span_type_schemas`` (None when
    undeclared, and for quality and alert spans): it carries the ``data_risk`` shown.
    Sensitive values are put back unless the view is redacted; ``risk_score`` and
    ``risk_level`` are added when the view asks (``rulesets`` shares their lookups in a list).
    """
    span = from_record(AgentSpan, record)
    details = {
        "id": span.id,
        "account_id": span.account_id,
        "agent_id": span.agent_id,
        "agent_instance_id": span.agent_instance_id,
        "parent_span_id": span.parent_span_id,
        "schema_name": span.schema_name,
        "schema_title": span.schema_title,
        "status": span.status,
        "purpose": span.purpose,
        "started_at": span.started_at,
        "finished_at": span.finished_at,
        "payload": span.payload,
        "result_payload": span.result_payload,
        "sensitive_encoding": span.sensitive_encoding,
        "data_risk": None if span_type is None else span_type.get("data_risk"),
        "summary": span.summary if view.include_summary else None,
        "size_bytes": span.size_bytes,
        "schema_known": span.schema_known,
        "payload_validation": span.payload_validation,
        "result_payload_validation": span.result_payload_validation,
        "inserted_at": span.inserted_at,
        "updated_at": span.updated_at,
        "type": "agent_span",
    }
    if span.sensitive_encoding and not view.redacted:
        details.update(reveal(ctx, span.id, {
            "payload": span.payload, "result_payload": span.result_payload,
        }))
    if view.include_risk:
        ruleset = (rulesets or Rulesets(ctx)).for_agent(span.agent_id)
        details.update(span_risk_fields(span_type, ruleset))
    return details


def load_span(ctx: Context, span_id: object) -> Record:
    """Return the caller's span.

    ``not_found`` when malformed, missing, another account's, or of a run outside an ingestion
    token's reach.
    """
    record = load_record(ctx, "agent_span", span_id)
    instance = ctx.store.get("agent_instances", record["agent_instance_id"])
    if instance is None or not in_reach(ctx, instance):
        raise NotFound("agent_span not found")
    return record


def _parent_to_come(ctx: Context, parent_id: str | None) -> bool:
    """Whether ``parent_id`` names a parent that has not arrived yet.

    That is a well-formed id of the caller's partition that no record holds: the child keeps
    it, and is linked when a span with that id is created.
    """
    assert ctx.principal is not None
    return (
        parent_id is not None
        and ctx.store.get("agent_spans", parent_id) is None
        and extract_partition(parent_id) == ctx.principal.partition
        and all(ctx.store.get(table, parent_id) is None for table in KIND_TABLES.values())
    )


def _named_by_another_run(ctx: Context, span_id: str, instance_id: str) -> bool:
    """Whether spans of another run already name ``span_id`` as their parent to come."""
    return bool(ctx.store.query("agent_spans", [
        Filter("parent_span_id", "eq", span_id), Filter("agent_instance_id", "ne", instance_id),
    ], limit=1))


def _derived(
    entry: dict[str, Any] | None, payload: dict[str, Any], result: dict[str, Any] | None
) -> dict[str, Any]:
    """Return what a span's payloads and type give it.

    Whether the type is declared, each payload's check result, the summary rendered from
    the type's template (the payload merged with the result, the result winning) and the
    size estimate.
    """
    size = payload_size(payload, result)
    if entry is None:
        return {"schema_known": False, "payload_validation": None,
                "result_payload_validation": None, "summary": None, "size_bytes": size}
    return {
        "schema_known": True,
        "payload_validation": validate_payload(entry.get("params_schema"), payload),
        "result_payload_validation": (
            None if result is None else validate_payload(entry.get("result_schema"), result)
        ),
        "summary": render_template(entry.get("template"), {**payload, **(result or {})}),
        "size_bytes": size,
    }


@operation("agent_spans/create", write=True, scopes=ANY_SCOPE)
def create_span(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create an agent span (bare or ``details``-wrapped; ``id`` optional)."""
    requested = read_supplied_id(ctx, fields)
    instance = read_instance_ref(ctx, fields)
    parent_id = fields.id("parent_span_id")
    schema_name = fields.str("schema_name", required=True, max_length=NAME_MAX)
    asked = fields.str("status", required=True, choices=SPAN_CREATE_STATES)
    # Quality and alert spans are written by the system only.
    fields.str("purpose", choices=(ACTIVITY,))
    payload = fields.object("payload") or {}
    result_payload = fields.object("result_payload")
    sensitive = fields.bool("sensitive_encoding")
    kept: dict[str, SplitValues] = {}
    if sensitive:
        payload, kept["payload"] = split_member(fields, "payload", payload)
        result_payload, kept["result_payload"] = split_member(
            fields, "result_payload", result_payload
        )
    started_at = fields.timestamp("started_at") or ctx.now
    finished_at = fields.timestamp("finished_at")
    parent = (
        None if _parent_to_come(ctx, parent_id)
        else resolve_ref(ctx, fields, "parent_span_id", "agent_span", parent_id)
    )
    same_run = parent is None or instance is None or parent["agent_instance_id"] == instance["id"]
    if not same_run:
        fields.errors.invalid("parent_span_id", "parent_span_id must name a span of the same run")
    status = SPAN_CREATE_STATES[asked] if asked is not None else "active"
    if status == "active":
        # An active span has not finished: a finish time sent with it is not kept.
        finished_at = None
    elif finished_at is None:
        finished_at = max(started_at, ctx.now)
    if finished_at is not None and finished_at < started_at:
        fields.errors.invalid("finished_at", "finished_at may not be before started_at")
    if requested is not None and instance is not None and _named_by_another_run(
        ctx, requested, instance["id"]
    ):
        fields.errors.invalid("id", "spans of another run already name this id as their parent")
    fields.done()
    assert instance is not None and schema_name is not None
    span_id = claim_id(ctx, requested)
    schema_version = run_schema_version(ctx, instance)
    entry = entry_in(schema_version, SPAN_TYPES, schema_name)
    span = AgentSpan(
        id=span_id, account_id=ctx.account_id, agent_id=instance["agent_id"],
        agent_instance_id=instance["id"], parent_span_id=parent_id, schema_name=schema_name,
        schema_title=(entry or {}).get("title") or schema_name, status=status,
        purpose=ACTIVITY, started_at=started_at, finished_at=finished_at, inserted_at=ctx.now,
        updated_at=ctx.now, payload=payload, result_payload=result_payload,
        sensitive_encoding=sensitive, **_derived(entry, payload, result_payload),
    )
    instance = record_span(ctx, instance, span)
    if sensitive:
        keep_values(ctx, span_id, kept)
    span_record = to_record(span)
    instance = raise_if_critical(ctx, instance, span_record, schema_version, entry)
    details = span_details(ctx, span_record, SpanView(), entry)
    return details_envelope(details, **control(instance))


def _cancelled_by_termination(instance: Record, span: AgentSpan) -> bool:
    """Whether the run's termination cancelled ``span`` (then a finish is answered as is)."""
    terminated_at = instance.get("finished_at")
    return (
        instance["status"] == "terminated"
        and span.status == "cancelled"
        and span.finished_at is not None
        and terminated_at is not None
        and format_timestamp(span.finished_at) >= terminated_at
    )


@operation("agent_spans/finish", write=True, scopes=ANY_SCOPE)
def finish_span(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Finish an active span as complete (default), failed or cancelled."""
    record = load_span(ctx, fields.raw("agent_span_id"))
    span = from_record(AgentSpan, record)
    asked = fields.str("status", choices=FINISH_STATUSES) or "complete"
    sent_result = fields.has("result_payload")
    result_payload = fields.object("result_payload") if sent_result else span.result_payload
    sensitive = fields.bool("sensitive_encoding", default=span.sensitive_encoding)
    result_values: SplitValues = {}
    if sent_result and sensitive:
        result_payload, result_values = split_member(fields, "result_payload", result_payload)
    finished_at = fields.timestamp("timestamp") or max(span.started_at, ctx.now)
    if finished_at < span.started_at:
        fields.errors.invalid("timestamp", "timestamp may not be before the span's started_at")
    fields.done()
    instance = ctx.store.get("agent_instances", span.agent_instance_id)
    assert instance is not None, "a span's run is never deleted before its spans"
    activity = span.purpose == ACTIVITY
    entry = schema_entry(ctx, instance, SPAN_TYPES, span.schema_name) if activity else None
    if _cancelled_by_termination(instance, span):
        return details_envelope(span_details(ctx, record, SpanView(), entry), **control(instance))
    status = advance(SPAN, span.status, asked, what="agent span")
    derived = _derived(entry, span.payload, result_payload)
    # The payload's check stands as made at creation; the schema version never changes.
    derived.pop("payload_validation")
    finished = attrs.evolve(
        span, status=status, finished_at=finished_at, result_payload=result_payload,
        sensitive_encoding=span.sensitive_encoding or sensitive, updated_at=ctx.now, **derived,
    )
    instance = record_span(ctx, instance, finished, before=span)
    if sent_result and finished.sensitive_encoding:
        # A new result replaces the values kept for the old one (none when sent in clear).
        keep_values(ctx, span.id, {"result_payload": result_values})
    details = span_details(ctx, to_record(finished), SpanView(), entry)
    return details_envelope(details, **control(instance))


@operation("agent_spans/show", write=False, scopes=ANY_SCOPE)
def show_span(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch an agent span (``redacted`` withholds sensitive values)."""
    record = load_span(ctx, fields.raw("agent_span_id"))
    redacted = fields.bool("redacted")
    include_risk = fields.bool("include_risk_level")
    fields.done()
    view = SpanView(redacted=not may_reveal(ctx, redacted), include_risk=include_risk)
    return details_envelope(span_details(ctx, record, view, SpanTypes(ctx).entry(record)))


@operation("agent_spans/list", write=False, scopes=ANY_SCOPE)
def list_spans(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List agent spans.

    Filters ``agent_instance_id``, ``agent_id``, ``start_time`` and ``end_time`` (on
    ``started_at``, both inclusive), ``status``, ``schema_name``, ``purpose``. An ingestion
    token lists the spans of one of its own runs (``agent_instance_id``).
    """
    principal = ctx.principal
    assert principal is not None
    filters: list[Filter] = []
    instance_id = fields.id("agent_instance_id", required=principal.is_ingestion)
    if instance_id is not None:
        instance = ctx.store.get("agent_instances", instance_id)
        if principal.is_ingestion and (
            instance is None or instance.get("account_id") != ctx.account_id
            or not in_reach(ctx, instance)
        ):
            raise NotFound("agent_instance not found")
        filters.append(Filter("agent_instance_id", "eq", instance_id))
    agent_id = fields.id("agent_id")
    if agent_id is not None:
        filters.append(Filter("agent_id", "eq", agent_id))
    start_time = fields.timestamp("start_time")
    if start_time is not None:
        filters.append(Filter("started_at", "ge", format_timestamp(start_time)))
    end_time = fields.timestamp("end_time")
    if end_time is not None:
        filters.append(Filter("started_at", "le", format_timestamp(end_time)))
    filters += equality_filters(fields, choices={"status": STATUSES, "purpose": PURPOSES})
    schema_name = fields.str("schema_name", max_length=NAME_MAX)
    if schema_name:
        filters.append(Filter("schema_name", "eq", schema_name))
    view = SpanView(
        include_summary=fields.bool("include_summaries"),
        include_risk=fields.bool("include_risk_level"),
    )
    span_types = SpanTypes(ctx)
    rulesets = Rulesets(ctx)
    return list_response(
        ctx, fields, "agent_spans", sortable=SORTABLE, filters=filters,
        summarize=lambda record: span_details(
            ctx, record, view, span_types.entry(record), rulesets
        ),
    )
