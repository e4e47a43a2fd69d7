"""The run and its spans: every write that moves a run, in the operation's one transaction.

A span write stores the span, moves its run's aggregates through
:func:`governance_core.rules.aggregates.apply_span` (the one place aggregates change: each
aggregate is a change computed from the span before and after, laid on the run as read in the
same transaction), starts a pending run with its first activity span, and moves the agent's
``last_activity_span_at``, so no read ever scans spans. Spans are never refused for arriving
late or out of order (decisions 7): before their run's start, after its finish, or after its
termination (then the write's response carries :func:`control`). Every status change of a
run goes through :func:`advance_instance`, which follows
:data:`governance_core.rules.states.INSTANCE` and moves the agent's ``instance_counts``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from governance_core import jsontext
from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.converter import from_record, to_record
from governance_core.models.agents import Agent, AgentInstance, AgentSpan, empty_instance_counts
from governance_core.repository import Filter, FirstReads, Record, tenant_filter
from governance_core.rules.aggregates import ACTIVITY, apply_span, latest
from governance_core.rules.payload_validation import SpanType, validate_payload
from governance_core.rules.states import INSTANCE, SPAN, advance
from governance_core.rules.templates import render_template

__all__ = [
    "DURATION_STEP",
    "NAME_MAX",
    "PARTY_MAX",
    "QUALITY_SCHEMAS",
    "RUN_PARTIES",
    "SPAN_TYPES",
    "PreparedChecks",
    "SpanType",
    "advance_instance",
    "bucket_bound",
    "cancel_active_spans",
    "cancelled_by_termination",
    "control",
    "duration_bucket",
    "entry_in",
    "follow_run_activity",
    "in_reach",
    "keep_run_parties",
    "keep_times",
    "party_value",
    "payload_size",
    "prepare_checks",
    "prepared_span_type",
    "quality_score",
    "record_span_and_agent",
    "remember_schema_version",
    "run_hint",
    "run_schema_version",
    "runs_by_external_id",
    "schema_entry",
    "set_quality",
    "span_checks",
    "span_bucket_count",
    "span_count_bucket",
    "system_checks",
    "system_span",
]

NAME_MAX = 200
"""The longest span, alert or quality schema name."""

PARTY_MAX = 200
"""The longest session or user id a run keeps (a longer one is ignored)."""

RUN_PARTIES = ("session_id", "user_id")
"""The run's conversation and end user: fields of the store (the console's sessions and
users), not of the run's view."""

# The top-level payload members of a span create that name its run's session and user.
_PAYLOAD_PARTIES = (("session_id", ("session_id", "conversation_id")), ("user_id", ("user_id",)))

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

def runs_by_external_id(
    ctx: Context, agent_id: str, external_identifiers: Collection[str]
) -> dict[str, Record]:
    """The caller's runs of ``agent_id`` within its reach, by the ``external_identifiers`` used.

    One indexed read for them all: an OpenTelemetry export finds its traces' runs so, by
    their trace ids. An agent's runs have distinct external identifiers.
    """
    if not external_identifiers:
        return {}
    found = ctx.tables.agent_instances.query([
        tenant_filter(ctx.account_id), Filter("agent_id", "eq", agent_id),
        Filter("external_identifier", "in", sorted(set(external_identifiers))),
    ])
    return {
        record["external_identifier"]: record for record in found if in_reach(ctx, record)
    }

def run_schema_version(ctx: Context, instance: Record) -> Record | None:
    """Return the schema version the run ``instance`` was registered with."""
    return ctx.caches.schema_version(
        ctx.tables.agent_schema_versions, instance["agent_schema_version_id"]
    )

def schema_entry(ctx: Context, instance: Record, group: str, name: str) -> dict[str, Any] | None:
    """Return the entry ``name`` of a map of the run's schema version, or None.

    ``group`` is ``span_type_schemas``, ``alert_schemas`` or ``quality_schemas``.
    """
    return entry_in(run_schema_version(ctx, instance), group, name)

def entry_in(schema_version: Record | None, group: str, name: str) -> dict[str, Any] | None:
    """Return the entry ``name`` of the map ``group`` of ``schema_version``, or None."""
    if schema_version is None:
        return None
    entry = (schema_version.get(group) or {}).get(name)
    return entry if isinstance(entry, dict) else None

def payload_size(*payloads: object) -> int:
    """Estimate the stored size of payloads: their compact JSON text in UTF-8 bytes."""
    return sum(len(jsontext.dumps(payload).encode()) for payload in payloads if payload is not None)

def control(instance: Record) -> dict[str, Any]:
    """Return the ``control`` member of a span write's response (only once terminated)."""
    if instance["status"] != "terminated":
        return {}
    return {"control": {"terminate": True, "reason": instance.get("termination_reason")}}

def prepared_span_type(
    ctx: Context, schema_version: Record | None, name: str
) -> SpanType | None:
    """Return the span type ``name`` of ``schema_version``, or None when it is undeclared."""
    entry = entry_in(schema_version, SPAN_TYPES, name)
    if entry is None or schema_version is None:
        return None
    key = (schema_version["id"], name)
    return ctx.caches.span_types.get(key, lambda: SpanType.prepare(entry))


def span_checks(
    span_type: SpanType | None, payload: dict[str, Any], result: dict[str, Any] | None
) -> dict[str, Any]:
    """Return what a span's payloads and type give it.

    Whether the type is declared, each payload's check result, the summary rendered from
    the type's template (the payload merged with the result, the result winning) and the
    size estimate.
    """
    size = payload_size(payload, result)
    if span_type is None:
        return {"schema_known": False, "payload_validation": None,
                "result_payload_validation": None, "summary": None, "size_bytes": size}
    return {
        "schema_known": True,
        "payload_validation": span_type.check_params(payload),
        "result_payload_validation": None if result is None else span_type.check_result(result),
        "summary": render_template(
            span_type.entry.get("template"), {**payload, **(result or {})}
        ),
        "size_bytes": size,
    }

def system_checks(entry: dict[str, Any] | None, payload: dict[str, Any]) -> dict[str, Any]:
    """Return what a quality or alert span's payload and schema entry give it.

    Whether the entry is declared (an empty entry is not), the payload's check against its
    ``schema`` and the summary its ``template`` renders from the payload.
    """
    if not entry:
        return {"schema_known": False, "payload_validation": None, "summary": None}
    return {
        "schema_known": True,
        "payload_validation": validate_payload(entry.get("schema"), payload),
        "summary": render_template(entry.get("template"), payload),
    }


_NOTHING_FIRST = FirstReads()
"""What a write with nothing to read first names (shared: it is frozen)."""


@attrs.frozen
class PreparedChecks:
    """Payload checks and summaries made before a write's transaction, for one schema version.

    ``derived`` maps a schema entry, by its group (``span_type_schemas``, ``quality_schemas``,
    ``alert_schemas``) and name, to what its checks give the span written for it
    (:func:`span_checks`, :func:`system_checks`). They hold for a run registered with
    ``schema_version_id`` only: the write asks :meth:`for_run` with the run it read in its
    transaction, and checks the payloads itself when that answers None. ``parsed`` is what
    the operation read from its parameters to make them (whatever the run), for it to take
    again rather than read them twice; None when it keeps nothing. ``reads`` are what the
    write will read first (its run and the run's agent), for the store to read together as
    the transaction opens.
    """

    schema_version_id: str
    derived: Mapping[tuple[str, str], dict[str, Any]]
    parsed: object = None
    reads: FirstReads = _NOTHING_FIRST

    def for_run(self, instance: Record, group: str, name: str) -> dict[str, Any] | None:
        """What the checks of entry ``name`` of ``group`` give a span of the run ``instance``.

        None when the run's schema version is not the one they were made for, or the entry
        was not prepared.
        """
        if instance.get("agent_schema_version_id") != self.schema_version_id:
            return None
        return self.derived.get((group, name))


def prepare_checks(
    ctx: Context,
    instance_id: str,
    compute: Callable[[Record], Mapping[tuple[str, str], dict[str, Any]]],
) -> PreparedChecks | None:
    """Run ``compute`` on the schema version of the caller's run ``instance_id``, if known.

    For an operation's ``prepare``, outside any transaction: the run's schema version id is
    taken from :func:`remember_schema_version`'s hint, else from one read of the run (it is
    remembered then). None when there is no such run of the caller's account.
    """
    hint = run_hint(ctx, instance_id)
    if hint is None:
        return None
    schema_version = ctx.caches.schema_version(ctx.tables.agent_schema_versions, hint[1])
    if schema_version is None:
        return None
    reads = FirstReads((("agent_instances", instance_id), ("agents", hint[2])))
    return PreparedChecks(schema_version["id"], compute(schema_version), reads=reads)


def run_hint(ctx: Context, instance_id: str) -> tuple[str, str, str] | None:
    """The account, schema version id and agent id of the caller's run ``instance_id``.

    They never change: taken from :func:`remember_schema_version`'s hint, else from one
    read of the run (remembered then). None when there is no such run of the caller's
    account.
    """
    def read() -> tuple[str, str, str] | None:
        instance = ctx.tables.agent_instances.get(instance_id)
        return None if instance is None else _run_hint(instance)

    hint = ctx.caches.run_schema_versions.get(instance_id, read)
    return None if hint is None or hint[0] != ctx.account_id else hint


def _run_hint(instance: Record) -> tuple[str, str, str]:
    return instance["account_id"], instance["agent_schema_version_id"], instance["agent_id"]


def remember_schema_version(ctx: Context, instance: Record) -> None:
    """Keep the run's schema version and agent for :func:`prepare_checks` (they never change)."""
    ctx.caches.run_schema_versions.get(instance["id"], lambda: _run_hint(instance))


def cancelled_by_termination(instance: Record, span: AgentSpan) -> bool:
    """Whether the run's termination cancelled ``span`` (then a finish is answered as is)."""
    terminated_at = instance.get("finished_at")
    return (
        instance["status"] == "terminated"
        and span.status == "cancelled"
        and span.finished_at is not None
        and terminated_at is not None
        and format_timestamp(span.finished_at) >= terminated_at
    )

def party_value(value: object) -> str | None:
    """``value`` as a session or user id: a string of 1 to :data:`PARTY_MAX` characters.

    Anything else (not a string, blank, longer, or text no database holds) is None: ignored.
    """
    if not isinstance(value, str) or not value.strip() or len(value) > PARTY_MAX:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate survives JSON's escapes, not a database
        return None
    return value


def _with_parties(run: Record, session_id: object, user_id: object) -> Record:
    """``run`` with each of its session and user set to the value given, where it has none."""
    for field, value in (("session_id", session_id), ("user_id", user_id)):
        if not run.get(field):
            kept = party_value(value)
            if kept is not None:
                run = {**run, field: kept}
    return run


def _payload_parties(payload: Mapping[str, Any]) -> Record:
    """The session and user a span create's payload names in its top-level members."""
    return {
        field: next((found for name in names
                     if (found := party_value(payload.get(name))) is not None), None)
        for field, names in _PAYLOAD_PARTIES
    }


def keep_run_parties(
    ctx: Context, run: Record, session_id: str | None, user_id: str | None
) -> Record:
    """Give the stored ``run`` the session and user it has none of yet; return it as stored.

    Each is set once: a run that has one keeps it, so only the first value seen counts, and
    a run that has both is not written. A value that is no id (:func:`party_value`) is
    ignored. Call it in the transaction of the span write that names them.
    """
    updated = _with_parties(run, session_id, user_id)
    if updated is not run:
        ctx.tables.agent_instances.put(updated)
    return updated


def record_span_and_agent(
    ctx: Context,
    instance: Record,
    span: AgentSpan,
    before: AgentSpan | None = None,
    *,
    record: Record | None = None,
    rollups: Callable[[Record], Record] | None = None,
) -> tuple[Record, Record | None]:
    """Store ``span`` (new when ``before`` is None) and what it moves.

    The instance's aggregates follow the span; a pending run is started by an activity span
    (its ``started_at`` is that span's); the agent's ``last_activity_span_at`` follows the
    instance's. An activity span create whose payload names a session (top-level
    ``session_id`` or ``conversation_id``) or a user (``user_id``) gives the run the ones it
    has none of yet (see :func:`keep_run_parties`), in the run's rewrite by this write.
    ``record`` is the span's stored form when the caller has made it already; ``rollups``
    gives the instance with its rollups kept (see
    :func:`governance_core.domain.insights.keep_total_cost`) before it is stored.
    Returns the instance as stored, and the agent when the write read it (else None).
    """
    after_record = to_record(span) if record is None else record
    ctx.tables.agent_spans.put(after_record)
    updated = apply_span(instance, None if before is None else to_record(before), after_record)
    if before is None and span.purpose == ACTIVITY and not (
        updated.get("session_id") and updated.get("user_id")
    ):
        updated = _with_parties(updated, **_payload_parties(span.payload))
    if rollups is not None:
        if span.purpose == ACTIVITY and updated["status"] == "pending":
            # The span starts the run below: its rollups are kept under that start.
            updated = {**updated, "started_at": format_timestamp(span.started_at)}
        updated = rollups(updated)
    score = quality_score(updated.get("quality_payloads") or {})
    if score != updated.get("quality_score"):
        updated = {**updated, "quality_score": score}
    if span.purpose == ACTIVITY and updated["status"] == "pending":
        updated = advance_instance(ctx, updated, "span", started_at=span.started_at)
    else:
        updated = {**updated, "updated_at": format_timestamp(ctx.now)}
        ctx.tables.agent_instances.put(updated)
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
    prepared: PreparedChecks | None = None,
) -> Record:
    """Record a quality or alert lifecycle event as a finished span of that ``purpose``.

    The span is named after the quality or alert schema entry ``name`` of ``group``;
    ``payload`` is checked against that entry's schema and flagged, never refused, and
    summarised by its template (:func:`system_checks`; taken from ``prepared`` when it holds
    them for this run). Returns the instance as stored (system spans leave its aggregates
    alone).
    """
    entry = schema_entry(ctx, instance, group, name) or {}
    remember_schema_version(ctx, instance)
    derived = None if prepared is None else prepared.for_run(instance, group, name)
    if derived is None:
        derived = system_checks(entry, payload)
    span = AgentSpan(
        id=ctx.new_id(), account_id=instance["account_id"], agent_id=instance["agent_id"],
        agent_instance_id=instance["id"], schema_name=name,
        schema_title=entry.get("title") or name, status="complete", purpose=purpose,
        started_at=at, finished_at=at, inserted_at=ctx.now, updated_at=ctx.now,
        payload=payload, result_payload=result_payload,
        size_bytes=payload_size(payload, result_payload), **derived,
    )
    return record_span_and_agent(ctx, instance, span)[0]

def set_quality(
    ctx: Context,
    instance: Record,
    name: str,
    payload: dict[str, Any] | None,
    prepared: PreparedChecks | None = None,
) -> Record:
    """Set (or, with ``payload`` None, remove) the run's quality payload ``name``.

    Writes the quality-purpose span that records it, in the caller's transaction (its
    checks taken from ``prepared`` when it holds them for this run); returns the instance as
    stored.
    """
    payloads = dict(instance.get("quality_payloads") or {})
    if payload is None:
        payloads.pop(name, None)
    else:
        payloads[name] = payload
    return system_span(
        ctx, {**instance, "quality_payloads": payloads}, purpose="quality",
        group=QUALITY_SCHEMAS, name=name, payload=payload or {},
        result_payload={"event": "removed" if payload is None else "recorded"}, at=ctx.now,
        prepared=prepared,
    )

def follow_run_activity(ctx: Context, agent_id: str, run_activity: str | None) -> Record:
    """Move the agent's ``last_activity_span_at`` up to a run's (a stored timestamp).

    Call it after any write that moved a run's ``last_activity_span_at``, in the same
    transaction; an earlier time leaves the agent as it is. Returns the agent as stored.
    """
    agent = ctx.tables.agents.get(agent_id)
    assert agent is not None, "a run's agent is never deleted before its runs"
    current = agent.get("last_activity_span_at")
    if latest(current, run_activity) != current:
        agent = {**agent, "last_activity_span_at": run_activity}
        ctx.tables.agents.put(agent)
    return agent

DURATION_STEP = 1.02
"""The ratio of one duration bucket's upper bound to the previous one's (2% precision)."""


def duration_bucket(milliseconds: int) -> int:
    """The bucket of a run lasting ``milliseconds``: the least ``b`` with ``1.02**b >= ms``.

    Bucket 0 holds every run of at most 1 ms; :func:`bucket_bound` gives a bucket's upper
    bound, which is never below a duration of the bucket and at most 2% above it.
    """
    if milliseconds <= 1:
        return 0
    bucket = max(0, math.ceil(math.log(milliseconds) / math.log(DURATION_STEP)))
    while bucket_bound(bucket) < milliseconds:
        bucket += 1
    while bucket > 0 and bucket_bound(bucket - 1) >= milliseconds:
        bucket -= 1
    return bucket


def span_count_bucket(count: int) -> int:
    """The bucket of a run of ``count`` spans: its digits times 100 plus its two first digits.

    Never smaller for a larger count, and the same for counts less than 10% apart above 100
    (1% at the top of a power of ten): the runs list sorts by it from an index, then by the
    count, within the few top buckets only. 0 spans is bucket 100, 9 is 109, 10 is 210,
    12,345 is 512.
    """
    digits = str(max(0, count))
    return len(digits) * 100 + int(digits[:2])


def span_bucket_count(bucket: int) -> int | None:
    """The one span count the bucket ``bucket`` holds, or None when it holds several.

    A bucket below 300 (fewer than 100 spans) holds its count alone: 100 to 109 hold 0 to 9,
    210 to 299 hold 10 to 99 (see :func:`span_count_bucket`).
    """
    if bucket < 200:
        return bucket - 100
    return bucket - 200 if bucket < 300 else None


def bucket_bound(bucket: int) -> float:
    """The upper bound, in milliseconds, of duration bucket ``bucket``."""
    return float(DURATION_STEP**bucket)


def quality_score(payloads: Mapping[str, Any]) -> float | None:
    """The run's quality score: the mean of its quality payloads' numeric ``score`` members.

    None when no payload has one (a boolean or a value that is not finite is no score), as
    the monitors read scores. Kept on the run as ``quality_score`` by every write of its
    quality payloads, for the trends page and the runs list's score filter.
    """
    scores = [
        float(payload["score"]) for payload in payloads.values()
        if isinstance(payload, Mapping) and isinstance(payload.get("score"), int | float)
        and not isinstance(payload.get("score"), bool) and math.isfinite(payload["score"])
    ]
    return sum(scores) / len(scores) if scores else None


def keep_times(instance: AgentInstance) -> AgentInstance:
    """The run with ``started_day``, ``duration_ms`` and ``duration_bucket`` kept.

    ``started_day`` is the UTC date of ``started_at`` (``YYYY-MM-DD``); the duration stays
    None until the run has a start and a finish (a finish before the start counts as 0 ms).
    """
    day = None if instance.started_at is None else instance.started_at.astimezone(UTC).date()
    instance = attrs.evolve(instance, started_day=None if day is None else day.isoformat())
    if instance.started_at is None or instance.finished_at is None:
        return attrs.evolve(instance, duration_ms=None, duration_bucket=None)
    milliseconds = max(0, (instance.finished_at - instance.started_at) // timedelta(milliseconds=1))
    return attrs.evolve(
        instance, duration_ms=milliseconds, duration_bucket=duration_bucket(milliseconds)
    )


def advance_instance(ctx: Context, record: Record, trigger: str, **changes: Any) -> Record:
    """Fire ``trigger`` on a stored instance and return the stored result.

    ``invalid_action`` when the INSTANCE table has no such transition. The instance is stored
    with ``changes`` (model-typed values), and the agent's ``instance_counts`` move from the
    old status to the new one.
    """
    instance = from_record(AgentInstance, record)
    status = advance(INSTANCE, instance.status, trigger, what="agent instance")
    stored = ctx.repo.instances.put(
        keep_times(attrs.evolve(instance, status=status, updated_at=ctx.now, **changes))
    )
    if status != instance.status:
        _move_instance_count(ctx, instance.agent_id, instance.status, status)
    return stored

def _move_instance_count(ctx: Context, agent_id: str, old: str, new: str) -> None:
    record = ctx.tables.agents.get(agent_id)
    assert record is not None, "an instance's agent is never deleted"
    agent = from_record(Agent, record)
    counts = {**empty_instance_counts(), **agent.instance_counts}
    counts[old] -= 1
    counts[new] += 1
    ctx.repo.agents.put(attrs.evolve(agent, instance_counts=counts))

def cancel_active_spans(ctx: Context, record: Record) -> Record:
    """Cancel the run's active spans (SPAN ``terminate``), moving the run's span aggregates."""
    spans = ctx.tables.agent_spans.query([
        tenant_filter(ctx.account_id),
        Filter("agent_instance_id", "eq", record["id"]),
        Filter("status", "eq", "active"),
    ])
    if not spans:
        return record
    for before in spans:
        span = from_record(AgentSpan, before)
        status = advance(SPAN, span.status, "terminate", what="agent span")
        after = ctx.repo.spans.put(
            attrs.evolve(span, status=status, finished_at=ctx.now, updated_at=ctx.now)
        )
        record = apply_span(record, before, after)
    ctx.tables.agent_instances.put(record)
    follow_run_activity(ctx, record["agent_id"], record.get("last_activity_span_at"))
    return record


SPAN_TYPES = "span_type_schemas"
"""The schema version's map of span types."""

QUALITY_SCHEMAS = "quality_schemas"
"""The schema version's map of quality schemas."""
