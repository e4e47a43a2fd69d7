"""Runtime governance in a console test account: policies, decisions and approvals, made through
the core as an agent and its operator would."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.service import Session
from tests.console.world import XSS, Account

REFUNDS = (
    '@approval("refunds over 100 need a person")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"refund")\n'
    "when { context.args has amount && context.args.amount > 100 };"
)
NO_EMAIL = (
    '@reason("this agent may not email customers")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"send_email");'
)
NO_WIRES = (
    '@reason("wire transfers are never made by an agent")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"wire_transfer");'
)
BUDGET = (
    '@reason("this run has spent its budget of 5 USD")\n'
    'forbid (principal, action == Action::"call_model", resource)\n'
    "when { context.run.cost_micro_usd >= 5000000 };"
)

LONG_RUNS = (
    '@reason("a run may call a model only in its first six spans")\n'
    'forbid (principal, action == Action::"call_model", resource)\n'
    "when { context.run.span_count >= 6 };"
)
"""Stops the playground's model calls late in a run: what a back-test finds."""


@attrs.frozen
class Governed:
    """The ids a test opens: the policies, the run decided for, its pending approvals."""

    refunds_policy_id: str
    email_policy_id: str
    wires_policy_id: str
    budget_policy_id: str
    run_id: str
    pending_approval_ids: tuple[str, ...]
    denied_decision_id: str


def decide(
    session: Session, run_id: str, name: str, args: dict[str, Any], kind: str = "tool_call"
) -> dict[str, Any]:
    """Ask whether the run may act, as its agent would; the decision."""
    return session.details("decisions/decide", {
        "agent_instance_id": run_id, "action": {"kind": kind, "name": name, "args": args},
    })


def govern(account: Account) -> Governed:
    """Policies in every mode and a run that asked for decisions of every outcome.

    Two refunds wait for approval; a small refund, an email (observed), a model call are
    allowed; a wire transfer is denied.
    """
    session = account.session

    def policy(name: str, source: str, mode: str, description: str | None = None) -> str:
        body = {"name": name, "source": source, "mode": mode, "description": description}
        made: str = session.details("policies/create", body)["id"]
        return made

    refunds = policy("Refunds need a person", REFUNDS, "enforce",
                     "Refunds over 100 wait for an operator's approval.")
    email = policy("No customer email", NO_EMAIL, "observe")
    wires = policy("No wire transfers", NO_WIRES, "enforce")
    budget = policy("Run budget", BUDGET, "disabled")
    run = account.running_run_id
    first = decide(session, run, "refund", {"amount": 150, "order": "A-1001"})
    second = decide(session, run, "refund", {
        "amount": 320, "order": "A-1002", "note": f"duplicate charge {XSS}",
        "lines": [{"sku": "LAMP-3", "qty": 2}, {"sku": "BULB-9", "qty": 4}],
    })
    decide(session, run, "refund", {"amount": 40, "order": "A-1003"})
    decide(session, run, "send_email", {"to": "customer@example.com"})
    decide(session, run, "gpt-4o-mini", {}, kind="model_call")
    denied = decide(session, run, "wire_transfer", {"amount": 9000, "iban": "GB00TEST"})
    return Governed(
        refunds_policy_id=refunds, email_policy_id=email, wires_policy_id=wires,
        budget_policy_id=budget, run_id=run,
        pending_approval_ids=(first["approval_id"], second["approval_id"]),
        denied_decision_id=denied["id"],
    )
