"""Decisions: ask before an agent acts (decide), and read what was decided (show, list).

Ingestion tokens decide for, and read the decisions of, their own runs. A denied action is
a successful decide whose ``outcome`` says so.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from governance_core import jsontext
from governance_core.context import Context
from governance_core.envelopes import ready_envelope
from governance_core.errors import Conflict, NotFound
from governance_core.fields import Fields
from governance_core.models.policies import OUTCOMES, Decision
from governance_core.operations.approvals import approval_details
from governance_core.operations.common import (
    equality_filters,
    list_response,
    load_record,
    reach_filters,
    read_instance_ref,
)
from governance_core.policies.deciding import Action, decide_action, decision_reads
from governance_core.policies.schema import KIND_ACTIONS
from governance_core.registry import ANY_SCOPE, operation
from governance_core.repository import FirstReads, Record
from governance_core.views import model_view

__all__ = ["APPROVAL_TTL_MS", "INTERCEPTION_MAX_BYTES", "SORTABLE", "decision_details"]

SORTABLE = ("id", "decided_at")
APPROVAL_TTL_MS = (1_000, 7 * 24 * 3_600_000)
"""The range of ``expires_in_ms``: how long an approval this decision opens may wait."""
NAME_MAX = 200


def decision_details(record: Record, **shown: Any) -> dict[str, Any]:
    """The Decision resource of a stored decision, with ``shown`` values laid over it."""
    return model_view(
        Decision, record, **shown
    )


def _action(fields: Fields) -> Action | None:
    value = fields.object("action", required=True, nullable=False)
    if value is None:
        return None
    nested = Fields(value)
    kind = nested.str("kind", required=True, choices=tuple(KIND_ACTIONS))
    name = nested.str("name", required=True, max_length=NAME_MAX)
    args = nested.object("args") or {}
    span_type = nested.str("span_type", max_length=NAME_MAX) or None
    if nested.errors:
        fields.errors.merge("action", nested.errors.to_error())
        return None
    assert kind is not None and name is not None
    return Action(kind, name, args, span_type)


def prepare_decide(ctx: Context, fields: Fields) -> FirstReads | None:
    """What a decide reads first (:func:`decision_reads`); None when a member does not parse.

    Asked only where the store reads it together (``prepares_reads``).
    """
    instance_id = fields.id("agent_instance_id", required=True)
    action = fields.object("action")
    kind = action.get("kind") if action is not None else None
    if instance_id is None or not isinstance(kind, str):
        return None
    return decision_reads(ctx, instance_id, kind)


@operation(
    "decisions/decide", write=True, scopes=ANY_SCOPE, prepare=prepare_decide,
    prepares_reads=True,
)
def decide(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Decide whether a run may act now: ``allow``, ``deny`` or ``pending_approval``.

    ``action`` is ``{kind: tool_call | model_call | span, name, args?, span_type?}``; an
    approval this decision opens expires after ``expires_in_ms`` (default one hour).
    """
    instance = read_instance_ref(ctx, fields)
    action = _action(fields)
    low, high = APPROVAL_TTL_MS
    ttl_ms = fields.int("expires_in_ms", minimum=low, maximum=high)
    fields.done()
    assert instance is not None and action is not None
    ttl = None if ttl_ms is None else timedelta(milliseconds=ttl_ms)
    decision = decide_action(ctx, instance, action, approval_ttl=ttl)
    return ready_envelope(decision_details(decision))


def _in_reach(ctx: Context, record: Record) -> bool:
    principal = ctx.principal
    assert principal is not None
    return not principal.is_ingestion or (
        record["agent_id"] == principal.agent_id
        and record["environment_id"] == principal.environment_id
    )


@operation("decisions/record_interception", write=True, scopes=ANY_SCOPE)
def record_interception(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Keep the agent-hooks interception record of the emission a decision decided.

    ``record`` is the record's wire form (``interception_point``, ``mode``, ``verdict``,
    ``session_id``, ``sequence``, ...; no payloads), at most 64 KiB of JSON. A decision keeps
    one: the same record again changes nothing, another is a ``conflict``.
    """
    decision = load_record(ctx, ctx.tables.decisions, fields.raw("decision_id"))
    if not _in_reach(ctx, decision):
        raise NotFound("decision not found")
    record = fields.object("record", required=True, nullable=False)
    if record is not None:
        _check_interception(fields, record)
    fields.done()
    assert record is not None
    kept = decision.get("interception")
    if kept is None:
        decision = {**decision, "interception": record}
        ctx.tables.decisions.put(decision)
    elif kept != record:
        raise Conflict(f"decision {decision['id']} already holds another interception record")
    return ready_envelope(decision_details(decision))


_INTERCEPTION_MEMBERS = {
    "interception_point": str, "mode": str, "verdict": dict, "session_id": str, "sequence": int,
}
INTERCEPTION_MAX_BYTES = 64 * 1024
"""The largest interception record (its JSON) a decision keeps."""


def _check_interception(fields: Fields, record: dict[str, Any]) -> None:
    for member, kind in _INTERCEPTION_MEMBERS.items():
        value = record.get(member)
        if not isinstance(value, kind) or isinstance(value, bool):
            fields.errors.invalid(
                "record", f"record.{member} must be a {kind.__name__}: an interception record's"
                " wire form"
            )
            return
    if len(jsontext.dumps(record).encode()) > INTERCEPTION_MAX_BYTES:
        fields.errors.invalid("record", f"record is larger than {INTERCEPTION_MAX_BYTES} bytes")


@operation("decisions/show", write=False, scopes=ANY_SCOPE)
def show_decision(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Get a decision, with its approval (and that approval's resolution) when it has one."""
    record = load_record(ctx, ctx.tables.decisions, fields.raw("decision_id"))
    if not _in_reach(ctx, record):
        raise NotFound("decision not found")
    approval_id = record.get("approval_id")
    approval = ctx.tables.approvals.get(approval_id) if approval_id else None
    shown = None if approval is None else approval_details(ctx, approval)
    return ready_envelope(decision_details(record, approval=shown))


@operation("decisions/list", write=False, scopes=ANY_SCOPE)
def list_decisions(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List decisions; filters ``agent_instance_id`` (a run's decisions) and ``outcome``."""
    filters = equality_filters(fields, ids=("agent_instance_id",), choices={"outcome": OUTCOMES})
    return list_response(
        ctx, fields, ctx.tables.decisions, sortable=SORTABLE, summarize=decision_details,
        filters=[*filters, *reach_filters(ctx)],
    )
