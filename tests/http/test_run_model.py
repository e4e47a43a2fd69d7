"""Runs over HTTP: the bare-body forms, state errors, ingestion reach, replays and control."""

from __future__ import annotations

import falcon.testing
import pytest

from governance_core.service import Bootstrap, Governance
from tests.http.support import Api, assert_error
from tests.http.world import World, build_world, register_body


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> World:
    return build_world(gov, boot)


@pytest.fixture
def account(client: falcon.testing.TestClient, world: World) -> Api:
    return Api(client, world.token)


@pytest.fixture
def ingestion(client: falcon.testing.TestClient, world: World) -> Api:
    return Api(client, world.secrets["ingestion"])


def run_path(world: World, suffix: str = "") -> str:
    return f"/agent_instance/{world.ids['agent_instance_id']}{suffix}"


def test_record_quality_takes_a_bare_json_string(account: Api, world: World) -> None:
    details = account.ok("POST", run_path(world, "/record_quality"), body='"accuracy"')["details"]
    assert details["quality_payloads"] == {"accuracy": {}}
    removed = account.ok(
        "POST", run_path(world, "/record_quality"), json={"name": "accuracy", "payload": None}
    )
    assert removed["details"]["quality_payloads"] == {}
    assert_error(account.post(run_path(world, "/record_quality"), body="42"), 422, "invalid_value")


def test_alerts_clear_takes_a_bare_instance_id_with_the_name_in_the_query(
    account: Api, world: World
) -> None:
    bare = f'"{world.ids["agent_instance_id"]}"'
    cleared = account.ok("POST", "/alerts/clear", body=bare, query="name=slow_run")["details"]
    assert (cleared["status"], cleared["version"]) == ("cleared", 2)
    assert_error(
        account.post("/alerts/clear", body=bare, query="name=slow_run"), 409,
        "alert_already_cleared",
    )
    assert_error(account.post("/alerts/clear", body=bare, query="name=nope"), 404, "alert_unknown")
    assert_error(account.post("/alerts/clear", body=bare), 404, "alert_unknown")


def test_finishing_twice_is_invalid_action(account: Api, world: World) -> None:
    account.ok("POST", run_path(world, "/finish"), json={})
    assert_error(account.post(run_path(world, "/finish"), json={}), 409, "invalid_action")
    assert_error(account.post(run_path(world, "/terminate"), json={"reason": "x"}), 409,
                 "invalid_action")
    span = f"/agent_spans/{world.ids['agent_span_id']}/finish"
    account.ok("POST", span, json={"status": "complete"})
    assert_error(account.post(span, json={"status": "failed"}), 409, "invalid_action")


def test_spans_after_termination_carry_the_control_signal(account: Api, world: World) -> None:
    account.ok("POST", run_path(world, "/terminate"), json={"reason": "budget"})
    created = account.ok("POST", "/agent_spans", json={"details": {
        "agent_instance_id": world.ids["agent_instance_id"], "schema_name": "langchain:tool",
        "status": "active",
    }})
    assert created["control"] == {"terminate": True, "reason": "budget"}
    finished = account.ok("POST", f"/agent_spans/{world.ids['agent_span_id']}/finish", json={})
    assert finished["details"]["status"] == "cancelled"
    assert finished["control"]["terminate"] is True


def test_field_errors_name_the_fields_as_sent(account: Api, world: World) -> None:
    result = account.post("/agent_spans", json={"details": {
        "agent_instance_id": world.ids["agent_instance_id"], "status": "sideways",
        "payload": [1],
    }})
    body = assert_error(result, 422, "validation_errors")
    assert {"schema_name", "status", "payload"} <= set(body["errors"])
    assert body["errors"]["schema_name"]["code"] == "required_value"
    wrong_kind = account.post("/person", json={
        "name": "Ann", "email": "ann@acme.test", "team_ids": [world.ids["agent_id"]],
    })
    errors = assert_error(wrong_kind, 422, "validation_errors")["errors"]
    assert "unexpected_ref_type" in str(errors["team_ids"])


def test_a_duplicate_external_identifier_is_conflict(account: Api) -> None:
    account.ok("POST", "/agent", json={"details": {"name": "A", "external_identifier": "ext-1"}})
    same = {"details": {"name": "B", "external_identifier": "ext-1"}}
    duplicate = account.post("/agent", json=same)
    assert_error(duplicate, 409, "conflict")


def test_an_ingestion_token_reaches_its_own_runs_only(
    account: Api, ingestion: Api, world: World
) -> None:
    assert ingestion.ok("GET", run_path(world))["details"]["id"] == world.ids["agent_instance_id"]
    mine = ingestion.ok("POST", "/agent_instance/register", json=register_body(None, "3.0.0"))
    assert mine["details"]["agent_id"] == world.ids["agent_id"]
    other = account.ok(
        "POST", "/agent_instance/register", json=register_body(world.ids["spare_agent_id"])
    )["details"]["id"]
    assert_error(ingestion.get(f"/agent_instance/{other}"), 404, "not_found")
    assert_error(ingestion.get("/team"), 403, "not_permitted")


def test_a_register_replays_from_its_idempotency_header(account: Api, world: World) -> None:
    headers = {"Idempotency-Key": "2b1f6a0e-6f1e-4c5e-9d8a-1c2b3d4e5f60"}
    body = register_body(world.ids["agent_id"], "4.0.0")
    first = account.ok("POST", "/agent_instance/register", json=body, headers=headers)
    assert account.ok("POST", "/agent_instance/register", json=body, headers=headers) == first
    changed = account.post("/agent_instance/register", json={**body, "purpose": "eval"},
                           headers=headers)
    assert_error(changed, 409, "idempotency_key_already_used")


def test_bulk_stops_at_the_first_failing_item_and_replays(account: Api, world: World) -> None:
    items = [
        {"_type": "agents/show", "idempotency_key": "item-0001", "agent_id": world.ids["agent_id"]},
        {"_type": "agent_spans/create", "idempotency_key": "item-0002",
         "agent_instance_id": world.ids["agent_instance_id"], "schema_name": "langchain:tool",
         "status": "complete"},
        {"_type": "agents/show", "idempotency_key": "item-0003", "agent_id": "0" * 32},
        {"_type": "teams/list", "idempotency_key": "item-0004"},
    ]
    outputs = account.ok("POST", "/bulk", json={"items": items})["outputs"]
    assert list(outputs) == ["item-0001", "item-0002", "item-0003"]
    assert outputs["item-0003"]["code"] == "not_found"
    again = account.ok("POST", "/bulk", json={"items": items})["outputs"]
    assert again["item-0002"] == outputs["item-0002"]
    duplicate = account.post("/bulk", json={"items": [items[0], items[0]]})
    assert_error(duplicate, 422, "validation_errors")
