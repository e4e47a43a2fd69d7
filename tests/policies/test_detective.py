"""The detective judge: the live policies on spans just recorded, called inside a transaction."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from governance_core.policies import detective, recorded
from governance_core.policies.detective import (
    RECORDED_KIND_PREFIX,
    RecordedJudgement,
    judge_recorded,
    keep_recorded,
)
from governance_core.policies.engine import CompiledSet
from governance_core.repository import Record
from tests.policies.recording import model_call, record
from tests.policies.support import RunWorld

NO_EMAIL = '@reason("no email") forbid (principal, action, resource == SpanType::"email.send");'
REFUNDS = (
    '@approval("refunds over 100 need a person")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"refund")\n'
    "when { context.args has amount && context.args.amount > 100 };"
)


def judged(
    world: RunWorld, run: str, batch: Callable[[], list[str]]
) -> tuple[RecordedJudgement, Record, list[str]]:
    """Record ``batch``'s spans, then judge and keep them as the span write path would.

    Answers the judgement, the run as kept and the spans' ids.
    """
    store = world.gov.store
    before = store.get("agent_instances", run)
    assert before is not None
    # Recorded without detective mode, so that this judgement is the spans' only one.
    config = world.gov.config
    world.gov.config = attrs.evolve(config, judge_recorded_spans=False)
    try:
        ids = batch()
    finally:
        world.gov.config = config
    spans = [store.get("agent_spans", span_id) for span_id in ids]
    ctx = world.gov.context(world.session.principal)
    with store.transaction():
        judgement = judge_recorded(ctx, before, [s for s in spans if s is not None])
        after = store.get("agent_instances", run)
        assert after is not None
        kept = keep_recorded(ctx, after, judgement)
    return judgement, kept, ids


def decisions(world: RunWorld, run: str) -> list[dict[str, Any]]:
    listed = world.session.call("decisions/list", {"agent_instance_id": run})
    return list(listed["summaries"])


def alerts(world: RunWorld, run: str) -> list[dict[str, Any]]:
    return list(world.session.call("alerts/list", {"agent_instance_id": run})["summaries"])


def test_an_enforced_deny_is_kept_and_raises_the_alert_once(world: RunWorld) -> None:
    policy = world.policy(NO_EMAIL, name="No email")
    run = world.run()
    judgement, kept, (_, sent) = judged(world, run, lambda: [
        record(world, run, "crm.read_order"), record(world, run, "email.send"),
    ])
    assert judgement.alert_due is True
    [decision] = decisions(world, run)
    assert decision["id"] == judgement.decisions[0]["id"]
    assert decision["agent_span_id"] == sent and decision["outcome"] == "deny"
    assert decision["action"] == {
        "kind": "span", "name": "email.send", "args": {}, "span_type": "email.send",
    }
    assert decision["reasons"] == [{
        "policy_id": policy["id"], "policy_version": 1, "message": "no email",
        "mode": "enforce", "effect": "deny",
    }]
    stored = world.gov.store.get("decisions", decision["id"])
    assert stored is not None and stored["action_kind"] == RECORDED_KIND_PREFIX + "span"
    [alert] = alerts(world, run)
    assert (alert["name"], alert["payload"]["decision_id"]) == ("policy_denied", decision["id"])
    assert kept["raised_alert_count"] == 1
    again, _, _ = judged(world, run, lambda: [record(world, run, "email.send")])
    assert again.alert_due is False and len(again.decisions) == 1
    assert len(alerts(world, run)) == 1


def test_observe_mode_and_warnings_are_kept_and_raise_nothing(world: RunWorld) -> None:
    world.policy(NO_EMAIL, mode="observe")
    world.policy('@warn("a model was called") forbid (principal, action, resource is Model);')
    run = world.run()
    judgement, _, _ = judged(world, run, lambda: [
        record(world, run, "email.send"), model_call(world, run, 10),
        record(world, run, "crm.read_order"),
    ])
    assert judgement.alert_due is False
    shown = [(d["action"]["name"], d["outcome"], d["observed_outcome"], d["warnings"])
             for d in judgement.decisions]
    assert shown == [
        ("email.send", "allow", "deny", []),
        ("test-model", "allow", "allow", ["a model was called"]),
    ]
    assert alerts(world, run) == []


def test_an_allow_with_nothing_to_say_is_not_kept(world: RunWorld) -> None:
    world.policy(NO_EMAIL)
    run = world.run()
    judgement, _, _ = judged(world, run, lambda: [record(world, run, "crm.read_order")])
    assert judgement == RecordedJudgement()
    assert decisions(world, run) == []


def test_the_figures_start_from_the_stored_run_and_move_through_the_batch(
    world: RunWorld,
) -> None:
    world.policy("forbid (principal, action, resource) when { context.run.span_count >= 2 };")
    run = world.run()
    record(world, run, "crm.read_order")
    judgement, _, (_, second) = judged(world, run, lambda: [
        record(world, run, "crm.read_order"), record(world, run, "crm.read_order"),
    ])
    assert [d["agent_span_id"] for d in judgement.decisions] == [second]


def test_a_daily_budget_counts_the_agents_other_runs_of_the_day_and_this_one_so_far(
    world: RunWorld,
) -> None:
    world.policy(
        "forbid (principal, action, resource)"
        " when { context.agent.cost_today_micro_usd >= 2000 };"
    )
    other = world.run()
    model_call(world, other, 1500)
    run = world.run()
    # The day's cost as the store keeps it holds all three calls of the run by the time they
    # are judged: each is judged with the other run's 1,500 and this run's cost before it.
    judgement, _, (_, _, third) = judged(world, run, lambda: [
        model_call(world, run, 400), model_call(world, run, 400), model_call(world, run, 400),
    ])
    assert [d["agent_span_id"] for d in judgement.decisions] == [third]


def test_a_recorded_span_asks_with_what_the_statements_that_can_hold_it_read(
    world: RunWorld, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The refunds policy reads a tool call's arguments and the rate policy its run's tool
    # calls; a model call is held by neither, only by the budget, which reads the run's cost.
    world.policy(REFUNDS)
    world.policy('forbid (principal, action == Action::"call_tool", resource)'
                 " when { context.run.tool_calls >= 100 };")
    world.policy('forbid (principal, action == Action::"call_model", resource)'
                 " when { context.run.cost_micro_usd >= 1000000000 };")
    asked: list[dict[str, Any]] = []
    evaluate_many = CompiledSet.evaluate_many

    def noting(self: CompiledSet, requests: Any, entities: Any) -> Any:
        asked.extend(requests)
        return evaluate_many(self, requests, entities)

    monkeypatch.setattr(CompiledSet, "evaluate_many", noting)
    run = world.run()
    judged(world, run, lambda: [
        model_call(world, run, 10),
        record(world, run, "tool:refund", {"amount": 150}),
    ])
    contexts = [json.loads(request["context"]) for request in asked]
    # As a live decide asks: no arguments nor tool calls for the model call, and the tool
    # call's arguments and tool calls without its cost.
    assert contexts == [
        {"run": {"cost_micro_usd": 0}},
        {"args": {"amount": 150}, "run": {"tool_calls": 0}},
    ]


def test_an_action_held_for_approval_is_denied_unless_approved(world: RunWorld) -> None:
    world.policy(REFUNDS)
    run = world.run()
    unapproved, _, _ = judged(world, run, lambda: [record(world, run, "tool:refund",
                                                       {"amount": 250})])
    [decision] = unapproved.decisions
    assert decision["outcome"] == "deny" and unapproved.alert_due is True
    assert decision["reasons"][0]["message"].endswith("(recorded without an approval)")
    pending = world.decide(run, "tool_call", "refund", {"amount": 300})
    world.session.call("approvals/approve", {"approval_id": pending["approval_id"]})
    approved, _, _ = judged(world, run, lambda: [record(world, run, "tool:refund",
                                                     {"amount": 300})])
    [decision] = approved.decisions
    assert decision["outcome"] == "allow"
    assert decision["reasons"][0]["approval_id"] == pending["approval_id"]


ARGS_READ_ELSEWHERE = (
    'forbid (principal, action == Action::"call_tool", resource == Tool::"wire")'
    " when { context.args has iban };"
)


def secret(value: Any) -> dict[str, Any]:
    kind = "number" if isinstance(value, int) else "string"
    return {"$sensitive": kind, "value": value}


def test_a_sensitive_spans_values_are_read_only_when_its_statements_read_arguments(
    world: RunWorld, monkeypatch: pytest.MonkeyPatch,
) -> None:
    world.policy(REFUNDS)
    world.policy('@reason("no lookups") forbid (principal, action == Action::"call_tool",'
                 ' resource == Tool::"lookup");')
    read: list[str] = []
    load_values = recorded.load_values

    def noting(ctx: Any, owner_id: str) -> Any:
        read.append(owner_id)
        return load_values(ctx, owner_id)

    monkeypatch.setattr(recorded, "load_values", noting)
    run = world.run()
    judgement, _, (looked_up, refunded) = judged(world, run, lambda: [
        record(world, run, "tool:lookup", {"customer": secret("Ada")}, sensitive=True),
        record(world, run, "tool:refund", {"amount": secret(250)}, sensitive=True),
    ])
    # The lookup's statement reads no arguments: its values stay where they are kept.
    assert read == [refunded]
    assert [(d["agent_span_id"], d["outcome"]) for d in judgement.decisions] == [
        (looked_up, "deny"), (refunded, "deny"),
    ]


def test_a_sensitive_action_held_for_approval_finds_its_approval_by_its_values(
    world: RunWorld,
) -> None:
    # The approval reads no arguments, but finding it does: by the digest of the arguments
    # decided, which the span holds as values kept apart.
    world.policy('@approval("refunds need a person") forbid (principal,'
                 ' action == Action::"call_tool", resource == Tool::"refund");')
    world.policy(ARGS_READ_ELSEWHERE)
    run = world.run()
    pending = world.decide(run, "tool_call", "refund", {"amount": 300})
    world.session.call("approvals/approve", {"approval_id": pending["approval_id"]})
    approved, _, _ = judged(world, run, lambda: [
        record(world, run, "tool:refund", {"amount": secret(300)}, sensitive=True),
    ])
    [decision] = approved.decisions
    assert decision["outcome"] == "allow"
    assert decision["reasons"][0]["approval_id"] == pending["approval_id"]


def test_an_action_held_by_an_approval_reading_no_arguments_finds_it_by_its_arguments(
    world: RunWorld,
) -> None:
    # No live policy reads arguments, yet the approval binds the arguments decided.
    world.policy('@approval("refunds need a person") forbid (principal,'
                 ' action == Action::"call_tool", resource == Tool::"refund");')
    run = world.run()
    pending = world.decide(run, "tool_call", "refund", {"amount": 300})
    world.session.call("approvals/approve", {"approval_id": pending["approval_id"]})
    approved, _, _ = judged(world, run, lambda: [
        record(world, run, "tool:refund", {"amount": 300}),
        record(world, run, "tool:refund", {"amount": 301}),
    ])
    assert [d["outcome"] for d in approved.decisions] == ["allow", "deny"]
    assert approved.decisions[0]["reasons"][0]["approval_id"] == pending["approval_id"]


def test_a_model_named_by_a_sensitive_value_is_judged_by_that_name(world: RunWorld) -> None:
    world.policy('forbid (principal, action == Action::"call_model",'
                 ' resource == Model::"secret-model");')
    world.policy(ARGS_READ_ELSEWHERE)
    run = world.run()
    judgement, _, (called,) = judged(world, run, lambda: [
        record(world, run, "llm", {"model": secret("secret-model")}, sensitive=True,
               result={"usage": {"input_tokens": 10, "output_tokens": 0}}),
    ])
    assert [(d["agent_span_id"], d["action"]["name"]) for d in judgement.decisions] == [
        (called, "secret-model"),
    ]


def test_recorded_tool_calls_do_not_count_as_decided_ones(world: RunWorld) -> None:
    world.policy('@warn("tool") forbid (principal, action == Action::"call_tool", resource);')
    world.policy(
        'forbid (principal, action == Action::"call_tool", resource == Tool::"search")'
        " when { context.run.tool_calls >= 1 };"
    )
    run = world.run()
    judgement, _, _ = judged(world, run, lambda: [record(world, run, "tool:lookup")])
    assert [d["outcome"] for d in judgement.decisions] == ["allow"]
    assert world.decide(run, "tool_call", "search")["outcome"] == "allow"
    assert world.decide(run, "tool_call", "search")["outcome"] == "deny"


def test_runs_out_of_scope_and_accounts_without_policies_are_not_judged(
    world: RunWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = world.run()
    assert judged(world, run, lambda: [record(world, run, "email.send")])[0] == (
        RecordedJudgement()
    )
    other_agent = world.session.details("agents/create", {"name": "Other"})["id"]
    world.policy(NO_EMAIL, scope={"agent_ids": [other_agent]})
    assert judged(world, run, lambda: [record(world, run, "email.send")])[0] == (
        RecordedJudgement()
    )
    theirs = world.run(other_agent)
    assert len(judged(world, theirs, lambda: [record(world, theirs, "email.send")])[0]
               .decisions) == 1
    monkeypatch.setattr(detective, "engine_available", lambda: False)
    assert judged(world, theirs, lambda: [record(world, theirs, "email.send")])[0] == (
        RecordedJudgement()
    )
