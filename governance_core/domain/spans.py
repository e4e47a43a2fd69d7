"""Span writes: a span create or finish, each one domain call in the operation's transaction.

A create stores the activity span, moves its run through
:func:`governance_core.domain.runs.record_span_and_agent` and raises the run's
``risk_critical`` alert when the span takes it to critical
(:func:`governance_core.domain.risk.raise_if_critical`). A finish moves the span through
:data:`governance_core.rules.states.SPAN` and the run's aggregates with it. The handlers in
:mod:`governance_core.operations.agent_spans` parse requests into :class:`NewSpan` and
:class:`SpanFinish` and make one call here: a create's checks against the store (its run, its
parent, its own id) are made by :func:`create_span`, before it writes.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record, to_record
from governance_core.domain.batch import batch_of, span_rollups, write_rulesets
from governance_core.domain.insights import keep_risk_level
from governance_core.domain.risk import raise_if_critical
from governance_core.domain.runs import (
    SPAN_TYPES,
    PreparedChecks,
    cancelled_by_termination,
    in_reach,
    prepared_span_type,
    record_span_and_agent,
    remember_schema_version,
    run_schema_version,
    span_checks,
)
from governance_core.domain.sensitive_values import keep_values
from governance_core.domain.supplied_ids import claim_id, id_holder, resolve_reference
from governance_core.errors import FieldErrors, NotFound
from governance_core.ids import extract_partition
from governance_core.models.agents import AgentSpan
from governance_core.repository import Filter, Record
from governance_core.rules.aggregates import ACTIVITY
from governance_core.rules.risk import is_assessable
from governance_core.rules.states import SPAN, advance

__all__ = [
    "NewSpan",
    "SpanFinish",
    "SpanWrite",
    "create_span",
    "finish_span",
    "named_by_another_run",
    "parent_to_come",
    "read_unnamed",
    "stored_parent",
]


@attrs.frozen
class NewSpan:
    """A span create as its operation parsed it, not yet checked against the store.

    ``instance_id``, ``schema_name``: None when the request's member was missing or bad (its
    error is already in the request's errors). ``id``: the id asked for (None: one is made);
    ``status`` and ``finished_at`` as they will be stored. ``payload`` and ``result_payload``
    are the stored forms (sensitive values split out into ``kept``, by member name);
    ``prepared`` holds their checks when they were made before the transaction
    (:func:`governance_core.domain.runs.prepare_checks`).
    """

    instance_id: str | None
    id: str | None
    schema_name: str | None
    status: str
    started_at: datetime
    finished_at: datetime | None
    payload: dict[str, Any]
    result_payload: dict[str, Any] | None
    parent_span_id: str | None = None
    sensitive_encoding: bool = False
    kept: dict[str, Any] = attrs.field(factory=dict)
    prepared: PreparedChecks | None = None


@attrs.frozen
class SpanWrite:
    """What a span write stored: the span and its run as stored, and what it read on the way.

    ``agent`` is the run's agent when the write read it (else None); ``span_type`` the
    span's entry in its run's schema version (None when undeclared).
    """

    span: Record
    instance: Record
    agent: Record | None
    schema_version: Record | None
    span_type: dict[str, Any] | None


def create_span(ctx: Context, new: NewSpan, errors: FieldErrors) -> SpanWrite:
    """Check a span create against the store, then store it and everything it moves.

    What the create names must exist: its run (in the caller's reach, else ``not_found``),
    its parent (stored, of the same run, or still to come) and, for an id of its own, no span
    of another run may name that id as its parent to come. Each problem is a field error,
    raised with those already in ``errors`` (the request's own); an id already taken is
    ``conflict``, once the request is otherwise valid.
    """
    instance = resolve_reference(
        ctx, errors, "agent_instance_id", "agent_instance", new.instance_id
    )
    if instance is not None and not in_reach(ctx, instance):
        raise NotFound("agent_instance not found")
    parent_id = new.parent_span_id
    parent = stored_parent(ctx, parent_id)
    if parent is None and parent_id is not None and not parent_to_come(ctx, parent_id):
        resolve_reference(ctx, errors, "parent_span_id", "agent_span", parent_id)  # the error
    if parent is not None and instance is not None and (
        parent["agent_instance_id"] != instance["id"]
    ):
        errors.invalid("parent_span_id", "parent_span_id must name a span of the same run")
    if new.id is not None and instance is not None and named_by_another_run(
        ctx, new.id, instance["id"]
    ):
        errors.invalid("id", "spans of another run already name this id as their parent")
    errors.raise_if_any()
    assert instance is not None and new.schema_name is not None
    return _store_span(ctx, new, instance, new.schema_name, claim_id(ctx, new.id))


def _store_span(
    ctx: Context, new: NewSpan, instance: Record, schema_name: str, span_id: str
) -> SpanWrite:
    """Store a checked span create and everything it moves, and raise ``risk_critical`` if due.

    See :mod:`governance_core.domain.runs` for what a span write moves, and
    :func:`governance_core.domain.risk.raise_if_critical` for the alert.
    """
    schema_version = run_schema_version(ctx, instance)
    span_type = prepared_span_type(ctx, schema_version, schema_name)
    entry = None if span_type is None else span_type.entry
    remember_schema_version(ctx, instance)
    checks = None if new.prepared is None else new.prepared.for_run(
        instance, SPAN_TYPES, schema_name
    )
    if checks is None:
        # Not prepared, or for another schema version than the run's: checked here.
        checks = span_checks(span_type, new.payload, new.result_payload)
    span = AgentSpan(
        id=span_id, account_id=instance["account_id"], agent_id=instance["agent_id"],
        agent_instance_id=instance["id"], parent_span_id=new.parent_span_id,
        schema_name=schema_name,
        schema_title=(entry or {}).get("title") or schema_name, status=new.status,
        purpose=ACTIVITY, started_at=new.started_at, finished_at=new.finished_at,
        inserted_at=ctx.now, updated_at=ctx.now, payload=new.payload,
        result_payload=new.result_payload, sensitive_encoding=new.sensitive_encoding,
        **checks,
    )
    record = to_record(span)
    stored, agent = record_span_and_agent(
        ctx, instance, span, record=record, rollups=span_rollups(ctx, instance),
    )
    if new.sensitive_encoding:
        keep_values(ctx, span.id, new.kept, new_owner=True)
    rulesets = write_rulesets(ctx)
    stored = raise_if_critical(ctx, stored, record, schema_version, entry, agent, rulesets)
    batch = batch_of(ctx)
    if batch is None or not batch.defers:
        stored = keep_risk_level(ctx, stored, schema_version, entry, rulesets, agent)
    elif entry is not None and is_assessable(entry.get("data_risk")):
        batch.note_risk(stored["id"], schema_version)
    if batch is not None:
        batch.note_created(ctx, instance, record)
        if new.parent_span_id is not None:
            batch.names_parent(new.parent_span_id)
    return SpanWrite(record, stored, agent, schema_version, entry)


def stored_parent(ctx: Context, parent_id: str | None) -> Record | None:
    """The caller's span ``parent_id`` names, or None (no id, no such span, another account's)."""
    if parent_id is None:
        return None
    record = ctx.tables.agent_spans.get(parent_id)
    return record if record is not None and record["account_id"] == ctx.account_id else None


def parent_to_come(ctx: Context, parent_id: str | None) -> bool:
    """Whether ``parent_id`` names a parent that has not arrived yet.

    That is a well-formed id of the caller's partition that no record holds: the child keeps
    it, and is linked when a span with that id is created (OpenTelemetry exports a child when
    it ends, before its parent has ended).
    """
    assert ctx.principal is not None
    return (
        parent_id is not None
        and extract_partition(parent_id) == ctx.principal.partition
        and id_holder(ctx, parent_id) is None
    )


def named_by_another_run(ctx: Context, span_id: str, instance_id: str) -> bool:
    """Whether spans of another run already name ``span_id`` as their parent to come.

    No query when the write's batch knows (:meth:`~governance_core.domain.batch.WriteBatch.
    known_unnamed`, read for many spans at once) that none does.
    """
    batch = batch_of(ctx)
    if batch is not None and batch.unnamed(span_id):
        return False
    return bool(ctx.tables.agent_spans.query([
        Filter("parent_span_id", "eq", span_id), Filter("agent_instance_id", "ne", instance_id),
    ], limit=1))


def read_unnamed(ctx: Context, span_ids: Collection[str], instance_id: str) -> None:
    """Tell the write's batch which of ``span_ids`` no span of another run names as parent.

    One query for many spans about to be created in the run ``instance_id`` (with ids of
    their own), so that their creates ask nothing (:func:`named_by_another_run`).
    """
    batch = batch_of(ctx)
    if batch is None or not span_ids:
        return
    named = ctx.tables.agent_spans.query([
        Filter("parent_span_id", "in", sorted(span_ids)),
        Filter("agent_instance_id", "ne", instance_id),
    ])
    batch.known_unnamed(set(span_ids) - {record["parent_span_id"] for record in named})


@attrs.frozen
class SpanFinish:
    """A span finish, parsed and checked: what :func:`finish_span` stores.

    ``result_payload`` is the stored form (``result_values`` the sensitive values split out
    of it, kept only when ``sent_result``).
    """

    status: str
    finished_at: datetime
    result_payload: dict[str, Any] | None
    sent_result: bool = False
    sensitive_encoding: bool = False
    result_values: dict[str, Any] = attrs.field(factory=dict)


def finish_span(ctx: Context, record: Record, finish: SpanFinish) -> SpanWrite:
    """Finish the stored span ``record`` (SPAN ``complete``/``failed``/``cancelled``).

    A span the run's termination cancelled is answered as it is; a span finished otherwise is
    ``invalid_action``. The payload's check stands as made at creation (the schema version
    never changes); the result is checked and the summary rendered again.
    """
    span = from_record(AgentSpan, record)
    instance = ctx.tables.agent_instances.get(span.agent_instance_id)
    assert instance is not None, "a span's run is never deleted before its spans"
    activity = span.purpose == ACTIVITY
    span_type = (
        prepared_span_type(ctx, run_schema_version(ctx, instance), span.schema_name)
        if activity else None
    )
    entry = None if span_type is None else span_type.entry
    if cancelled_by_termination(instance, span):
        return SpanWrite(record, instance, None, None, entry)
    status = advance(SPAN, span.status, finish.status, what="agent span")
    derived = span_checks(span_type, span.payload, finish.result_payload)
    derived.pop("payload_validation")
    finished = attrs.evolve(
        span, status=status, finished_at=finish.finished_at,
        result_payload=finish.result_payload,
        sensitive_encoding=span.sensitive_encoding or finish.sensitive_encoding,
        updated_at=ctx.now, **derived,
    )
    stored = to_record(finished)
    instance, agent = record_span_and_agent(
        ctx, instance, finished, before=span, record=stored,
        rollups=span_rollups(ctx, instance),
    )
    if finish.sent_result and finished.sensitive_encoding:
        # A new result replaces the values kept for the old one (none when sent in clear).
        keep_values(ctx, span.id, {"result_payload": finish.result_values})
    return SpanWrite(stored, instance, agent, None, entry)
