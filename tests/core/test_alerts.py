"""Alerts: one per (run, name); raise, clear, show, list, count; errors and isolation."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.domain.alerts import raise_alert
from governance_core.errors import (
    AlertAlreadyCleared,
    AlertUnknown,
    InvalidValue,
    NotFound,
    ValidationErrors,
)
from governance_core.service import Bootstrap, Governance
from tests.core.runs import account_caller, make_agent
from tests.core.span_world import SpanWorld, register_run, span_world


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> SpanWorld:
    return span_world(gov, boot)


def raise_(world: SpanWorld, name: str = "slow", severity: str = "warning",
           payload: dict[str, Any] | None = None, **members: Any) -> dict[str, Any]:
    result: dict[str, Any] = world.caller.details(
        "alerts/raise", agent_instance_id=world.instance_id, name=name, severity=severity,
        payload={"seconds": 3} if payload is None else payload, **members,
    )
    return result


def alert_spans(world: SpanWorld) -> list[dict[str, Any]]:
    listed = world.caller.call(
        "agent_spans/list", agent_instance_id=world.instance_id, purpose="alert", sorting="id"
    )
    rows: list[dict[str, Any]] = listed["summaries"]
    return rows


def test_raise_creates_version_one_with_title_and_summary(world: SpanWorld) -> None:
    alert = raise_(world, raised_at="2026-01-01T00:00:00Z")
    assert alert["type"] == "alert" and alert["version"] == 1
    assert alert["status"] == "raised" and alert["cleared_at"] is None
    assert alert["title"] == "Slow run" and alert["summary"] == "took 3s"
    assert alert["raised_at"] == "2026-01-01T00:00:00.000000Z"
    assert alert["environment_id"] == world.instance["environment_id"]
    assert alert["payload_sensitive_encoding"] is False
    assert world.show_instance()["raised_alert_count"] == 1


def test_an_undeclared_alert_name_is_stored_titled_by_its_name(world: SpanWorld) -> None:
    alert = raise_(world, name="odd", payload={"x": 1})
    assert alert["title"] == "odd" and alert["summary"] is None
    spans = alert_spans(world)
    assert spans[0]["schema_known"] is False and spans[0]["payload"] == {"x": 1}


def test_raise_again_bumps_the_version_only_on_change(world: SpanWorld) -> None:
    first = raise_(world)
    same = raise_(world)
    assert same["version"] == 1 and same["updated_at"] == first["updated_at"]
    louder = raise_(world, severity="critical")
    assert louder["version"] == 2 and louder["id"] == first["id"]
    changed = raise_(world, severity="critical", payload={"seconds": 9})
    assert changed["version"] == 3 and changed["summary"] == "took 9s"
    assert changed["raised_at"] == first["raised_at"]
    assert world.show_instance()["raised_alert_count"] == 1


def test_clear_then_raise_again(world: SpanWorld) -> None:
    raise_(world)
    cleared = world.caller.details(
        "alerts/clear", agent_instance_id=world.instance_id, name="slow"
    )
    assert cleared["status"] == "cleared" and cleared["version"] == 2
    assert cleared["cleared_at"] is not None
    assert world.show_instance()["raised_alert_count"] == 0
    with pytest.raises(AlertAlreadyCleared):
        world.caller.call("alerts/clear", agent_instance_id=world.instance_id, name="slow")
    again = raise_(world)
    assert again["status"] == "raised" and again["version"] == 3
    assert again["cleared_at"] is None and again["raised_at"] > cleared["raised_at"]
    assert world.show_instance()["raised_alert_count"] == 1


def test_every_raise_and_clear_writes_an_alert_span_outside_the_metrics(
    world: SpanWorld,
) -> None:
    raise_(world)
    raise_(world)
    raise_(world, payload={"seconds": 4})
    world.caller.call("alerts/clear", agent_instance_id=world.instance_id, name="slow")
    events = [span["result_payload"]["event"] for span in alert_spans(world)]
    assert events == ["raised", "unchanged", "updated", "cleared"]
    span = alert_spans(world)[0]
    assert span["schema_name"] == "slow" and span["schema_title"] == "Slow run"
    assert span["status"] == "complete" and span["purpose"] == "alert"
    assert span["payload_validation"] == {"status": "valid", "message": None}
    run = world.show_instance()
    assert run["span_counts"]["total"] == 0 and run["status"] == "pending"
    assert run["span_schema_counts"]["by_name"] == {}


def test_raise_refusals(world: SpanWorld) -> None:
    with pytest.raises(ValidationErrors) as caught:
        world.caller.call("alerts/raise", agent_instance_id="bad", severity="fatal",
                          payload="x")
    assert {k: v.code for k, v in caught.value.errors.items()} == {
        "agent_instance_id": "invalid_value", "name": "required_value",
        "severity": "invalid_value", "payload": "invalid_value",
    }


def test_clear_by_a_bare_instance_id(world: SpanWorld) -> None:
    with pytest.raises(AlertUnknown):
        world.caller.call("alerts/clear", _body=world.instance_id)
    raise_(world)
    assert world.caller.details("alerts/clear", _body=world.instance_id)["name"] == "slow"
    raise_(world)
    raise_(world, name="other")
    with pytest.raises(ValidationErrors) as caught:
        world.caller.call("alerts/clear", _body=world.instance_id)
    assert caught.value.errors["name"].code == "required_value"
    cleared = world.caller.details("alerts/clear", _body=world.instance_id, name="other")
    assert cleared["name"] == "other"
    with pytest.raises(AlertUnknown):
        world.caller.call("alerts/clear", _body=world.instance_id, name="never")


def test_clear_bare_body_refusals_stand_at_the_top_level(
    world: SpanWorld, other: Bootstrap
) -> None:
    with pytest.raises(InvalidValue):
        world.caller.call("alerts/clear", _body=12)
    # The bare instance is the resource cleared on, so it is answered like a path id.
    foreign = account_caller(world.gov, other)
    foreign_run = register_run(foreign, make_agent(foreign)["id"])
    for unknown in ("not-an-id", world.agent["id"], "0" * 32, foreign_run["id"]):
        with pytest.raises(NotFound):
            world.caller.call("alerts/clear", _body=unknown)


def test_clear_by_object_answers_the_run_like_a_path_id(
    world: SpanWorld, other: Bootstrap
) -> None:
    raise_(world)
    foreign = account_caller(world.gov, other)
    foreign_run = register_run(foreign, make_agent(foreign)["id"])
    theirs = foreign.details("alerts/raise", agent_instance_id=foreign_run["id"], name="slow",
                             severity="info", payload={})
    # The instance named in the object is the resource cleared on, as in the bare form.
    for unknown in ("not-an-id", world.agent["id"], "0" * 32, foreign_run["id"]):
        with pytest.raises(NotFound):
            world.caller.call("alerts/clear", agent_instance_id=unknown, name="slow")
    assert foreign.details("alerts/show", alert_id=theirs["id"])["status"] == "raised"
    with pytest.raises(ValidationErrors) as caught:
        world.caller.call("alerts/clear", name="slow")
    assert {k: v.code for k, v in caught.value.errors.items()} == {
        "agent_instance_id": "required_value"}
    with pytest.raises(ValidationErrors) as caught:
        world.caller.call("alerts/clear", agent_instance_id=12, name=["slow"])
    assert {k: v.code for k, v in caught.value.errors.items()} == {
        "agent_instance_id": "invalid_value", "name": "invalid_value"}
    cleared = world.caller.details(
        "alerts/clear", agent_instance_id=world.instance_id, name="slow"
    )
    assert cleared["status"] == "cleared"


def test_clear_an_unknown_name_is_alert_unknown(world: SpanWorld) -> None:
    with pytest.raises(AlertUnknown):
        world.caller.call("alerts/clear", agent_instance_id=world.instance_id, name="slow")


def test_alerts_after_the_run_finished_are_stored(world: SpanWorld) -> None:
    world.caller.call("agent_instances/finish", agent_instance_id=world.instance_id)
    assert raise_(world)["status"] == "raised"
    assert world.show_instance()["raised_alert_count"] == 1


def test_show_list_and_count(world: SpanWorld, other: Bootstrap) -> None:
    slow = raise_(world, severity="warning")
    odd = raise_(world, name="odd", severity="critical")
    world.caller.call("alerts/clear", agent_instance_id=world.instance_id, name="odd")
    second_run = world.new_run()
    world.caller.call("alerts/raise", agent_instance_id=second_run["id"], name="slow",
                      severity="info", payload={})
    assert world.caller.details("alerts/show", alert_id=slow["id"]) == slow

    def names(**members: Any) -> list[str]:
        return [row["name"] for row in world.caller.call("alerts/list", members)["summaries"]]

    assert names(agent_instance_id=world.instance_id, sorting="name") == ["odd", "slow"]
    assert names(status="raised", sorting="-raised_at") == ["slow", "slow"]
    assert names(severity="critical") == ["odd"]
    assert names(name="slow", agent_id=world.agent["id"]) == ["slow", "slow"]
    assert names(environment_id=world.instance["environment_id"], status="cleared") == ["odd"]
    assert world.caller.call("alerts/count", status="raised") == {"status": "success", "count": 2}
    assert world.caller.call("alerts/count", agent_instance_id=odd["agent_instance_id"],
                             severity="critical")["count"] == 1
    with pytest.raises(ValidationErrors):
        world.caller.call("alerts/list", sorting="payload")
    with pytest.raises(ValidationErrors):
        world.caller.call("alerts/count", severity="loud")

    stranger = account_caller(world.gov, other)
    assert stranger.call("alerts/count")["count"] == 0
    assert stranger.call("alerts/list")["summaries"] == []
    with pytest.raises(NotFound):
        stranger.call("alerts/show", alert_id=slow["id"])
    with pytest.raises(ValidationErrors):
        stranger.call("alerts/raise", agent_instance_id=world.instance_id, name="x",
                      severity="info")


def test_an_ingestion_token_reaches_its_own_alerts_only(world: SpanWorld) -> None:
    mine = world.ingestion()
    own = mine.details("alerts/raise", agent_instance_id=world.instance_id, name="slow",
                       severity="error", payload={"seconds": 1})
    foreign_run = register_run(world.caller, make_agent(world.caller, "Other")["id"])
    foreign = world.caller.details("alerts/raise", agent_instance_id=foreign_run["id"],
                                   name="slow", severity="error", payload={})
    assert [row["id"] for row in mine.call("alerts/list")["summaries"]] == [own["id"]]
    assert mine.call("alerts/count")["count"] == 1
    assert mine.details("alerts/show", alert_id=own["id"])["id"] == own["id"]
    with pytest.raises(NotFound):
        mine.call("alerts/show", alert_id=foreign["id"])
    with pytest.raises(NotFound):
        mine.call("alerts/raise", agent_instance_id=foreign_run["id"], name="x",
                  severity="info")
    with pytest.raises(NotFound):
        mine.call("alerts/clear", agent_instance_id=foreign_run["id"], name="slow")
    with pytest.raises(NotFound):
        mine.call("alerts/clear", _body=foreign_run["id"])
    assert mine.details("alerts/clear", _body=world.instance_id)["status"] == "cleared"


def test_raise_alert_for_the_system_keeps_the_run_count(world: SpanWorld) -> None:
    gov = world.gov
    ctx = gov.context(world.caller.principal)
    with gov.store.transaction():
        instance = gov.store.get("agent_instances", world.instance_id)
        assert instance is not None
        written = raise_alert(ctx, instance, "risk_critical", "critical", {"score": 99})
    assert written.alert.severity == "critical" and written.alert.version == 1
    assert written.instance["raised_alert_count"] == 1
    assert world.show_instance()["raised_alert_count"] == 1
    assert world.caller.call("alerts/count", name="risk_critical")["count"] == 1


def test_replayed_raise_is_answered_from_the_key(world: SpanWorld) -> None:
    body = {"agent_instance_id": world.instance_id, "name": "slow", "severity": "error",
            "payload": {"seconds": 2}, "idempotency_key": "raise-key-01"}
    first = world.caller.call("alerts/raise", body)
    assert world.caller.call("alerts/raise", body) == first
    assert len(alert_spans(world)) == 1
