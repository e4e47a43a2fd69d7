"""Back-testing: a draft judged over the recorded runs, span by span, as the run then stood."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from governance_core.errors import NotFound, NotPermitted, ValidationErrors
from governance_core.policies import backtest
from tests.policies.recording import advance, later, model_call, record
from tests.policies.support import RunWorld

BUDGET = (
    '@reason("budget") forbid (principal, action == Action::"call_model", resource)'
    " when { context.run.cost_micro_usd >= 3000 };"
)
REFUNDS = (
    '@approval("refunds over 100 need a person")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"refund")\n'
    "when { context.args has amount && context.args.amount > 100 };"
)


def backtested(world: RunWorld, source: str, **members: Any) -> dict[str, Any]:
    """The answer of ``policies/test`` for ``source`` (status left out)."""
    answer = world.session.call("policies/test", {"source": source, **members})
    assert answer.pop("status") == "success"
    return answer


def test_each_span_is_judged_as_the_run_stood_before_it(world: RunWorld) -> None:
    run = world.run()
    first = model_call(world, run, 500, 500)  # 1,500 micro-dollars after it
    second = model_call(world, run, 500, 500)  # 3,000 after it
    record(world, run, "crm.read_order")
    third = model_call(world, run, 10)
    report = backtested(world, BUDGET)
    assert (report["runs"], report["spans"]) == (1, 4)
    assert report["outcomes"] == {"allow": 3, "deny": 1, "pending_approval": 0}
    assert report["observed_outcomes"] is None
    [stopped] = report["stopped_spans"]["items"]
    assert stopped["agent_span_id"] == third and stopped["agent_instance_id"] == run
    assert stopped["action"] == {"kind": "model_call", "name": "test-model", "span_type": "llm"}
    assert (stopped["outcome"], stopped["observed_outcome"]) == ("deny", None)
    assert stopped["reasons"] == [{
        "policy_id": None, "policy_version": 1, "message": "budget", "mode": "enforce",
        "effect": "deny",
    }]
    assert report["stopped_runs"] == {"count": 1, "items": [{
        "agent_instance_id": run, "agent_id": world.agent_id,
        "environment_id": world.boot.environment_id,
        "started_at": report["stopped_runs"]["items"][0]["started_at"],
        "first_agent_span_id": third,
        "first_action": {"kind": "model_call", "name": "test-model"}, "stopped_spans": 1,
    }]}
    assert len({first, second, third}) == 3


def test_nothing_is_written(world: RunWorld) -> None:
    run = world.run()
    world.policy('@approval("ask") forbid (principal, action, resource);', name="live")
    model_call(world, run, 10)
    store = world.gov.store
    before = {table: store.count(table) for table in ("decisions", "approvals", "alerts")}
    report = backtested(world, "forbid (principal, action, resource);")
    assert report["outcomes"]["deny"] == 1
    assert {table: store.count(table) for table in before} == before


def test_observe_mode_allows_and_counts_what_enforcing_would_say(world: RunWorld) -> None:
    run = world.run()
    model_call(world, run, 5000)
    model_call(world, run, 1)
    report = backtested(world, BUDGET, mode="observe")
    assert report["policy"]["mode"] == "observe"
    assert report["outcomes"] == {"allow": 2, "deny": 0, "pending_approval": 0}
    assert report["observed_outcomes"] == {"allow": 1, "deny": 1, "pending_approval": 0}
    [stopped] = report["stopped_spans"]["items"]
    assert (stopped["outcome"], stopped["observed_outcome"]) == ("allow", "deny")
    assert stopped["reasons"][0]["mode"] == "observe"


def test_recorded_tool_calls_are_judged_with_their_arguments(world: RunWorld) -> None:
    run = world.run()
    small = record(world, run, "tool:refund", {"amount": 40})
    large = record(world, run, "tool:refund", {"amount": 250})
    otel = record(world, run, "gen_ai:execute_tool", {
        "gen_ai.tool.name": "refund", "gen_ai.tool.call.arguments": '{"amount": 150}',
    })
    report = backtested(world, REFUNDS)
    assert report["outcomes"] == {"allow": 1, "deny": 0, "pending_approval": 2}
    stopped = report["stopped_spans"]["items"]
    assert [item["agent_span_id"] for item in stopped] == [large, otel]
    assert stopped[1]["action"] == {
        "kind": "tool_call", "name": "refund", "span_type": "gen_ai:execute_tool",
    }
    assert small not in {item["agent_span_id"] for item in stopped}


def test_sensitive_arguments_are_read_with_their_values(world: RunWorld) -> None:
    run = world.run()
    record(world, run, "tool:refund",
           {"amount": {"$sensitive": "number", "labels": ["money"], "value": 500}},
           sensitive=True)
    report = backtested(world, REFUNDS)
    assert report["outcomes"]["pending_approval"] == 1
    shown = world.session.call("agent_spans/list", {"agent_instance_id": run})["summaries"]
    assert "value" not in shown[0]["payload"]["amount"]


def test_a_policy_that_cannot_be_evaluated_holds_and_is_counted(world: RunWorld) -> None:
    run = world.run()
    record(world, run, "tool:refund", {})
    report = backtested(
        world, 'forbid (principal, action, resource == Tool::"refund")'
        " when { context.args.amount > 100 };",
    )
    assert (report["errors"], report["outcomes"]["deny"]) == (1, 1)
    assert "could not be evaluated" in report["stopped_spans"]["items"][0]["reasons"][0][
        "message"]


def test_warnings_are_counted_and_stop_nothing(world: RunWorld) -> None:
    run = world.run()
    model_call(world, run, 10)
    report = backtested(world, '@warn("careful") forbid (principal, action, resource);')
    assert (report["warnings"], report["outcomes"]["allow"]) == (1, 1)
    assert report["stopped_spans"] == {"count": 0, "items": []}


def test_the_run_figures_move_span_by_span(world: RunWorld) -> None:
    run = world.run()
    record(world, run, "tool:search")
    record(world, run, "tool:search")
    record(world, run, "crm.read_patient")
    send = record(world, run, "email.send", started_at=later(world, timedelta(minutes=2)))
    report = backtested(
        world, "forbid (principal, action, resource) when {"
        " context.run.span_count == 3 && context.run.tool_calls == 2"
        ' && context.run.peak_classification == "restricted"'
        ' && context.run.data_categories.contains("health_and_medical")'
        ' && context.run.risk_level != "unknown" && context.run.elapsed_ms >= 60000'
        ' && resource.actions.contains("external_communication") };',
    )
    assert [item["agent_span_id"] for item in report["stopped_spans"]["items"]] == [send]


def test_spans_are_judged_in_start_order_not_arrival(world: RunWorld) -> None:
    run = world.run()
    late = record(world, run, "crm.read_order", started_at=later(world, timedelta(seconds=30)))
    early = record(world, run, "crm.read_order", started_at=later(world, timedelta(seconds=10)))
    report = backtested(
        world, "forbid (principal, action, resource) when { context.run.span_count == 1 };"
    )
    assert [item["agent_span_id"] for item in report["stopped_spans"]["items"]] == [late]
    assert early != late


def test_cost_today_counts_the_agents_earlier_runs_of_the_day(world: RunWorld) -> None:
    policy = (
        "forbid (principal, action, resource)"
        " when { context.agent.cost_today_micro_usd >= 2000 };"
    )
    yesterday = world.run()
    model_call(world, yesterday, 5000)
    advance(world, timedelta(days=1))
    first = world.run()
    model_call(world, first, 1500)
    model_call(world, first, 600)  # 1,500 today before it; 2,100 after
    second = world.run()
    record(world, second, "crm.read_order")  # its earlier run spent 2,100 today
    report = backtested(world, policy)
    stopped = {item["agent_instance_id"] for item in report["stopped_spans"]["items"]}
    assert stopped == {second}
    assert report["stopped_spans"]["count"] == 1


def test_the_window_agent_environment_and_scope_choose_the_runs(world: RunWorld) -> None:
    old = world.run()
    model_call(world, old, 1)
    advance(world, timedelta(days=8))
    other_agent = world.session.details("agents/create", {"name": "Other"})["id"]
    staging = world.session.details("environments/create", {"name": "Staging"})["id"]
    mine = world.run()
    theirs = world.run(other_agent)
    staged = world.run(environment_id=staging)
    for run in (mine, theirs, staged):
        model_call(world, run, 1)
    everything = "forbid (principal, action, resource);"

    def runs(**members: Any) -> set[str]:
        report = backtested(world, everything, **members)
        return {item["agent_instance_id"] for item in report["stopped_runs"]["items"]}

    assert runs() == {mine, theirs, staged}
    assert runs(days=9) == {old, mine, theirs, staged}
    assert runs(agent_id=other_agent) == {theirs}
    assert runs(environment_id=staging) == {staged}
    assert runs(scope={"agent_ids": [world.agent_id]}) == {mine, staged}
    assert runs(scope={"environment_ids": [staging]}, agent_id=other_agent) == set()


def test_a_saved_policy_is_tested_as_its_next_version(world: RunWorld) -> None:
    run = world.run()
    model_call(world, run, 5000)
    saved = world.policy(BUDGET, name="Budget", mode="observe",
                         scope={"agent_ids": [world.agent_id]})
    same = backtested(world, BUDGET, policy_id=saved["id"])
    assert same["policy"] == {
        "id": saved["id"], "name": "Budget", "mode": "observe", "version": 1,
        "scope": {"environment_ids": [], "agent_ids": [world.agent_id]},
    }
    model_call(world, run, 1)
    changed = backtested(world, BUDGET.replace("3000", "1"), policy_id=saved["id"],
                     mode="enforce")
    assert changed["policy"]["version"] == 2 and changed["policy"]["mode"] == "enforce"
    assert changed["stopped_spans"]["items"][0]["reasons"][0]["policy_id"] == saved["id"]
    world.session.call("policies/update", {"policy_id": saved["id"], "mode": "disabled"})
    assert backtested(world, BUDGET, policy_id=saved["id"])["policy"]["mode"] == "enforce"
    stranger = world.gov.session(world.gov.bootstrap(account_name="Globex").token)
    with pytest.raises(NotFound):
        stranger.call("policies/test", {"source": BUDGET, "policy_id": saved["id"]})


def test_the_lists_are_bounded_and_the_counts_whole(world: RunWorld) -> None:
    runs = [world.run() for _ in range(3)]
    for run in runs:
        model_call(world, run, 1)
        model_call(world, run, 1)
    report = backtested(world, "forbid (principal, action, resource);", limit=2)
    assert report["stopped_runs"]["count"] == 3 and len(report["stopped_runs"]["items"]) == 2
    assert report["stopped_spans"]["count"] == 6 and len(report["stopped_spans"]["items"]) == 2
    assert [item["stopped_spans"] for item in report["stopped_runs"]["items"]] == [2, 2]
    none = backtested(world, "forbid (principal, action, resource);", limit=0)
    assert none["stopped_spans"] == {"count": 6, "items": []}


def test_pages_follow_on_from_ties_of_start_time(
    world: RunWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backtest, "_SPAN_PAGE", 2)
    monkeypatch.setattr(backtest, "_RUN_PAGE", 1)
    at = later(world, timedelta(seconds=1))
    ids = []
    for _ in range(2):
        run = world.run()
        ids += [record(world, run, "crm.read_order", started_at=at) for _ in range(5)]
        ids.append(record(world, run, "crm.read_order", started_at=later(world,
                                                                          timedelta(seconds=2))))
    report = backtested(world, "forbid (principal, action, resource);")
    assert (report["runs"], report["spans"]) == (2, 12)
    assert sorted(item["agent_span_id"] for item in report["stopped_spans"]["items"]) == sorted(
        ids
    )


def test_bad_members_are_named(world: RunWorld) -> None:
    with pytest.raises(ValidationErrors) as raised:
        world.session.call("policies/test", {
            "source": "forbid (principal,", "mode": "disabled", "days": 0, "limit": 5000,
            "agent_id": world.boot.environment_id,
        })
    errors = raised.value.to_payload()["errors"]
    assert set(errors) == {"source", "mode", "days", "limit", "agent_id"}
    assert errors["source"]["message"].startswith("line 1:")
    with pytest.raises(ValidationErrors) as raised:
        world.session.call("policies/test", {})
    assert set(raised.value.to_payload()["errors"]) == {"source"}


def test_ingestion_tokens_may_not_back_test(world: RunWorld) -> None:
    issued = world.session.call("api_tokens/create", {
        "token_scope": "agent_deployment", "agent_id": world.agent_id,
        "environment_id": world.boot.environment_id,
    })
    with pytest.raises(NotPermitted):
        world.gov.session(issued["token"]).call("policies/test", {"source": BUDGET})


def test_bulk_runs_a_back_test_as_the_operation_does(world: RunWorld) -> None:
    run = world.run()
    model_call(world, run, 5000)
    model_call(world, run, 1)
    item = {"_type": "policies/test", "idempotency_key": "backtest-1", "source": BUDGET}
    in_bulk = world.session.call("bulk", {"items": [item]})["outputs"]["backtest-1"]
    alone = world.session.call("policies/test", {"source": BUDGET})
    # The clock moves a microsecond a call: the windows differ by that alone.
    assert in_bulk.pop("window")["since"] < alone.pop("window")["since"]
    assert in_bulk == alone and alone["stopped_spans"]["count"] == 1
