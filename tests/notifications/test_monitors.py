"""Monitors: the level rule with hysteresis, and evaluation over a window on an injected clock."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governance_core.clock import FixedClock, parse_timestamp
from governance_core.context import Config
from governance_core.errors import ValidationErrors
from governance_core.ids import SeededIds
from governance_core.notifications.monitors import level_after
from governance_core.service import Governance
from tests.core.runs import Caller, account_caller, make_agent, register
from tests.notifications.conftest import LOOPBACK_ONLY
from tests.notifications.world import deliveries, destination
from tests.policies.support import run_world
from tests.stores import STORE_KINDS, make_store


def walk(values: Sequence[float | None], hysteresis: float, comparison: str = "gt") -> list[str]:
    level, levels = "unknown", []
    for value in values:
        level = level_after(level, value, comparison, 50.0, 80.0, hysteresis)
        levels.append(level)
    return levels


def test_levels_are_entered_at_their_thresholds() -> None:
    assert walk([10, 51, 81, 60, 10], 0) == ["ok", "warning", "critical", "warning", "ok"]
    assert walk([50, 80], 0) == ["ok", "warning"], "gt: the threshold itself does not pass"
    assert walk([50, 80], 0, "ge") == ["warning", "critical"]
    assert level_after("ok", 40, "lt", 50, 20, 5) == "warning"
    assert level_after("warning", 52, "lt", 50, 20, 5) == "warning"
    assert level_after("warning", 55, "lt", 50, 20, 5) == "ok"


def test_a_value_hovering_at_a_threshold_does_not_flap_with_hysteresis() -> None:
    hovering = [49.0, 51.0, 49.5, 50.5, 48.0, 51.0, 49.0]
    assert walk(hovering, 0) == [
        "ok", "warning", "ok", "warning", "ok", "warning", "ok"]
    assert walk(hovering, 5) == ["ok"] + ["warning"] * 6
    assert walk([51, 46, 45, 44.9], 5) == ["warning", "warning", "ok", "ok"]
    assert walk([85, 76, 75], 5) == ["critical", "critical", "warning"]


def test_no_data_keeps_the_level() -> None:
    assert walk([None], 0) == ["ok"]
    assert walk([60, None, None], 0) == ["warning", "warning", "warning"]


@given(st.lists(st.floats(0, 100), max_size=30), st.floats(0, 20))
def test_hysteresis_never_raises_more_often(values: list[float], hysteresis: float) -> None:
    def raised(levels: list[str]) -> int:
        """How often the level left ok (each time an alert is raised)."""
        return sum(a == "ok" and b != "ok" for a, b in zip(["ok", *levels], levels, strict=False))

    with_margin, without = walk(list(values), hysteresis), walk(list(values), 0)
    assert raised(with_margin) <= raised(without)
    # Never less alarmed than without a margin: a margin only holds a level longer.
    rank = {"ok": 0, "warning": 1, "critical": 2}
    assert all(rank[a] >= rank[b] for a, b in zip(with_margin, without, strict=True))


@pytest.fixture(params=STORE_KINDS)
def clocked(request: pytest.FixtureRequest) -> Iterator[tuple[Governance, FixedClock]]:
    clock = FixedClock()
    governance = Governance(make_store(request.param), clock=clock, ids=SeededIds(3),
                            config=Config(webhook_allowed_networks=LOOPBACK_ONLY))
    yield governance, clock
    governance.close()


def finished_run(caller: Caller, agent_id: str, status: str = "complete") -> str:
    run_id: str = register(caller, agent_id)["id"]
    caller.call("agent_instances/start", agent_instance_id=run_id)
    caller.call("agent_instances/finish", agent_instance_id=run_id, status=status)
    return run_id


def test_a_monitor_raises_and_clears_its_alert_as_the_window_moves(
    clocked: tuple[Governance, FixedClock],
) -> None:
    gov, clock = clocked
    caller = account_caller(gov, gov.bootstrap())
    destination(caller, "https://hooks.example.com/")
    agent = make_agent(caller)
    monitor = caller.details(
        "monitors/create", name="failures", metric="failed_runs", agent_id=agent["id"],
        window_seconds=3600, warning=1, critical=3, comparison="ge", hysteresis=0,
    )
    assert monitor["level"] == "unknown"
    finished_run(caller, agent["id"])
    [evaluated] = caller.call("monitors/evaluate")["evaluated"]
    assert evaluated["level"] == "ok" and evaluated["last_value"] == 0
    assert deliveries(caller) == [], "leaving unknown for ok is no news"

    latest = finished_run(caller, agent["id"], status="failed")
    clock.advance(timedelta(seconds=60))
    [evaluated] = caller.call("monitors/evaluate")["evaluated"]
    assert evaluated["level"] == "warning" and evaluated["alert_instance_id"] == latest
    [alert] = caller.call("alerts/list", agent_instance_id=latest)["summaries"]
    assert alert["name"] == "monitor:failures" and alert["severity"] == "warning"
    assert alert["payload"]["value"] == 1 and alert["payload"]["threshold"] == 1

    assert caller.call("monitors/evaluate")["evaluated"] == [], "not due for a minute"
    clock.advance(timedelta(hours=1, seconds=1))
    [evaluated] = caller.call("monitors/evaluate")["evaluated"]
    assert evaluated["level"] == "ok" and evaluated["alert_instance_id"] is None
    alert = caller.details("alerts/show", alert_id=alert["id"])
    assert alert["status"] == "cleared"
    types = [row["event_type"] for row in deliveries(caller)]
    assert types == ["alert.raised", "monitor.state_changed", "alert.cleared",
                     "monitor.state_changed"]


def test_metrics_over_the_window(clocked: tuple[Governance, FixedClock]) -> None:
    gov, clock = clocked
    caller = account_caller(gov, gov.bootstrap())
    agent = make_agent(caller)
    other = make_agent(caller, name="Other")
    finished_run(caller, agent["id"])
    finished_run(caller, agent["id"], status="failed")
    finished_run(caller, agent["id"], status="failed")
    register(caller, agent["id"])
    finished_run(caller, other["id"], status="failed")

    def value(metric: str, **scope: Any) -> float | None:
        made = caller.details("monitors/create", name=metric + str(scope), metric=metric,
                              window_seconds=600, warning=1e9, **scope)
        [evaluated] = caller.call("monitors/evaluate", monitor_id=made["id"])["evaluated"]
        result: float | None = evaluated["last_value"]
        return result

    assert value("run_count", agent_id=agent["id"]) == 3, "a registered run has not started"
    assert value("failed_runs", agent_id=agent["id"]) == 2
    assert value("error_rate", agent_id=agent["id"]) == pytest.approx(2 / 3)
    assert value("failed_runs") == 3
    assert value("p95_duration_seconds", agent_id=agent["id"]) is not None
    assert value("tokens", agent_id=agent["id"]) == 0
    assert value("quality_score_average") is None
    clock.advance(timedelta(minutes=11))
    assert value("run_count", agent_id=agent["id"]) == 0


def test_counts_cost_and_durations_are_read_from_the_store_not_from_each_run(
    clocked: tuple[Governance, FixedClock], monkeypatch: pytest.MonkeyPatch,
) -> None:
    gov, clock = clocked
    caller = account_caller(gov, gov.bootstrap())
    agent = make_agent(caller)
    runs = []
    for seconds, status in ((2, "complete"), (5, "failed"), (1, "cancelled")):
        run_id = register(caller, agent["id"], span_type_schemas=[
            {"name": "llm", "params_schema": {"type": "object"}},
        ])["id"]
        caller.call("agent_instances/start", agent_instance_id=run_id)
        caller.call("agent_spans/create", agent_instance_id=run_id, schema_name="llm",
                    status="complete", payload={"model": "gpt-4o", "token_usage": {
                        "prompt_tokens": 1000 * seconds, "completion_tokens": 100}})
        clock.advance(timedelta(seconds=seconds))
        caller.call("agent_instances/finish", agent_instance_id=run_id, status=status)
        runs.append(caller.details("agent_instances/show", agent_instance_id=run_id))
    register(caller, agent["id"])
    metrics = ("run_count", "failed_runs", "error_rate", "cost_usd", "p95_duration_seconds")
    made = {
        metric: caller.details("monitors/create", name=metric, metric=metric,
                               agent_id=agent["id"], window_seconds=600, warning=1e9)["id"]
        for metric in metrics
    }
    queried = gov.store.query

    def query(table: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        # However many runs the window holds, none is read to measure these.
        assert table != "agent_instances", "a run was read"
        return queried(table, *args, **kwargs)

    monkeypatch.setattr(gov.store, "query", query)
    values = {
        metric: caller.call("monitors/evaluate", monitor_id=monitor_id)["evaluated"][0][
            "last_value"
        ]
        for metric, monitor_id in made.items()
    }
    durations = sorted(
        (parse_timestamp(run["finished_at"]) - parse_timestamp(run["started_at"]))
        // timedelta(milliseconds=1) for run in runs
    )
    costs = [Decimal(str(run["cost_breakdown"]["total_cost"])) for run in runs]
    assert values["run_count"] == 3 and values["failed_runs"] == 1
    assert values["error_rate"] == pytest.approx(1 / 3)
    # The runs' cost as their pages show it; the 95th percentile of three is the longest.
    assert values["cost_usd"] == pytest.approx(float(sum(costs)))
    assert values["p95_duration_seconds"] == durations[-1] / 1000


def test_a_monitor_with_no_run_changes_state_without_an_alert(
    clocked: tuple[Governance, FixedClock],
) -> None:
    gov, _ = clocked
    caller = account_caller(gov, gov.bootstrap())
    caller.details("monitors/create", name="quiet", metric="run_count", comparison="lt",
                   window_seconds=3600, warning=1)
    [evaluated] = caller.call("monitors/evaluate")["evaluated"]
    assert evaluated["level"] == "warning" and evaluated["alert_instance_id"] is None
    events = caller.call("notification_events/list")["summaries"]
    assert [event["event_type"] for event in events] == ["monitor.state_changed"]
    assert events[0]["data"]["level"] == "warning"


def test_bad_monitors_are_refused_field_by_field(clocked: tuple[Governance, FixedClock]) -> None:
    gov, _ = clocked
    caller = account_caller(gov, gov.bootstrap())
    with pytest.raises(ValidationErrors) as raised:
        caller.call("monitors/create", name="x", metric="vibes", window_seconds=5,
                    warning="high", hysteresis=-1)
    assert set(raised.value.errors) == {"metric", "window_seconds", "warning", "hysteresis"}
    with pytest.raises(ValidationErrors) as raised:
        caller.call("monitors/create", name="x", metric="run_count", window_seconds=60)
    assert set(raised.value.errors) == {"warning"}
    with pytest.raises(ValidationErrors) as raised:
        caller.call("monitors/create", name="x", metric="run_count", window_seconds=60,
                    warning=10, critical=5)
    assert set(raised.value.errors) == {"critical"}
    with pytest.raises(ValidationErrors) as raised:
        caller.call("monitors/create", name="x", metric="run_count", window_seconds=60,
                    warning=1, agent_id="0" * 32)
    assert set(raised.value.errors) == {"agent_id"}


def test_a_monitor_is_updated_versioned_and_deleted(
    clocked: tuple[Governance, FixedClock],
) -> None:
    gov, _ = clocked
    caller = account_caller(gov, gov.bootstrap())
    made = caller.details("monitors/create", name="m", metric="run_count",
                          window_seconds=60, warning=1)
    updated = caller.details("monitors/update", monitor_id=made["id"], critical=5,
                             status="paused")
    assert updated["version"] == 2 and updated["critical"] == 5 and updated["status"] == "paused"
    assert caller.call("monitors/evaluate")["evaluated"] == [], "a paused monitor waits"
    same = caller.details("monitors/update", monitor_id=made["id"], critical=5)
    assert same["version"] == 2
    caller.call("monitors/delete", monitor_id=made["id"])
    assert caller.call("monitors/list")["summaries"] == []


def test_policy_denials_count_enforce_denials_in_the_window_per_scope(
    clocked: tuple[Governance, FixedClock],
) -> None:
    gov, clock = clocked
    world = run_world(gov, gov.bootstrap())
    other = world.session.details("agents/create", {"name": "Other"})["id"]
    staging = world.session.details("environments/create", {"name": "staging"})["id"]
    world.policy('forbid (principal, action == Action::"call_tool", resource == Tool::"email");')
    world.policy('forbid (principal, action == Action::"call_tool", resource == Tool::"sms");',
                 name="observed", mode="observe")
    run, other_run = world.run(), world.run(other)
    staged = world.run(environment_id=staging)
    outcomes = [
        world.decide(run, "tool_call", "email")["outcome"],
        world.decide(run, "tool_call", "sms")["outcome"],
        world.decide(run, "tool_call", "search")["outcome"],
        world.decide(other_run, "tool_call", "email")["outcome"],
        world.decide(staged, "tool_call", "email")["outcome"],
    ]
    assert outcomes == ["deny", "allow", "allow", "deny", "deny"]

    def denials(**scope: Any) -> float | None:
        made = world.session.details("monitors/create", {
            "name": f"denials {scope} {clock.now}", "metric": "policy_denials",
            "window_seconds": 600, "warning": 1, "comparison": "ge", **scope,
        })
        [evaluated] = world.session.call(
            "monitors/evaluate", {"monitor_id": made["id"]})["evaluated"]
        assert evaluated["level"] == ("warning" if evaluated["last_value"] else "ok")
        result: float | None = evaluated["last_value"]
        return result

    assert denials(agent_id=world.agent_id) == 2, "the observe-mode deny was allowed"
    assert denials(agent_id=other) == 1
    assert denials(environment_id=staging) == 1
    assert denials() == 3
    clock.advance(timedelta(minutes=5))
    world.decide(run, "tool_call", "email")
    clock.advance(timedelta(minutes=6))
    assert denials(agent_id=world.agent_id) == 1, "only the denial within the window"
    assert denials() == 1
