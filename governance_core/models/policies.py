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

__all__ = ["APPROVAL_STATUSES", "MODES", "OUTCOMES", "Approval", "Decision", "Policy"]

MODES = ("enforce", "observe", "disabled")
"""A policy's modes: it blocks, it only records what it would have said, or it is off."""

OUTCOMES = ("allow", "deny", "pending_approval")
"""What a decision answers."""

APPROVAL_STATUSES = ("pending", "approved", "rejected", "expired")
"""An approval's statuses; ``expired`` is a pending one past ``expires_at`` (derived on read)."""


def _empty_scope() -> dict[str, list[str]]:
    return {"environment_ids": [], "agent_ids": []}


@attrs.frozen
class Policy:
    """Cedar text deciding an account's actions, in a mode, for a scope of its runs."""

    id: str
    account_id: str
    name: str
    mode: str
    source: str
    inserted_at: datetime
    updated_at: datetime
    description: str | None = None
    scope: dict[str, list[str]] = attrs.field(factory=_empty_scope)
    version: int = 1


@attrs.frozen
class Decision:
    """One answer to "may this run do this now?", kept with the reasons for it."""

    id: str
    account_id: str
    agent_instance_id: str
    agent_id: str
    environment_id: str
    action: dict[str, Any]
    action_kind: str
    outcome: str
    decided_at: datetime
    inserted_at: datetime
    observed_outcome: str | None = None
    warnings: list[str] = attrs.field(factory=list)
    reasons: list[dict[str, Any]] = attrs.field(factory=list)
    approval_id: str | None = None
    agent_span_id: str | None = None
    """The recorded span a decision judged after the fact (null for a ``decide``)."""
    interception: dict[str, Any] | None = None
    """The agent-hooks interception record of the emission it decided (its wire form)."""


@attrs.frozen
class Approval:
    """An action held for a person: approved once, it lets the same action through once."""

    id: str
    account_id: str
    agent_instance_id: str
    agent_id: str
    environment_id: str
    decision_id: str
    action: dict[str, Any]
    digest: str
    status: str
    expires_at: datetime
    inserted_at: datetime
    updated_at: datetime
    reasons: list[dict[str, Any]] = attrs.field(factory=list)
    resolved_at: datetime | None = None
    resolved_by: dict[str, Any] | None = None
    resolution_reason: str | None = None
    consumed_at: datetime | None = None
    consumed_by_decision_id: str | None = None
