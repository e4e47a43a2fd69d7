"""Sensitive values: split from payloads, kept apart (encrypted with a key), shown to few reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests, generate_key
from governance_core.errors import ValidationErrors
from governance_core.ids import SeededIds
from governance_core.service import Bootstrap, Governance
from tests.core.insight_world import InsightWorld, insight_world

SSN = "123-45-6789"
MARKER = {"$sensitive": "string", "labels": ["pii"], "value": SSN}
REDACTED = {"$sensitive": "string", "labels": ["pii"]}
PAYLOAD = {"customer": {"name": "Ada", "ssn": MARKER}, "ids": [{"$sensitive": "number",
                                                              "value": 42}]}
STORED = {"customer": {"name": "Ada", "ssn": REDACTED}, "ids": [{"$sensitive": "number"}]}


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> InsightWorld:
    return insight_world(gov, boot)


def sensitive_span(world: InsightWorld, **members: Any) -> dict[str, Any]:
    return world.span("read_pii", payload=PAYLOAD, sensitive_encoding=True, **members)


def show_span(world: InsightWorld, span_id: str, **query: Any) -> dict[str, Any]:
    result: dict[str, Any] = world.caller.details("agent_spans/show", agent_span_id=span_id,
                                                  **query)
    return result


def raise_sensitive(world: InsightWorld, **members: Any) -> dict[str, Any]:
    result: dict[str, Any] = world.caller.details(
        "alerts/raise", agent_instance_id=world.instance_id, name="overspend",
        severity="warning", payload={"amount": 10, "budget": 5, "card": MARKER},
        payload_sensitive_encoding=True, **members,
    )
    return result


def test_a_write_answers_the_markers_without_their_values(world: InsightWorld) -> None:
    span = sensitive_span(world)
    assert span["payload"] == STORED and span["sensitive_encoding"] is True


def test_an_account_token_show_puts_the_values_back(world: InsightWorld) -> None:
    span = sensitive_span(world)
    assert show_span(world, span["id"])["payload"] == PAYLOAD


@pytest.mark.parametrize("flag", [True, "true"])
def test_a_redacted_show_withholds_the_values(world: InsightWorld, flag: object) -> None:
    span = sensitive_span(world)
    assert show_span(world, span["id"], redacted=flag)["payload"] == STORED


def test_lists_withhold_the_values(world: InsightWorld) -> None:
    sensitive_span(world)
    listed = world.caller.call("agent_spans/list", agent_instance_id=world.instance_id)
    assert listed["summaries"][0]["payload"] == STORED


def test_ingestion_token_reads_withhold_the_values(world: InsightWorld) -> None:
    span = sensitive_span(world)
    shown = world.ingestion().details("agent_spans/show", agent_span_id=span["id"])
    assert shown["payload"] == STORED


def test_an_idempotent_replay_holds_no_value(world: InsightWorld) -> None:
    body = {"agent_instance_id": world.instance_id, "schema_name": "plain",
            "status": "active", "payload": PAYLOAD, "sensitive_encoding": True,
            "idempotency_key": "sensitive-1"}
    first = world.caller.call("agent_spans/create", body)
    replay = world.caller.call("agent_spans/create", body)
    assert replay == first and replay["details"]["payload"] == STORED
    stored = world.gov.store.query("idempotency_keys")
    assert SSN not in repr(stored)


def test_a_finish_splits_the_result_and_keeps_the_payload_values(world: InsightWorld) -> None:
    span = sensitive_span(world, status="active")
    result = {"match": {"$sensitive": "boolean", "value": True}, "note": "ok"}
    finished = world.finish(span["id"], result_payload=result)
    assert finished["result_payload"] == {"match": {"$sensitive": "boolean"}, "note": "ok"}
    shown = show_span(world, span["id"])
    assert shown["payload"] == PAYLOAD and shown["result_payload"] == result


def test_a_finish_can_turn_sensitive_encoding_on_for_the_result(world: InsightWorld) -> None:
    span = world.span("plain", status="active", payload={"plain": True})
    finished = world.finish(span["id"], sensitive_encoding=True,
                            result_payload={"token": {"$sensitive": "string", "value": "s3"}})
    assert finished["result_payload"] == {"token": {"$sensitive": "string"}}
    assert finished["sensitive_encoding"] is True
    assert show_span(world, span["id"])["result_payload"]["token"]["value"] == "s3"


def test_without_sensitive_encoding_markers_are_plain_data(world: InsightWorld) -> None:
    span = world.span("plain", payload={"ssn": MARKER})
    assert span["payload"] == {"ssn": MARKER}
    assert world.gov.store.query("sensitive_values") == []


def test_a_marker_whose_type_does_not_match_is_422_at_its_path(world: InsightWorld) -> None:
    with pytest.raises(ValidationErrors) as caught:
        world.span("plain", sensitive_encoding=True,
                   payload={"customer": {"ssn": {"$sensitive": "number", "value": SSN}}},
                   result_payload={"items": [{"$sensitive": "boolean", "value": 1}]})
    errors = caught.value.to_payload()["errors"]
    assert errors["payload"]["errors"]["customer"]["errors"]["ssn"]["code"] == "invalid_value"
    assert errors["result_payload"]["errors"]["items"]["errors"]["0"]["code"] == "invalid_value"
    assert world.caller.call("agent_spans/list", agent_instance_id=world.instance_id)[
        "summaries"
    ] == []


def test_templates_and_checks_see_the_payload_without_values(world: InsightWorld) -> None:
    span = world.span("read_pii", sensitive_encoding=True,
                      payload={"customer": {"name": {"$sensitive": "string", "value": "Ada"}}})
    assert span["summary"] == 'looked up {"$sensitive": "string"}'
    assert "Ada" not in repr(world.gov.store.query("agent_spans"))


def test_alert_payload_values_follow_the_same_rules(world: InsightWorld) -> None:
    raised = raise_sensitive(world)
    stored_payload = {"amount": 10, "budget": 5, "card": REDACTED}
    assert raised["payload"] == stored_payload and raised["payload_sensitive_encoding"] is True
    assert raised["summary"] == "spent 10 of 5"
    shown = world.caller.details("alerts/show", alert_id=raised["id"])
    assert shown["payload"]["card"] == MARKER
    redacted = world.caller.details("alerts/show", alert_id=raised["id"], redacted=True)
    assert redacted["payload"] == stored_payload
    listed = world.caller.call("alerts/list", agent_instance_id=world.instance_id)
    assert listed["summaries"][0]["payload"] == stored_payload
    ingestion = world.ingestion().details("alerts/show", alert_id=raised["id"])
    assert ingestion["payload"] == stored_payload


def test_raising_again_without_markers_forgets_the_values(world: InsightWorld) -> None:
    raised = raise_sensitive(world)
    world.caller.call("alerts/raise", agent_instance_id=world.instance_id, name="overspend",
                      severity="warning", payload={"amount": 1, "budget": 5})
    shown = world.caller.details("alerts/show", alert_id=raised["id"])
    assert shown["payload"] == {"amount": 1, "budget": 5}
    assert world.gov.store.query("sensitive_values") == []


def test_a_bad_alert_marker_is_422_at_its_path(world: InsightWorld) -> None:
    with pytest.raises(ValidationErrors) as caught:
        world.caller.call("alerts/raise", agent_instance_id=world.instance_id, name="quiet",
                          severity="info", payload_sensitive_encoding=True,
                          payload={"card": {"$sensitive": "string"}})
    errors = caught.value.to_payload()["errors"]
    assert errors["payload"]["errors"]["card"]["code"] == "invalid_value"


def file_world(path: Path, encryption_key: str | None = None) -> tuple[Governance, InsightWorld]:
    # Without a key the test's values are kept in plain, by choice.
    config = None if encryption_key else Config(cipher=PlaintextForTests())
    gov = Governance.open(path, encryption_key=encryption_key, config=config,
                          clock=FixedClock(), ids=SeededIds(5))
    return gov, insight_world(gov, gov.bootstrap())


def write_sensitive_run(world: InsightWorld) -> str:
    span = sensitive_span(world, status="active")
    world.finish(span["id"], result_payload={"secret": {"$sensitive": "string",
                                                        "value": "result-secret-77"}},
                 sensitive_encoding=True)
    raise_sensitive(world)
    span_id: str = span["id"]
    return span_id


def test_the_database_file_keeps_no_value_in_payload_columns(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    gov, world = file_world(path)
    span_id = write_sensitive_run(world)
    assert show_span(world, span_id)["payload"] == PAYLOAD
    gov.close()
    with sqlite3.connect(path) as db:
        for table in ("agent_spans", "alerts", "idempotency_keys"):
            for (data,) in db.execute(f"SELECT data FROM {table}"):
                assert SSN not in data and "result-secret-77" not in data
        kept = db.execute("SELECT COUNT(*) FROM sensitive_values").fetchone()
    assert kept == (2,)


def test_with_a_key_no_value_is_in_the_file_in_plaintext(tmp_path: Path) -> None:
    path = tmp_path / "encrypted.db"
    key = generate_key()
    gov, world = file_world(path, key)
    span_id = write_sensitive_run(world)
    gov.close()
    content = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    for secret in (SSN, "result-secret-77"):
        assert secret.encode() not in content
    reopened = Governance.open(path, encryption_key=key)
    try:
        session = reopened.as_account(world.caller.principal.account_id)
        shown = session.details("agent_spans/show", agent_span_id=span_id)
        assert shown["payload"] == PAYLOAD
        assert shown["result_payload"]["secret"]["value"] == "result-secret-77"
    finally:
        reopened.close()
