"""Governance as an agent-hooks interceptor (``agent-hooks-sdk``, the ``agent-hooks`` extra).

A host built on the agent-hooks contract (``agent_hooks.InterceptionEmitter``) asks its
interceptors for a verdict at each interception point. :class:`GovernanceHooks` is the three
parts that contract lets a governance service play, for one run:

- the **interceptor** (:meth:`GovernanceHooks.intercept`): at ``pre_tool_call`` and
  ``pre_model_call`` it decides the action through ``decisions/decide``, so the account's
  Cedar policies judge it and the decision is kept on the run. ``allow`` is an allow verdict
  (its warnings as verdict warnings), ``deny`` a plain deny, ``pending_approval`` a liftable
  deny whose ``approval`` block names the approval. The other points carry nothing a policy
  speaks of (policies judge tool calls, model calls and spans) and are allowed, undecided;
- the **approval resolver** (:meth:`GovernanceHooks.resolve`): for a liftable deny of its own
  it waits, polling the decision, until a person approves or rejects the approval
  (``approvals/approve``, ``/reject``) or ``approval_timeout`` passes. Approved, it decides
  the action again, which uses the approval once, and answers ``approve`` with that allowing
  decision's verdict; rejected or expired, ``reject``; not resolved in time (or a liftable
  deny of another interceptor, which is not its to lift), ``unresolved``, which the host
  enforces as a deny. Every resolution echoes the request's ``context_identity``;
- the **record sink** (:meth:`GovernanceHooks.record`): each interception record the host
  delivers for an emission the interceptor decided is stored with that decision, on the run
  (its payload-free wire form, as the decision's ``interception``), and
  :func:`stored_interceptions` reads them back.

An error while deciding (the run unknown, policies the engine cannot evaluate) propagates, and
the emitter turns it into ``deny host_error:interceptor_failed``: an action governance could
not judge is not taken.

The core never imports this module; importing it needs the extra.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from agent_hooks import (
    AgentContext,
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResolution,
    CompositionConfig,
    Decision,
    EnforcementMode,
    Evidence,
    InterceptionEmitter,
    InterceptionPoint,
    InterceptionRecord,
    Verdict,
    Warning,
)
from agent_hooks.emitter import DEFAULT_TIMEOUT

from governance_core.policies.guard import decide
from governance_core.service import Session

__all__ = [
    "APPROVAL_EXPIRED",
    "APPROVAL_REJECTED",
    "APPROVAL_REQUIRED",
    "DENIED",
    "GovernanceHooks",
    "OBSERVED",
    "WARNED",
    "stored_interceptions",
    "verdict_of",
]

DENIED = "governance:denied"
"""The ``reason`` of a verdict for a decision that denied the action."""
APPROVAL_REQUIRED = "governance:approval_required"
"""The ``reason`` of a liftable deny: the action waits for a person's approval."""
APPROVAL_REJECTED = "governance:approval_rejected"
"""The ``reason`` of a rejection: a person rejected the approval."""
APPROVAL_EXPIRED = "governance:approval_expired"
"""The ``reason`` of a rejection: the approval expired before anyone resolved it."""
WARNED = "governance:warning"
"""The ``reason`` of each verdict warning a ``@warn`` policy adds."""
OBSERVED = "governance:observed"
"""The ``reason`` of the warning an observe-mode policy adds when it would have blocked."""

_PAGE = 100


def _message(decision: Mapping[str, Any]) -> str | None:
    messages = [str(reason.get("message") or "") for reason in decision.get("reasons") or []]
    return "; ".join(message for message in messages if message) or None


def _evidence(decision: Mapping[str, Any]) -> Evidence:
    pointers = {"decision": f"/api/v1/decision/{decision['id']}"}
    if decision.get("approval_id"):
        pointers["approval"] = f"/api/v1/approval/{decision['approval_id']}"
    return Evidence(verification_pointers=pointers)


def _warnings(decision: Mapping[str, Any]) -> tuple[Warning, ...]:
    found = [Warning(reason=WARNED, message=str(text)) for text in decision.get("warnings") or []]
    observed = decision.get("observed_outcome")
    if observed not in (None, "allow"):
        found.append(Warning(
            reason=OBSERVED, message=f"observe-mode policies would have answered {observed}"
        ))
    return tuple(found)


def verdict_of(decision: Mapping[str, Any]) -> Verdict:
    """The agent-hooks verdict that says what ``decision`` (a Decision resource) says."""
    warnings, evidence = _warnings(decision), _evidence(decision)
    outcome = decision["outcome"]
    if outcome == "allow":
        return Verdict(Decision.ALLOW, warnings=warnings, evidence=evidence)
    if outcome == "deny":
        return Verdict(
            Decision.DENY, reason=DENIED, message=_message(decision), warnings=warnings,
            evidence=evidence,
        )
    return Verdict(
        Decision.DENY, reason=APPROVAL_REQUIRED, message=_message(decision), warnings=warnings,
        evidence=evidence,
        approval={"approval_id": decision["approval_id"], "decision_id": decision["id"]},
    )


class GovernanceHooks:
    """The interceptor, approval resolver and record sink of one run (see the module).

    ``session`` acts for the run ``agent_instance_id`` (an account session, or an ingestion
    session of the run's agent). ``span_types`` maps a tool or model name to the span type
    its call records, whose data-risk declaration the policies then see on the resource.
    ``expires_in_ms`` is how long an approval the interceptor opens waits (default one hour);
    the resolver waits ``approval_timeout`` seconds for a person, polling every
    ``poll_interval`` seconds; ``sleep`` and ``monotonic`` are its clock (tests inject them).
    """

    def __init__(
        self,
        session: Session,
        agent_instance_id: str,
        *,
        span_types: Mapping[str, str] | None = None,
        expires_in_ms: int | None = None,
        approval_timeout: float = 300.0,
        poll_interval: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session
        self.agent_instance_id = agent_instance_id
        self.span_types = dict(span_types or {})
        self.expires_in_ms = expires_in_ms
        self.approval_timeout = approval_timeout
        self.poll_interval = poll_interval
        self._sleep = sleep
        self._monotonic = monotonic
        self._lock = threading.Lock()
        # The decision taken for each emission, by (session id, sequence), for the sink.
        self._decided: dict[tuple[str, int], str] = {}

    # -- the host side ---------------------------------------------------------------------
    def emitter(
        self,
        *,
        mode: EnforcementMode = EnforcementMode.ENFORCE,
        composition: CompositionConfig | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        name: str = "governance",
    ) -> InterceptionEmitter:
        """A new emitter with these hooks as its interceptor, approval resolver and sink.

        ``timeout`` bounds each awaitable interceptor (the SDK's default, 5 s); the hooks are
        synchronous, so their resolver's wait is bounded by ``approval_timeout`` instead.
        Register further interceptors on the emitter as usual.
        """
        made = InterceptionEmitter(
            mode=mode, resolver=self, composition=composition, timeout=timeout
        )
        made.register(self, name=name)
        made.set_record_sink(self.record)
        return made

    # -- the interceptor -------------------------------------------------------------------
    def action_of(self, context: AgentContext) -> tuple[str, str, dict[str, Any]] | None:
        """The action a context asks for: ``(kind, name, args)``; None where none is asked.

        ``pre_tool_call`` is the tool call with its arguments; ``pre_model_call`` the model
        call, with the model's parameters (its members other than ``id``) as arguments.
        """
        point = context.get("interception_point")
        if point == InterceptionPoint.PRE_TOOL_CALL.value:
            call = context["tool_call"]
            return "tool_call", str(call["name"]), dict(call.get("args") or {})
        if point == InterceptionPoint.PRE_MODEL_CALL.value:
            model = dict(context["model"])
            return "model_call", str(model.pop("id")), model
        return None

    def intercept(self, context: AgentContext, /) -> Verdict:
        """Decide the action ``context`` asks for; its verdict (allow where none is asked)."""
        action = self.action_of(context)
        if action is None:
            return Verdict.allow()
        kind, name, args = action
        decision = decide(
            self.session, self.agent_instance_id, kind, name, args,
            span_type=self.span_types.get(name), expires_in_ms=self.expires_in_ms,
        )
        self._remember(context, decision)
        return verdict_of(decision)

    def _remember(self, context: Mapping[str, Any], decision: Mapping[str, Any]) -> None:
        key = _emission(context)
        if key is not None:
            with self._lock:
                self._decided[key] = str(decision["id"])

    # -- the approval resolver -------------------------------------------------------------
    def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        """Wait for a person to resolve the approval of a liftable deny (see the module)."""
        identity = request.context_identity
        block = request.verdict.approval or {}
        decision_id = block.get("decision_id")
        if not isinstance(decision_id, str):
            return ApprovalResolution(ApprovalOutcome.UNRESOLVED, identity)
        deadline = self._monotonic() + self.approval_timeout
        while True:
            shown = self.session.call("decisions/show", {"decision_id": decision_id})["details"]
            approval = shown.get("approval") or {}
            status = approval.get("status")
            if status == "approved":
                action = shown["action"]
                again = decide(
                    self.session, shown["agent_instance_id"], action["kind"], action["name"],
                    action.get("args"), span_type=action.get("span_type"),
                    expires_in_ms=self.expires_in_ms,
                )
                self._remember(request.context, again)
                if again["outcome"] == "allow":
                    return ApprovalResolution(ApprovalOutcome.APPROVE, identity, verdict_of(again))
                if again["outcome"] == "deny":
                    return ApprovalResolution(ApprovalOutcome.REJECT, identity, verdict_of(again))
                # Another caller used the approval first: this one waits for its own.
                decision_id = str(again["id"])
                continue
            if status in ("rejected", "expired"):
                reason = APPROVAL_REJECTED if status == "rejected" else APPROVAL_EXPIRED
                why = approval.get("resolution_reason")
                message = f"approval {approval['id']} {status}" + (f": {why}" if why else "")
                refused = Verdict(
                    Decision.DENY, reason=reason, message=message, evidence=_evidence(shown)
                )
                return ApprovalResolution(ApprovalOutcome.REJECT, identity, refused)
            remaining = deadline - self._monotonic()
            if remaining <= 0:
                return ApprovalResolution(ApprovalOutcome.UNRESOLVED, identity)
            self._sleep(min(self.poll_interval, remaining))

    # -- the record sink -------------------------------------------------------------------
    def record(self, record: InterceptionRecord) -> None:
        """Store ``record`` with the decision taken for its emission; others are not stored.

        The record is stored as its payload-free wire form (no arguments, no messages: the
        context's identity stands for them), in one transaction.
        """
        with self._lock:
            decision_id = self._decided.pop((record.session_id, record.sequence), None)
        if decision_id is None:
            return
        self.session.call(
            "decisions/record_interception",
            {"decision_id": decision_id, "record": record.to_wire()},
        )


def _emission(context: Mapping[str, Any]) -> tuple[str, int] | None:
    session, sequence = context.get("session"), context.get("sequence")
    if not isinstance(session, Mapping) or not isinstance(sequence, int):
        return None
    return str(session.get("id", "")), sequence


def stored_interceptions(session: Session, agent_instance_id: str) -> list[dict[str, Any]]:
    """The interception records stored on a run, oldest decision first.

    Each is ``{"decision_id": ..., "record": <the record's wire form>}``.
    """
    found: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = session.call("decisions/list", {
            "agent_instance_id": agent_instance_id, "sorting": "decided_at",
            "pagination[page_size]": _PAGE, "pagination[offset]": offset,
        })
        for summary in page["summaries"]:
            if summary.get("interception") is not None:
                found.append({"decision_id": summary["id"], "record": summary["interception"]})
        offset = page["pagination"]["next_page_offset"]
    return found
