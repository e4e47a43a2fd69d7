"""Deciding: outcomes, modes, scopes, warnings, reasons, the run's figures, the alert."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.errors import NotFound, NotPermitted, ValidationErrors
from tests.policies.support import RunWorld

DENY_EMAIL = 'forbid (principal, action == Action::"call_tool", resource == Tool::"email");'


def test_no_policy_allows_and_every_decision_is_kept(world: RunWorld) -> None:
    run = world.run()
    decision = world.decide(run, "tool_call", "search", {"q": "shoes"})
    assert decision["outcome"] == "allow"
    assert decision["observed_outcome"] is None
    assert decision["reasons"] == [] and decision["warnings"] == []
    assert decision["action"] == {
        "kind": "tool_call", "name": "search", "args": {"q": "shoes"}, "span_type": None,
    }
    listed = world.session.call("decisions/list", {"agent_instance_id": run})
    assert [d["id"] for d in listed["summaries"]] == [decision["id"]]
    shown = world.session.details("decisions/show", {"decision_id": decision["id"]})
    assert shown["outcome"] == "allow" and shown["approval"] is None


def test_a_matching_forbid_denies_with_its_reason(world: RunWorld) -> None:
    run = world.run()
    policy = world.policy(DENY_EMAIL, name="No email")
    denied = world.decide(run, "tool_call", "email")
    assert denied["outcome"] == "deny"
    assert denied["reasons"] == [{
        "policy_id": policy["id"], "policy_version": 1, "message": "forbidden by policy 'No email'",
        "mode": "enforce", "effect": "deny",
    }]
    assert world.decide(run, "tool_call", "search")["outcome"] == "allow"


def test_the_first_enforce_deny_raises_policy_denied_once(world: RunWorld) -> None:
    run = world.run()
    world.policy(DENY_EMAIL)
    first = world.decide(run, "tool_call", "email")
    world.decide(run, "tool_call", "email")
    alerts = world.session.call("alerts/list", {"agent_instance_id": run})["summaries"]
    assert [(a["name"], a["version"], a["severity"]) for a in alerts] == [
        ("policy_denied", 1, "error")
    ]
    assert alerts[0]["payload"]["decision_id"] == first["id"]


def test_observe_mode_allows_and_says_what_enforce_would_have(world: RunWorld) -> None:
    run = world.run()
    world.policy(DENY_EMAIL, mode="observe")
    decision = world.decide(run, "tool_call", "email")
    assert decision["outcome"] == "allow"
    assert decision["observed_outcome"] == "deny"
    assert decision["reasons"][0]["mode"] == "observe"
    assert world.session.call("alerts/list", {"agent_instance_id": run})["summaries"] == []


def test_disabled_policies_decide_nothing(world: RunWorld) -> None:
    run = world.run()
    world.policy(DENY_EMAIL, mode="disabled")
    assert world.decide(run, "tool_call", "email")["outcome"] == "allow"


def test_warn_never_blocks(world: RunWorld) -> None:
    run = world.run()
    world.policy('@warn("careful with email") ' + DENY_EMAIL)
    decision = world.decide(run, "tool_call", "email")
    assert decision["outcome"] == "allow"
    assert decision["warnings"] == ["careful with email"]
    assert decision["reasons"] == []


def test_deny_wins_over_approval_which_wins_over_allow(world: RunWorld) -> None:
    run = world.run()
    world.policy('@approval("ask") ' + DENY_EMAIL, name="ask")
    assert world.decide(run, "tool_call", "email")["outcome"] == "pending_approval"
    world.policy(DENY_EMAIL, name="deny")
    decision = world.decide(run, "tool_call", "email")
    assert decision["outcome"] == "deny"
    assert decision["approval_id"] is None
    assert sorted(r["effect"] for r in decision["reasons"]) == ["approval", "deny"]


def test_scope_limits_a_policy_to_its_agents_and_environments(world: RunWorld) -> None:
    other_agent = world.session.details("agents/create", {"name": "Other"})["id"]
    staging = world.session.details("environments/create", {"name": "Staging"})["id"]
    world.policy(DENY_EMAIL, scope={"agent_ids": [world.agent_id]})
    world.policy(
        'forbid (principal, action == Action::"call_tool", resource == Tool::"sms");',
        scope={"environment_ids": [staging]},
    )
    assert world.decide(world.run(), "tool_call", "email")["outcome"] == "deny"
    assert world.decide(world.run(other_agent), "tool_call", "email")["outcome"] == "allow"
    assert world.decide(world.run(), "tool_call", "sms")["outcome"] == "allow"
    in_staging = world.run(environment_id=staging)
    assert world.decide(in_staging, "tool_call", "sms")["outcome"] == "deny"


def test_a_scope_naming_an_unknown_resource_is_refused(world: RunWorld) -> None:
    with pytest.raises(ValidationErrors) as raised:
        world.policy(DENY_EMAIL, scope={"agent_ids": [world.boot.environment_id]})
    scope = raised.value.to_payload()["errors"]["scope"]
    assert scope["errors"]["agent_ids"]["errors"]["0"]["code"] == "unexpected_ref_type"


def test_a_scope_reads_only_its_members(world: RunWorld) -> None:
    policy = world.policy(DENY_EMAIL, scope={"details": 1, "agent_ids": None})
    assert policy["scope"] == {"environment_ids": [], "agent_ids": []}
    with pytest.raises(ValidationErrors) as raised:
        world.policy(DENY_EMAIL, scope={"environment_ids": "all"})
    scope = raised.value.to_payload()["errors"]["scope"]
    assert scope["errors"]["environment_ids"]["code"] == "invalid_value"


def test_an_update_grows_the_version_and_is_decided_at_once(world: RunWorld) -> None:
    run = world.run()
    policy = world.policy(DENY_EMAIL)
    assert world.decide(run, "tool_call", "email")["outcome"] == "deny"
    updated = world.session.details("policies/update", {
        "policy_id": policy["id"],
        "source": 'forbid (principal, action == Action::"call_tool", resource == Tool::"sms");',
    })
    assert updated["version"] == 2
    assert world.decide(run, "tool_call", "email")["outcome"] == "allow"
    denied = world.decide(run, "tool_call", "sms")
    assert denied["reasons"][0]["policy_version"] == 2
    unchanged = world.session.details("policies/update", {
        "policy_id": policy["id"], "name": updated["name"],
    })
    assert unchanged["version"] == 2
    world.session.details("policies/update", {"policy_id": policy["id"], "mode": "disabled"})
    assert world.decide(run, "tool_call", "sms")["outcome"] == "allow"


def test_the_run_figures_come_from_its_aggregates(world: RunWorld) -> None:
    run = world.run()
    world.policy(
        '@reason("budget") forbid (principal, action == Action::"call_model", resource)'
        " when { context.run.cost_micro_usd >= 3000 && context.run.input_tokens >= 1000"
        ' && context.run.output_tokens == 1000 && context.run.span_count == 2 };'
    )
    world.spend(run, 500, 500)
    assert world.decide(run, "model_call", "test-model")["outcome"] == "allow"
    world.spend(run, 500, 500)
    # 1,000 input tokens at 1 and 1,000 output tokens at 2 micro-dollars: 3,000.
    denied = world.decide(run, "model_call", "test-model")
    assert denied["outcome"] == "deny" and denied["reasons"][0]["message"] == "budget"


def test_risk_and_data_declarations_reach_the_policy(world: RunWorld) -> None:
    run = world.run()
    world.policy(
        'forbid (principal, action, resource) when {'
        ' context.run.peak_classification == "internal"'
        ' && context.run.data_categories.contains("contact_information")'
        ' && context.run.risk_level != "unknown"'
        ' && resource.actions.contains("external_communication")'
        ' && resource.classification == "unknown" };'
    )
    world.span(run, "crm.read_order")
    decision = world.decide(run, "tool_call", "send", action_members={"span_type": "email.send"})
    assert decision["outcome"] == "deny"
    # Without the span type, the resource declares nothing.
    assert world.decide(run, "tool_call", "send")["outcome"] == "allow"


def test_tool_calls_count_the_allowed_tool_calls_of_the_run(world: RunWorld) -> None:
    run = world.run()
    world.policy(
        'forbid (principal, action == Action::"call_tool", resource)'
        " when { context.run.tool_calls >= 2 };"
    )
    outcomes = [world.decide(run, "tool_call", "search")["outcome"] for _ in range(3)]
    assert outcomes == ["allow", "allow", "deny"]
    assert world.decide(world.run(), "tool_call", "search")["outcome"] == "allow"


def test_tool_calls_decided_in_one_bulk_request_count_those_before_them(
    world: RunWorld,
) -> None:
    run = world.run()
    world.policy(
        'forbid (principal, action == Action::"call_tool", resource)'
        " when { context.run.tool_calls >= 2 };"
    )
    items = [
        {"_type": "decisions/decide", "idempotency_key": f"tool-call-{number}",
         "agent_instance_id": run, "action": {"kind": "tool_call", "name": "search"}}
        for number in range(3)
    ]
    outputs = world.session.call("bulk", {"items": items})["outputs"]
    assert [outputs[f"tool-call-{number}"]["details"]["outcome"] for number in range(3)] == [
        "allow", "allow", "deny",
    ]
    # Each allowed call counts for the next, in the same transaction and after it.
    assert world.decide(run, "tool_call", "search")["outcome"] == "deny"
    assert world.decide(run, "model_call", "gpt-4o")["outcome"] == "allow"


def test_cost_today_sums_the_agents_runs_started_today(world: RunWorld) -> None:
    clock = world.gov.clock
    assert isinstance(clock, FixedClock)
    world.policy(
        'forbid (principal, action, resource)'
        " when { context.agent.cost_today_micro_usd >= 2000 };"
    )
    yesterday = world.run()
    world.spend(yesterday, 5000)
    clock.advance(timedelta(days=1))
    first = world.run()
    world.spend(first, 1500)
    second = world.run()
    assert world.decide(second, "tool_call", "search")["outcome"] == "allow"
    world.spend(second, 500)
    assert world.decide(second, "tool_call", "search")["outcome"] == "deny"


def test_elapsed_ms_counts_from_the_start(world: RunWorld) -> None:
    clock = world.gov.clock
    assert isinstance(clock, FixedClock)
    run = world.run()
    world.policy(
        "forbid (principal, action, resource) when { context.run.elapsed_ms > 60000 };"
    )
    assert world.decide(run, "tool_call", "search")["outcome"] == "allow"
    clock.advance(timedelta(minutes=2))
    assert world.decide(run, "tool_call", "search")["outcome"] == "deny"


def test_an_evaluation_error_blocks(world: RunWorld) -> None:
    run = world.run()
    world.policy(
        'forbid (principal, action == Action::"call_tool", resource == Tool::"refund")'
        " when { context.args.amount > 100 };"
    )
    assert world.decide(run, "tool_call", "refund", {"amount": 5})["outcome"] == "allow"
    failed = world.decide(run, "tool_call", "refund", {})
    assert failed["outcome"] == "deny"
    assert "could not be evaluated" in failed["reasons"][0]["message"]
    # A fraction is a Cedar decimal, which > cannot compare: held too.
    assert world.decide(run, "tool_call", "refund", {"amount": 5.5})["outcome"] == "deny"
    assert world.decide(run, "tool_call", "refund", {"amount": 5.0})["outcome"] == "allow"


def test_bad_decide_members_are_named(world: RunWorld) -> None:
    run = world.run()
    with pytest.raises(ValidationErrors) as raised:
        world.session.call("decisions/decide", {
            "agent_instance_id": run, "action": {"kind": "teleport", "args": []},
            "expires_in_ms": 5,
        })
    errors = raised.value.to_payload()["errors"]
    assert set(errors["action"]["errors"]) == {"kind", "name", "args"}
    assert errors["expires_in_ms"]["code"] == "invalid_value"


def test_ingestion_tokens_decide_for_their_own_runs_only(world: RunWorld) -> None:
    run = world.run()
    issued = world.session.call("api_tokens/create", {
        "token_scope": "agent_deployment", "agent_id": world.agent_id,
        "environment_id": world.boot.environment_id,
    })
    ingestion = world.gov.session(issued["token"])
    decision = world.decide(run, "tool_call", "search", session=ingestion)
    assert ingestion.details("decisions/show", {"decision_id": decision["id"]})["id"]
    other_agent = world.session.details("agents/create", {"name": "Other"})["id"]
    foreign = world.run(other_agent)
    foreign_decision = world.decide(foreign, "tool_call", "search")
    with pytest.raises(NotFound):
        world.decide(foreign, "tool_call", "search", session=ingestion)
    with pytest.raises(NotFound):
        ingestion.call("decisions/show", {"decision_id": foreign_decision["id"]})
    listed = ingestion.call("decisions/list", {})["summaries"]
    assert [d["id"] for d in listed] == [decision["id"]]
    with pytest.raises(NotPermitted):
        ingestion.call("policies/create", {"name": "x", "source": DENY_EMAIL})
    with pytest.raises(NotPermitted):
        ingestion.call("approvals/list", {})


def test_other_accounts_see_nothing(world: RunWorld) -> None:
    run = world.run()
    policy = world.policy(DENY_EMAIL)
    decision = world.decide(run, "tool_call", "email")
    stranger = world.gov.session(world.gov.bootstrap(account_name="Globex").token)
    with pytest.raises(NotFound):
        stranger.call("policies/show", {"policy_id": policy["id"]})
    with pytest.raises(NotFound):
        stranger.call("decisions/show", {"decision_id": decision["id"]})
    assert stranger.call("decisions/list", {})["summaries"] == []
    assert stranger.call("policies/list", {})["summaries"] == []


def test_only_what_the_policies_that_can_hold_an_action_read_is_computed(
    world: RunWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    from governance_core.policies import deciding

    run = world.run()
    world.policy('forbid (principal, action == Action::"call_tool", resource == Tool::"refund")'
                 " when { context.run.tool_calls >= 1 };")
    world.policy('forbid (principal, action == Action::"call_model", resource)'
                 " when { context.agent.cost_today_micro_usd >= 1 };")
    asked: list[tuple[str, ...]] = []
    counted, queried = world.gov.store.count, world.gov.store.query

    def count(table: str, filters: object = ()) -> int:
        asked.append(("count", table))
        return counted(table, filters)  # type: ignore[arg-type]

    def query(table: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        asked.append(("query", table))
        return queried(table, *args, **kwargs)

    def decisions_read() -> list[tuple[str, ...]]:
        read = [step for step in asked if step[0] == "count" or step[1] == "decisions"]
        asked.clear()
        return read

    monkeypatch.setattr(world.gov.store, "count", count)
    monkeypatch.setattr(world.gov.store, "query", query)
    together = getattr(world.gov.store, "read_together", None)
    if together is not None:
        # PostgreSQL reads a decision's first records and queries together: each query so
        # read is one read of its table.
        def read_together(keys: Any, queries: Any) -> Any:
            asked.extend(("query", asked_query.table) for asked_query in queries)
            return together(keys, queries)

        monkeypatch.setattr(world.gov.store, "read_together", read_together)
    sent: list[dict[str, object]] = []
    built = deciding.policy_request

    def request(*args: object) -> object:
        made = built(*args)  # type: ignore[arg-type]
        sent.append(made[0]["context"])
        return made

    monkeypatch.setattr(deciding, "policy_request", request)
    # No statement can hold a search: nothing is counted for the policies, nothing asked of
    # the engine. The one read is of the run's last allowed tool call, which the search,
    # allowed, is numbered after.
    assert world.decide(run, "tool_call", "search")["outcome"] == "allow"
    assert decisions_read() == [("query", "decisions")] and sent == []
    # A refund: the run's tool calls (the allowed search) are read once, from that number
    # (not counted), and only they are sent.
    assert world.decide(run, "tool_call", "refund", {"amount": 5})["outcome"] == "deny"
    assert decisions_read() == [("query", "decisions")]
    assert sent == [{"run": {"tool_calls": 1}}]
