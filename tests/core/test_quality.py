"""Quality payloads: record_quality in every form, the older update form, isolation."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.errors import InvalidValue, NotFound, ValidationErrors
from governance_core.service import Bootstrap, Governance
from tests.core.runs import account_caller, make_agent
from tests.core.span_world import SpanWorld, register_run, span_world


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> SpanWorld:
    return span_world(gov, boot)


def record(world: SpanWorld, **members: Any) -> dict[str, Any]:
    result: dict[str, Any] = world.caller.details(
        "agent_instances/record_quality", agent_instance_id=world.instance_id, **members
    )
    return result


def quality_spans(world: SpanWorld) -> list[dict[str, Any]]:
    listed = world.caller.call("agent_spans/list", agent_instance_id=world.instance_id,
                               purpose="quality", sorting="id", include_summaries=True)
    rows: list[dict[str, Any]] = listed["summaries"]
    return rows


def test_record_answers_the_run_with_the_payload(world: SpanWorld) -> None:
    run = record(world, name="accuracy", payload={"score": 0.9})
    assert run["type"] == "agent_instance" and run["id"] == world.instance_id
    assert run["quality_payloads"] == {"accuracy": {"score": 0.9}}
    span = quality_spans(world)[0]
    assert span["schema_name"] == "accuracy" and span["schema_title"] == "Accuracy"
    assert span["purpose"] == "quality" and span["status"] == "complete"
    assert span["payload"] == {"score": 0.9}
    assert span["summary"] == "score 0.9"
    assert span["payload_validation"] == {"status": "valid", "message": None}
    assert run["span_counts"]["total"] == 0 and run["status"] == "pending"


def test_a_bare_name_records_an_empty_payload(world: SpanWorld) -> None:
    assert record(world, _body="accuracy")["quality_payloads"] == {"accuracy": {}}


def test_a_null_payload_removes_the_name(world: SpanWorld) -> None:
    record(world, name="accuracy", payload={"score": 1})
    record(world, name="tone", payload={"ok": True})
    run = record(world, name="accuracy", payload=None)
    assert run["quality_payloads"] == {"tone": {"ok": True}}
    assert [s["result_payload"]["event"] for s in quality_spans(world)] == [
        "recorded", "recorded", "removed"
    ]


def test_an_undeclared_name_is_stored_and_flagged(world: SpanWorld) -> None:
    run = record(world, name="tone", payload={"ok": True})
    assert run["quality_payloads"] == {"tone": {"ok": True}}
    span = quality_spans(world)[0]
    assert span["schema_known"] is False and span["payload_validation"] is None


def test_a_payload_that_does_not_match_is_stored_and_flagged(world: SpanWorld) -> None:
    record(world, name="accuracy", payload={"score": "high"})
    assert quality_spans(world)[0]["payload_validation"]["status"] == "invalid"


def test_refusals(world: SpanWorld, other: Bootstrap) -> None:
    with pytest.raises(ValidationErrors) as caught:
        record(world, payload=[1])
    assert {k: v.code for k, v in caught.value.errors.items()} == {
        "name": "required_value", "payload": "invalid_value"
    }
    with pytest.raises(InvalidValue):
        record(world, _body=7)
    with pytest.raises(InvalidValue):
        record(world, _body="  ")
    with pytest.raises(NotFound):
        world.caller.call("agent_instances/record_quality", agent_instance_id="nope",
                          name="accuracy")
    stranger = account_caller(world.gov, other)
    with pytest.raises(NotFound):
        stranger.call("agent_instances/record_quality", agent_instance_id=world.instance_id,
                      name="accuracy")


def test_quality_after_the_run_finished_is_stored(world: SpanWorld) -> None:
    world.caller.call("agent_instances/finish", agent_instance_id=world.instance_id)
    run = record(world, name="accuracy", payload={"score": 1})
    assert run["status"] == "complete" and run["quality_payloads"] == {"accuracy": {"score": 1}}


def test_an_ingestion_token_records_on_its_own_runs_only(world: SpanWorld) -> None:
    mine = world.ingestion()
    run = mine.details("agent_instances/record_quality", agent_instance_id=world.instance_id,
                       name="accuracy", payload={"score": 1})
    assert run["quality_payloads"] == {"accuracy": {"score": 1}}
    foreign = register_run(world.caller, make_agent(world.caller, "Other")["id"])
    with pytest.raises(NotFound):
        mine.call("agent_instances/record_quality", agent_instance_id=foreign["id"],
                  name="accuracy")
    with pytest.raises(NotFound):
        mine.call("agent_instances/update", agent_instance_id=foreign["id"],
                  details={"quality_payload": {"accuracy": {}}})


def test_the_older_update_form_merges_a_map_of_payloads(world: SpanWorld) -> None:
    record(world, name="tone", payload={"ok": False})
    run = world.caller.details(
        "agent_instances/update", agent_instance_id=world.instance_id,
        details={"quality_payload": {"accuracy": {"score": 0.5}, "tone": None}},
    )
    assert run["quality_payloads"] == {"accuracy": {"score": 0.5}}
    assert len(quality_spans(world)) == 3
    unchanged = world.caller.details("agent_instances/update", agent_instance_id=world.instance_id)
    assert unchanged["quality_payloads"] == {"accuracy": {"score": 0.5}}


def test_the_older_update_form_names_bad_entries(world: SpanWorld) -> None:
    with pytest.raises(ValidationErrors) as caught:
        world.caller.call(
            "agent_instances/update", agent_instance_id=world.instance_id,
            details={"quality_payload": {"accuracy": 3, "": {}}},
        )
    nested = caught.value.errors["quality_payload"]
    assert isinstance(nested, ValidationErrors)
    assert {k: v.code for k, v in nested.errors.items()} == {
        "accuracy": "invalid_value", "": "invalid_value"
    }
    assert world.show_instance()["quality_payloads"] == {}
