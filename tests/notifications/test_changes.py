"""Monitors evaluated as runs change: the sender's look at what changed, on an injected clock.

The schedule stays the fallback: a monitor nothing touched waits for its
``evaluate_every_seconds``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.converter import from_record
from governance_core.ids import SeededIds
from governance_core.models.notifications import Monitor
from governance_core.notifications.changes import EVERY_PAIR, ChangeWatch, sources_of, touches
from governance_core.notifications.sender import Sender
from governance_core.service import Governance
from tests.notifications.conftest import quick_settings
from tests.policies.support import RunWorld, run_world
from tests.stores import make_store

STORES = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=STORES)
def world(request: pytest.FixtureRequest) -> Iterator[tuple[RunWorld, FixedClock]]:
    clock = FixedClock()
    governance = Governance(make_store(request.param), clock=clock, ids=SeededIds(11))
    yield run_world(governance, governance.bootstrap()), clock
    governance.close()


@pytest.fixture
def sender(world: tuple[RunWorld, FixedClock]) -> Iterator[Sender]:
    """Changes looked for every 5 s, due monitors every 15 s."""
    made = Sender(world[0].gov, quick_settings(monitor_seconds=15, change_seconds=5),
                  holder="changes")
    yield made
    made.close()


def monitor(world: RunWorld, name: str, **members: Any) -> dict[str, Any]:
    """A monitor evaluated every 10 minutes unless something touches it."""
    body = {"name": name, "metric": "failed_runs", "comparison": "ge", "warning": 1,
            "window_seconds": 3600, "evaluate_every_seconds": 600, **members}
    made: dict[str, Any] = world.session.details("monitors/create", body)
    return made


def shown(world: RunWorld, made: dict[str, Any]) -> dict[str, Any]:
    details: dict[str, Any] = world.session.details("monitors/show", {"monitor_id": made["id"]})
    return details


def stored(world: RunWorld, made: dict[str, Any]) -> Monitor:
    """The monitor as the sender reads it."""
    record = world.gov.store.get("monitors", made["id"])
    assert record is not None
    return from_record(Monitor, record)


def evaluated_at(world: RunWorld, *monitors: dict[str, Any]) -> list[str | None]:
    return [shown(world, made)["last_evaluated_at"] for made in monitors]


def fail(world: RunWorld, run_id: str) -> None:
    world.session.call("agent_instances/finish", {"agent_instance_id": run_id, "status": "failed"})


def test_a_run_that_changes_has_its_monitors_evaluated_at_the_next_look(
    world: tuple[RunWorld, FixedClock], sender: Sender,
) -> None:
    w, clock = world
    quiet = w.session.details("agents/create", {"name": "Quiet bot"})["id"]
    busy_run = w.run()
    w.run(quiet)
    watched = monitor(w, "busy failures", agent_id=w.agent_id)
    untouched = monitor(w, "quiet failures", agent_id=quiet)
    everything = monitor(w, "all runs", metric="run_count", warning=100)
    sender.run_once()  # the first look learns the state; the schedule evaluates all three
    first = evaluated_at(w, watched, untouched, everything)
    assert None not in first

    clock.advance(timedelta(seconds=1))
    fail(w, busy_run)
    sender.run_once()
    assert evaluated_at(w, watched, untouched, everything) == first, "the next look is in 5 s"

    clock.advance(timedelta(seconds=4))
    sender.run_once()
    after = evaluated_at(w, watched, untouched, everything)
    assert after[0] != first[0] and shown(w, watched)["level"] == "warning"
    assert after[1] == first[1], "the quiet agent's monitor waits for its schedule"
    assert after[2] != first[2], "a monitor of the whole account covers every agent"
    [alert] = w.session.call("alerts/list", {"agent_instance_id": busy_run})["summaries"]
    assert alert["name"] == "monitor:busy failures"

    clock.advance(timedelta(seconds=5))
    sender.run_once()
    again = evaluated_at(w, watched, untouched, everything)
    # Raising the alert recorded a span on the run, which the look may count once more.
    clock.advance(timedelta(seconds=5))
    sender.run_once()
    assert evaluated_at(w, watched, untouched, everything) == again, "nothing changed since"
    assert again[1] == first[1]

    clock.advance(timedelta(seconds=600))
    sender.run_once()
    assert evaluated_at(w, watched, untouched, everything)[1] != first[1], "on schedule"


def test_the_scope_of_a_monitor_decides_what_touches_it(
    world: tuple[RunWorld, FixedClock], sender: Sender,
) -> None:
    w, clock = world
    staging = w.session.details("environments/create", {"name": "staging"})["id"]
    other = w.session.details("agents/create", {"name": "Other bot"})["id"]
    w.run()  # in the default environment
    staged_run = w.run(environment_id=staging)
    other_staged = w.run(other, environment_id=staging)
    in_staging = monitor(w, "staging", environment_id=staging)
    agent_in_default = monitor(w, "agent default", agent_id=w.agent_id,
                               environment_id=w.boot.environment_id)
    agent_in_staging = monitor(w, "agent staging", agent_id=w.agent_id, environment_id=staging)
    monitors = (in_staging, agent_in_default, agent_in_staging)
    sender.run_once()
    first = evaluated_at(w, *monitors)

    clock.advance(timedelta(seconds=5))
    fail(w, other_staged)
    sender.run_once()
    second = evaluated_at(w, *monitors)
    assert [a != b for a, b in zip(first, second, strict=True)] == [True, False, False]

    clock.advance(timedelta(seconds=5))
    fail(w, staged_run)
    sender.run_once()
    third = evaluated_at(w, *monitors)
    assert third[2] != second[2] and third[1] == second[1]


def test_hysteresis_holds_when_changes_drive_the_evaluations(
    world: tuple[RunWorld, FixedClock], sender: Sender,
) -> None:
    w, clock = world
    made = monitor(w, "error rate", metric="error_rate", comparison="gt", warning=0.5,
                   hysteresis=0.2)
    sender.run_once()

    def finish(status: str) -> str:
        run_id = w.run()
        w.session.call("agent_instances/finish",
                       {"agent_instance_id": run_id, "status": status})
        clock.advance(timedelta(seconds=5))
        sender.run_once()
        level: str = shown(w, made)["level"]
        return level

    # Error rates 1/1, 2/2, 2/3, 2/4, 2/5, 2/6: above 0.5 it warns, and it stays warning
    # until the rate is 0.3 or less (2/6 is 0.33, 2/7 is 0.29).
    levels = [finish(status) for status in
              ("failed", "failed", "complete", "complete", "complete", "complete", "complete")]
    assert levels == ["warning"] * 6 + ["ok"]
    changes = w.session.call("notification_events/list",
                             {"event_type": "monitor.state_changed", "sorting": "id"})
    assert [event["data"]["level"] for event in changes["summaries"]] == ["warning", "ok"]


def test_a_policy_denial_touches_the_denials_monitor_of_its_agent(
    world: tuple[RunWorld, FixedClock], sender: Sender,
) -> None:
    w, clock = world
    w.policy('forbid (principal, action == Action::"call_tool", resource == Tool::"email");')
    other = w.session.details("agents/create", {"name": "Other bot"})["id"]
    run = w.run()
    denials = monitor(w, "denials", metric="policy_denials", agent_id=w.agent_id)
    others = monitor(w, "other denials", metric="policy_denials", agent_id=other)
    runs = monitor(w, "runs", metric="run_count", warning=100, agent_id=w.agent_id)
    sender.run_once()
    first = evaluated_at(w, denials, others, runs)

    clock.advance(timedelta(seconds=5))
    assert w.decide(run, "tool_call", "search")["outcome"] == "allow"
    sender.run_once()
    assert evaluated_at(w, denials, others, runs) == first, "an allowed action moves nothing"

    clock.advance(timedelta(seconds=5))
    assert w.decide(run, "tool_call", "email")["outcome"] == "deny"
    sender.run_once()
    second = evaluated_at(w, denials, others, runs)
    assert second[0] != first[0] and second[1:] == first[1:]
    assert shown(w, denials)["level"] == "warning"


def test_a_critical_alert_touches_the_critical_alerts_monitor(
    world: tuple[RunWorld, FixedClock], sender: Sender,
) -> None:
    w, clock = world
    run = w.run()
    critical = monitor(w, "criticals", metric="critical_alerts", agent_id=w.agent_id)
    sender.run_once()
    first = evaluated_at(w, critical)

    clock.advance(timedelta(seconds=5))
    w.session.call("alerts/raise", {"agent_instance_id": run, "name": "slow",
                                    "severity": "warning"})
    sender.run_once()
    assert evaluated_at(w, critical) == first, "a warning is not a critical alert"

    clock.advance(timedelta(seconds=5))
    w.session.call("alerts/raise", {"agent_instance_id": run, "name": "slow",
                                    "severity": "critical"})
    sender.run_once()
    assert evaluated_at(w, critical) != first, "raised from warning to critical"
    assert shown(w, critical)["last_value"] == 1


def test_token_usage_touches_a_tokens_monitor(world: tuple[RunWorld, FixedClock]) -> None:
    w, clock = world
    run = w.run()
    tokens = stored(w, monitor(w, "tokens", metric="tokens", comparison="gt", warning=1000))
    watch = ChangeWatch(w.gov.store)
    assert watch.look([tokens], clock()) == []
    clock.advance(timedelta(seconds=5))
    assert watch.look([tokens], clock()) == []
    w.span(run, "llm", model="unpriced-model", usage={"input_tokens": 10, "output_tokens": 5})
    clock.advance(timedelta(seconds=5))
    assert watch.look([tokens], clock()) == [tokens]


def test_too_many_new_rows_touch_every_monitor_of_the_source(
    world: tuple[RunWorld, FixedClock],
) -> None:
    w, clock = world
    w.policy('forbid (principal, action == Action::"call_tool", resource == Tool::"email");')
    other = w.session.details("agents/create", {"name": "Other bot"})["id"]
    scoped = [stored(w, monitor(w, f"denials {agent}", metric="policy_denials", agent_id=agent))
              for agent in (w.agent_id, other)]
    watch = ChangeWatch(w.gov.store, margin=timedelta(seconds=1), rows_per_look=2)
    watch.look(scoped, clock())
    run = w.run()
    for _ in range(2):
        w.decide(run, "tool_call", "email")
    clock.advance(timedelta(seconds=5))
    assert watch.look(scoped, clock()) == scoped, "two rows fill the look: it cannot tell"
    clock.advance(timedelta(seconds=5))
    assert watch.look(scoped, clock()) == []
    w.decide(run, "tool_call", "email")
    clock.advance(timedelta(seconds=5))
    assert watch.look(scoped, clock()) == scoped[:1]


def test_a_row_committed_late_is_caught_within_the_margin(
    world: tuple[RunWorld, FixedClock],
) -> None:
    w, clock = world
    w.policy('forbid (principal, action == Action::"call_tool", resource == Tool::"email");')
    denials = stored(w, monitor(w, "denials", metric="policy_denials"))
    run = w.run()
    watch = ChangeWatch(w.gov.store, margin=timedelta(seconds=30))
    decided_at = clock.now
    clock.advance(timedelta(seconds=10))
    watch.look([denials], clock())
    # Decided (stamped) before that look, committed after it.
    clock.now = decided_at
    w.decide(run, "tool_call", "email")
    clock.advance(timedelta(seconds=20))
    assert watch.look([denials], clock()) == [denials]
    clock.advance(timedelta(seconds=5))
    assert watch.look([denials], clock()) == [], "counted once"


def test_without_looking_for_changes_monitors_wait_for_their_schedule(
    world: tuple[RunWorld, FixedClock],
) -> None:
    w, clock = world
    run = w.run()
    made = monitor(w, "failures", agent_id=w.agent_id)
    sender = Sender(w.gov, quick_settings(monitor_seconds=15, change_seconds=0), holder="s")
    try:
        sender.run_once()
        first = evaluated_at(w, made)
        fail(w, run)
        clock.advance(timedelta(seconds=30))
        sender.run_once()
        assert evaluated_at(w, made) == first
        clock.advance(timedelta(seconds=600))
        sender.run_once()
        assert shown(w, made)["level"] == "warning"
    finally:
        sender.close()


def test_which_sources_a_metric_reads_and_what_a_scope_covers() -> None:
    assert sources_of("policy_denials") == ("decisions",)
    assert sources_of("critical_alerts") == ("alerts",)
    assert sources_of("tokens") == ("runs", "tokens")
    assert sources_of("error_rate") == ("runs",)

    def scoped(agent: str | None, environment: str | None) -> Monitor:
        return Monitor(
            id="m", account_id="a", name="m", metric="run_count", comparison="gt",
            window_seconds=60, status="active", level="ok", inserted_at=FixedClock()(),
            updated_at=FixedClock()(), agent_id=agent, environment_id=environment,
        )

    assert touches(scoped(None, None), [("x", "e")])
    assert touches(scoped("x", None), [("x", "e")])
    assert not touches(scoped("y", None), [("x", "e")])
    assert touches(scoped(None, "e"), [("x", "e")]) and not touches(scoped(None, "f"), [("x", "e")])
    assert touches(scoped("x", "e"), [("y", "f"), ("x", "e")])
    assert not touches(scoped("x", "e"), [("x", "f")])
    assert touches(scoped("y", "f"), [EVERY_PAIR])
    assert not touches(scoped(None, None), [])
