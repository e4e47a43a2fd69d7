"""Agent spans: create, finish, show, list.

Spans are never refused for arriving late or out of order (decisions 7): a span may come
before its run's start (it starts a pending run), after its run's finish, or after its run's
termination (then the response carries ``control``), and before its parent (OpenTelemetry
exports a child when it ends, before its parent has ended). Payloads are checked against the span
type's schemas and the result is recorded on the span, never refused (decisions 13): a
create's checks (and its summary) are made before its transaction (:func:`prepare_create`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record, json_ready
from governance_core.domain import spans
from governance_core.domain.risk import Rulesets, span_risk_fields
from governance_core.domain.runs import (
    NAME_MAX,
    SPAN_TYPES,
    PreparedChecks,
    control,
    in_reach,
    prepare_checks,
    prepared_span_type,
    span_checks,
)
from governance_core.domain.sensitive_values import (
    SplitValues,
    may_reveal,
    reveal,
    split_member,
)
from governance_core.domain.supplied_ids import read_supplied_id
from governance_core.envelopes import details_envelope, ready_envelope
from governance_core.errors import NotFound
from governance_core.fields import Fields
from governance_core.models.agents import SPAN_PURPOSES, SPAN_STATUSES, AgentSpan
from governance_core.models.description import sensitive_fields
from governance_core.operations.common import (
    equality_filters,
    list_response,
    load_record,
    started_between,
)
from governance_core.registry import ANY_SCOPE, operation
from governance_core.repository import Filter, Record
from governance_core.rules.aggregates import ACTIVITY
from governance_core.rules.states import (
    FINISH_STATUSES,
    SPAN_CREATE_STATES,
)
from governance_core.views import model_view

__all__ = [
    "FINISH_STATUSES",
    "PURPOSES",
    "SORTABLE",
    "STATUSES",
    "SpanTypes",
    "SpanView",
    "load_span",
    "prepare_create",
    "prepare_create_for",
    "span_details",
]

STATUSES = SPAN_STATUSES
PURPOSES = SPAN_PURPOSES
SORTABLE = ("id", "started_at", "finished_at", "status")


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
            instance = self._ctx.tables.agent_instances.get(instance_id)
            version = instance and self._ctx.caches.schema_version(
                self._ctx.tables.agent_schema_versions, instance["agent_schema_version_id"]
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
    details = model_view(
        AgentSpan, record,
        data_risk=None if span_type is None else span_type.get("data_risk"),
        summary=record.get("summary") if view.include_summary else None,
    )
    if details["sensitive_encoding"] and not view.redacted:
        details.update(reveal(
            ctx, details["id"], {name: details[name] for name in sensitive_fields(AgentSpan)}
        ))
    if view.include_risk:
        ruleset = (rulesets or Rulesets(ctx)).for_agent(details["agent_id"])
        details.update(json_ready(span_risk_fields(span_type, ruleset)))
    return details


def load_span(ctx: Context, span_id: object) -> Record:
    """Return the caller's span.

    ``not_found`` when malformed, missing, another account's, or of a run outside an ingestion
    token's reach.
    """
    record = load_record(ctx, ctx.tables.agent_spans, span_id)
    instance = ctx.tables.agent_instances.get(record["agent_instance_id"])
    if instance is None or not in_reach(ctx, instance):
        raise NotFound("agent_span not found")
    return record


@attrs.frozen
class _Payloads:
    """A create's payload and result as stored, ``sensitive_encoding``, the values split out."""

    payload: dict[str, Any]
    result_payload: dict[str, Any] | None
    sensitive: bool
    kept: dict[str, SplitValues]


def _payloads(fields: Fields) -> _Payloads:
    """The create's payloads read from ``fields`` (problems go to ``fields.errors``)."""
    payload = fields.object("payload") or {}
    result_payload = fields.object("result_payload")
    sensitive = fields.bool("sensitive_encoding")
    kept: dict[str, SplitValues] = {}
    if sensitive:
        payload, kept["payload"] = split_member(fields, "payload", payload)
        result_payload, kept["result_payload"] = split_member(
            fields, "result_payload", result_payload
        )
    return _Payloads(payload, result_payload, sensitive, kept)


def _create_checks(
    ctx: Context, fields: Fields
) -> tuple[Callable[[Record], dict[tuple[str, str], dict[str, Any]]], _Payloads] | None:
    """What a create's checks are, given its run's schema version, and its payloads as read.

    None if a member is bad.
    """
    schema_name = fields.str("schema_name", required=True, max_length=NAME_MAX)
    payloads = _payloads(fields)
    if fields.errors or schema_name is None:
        return None
    return lambda schema_version: {
        (SPAN_TYPES, schema_name): span_checks(
            prepared_span_type(ctx, schema_version, schema_name), payloads.payload,
            payloads.result_payload,
        ),
    }, payloads


def prepare_create(ctx: Context, fields: Fields) -> PreparedChecks | None:
    """Check a create's payloads and render its summary, before its transaction opens.

    Reads what :func:`create_span` reads them with (the run's schema version, hinted or read
    without a transaction); None when a member does not parse (the create reports it) or
    the run is not the caller's.
    """
    instance_id = fields.id("agent_instance_id", required=True)
    made = _create_checks(ctx, fields)
    if instance_id is None or made is None:
        return None
    checks, payloads = made
    prepared = prepare_checks(ctx, instance_id, checks)
    return None if prepared is None else attrs.evolve(prepared, parsed=payloads)


def prepare_create_for(
    ctx: Context, fields: Fields, schema_version: Record
) -> PreparedChecks | None:
    """:func:`prepare_create` for a run expected to have ``schema_version``.

    For a caller that knows the schema version of a run it has not registered yet (it will
    be, in the create's transaction): the create uses the checks only if the run has it.
    """
    made = _create_checks(ctx, fields)
    if made is None:
        return None
    checks, payloads = made
    return PreparedChecks(schema_version["id"], checks(schema_version), payloads)


@operation(
    "agent_spans/create", write=True, scopes=ANY_SCOPE, prepare=prepare_create,
    defers_rollups=True,
)
def create_span(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create an agent span (bare or ``details``-wrapped; ``id`` optional)."""
    requested = read_supplied_id(ctx, fields)
    instance_id = fields.id("agent_instance_id", required=True)
    parent_id = fields.id("parent_span_id")
    schema_name = fields.str("schema_name", required=True, max_length=NAME_MAX)
    asked = fields.str("status", required=True, choices=SPAN_CREATE_STATES)
    # Quality and alert spans are written by the system only.
    fields.str("purpose", choices=(ACTIVITY,))
    prepared = ctx.prepared if isinstance(ctx.prepared, PreparedChecks) else None
    # Prepared from these very parameters, which then held no bad member: read once.
    payloads = (
        prepared.parsed if prepared is not None and isinstance(prepared.parsed, _Payloads)
        else _payloads(fields)
    )
    started_at = fields.timestamp("started_at") or ctx.now
    finished_at = fields.timestamp("finished_at")
    status = SPAN_CREATE_STATES[asked] if asked is not None else "active"
    if status == "active":
        # An active span has not finished: a finish time sent with it is not kept.
        finished_at = None
    elif finished_at is None:
        finished_at = max(started_at, ctx.now)
    if finished_at is not None and finished_at < started_at:
        fields.errors.invalid("finished_at", "finished_at may not be before started_at")
    written = spans.create_span(ctx, spans.NewSpan(
        instance_id=instance_id, id=requested, schema_name=schema_name, status=status,
        started_at=started_at, finished_at=finished_at, payload=payloads.payload,
        result_payload=payloads.result_payload, parent_span_id=parent_id,
        sensitive_encoding=payloads.sensitive, kept=payloads.kept, prepared=prepared,
    ), fields.errors)
    details = span_details(ctx, written.span, SpanView(), written.span_type)
    return ready_envelope(details, **control(written.instance))


@operation("agent_spans/finish", write=True, scopes=ANY_SCOPE, defers_rollups=True)
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
    written = spans.finish_span(ctx, record, spans.SpanFinish(
        status=asked, finished_at=finished_at, result_payload=result_payload,
        sent_result=sent_result, sensitive_encoding=sensitive, result_values=result_values,
    ))
    details = span_details(ctx, written.span, SpanView(), written.span_type)
    return ready_envelope(details, **control(written.instance))


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

    Filters ``agent_instance_id``, ``agent_id``, ``parent_span_id`` (or ``top_level=true``:
    spans without a parent), ``start_time`` and ``end_time`` (on ``started_at``, both
    inclusive), ``status``, ``schema_name``, ``purpose``. An ingestion
    token lists the spans of one of its own runs (``agent_instance_id``).
    """
    principal = ctx.principal
    assert principal is not None
    filters: list[Filter] = []
    instance_id = fields.id("agent_instance_id", required=principal.is_ingestion)
    if instance_id is not None:
        instance = ctx.tables.agent_instances.get(instance_id)
        if principal.is_ingestion and (
            instance is None or instance.get("account_id") != ctx.account_id
            or not in_reach(ctx, instance)
        ):
            raise NotFound("agent_instance not found")
        filters.append(Filter("agent_instance_id", "eq", instance_id))
    agent_id = fields.id("agent_id")
    if agent_id is not None:
        filters.append(Filter("agent_id", "eq", agent_id))
    parent_span_id = fields.id("parent_span_id")
    if parent_span_id is not None:
        filters.append(Filter("parent_span_id", "eq", parent_span_id))
    elif fields.bool("top_level"):
        filters.append(Filter("parent_span_id", "eq", None))
    filters += started_between(fields)
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
        ctx, fields, ctx.tables.agent_spans, sortable=SORTABLE, filters=filters,
        summarize=lambda record: span_details(
            ctx, record, view, span_types.entry(record), rulesets
        ),
    )
