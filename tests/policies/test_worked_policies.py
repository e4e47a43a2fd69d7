"""The worked policies of docs/policies.md, loaded from the page and decided against runs."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from governance_core.clock import FixedClock
from tests.policies.support import RunWorld

PAGE = Path(__file__).resolve().parents[2] / "docs" / "policies.md"
WORKED = re.compile(r"<!-- policy: ([\w-]+) -->\n```cedar\n(.*?)```", re.S)


def worked() -> dict[str, str]:
    """Each worked policy of the page, by its marker name."""
    return dict(WORKED.findall(PAGE.read_text(encoding="utf-8")))


def test_the_page_holds_every_worked_policy() -> None:
    assert set(worked()) == {
        "run-budget", "daily-budget", "tool-allow-list", "no-exfiltration", "refund-approval",
        "tool-call-rate", "cost-warning",
    }


@pytest.mark.parametrize("name", sorted(worked()))
def test_each_worked_policy_is_accepted(world: RunWorld, name: str) -> None:
    check = world.session.call("policies/validate", {"source": worked()[name]})
    assert check["valid"], check["problems"]


def test_run_budget(world: RunWorld) -> None:
    world.policy(worked()["run-budget"])
    run = world.run()
    world.spend(run, 4_000_000, 400_000)  # 4.0 + 0.8 USD
    assert world.decide(run, "model_call", "test-model")["outcome"] == "allow"
    world.spend(run, 200_000)  # 5.0 USD
    denied = world.decide(run, "model_call", "test-model")
    assert denied["outcome"] == "deny"
    assert denied["reasons"][0]["message"] == "this run has spent its budget of 5 USD"
    assert world.decide(run, "tool_call", "search")["outcome"] == "allow"
    assert world.decide(world.run(), "model_call", "test-model")["outcome"] == "allow"


def test_daily_budget(world: RunWorld) -> None:
    clock = world.gov.clock
    assert isinstance(clock, FixedClock)
    world.policy(worked()["daily-budget"])
    for _ in range(2):
        world.spend(world.run(), 20_000_000)  # 20 USD a run
    run = world.run()
    assert world.decide(run, "tool_call", "search")["outcome"] == "allow"
    world.spend(run, 10_000_000)
    assert world.decide(run, "tool_call", "search")["outcome"] == "deny"
    assert world.decide(run, "span", "llm")["outcome"] == "allow"
    clock.advance(timedelta(days=1))
    assert world.decide(world.run(), "tool_call", "search")["outcome"] == "allow"


def test_tool_allow_list_in_one_environment(world: RunWorld) -> None:
    production = world.boot.environment_id
    staging = world.session.details("environments/create", {"name": "Staging"})["id"]
    world.policy(worked()["tool-allow-list"], scope={"environment_ids": [production]})
    run = world.run()
    assert world.decide(run, "tool_call", "search")["outcome"] == "allow"
    assert world.decide(run, "tool_call", "lookup_order")["outcome"] == "allow"
    assert world.decide(run, "tool_call", "delete_account")["outcome"] == "deny"
    elsewhere = world.run(environment_id=staging)
    assert world.decide(elsewhere, "tool_call", "delete_account")["outcome"] == "allow"


@pytest.mark.parametrize(("read", "blocked"), [
    (None, False), ("crm.read_order", False), ("crm.read_patient", True),
])
def test_no_external_communication_after_restricted_data(
    world: RunWorld, read: str | None, blocked: bool
) -> None:
    world.policy(worked()["no-exfiltration"])
    run = world.run()
    if read is not None:
        world.span(run, read)
    email = world.decide(run, "tool_call", "send_email", action_members={"span_type": "email.send"})
    assert email["outcome"] == ("deny" if blocked else "allow")
    assert world.decide(run, "span", "email.send")["outcome"] == email["outcome"]
    lookup = world.decide(
        run, "tool_call", "lookup", action_members={"span_type": "crm.read_order"}
    )
    assert lookup["outcome"] == "allow"


def test_refunds_over_100_need_approval(world: RunWorld) -> None:
    world.policy(worked()["refund-approval"])
    run = world.run()
    assert world.decide(run, "tool_call", "refund", {"amount": 100})["outcome"] == "allow"
    held = world.decide(run, "tool_call", "refund", {"amount": 101})
    assert held["outcome"] == "pending_approval"
    assert held["reasons"][0]["message"] == "refunds over 100 need a person's approval"
    world.session.call("approvals/approve", {"approval_id": held["approval_id"]})
    assert world.decide(run, "tool_call", "refund", {"amount": 101})["outcome"] == "allow"


def test_tool_call_rate(world: RunWorld) -> None:
    world.policy(worked()["tool-call-rate"])
    run = world.run()
    outcomes = [world.decide(run, "tool_call", "search")["outcome"] for _ in range(21)]
    assert outcomes == ["allow"] * 20 + ["deny"]
    assert world.decide(run, "model_call", "test-model")["outcome"] == "allow"


def test_cost_warning(world: RunWorld) -> None:
    world.policy(worked()["cost-warning"])
    run = world.run()
    world.spend(run, 1_000_000)
    decision = world.decide(run, "model_call", "test-model")
    assert decision["outcome"] == "allow"
    assert decision["warnings"] == ["this run has spent more than 1 USD"]
