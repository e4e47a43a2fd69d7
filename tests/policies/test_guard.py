"""The in-process guard: allow returns, deny raises, a pending approval is waited for."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from governance_core.policies import ActionDenied, ApprovalTimedOut, guard
from tests.policies.support import RunWorld

REFUNDS = (
    '@approval("refunds over 100 need a person")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"refund")\n'
    "when { context.args has amount && context.args.amount > 100 };\n"
    'forbid (principal, action == Action::"call_tool", resource == Tool::"wipe");'
)


class Waiting:
    """A waiting clock that runs ``on_wait`` at the first wait, and counts the seconds."""

    def __init__(self, on_wait: Callable[[], object] = lambda: None) -> None:
        self.now = 0.0
        self.waits = 0
        self.on_wait = on_wait

    def sleep(self, seconds: float) -> None:
        if self.waits == 0:
            self.on_wait()
        self.waits += 1
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


def pending(world: RunWorld) -> str:
    found = world.session.call("approvals/list", {"status": "pending"})["summaries"]
    return str(found[0]["id"])


def test_guard_returns_an_allowing_decision(world: RunWorld) -> None:
    world.policy(REFUNDS)
    decision = guard(world.session, world.run(), "tool_call", "refund", {"amount": 10})
    assert decision["outcome"] == "allow"


def test_guard_raises_for_a_deny(world: RunWorld) -> None:
    world.policy(REFUNDS)
    with pytest.raises(ActionDenied) as raised:
        guard(world.session, world.run(), "tool_call", "wipe")
    assert raised.value.decision["outcome"] == "deny"
    assert not isinstance(raised.value, ApprovalTimedOut)


def test_guard_waits_for_an_approval_and_uses_it(world: RunWorld) -> None:
    world.policy(REFUNDS)
    run = world.run()
    clock = Waiting(
        lambda: world.session.call("approvals/approve", {"approval_id": pending(world)})
    )
    decision = guard(world.session, run, "tool_call", "refund", {"amount": 500},
                     poll_interval=2, sleep=clock.sleep, monotonic=clock.monotonic)
    assert decision["outcome"] == "allow"
    assert decision["reasons"][0]["approval_id"]
    assert clock.waits == 1


def test_guard_raises_for_a_rejection(world: RunWorld) -> None:
    world.policy(REFUNDS)
    run = world.run()
    clock = Waiting(lambda: world.session.call("approvals/reject", {"approval_id": pending(world)}))
    with pytest.raises(ActionDenied, match="rejected"):
        guard(world.session, run, "tool_call", "refund", {"amount": 500},
              sleep=clock.sleep, monotonic=clock.monotonic)


def test_guard_gives_up_after_its_timeout(world: RunWorld) -> None:
    world.policy(REFUNDS)
    clock = Waiting()
    with pytest.raises(ApprovalTimedOut):
        guard(world.session, world.run(), "tool_call", "refund", {"amount": 500},
              timeout=10, poll_interval=3, sleep=clock.sleep, monotonic=clock.monotonic)
    assert clock.now == 10 and clock.waits == 4


def test_an_embedding_session_decides_and_guards(world: RunWorld) -> None:
    world.policy(REFUNDS)
    run = world.run()
    assert world.session.decide(run, "tool_call", "wipe")["outcome"] == "deny"
    assert world.session.guard(run, "tool_call", "refund", {"amount": 5})["outcome"] == "allow"
    with pytest.raises(ActionDenied):
        world.session.guard(run, "tool_call", "wipe")
