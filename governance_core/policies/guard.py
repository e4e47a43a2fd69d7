"""Deciding in process: :func:`decide` answers a decision, :func:`guard` enforces it.

``guard(session, run_id, "tool_call", "refund", {"amount": 250})`` returns the allowing
decision, raises :class:`ActionDenied` for a deny (or a rejected or expired approval), and
for a pending approval waits, polling the decision, until a person resolves it or
``timeout`` passes (:class:`ApprovalTimedOut`, a kind of :class:`ActionDenied`: an action
nobody approved in time is not taken). Once approved, the guard decides again, which uses the
approval (once) and answers ``allow``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = ["ActionDenied", "ApprovalTimedOut", "Caller", "decide", "guard"]


class Caller(Protocol):
    """What the guard calls operations through: a ``Session`` (or anything with ``call``)."""

    def call(
        self, operation: str, params: Mapping[str, Any] | None = None, **members: Any
    ) -> dict[str, Any]:
        """Run ``operation``; its envelope."""


class ActionDenied(Exception):
    """The action may not be taken; ``decision`` is the decision that says so."""

    def __init__(self, decision: Mapping[str, Any], message: str | None = None) -> None:
        self.decision = dict(decision)
        reasons = "; ".join(r.get("message", "") for r in self.decision.get("reasons") or [])
        super().__init__(message or f"action denied: {reasons or self.decision.get('outcome')}")


class ApprovalTimedOut(ActionDenied):
    """Nobody resolved the approval within the guard's timeout."""


def decide(
    session: Caller,
    agent_instance_id: str,
    kind: str,
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    span_type: str | None = None,
    expires_in_ms: int | None = None,
) -> dict[str, Any]:
    """Ask whether the run may take the action now; the Decision (never raises for a deny)."""
    action: dict[str, Any] = {"kind": kind, "name": name, "args": dict(args or {})}
    if span_type is not None:
        action["span_type"] = span_type
    members: dict[str, Any] = {"agent_instance_id": agent_instance_id, "action": action}
    if expires_in_ms is not None:
        members["expires_in_ms"] = expires_in_ms
    decision: dict[str, Any] = session.call("decisions/decide", members)["details"]
    return decision


def guard(
    session: Caller,
    agent_instance_id: str,
    kind: str,
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    span_type: str | None = None,
    timeout: float = 300.0,
    poll_interval: float = 1.0,
    expires_in_ms: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Return the allowing decision, or raise :class:`ActionDenied` (see the module).

    ``timeout`` and ``poll_interval`` are seconds; ``sleep`` and ``monotonic`` are the
    waiting clock (injected by tests).
    """
    def asked() -> dict[str, Any]:
        """The decision now; an allow is returned and a deny raised by the guard."""
        decision = decide(
            session, agent_instance_id, kind, name, args, span_type=span_type,
            expires_in_ms=expires_in_ms,
        )
        if decision["outcome"] == "deny":
            raise ActionDenied(decision)
        return decision

    decision = asked()
    if decision["outcome"] == "allow":
        return decision
    deadline = monotonic() + timeout
    while True:
        shown = session.call("decisions/show", {"decision_id": decision["id"]})["details"]
        status = (shown.get("approval") or {}).get("status")
        if status == "approved":
            decision = asked()
            if decision["outcome"] == "allow":
                return decision
            # Another caller used the approval first: this one waits for its own.
            continue
        if status in ("rejected", "expired"):
            raise ActionDenied(shown, f"action {status}: approval {decision['approval_id']}")
        remaining = deadline - monotonic()
        if remaining <= 0:
            raise ApprovalTimedOut(
                shown, f"no one resolved approval {decision['approval_id']} in {timeout} s"
            )
        sleep(min(poll_interval, remaining))
