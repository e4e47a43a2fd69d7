"""Approvals: bound to one action by digest, resolved once, used once, expiring closed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from governance_core.clock import FixedClock, parse_timestamp
from governance_core.errors import Conflict, NotFound
from tests.policies.support import RunWorld

REFUNDS = (
    '@approval("refunds over 100 need a person")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"refund")\n'
    "when { context.args has amount && context.args.amount > 100 };"
)


def refund(world: RunWorld, run: str, amount: int, **members: Any) -> dict[str, Any]:
    return world.decide(run, "tool_call", "refund", {"amount": amount}, **members)


def test_an_approved_action_is_allowed_once(world: RunWorld) -> None:
    run = world.run()
    world.policy(REFUNDS)
    held = refund(world, run, 150)
    assert held["outcome"] == "pending_approval" and held["approval_id"]
    approval = world.session.details(
        "approvals/approve", {"approval_id": held["approval_id"], "reason": "customer is right"}
    )
    assert approval["status"] == "approved"
    assert approval["resolution_reason"] == "customer is right"
    assert approval["resolved_by"] == {
        "token_id": world.boot.token_id, "admin_user_id": world.boot.admin_user_id,
    }
    allowed = refund(world, run, 150)
    assert allowed["outcome"] == "allow" and allowed["approval_id"] is None
    assert allowed["reasons"][0]["approval_id"] == held["approval_id"]
    used = world.session.details("approvals/show", {"approval_id": held["approval_id"]})
    assert used["consumed_by_decision_id"] == allowed["id"]
    again = refund(world, run, 150)
    assert again["outcome"] == "pending_approval"
    assert again["approval_id"] != held["approval_id"]


def test_an_approval_binds_the_exact_action(world: RunWorld) -> None:
    run, other_run = world.run(), world.run()
    world.policy(REFUNDS)
    held = refund(world, run, 150)
    world.session.call("approvals/approve", {"approval_id": held["approval_id"]})
    assert refund(world, run, 151)["outcome"] == "pending_approval"
    assert refund(world, other_run, 150)["outcome"] == "pending_approval"
    assert refund(world, run, 150)["outcome"] == "allow"


def test_deciding_again_while_pending_joins_the_approval(world: RunWorld) -> None:
    run = world.run()
    world.policy(REFUNDS)
    first, second = refund(world, run, 150), refund(world, run, 150)
    assert first["approval_id"] == second["approval_id"]
    pending = world.session.call("approvals/list", {"status": "pending"})["summaries"]
    assert [a["id"] for a in pending] == [first["approval_id"]]


def test_a_rejected_action_stays_held_and_the_decision_shows_why(world: RunWorld) -> None:
    run = world.run()
    world.policy(REFUNDS)
    held = refund(world, run, 150)
    world.session.call("approvals/reject", {"approval_id": held["approval_id"], "reason": "no"})
    shown = world.session.details("decisions/show", {"decision_id": held["id"]})
    assert shown["approval"]["status"] == "rejected"
    assert shown["approval"]["resolution_reason"] == "no"
    assert refund(world, run, 150)["outcome"] == "pending_approval"


def test_resolving_twice_is_a_conflict(world: RunWorld) -> None:
    run = world.run()
    world.policy(REFUNDS)
    held = refund(world, run, 150)
    world.session.call("approvals/approve", {"approval_id": held["approval_id"]})
    with pytest.raises(Conflict):
        world.session.call("approvals/approve", {"approval_id": held["approval_id"]})
    with pytest.raises(Conflict):
        world.session.call("approvals/reject", {"approval_id": held["approval_id"]})


def test_an_expired_approval_counts_as_rejected(world: RunWorld) -> None:
    clock = world.gov.clock
    assert isinstance(clock, FixedClock)
    run = world.run()
    world.policy(REFUNDS)
    held = refund(world, run, 150, expires_in_ms=60_000)
    clock.advance(timedelta(seconds=59))
    assert world.session.details(
        "approvals/show", {"approval_id": held["approval_id"]}
    )["status"] == "pending"
    clock.advance(timedelta(seconds=1))
    shown = world.session.details("approvals/show", {"approval_id": held["approval_id"]})
    assert shown["status"] == "expired"
    expired = world.session.call("approvals/list", {"status": "expired"})["summaries"]
    assert [a["id"] for a in expired] == [held["approval_id"]]
    assert world.session.call("approvals/list", {"status": "pending"})["summaries"] == []
    with pytest.raises(Conflict):
        world.session.call("approvals/approve", {"approval_id": held["approval_id"]})
    # The action is held again, by a new approval.
    again = refund(world, run, 150)
    assert again["outcome"] == "pending_approval"
    assert again["approval_id"] != held["approval_id"]


def test_the_default_expiry_is_one_hour(world: RunWorld) -> None:
    run = world.run()
    world.policy(REFUNDS)
    held = refund(world, run, 150)
    approval = world.session.details("approvals/show", {"approval_id": held["approval_id"]})
    waited = parse_timestamp(approval["expires_at"]) - parse_timestamp(held["decided_at"])
    assert waited == timedelta(hours=1)


def test_unknown_approvals_are_not_found(world: RunWorld) -> None:
    with pytest.raises(NotFound):
        world.session.call("approvals/approve", {"approval_id": "not-an-id"})
