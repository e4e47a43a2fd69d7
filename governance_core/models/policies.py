"""Runtime governance: policies, the decisions taken before an agent acts, and approvals.

A :class:`Policy` holds Cedar text and grows a ``version`` on every update. A
:class:`Decision` is kept for every ``decide``, and for a recorded span the policies judged
after the fact (:mod:`governance_core.policies.detective`); a :class:`Approval` holds one
action (by the digest of its run, kind, name and arguments) for a person to approve or reject.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from governance_core.models.description import described, enum, resource

__all__ = ["APPROVAL_STATUSES", "MODES", "OUTCOMES", "Approval", "Decision", "Policy"]


MODES = ("enforce", "observe", "disabled")
"""A policy's modes: it blocks, it only records what it would have said, or it is off."""

OUTCOMES = ("allow", "deny", "pending_approval")
"""What a decision answers."""

APPROVAL_STATUSES = ("pending", "approved", "rejected", "expired")
"""An approval's statuses; ``expired`` is a pending one past ``expires_at`` (derived on read)."""


def _empty_scope() -> dict[str, list[str]]:
    return {"environment_ids": [], "agent_ids": []}


@resource("policy", created_at="ts")
@attrs.frozen
class Policy:
    """Cedar text deciding an account's actions, in a mode, for a scope of its runs."""

    id: str
    account_id: str
    name: str = attrs.field(metadata=described(column=True))
    mode: str = attrs.field(metadata=described(notation=enum(*MODES), column=True))
    source: str
    inserted_at: datetime = attrs.field(metadata=described(shown=False))
    updated_at: datetime = attrs.field(metadata=described(column=True))
    description: str | None = None
    scope: dict[str, list[str]] = attrs.field(factory=_empty_scope)
    version: int = attrs.field(default=1, metadata=described(column=True, managed=True))


@resource("decision", approval="~obj?")
@attrs.frozen
class Decision:
    """One answer to "may this run do this now?", kept with the reasons for it."""

    id: str
    account_id: str
    agent_instance_id: str = attrs.field(metadata=described(column=True))
    agent_id: str = attrs.field(metadata=described(column=True))
    environment_id: str = attrs.field(metadata=described(column=True))
    action: dict[str, Any]
    action_kind: str = attrs.field(metadata=described(column=True, shown=False))
    outcome: str = attrs.field(
        metadata=described(notation=enum(*OUTCOMES), column=True, managed=True)
    )
    decided_at: datetime = attrs.field(metadata=described(column=True, managed=True))
    inserted_at: datetime = attrs.field(metadata=described(shown=False))
    observed_outcome: str | None = attrs.field(
        default=None, metadata=described(notation=enum(*OUTCOMES, nullable=True), managed=True)
    )
    warnings: list[str] = attrs.field(factory=list, metadata=described(managed=True))
    reasons: list[dict[str, Any]] = attrs.field(factory=list, metadata=described(managed=True))
    approval_id: str | None = attrs.field(
        default=None, metadata=described(column=True, managed=True)
    )
    agent_span_id: str | None = None
    """The recorded span a decision judged after the fact (null for a ``decide``)."""
    interception: dict[str, Any] | None = None
    """The agent-hooks interception record of the emission it decided (its wire form)."""
    tool_call_number: int | None = attrs.field(
        default=None, metadata=described(column=True, shown=False)
    )
    """An allowed tool call's place among its run's allowed tool calls (1 for the first): the
    last one's is the run's ``tool_calls``, read from an index whatever their number."""


@resource("approval", created_at="ts")
@attrs.frozen
class Approval:
    """An action held for a person: approved once, it lets the same action through once."""

    id: str
    account_id: str
    agent_instance_id: str = attrs.field(metadata=described(column=True))
    agent_id: str = attrs.field(metadata=described(column=True))
    environment_id: str
    decision_id: str
    action: dict[str, Any]
    digest: str = attrs.field(metadata=described(column=True, managed=True))
    status: str = attrs.field(
        metadata=described(notation=enum(*APPROVAL_STATUSES), column=True, managed=True)
    )
    expires_at: datetime = attrs.field(metadata=described(column=True, managed=True))
    inserted_at: datetime = attrs.field(metadata=described(shown=False))
    updated_at: datetime
    reasons: list[dict[str, Any]] = attrs.field(factory=list, metadata=described(managed=True))
    resolved_at: datetime | None = attrs.field(
        default=None, metadata=described(column=True, managed=True)
    )
    resolved_by: dict[str, Any] | None = attrs.field(default=None, metadata=described(managed=True))
    resolution_reason: str | None = None
    consumed_at: datetime | None = attrs.field(default=None, metadata=described(managed=True))
    consumed_by_decision_id: str | None = attrs.field(
        default=None, metadata=described(managed=True)
    )
