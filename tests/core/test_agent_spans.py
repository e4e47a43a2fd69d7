"""Agent spans: create, finish, show, list; state rules, error codes and isolation."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.errors import (
    Conflict,
    GovernanceError,
    InvalidAction,
    NotFound,
    NotPermitted,
    ValidationErrors,
)
from governance_core.service import Bootstrap, Governance
from tests.core.runs import account_caller, make_agent
from tests.core.span_world import SpanWorld, register_run, span_world


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> SpanWorld:
    return span_world(gov, boot)


def field_codes(error: GovernanceError) -> dict[str, str]:
    assert isinstance(error, ValidationErrors)
    return {name: inner.code for name, inner in error.errors.items()}


def refused(world: SpanWorld, operation: str, **members: Any) -> dict[str, str]:
    with pytest.raises(ValidationErrors) as caught:
        world.caller.call(operation, members)
    return field_codes(caught.value)


# -- create ----------------------------------------------------------------------------------
def test_create_details_wrapped_generates_the_id_and_shows_every_field(world: SpanWorld) -> None:
    span = world.span(payload={"prompt": "hi"})
    assert span["type"] == "agent_span"
    assert span["id"] and span["agent_instance_id"] == world.instance_id
    assert span["agent_id"] == world.agent["id"]
    assert span["status"] == "active" and span["finished_at"] is None
    assert span["purpose"] == "activity"
    assert span["schema_title"] == "Model call"
    assert span["summary"] == "hi -> pending"
    assert span["payload"] == {"prompt": "hi"} and span["result_payload"] is None
    assert span["schema_known"] is True
    assert span["payload_validation"] == {"status": "valid", "message": None}
    assert span["result_payload_validation"] is None
    assert span["size_bytes"] == len('{"prompt":"hi"}')
    assert span["data_risk"]["action_profile"]["read_data"] == "allowed"
    assert span["sensitive_encoding"] is False


def test_create_bare_body_works_the_same(world: SpanWorld) -> None:
    span = world.caller.details(
        "agent_spans/create",
        agent_instance_id=world.instance_id, schema_name="tool", status="complete",
        payload={}, result_payload={"ok": True},
    )
    assert span["status"] == "complete"
    assert span["schema_title"] == "tool"
    assert span["finished_at"] == span["started_at"]


def test_payloads_that_do_not_match_are_stored_and_flagged(world: SpanWorld) -> None:
    span = world.span(payload={"prompt": 42}, status="complete", result_payload={"text": 1})
    assert span["payload"] == {"prompt": 42}
    assert span["payload_validation"]["status"] == "invalid"
    assert span["payload_validation"]["errors"][0]["path"] == "/prompt"
    assert span["result_payload_validation"]["status"] == "invalid"


def test_a_span_of_an_undeclared_type_is_stored_and_flagged(world: SpanWorld) -> None:
    span = world.span(schema_name="langchain:retriever", payload={"q": "x"})
    assert span["schema_known"] is False
    assert span["schema_title"] == "langchain:retriever"
    assert span["payload_validation"] is None
    assert span["summary"] is None and span["data_risk"] is None
    counts = world.show_instance()["span_schema_counts"]["by_name"]
    assert counts == {"langchain:retriever": 1}


def test_pending_is_accepted_and_stored_as_active(world: SpanWorld) -> None:
    assert world.span(status="pending")["status"] == "active"
    assert world.show_instance()["span_counts"]["pending"] == 0


def test_required_and_invalid_members_are_named(world: SpanWorld) -> None:
    codes = refused(world, "agent_spans/create", payload=[], started_at="yesterday")
    assert codes == {
        "agent_instance_id": "required_value", "schema_name": "required_value",
        "status": "required_value", "payload": "invalid_value", "started_at": "invalid_value",
    }
    codes = refused(
        world, "agent_spans/create", agent_instance_id=world.instance_id, schema_name="llm",
        status="running", purpose="quality", sensitive_encoding="maybe",
    )
    assert codes == {
        "status": "invalid_value", "purpose": "invalid_value",
        "sensitive_encoding": "invalid_value",
    }


def test_instance_references_are_checked(world: SpanWorld, other: Bootstrap) -> None:
    base = {"schema_name": "llm", "status": "active"}
    assert refused(world, "agent_spans/create", agent_instance_id="nope", **base) == {
        "agent_instance_id": "invalid_value"
    }
    missing = world.gov.ids.new(world.caller.principal.partition, world.gov.clock())
    assert refused(world, "agent_spans/create", agent_instance_id=missing, **base) == {
        "agent_instance_id": "invalid_value"
    }
    assert refused(world, "agent_spans/create", agent_instance_id=world.agent["id"], **base) == {
        "agent_instance_id": "unexpected_ref_type"
    }
    stranger = account_caller(world.gov, other)
    foreign = register_run(stranger, make_agent(stranger)["id"])
    assert refused(world, "agent_spans/create", agent_instance_id=foreign["id"], **base) == {
        "agent_instance_id": "invalid_value"
    }


def test_the_parent_must_be_a_span_of_the_same_run(world: SpanWorld) -> None:
    parent = world.span()
    child = world.span(parent_span_id=parent["id"])
    assert child["parent_span_id"] == parent["id"]
    elsewhere = world.span(world.new_run()["id"])
    assert refused(
        world, "agent_spans/create", agent_instance_id=world.instance_id, schema_name="llm",
        status="active", parent_span_id=elsewhere["id"],
    ) == {"parent_span_id": "invalid_value"}
    assert refused(
        world, "agent_spans/create", agent_instance_id=world.instance_id, schema_name="llm",
        status="active", parent_span_id=world.instance_id,
    ) == {"parent_span_id": "unexpected_ref_type"}


def test_times_default_and_must_be_in_order(world: SpanWorld) -> None:
    span = world.span()
    assert span["started_at"] == span["inserted_at"]
    finished = world.span(status="failed", started_at="2026-02-01T10:00:00+02:00")
    assert finished["started_at"] == "2026-02-01T08:00:00.000000Z"
    assert finished["finished_at"] == finished["started_at"]
    assert refused(
        world, "agent_spans/create", agent_instance_id=world.instance_id, schema_name="llm",
        status="complete", started_at="2026-01-02T00:00:00Z", finished_at="2026-01-01T00:00:00Z",
    ) == {"finished_at": "invalid_value"}
    active = world.span(finished_at="2026-03-01T00:00:00Z")
    assert active["finished_at"] is None


def test_supplied_ids_malformed_taken_and_replayed(world: SpanWorld) -> None:
    assert refused(
        world, "agent_spans/create", id="not-an-id", agent_instance_id=world.instance_id,
        schema_name="llm", status="active",
    ) == {"id": "invalid_value"}
    chosen = world.gov.ids.new(world.caller.principal.partition, world.gov.clock())
    body = {"details": {"id": chosen, "agent_instance_id": world.instance_id,
                        "schema_name": "llm", "status": "active", "idempotency_key": "span-key-1"}}
    first = world.caller.call("agent_spans/create", body)
    assert first["details"]["id"] == chosen
    assert world.caller.call("agent_spans/create", body) == first
    assert world.show_instance()["span_counts"]["total"] == 1
    with pytest.raises(Conflict):
        world.span(id=chosen)
    with pytest.raises(Conflict):
        world.span(id=world.instance_id)


def test_a_span_starts_a_pending_run_and_moves_the_agent(world: SpanWorld) -> None:
    assert world.instance["status"] == "pending"
    span = world.span(started_at="2026-01-01T00:00:00Z")
    run = world.show_instance()
    assert run["status"] == "active"
    assert run["started_at"] == span["started_at"]
    agent = world.caller.details("agents/show", agent_id=world.agent["id"])
    assert agent["instance_counts"]["active"] == 1 and agent["instance_counts"]["pending"] == 0
    assert agent["last_activity_span_at"] == span["started_at"]


def test_spans_after_the_run_finished_are_stored(world: SpanWorld) -> None:
    span = world.span()
    world.caller.call("agent_instances/finish", agent_instance_id=world.instance_id)
    late = world.span(status="complete")
    finished = world.caller.details("agent_spans/finish", agent_span_id=span["id"])
    assert finished["status"] == "complete" and "control" not in finished
    run = world.show_instance()
    assert run["status"] == "complete"
    assert run["span_counts"]["complete"] == 2 and run["span_counts"]["total"] == 2
    assert late["id"] in {s["id"] for s in world.caller.call(
        "agent_spans/list", agent_instance_id=world.instance_id)["summaries"]}


def test_after_termination_spans_are_stored_and_answers_carry_control(world: SpanWorld) -> None:
    running = world.span()
    done = world.span()
    world.caller.call("agent_spans/finish", agent_span_id=done["id"])
    world.caller.call(
        "agent_instances/terminate", agent_instance_id=world.instance_id, reason="runaway"
    )
    order = {"terminate": True, "reason": "runaway"}

    created = world.caller.call("agent_spans/create", {
        "agent_instance_id": world.instance_id, "schema_name": "llm", "status": "active",
    })
    assert created["control"] == order and created["details"]["status"] == "active"
    finished = world.caller.call("agent_spans/finish", agent_span_id=created["details"]["id"])
    assert finished["control"] == order and finished["details"]["status"] == "complete"

    as_it_is = world.caller.call("agent_spans/finish", agent_span_id=running["id"])
    assert as_it_is["control"] == order
    assert as_it_is["details"]["status"] == "cancelled"
    with pytest.raises(InvalidAction):
        world.caller.call("agent_spans/finish", agent_span_id=done["id"])
    counts = world.show_instance()["span_counts"]
    assert counts["cancelled"] == 1 and counts["complete"] == 2 and counts["total"] == 3


# -- finish ----------------------------------------------------------------------------------
def test_finish_defaults_to_complete_and_checks_the_result(world: SpanWorld) -> None:
    span = world.span(payload={"prompt": "q"})
    done = world.caller.details(
        "agent_spans/finish", agent_span_id=span["id"], result_payload={"text": "a"}
    )
    assert done["status"] == "complete"
    assert done["result_payload"] == {"text": "a"}
    assert done["result_payload_validation"] == {"status": "valid", "message": None}
    assert done["payload_validation"] == span["payload_validation"]
    assert done["summary"] == "q -> a"
    assert done["size_bytes"] == len('{"prompt":"q"}') + len('{"text":"a"}')
    assert done["finished_at"] >= done["started_at"]


def test_finish_with_status_and_timestamp(world: SpanWorld) -> None:
    span = world.span(started_at="2026-01-01T00:00:00Z")
    done = world.caller.details(
        "agent_spans/finish", agent_span_id=span["id"], status="failed",
        timestamp="2026-01-01T00:00:03Z",
    )
    assert done["status"] == "failed" and done["finished_at"] == "2026-01-01T00:00:03.000000Z"
    counts = world.show_instance()["span_counts"]
    assert counts == {"active": 0, "complete": 0, "failed": 1, "cancelled": 0, "total": 1,
                      "finished": 1, "pending": 0}


def test_finish_refusals(world: SpanWorld) -> None:
    span = world.span(started_at="2026-01-01T00:00:10Z")
    assert refused(world, "agent_spans/finish", agent_span_id=span["id"], status="active") == {
        "status": "invalid_value"
    }
    assert refused(
        world, "agent_spans/finish", agent_span_id=span["id"], timestamp="2026-01-01T00:00:00Z"
    ) == {"timestamp": "invalid_value"}
    world.caller.call("agent_spans/finish", agent_span_id=span["id"], status="cancelled")
    with pytest.raises(InvalidAction):
        world.caller.call("agent_spans/finish", agent_span_id=span["id"])
    for bad in ("nope", world.instance_id, None):
        with pytest.raises(NotFound):
            world.caller.call("agent_spans/finish", agent_span_id=bad)


# -- show and list ---------------------------------------------------------------------------
def test_show_and_its_redacted_flag(world: SpanWorld, other: Bootstrap) -> None:
    span = world.span()
    assert world.caller.details("agent_spans/show", agent_span_id=span["id"]) == span
    assert world.caller.details(
        "agent_spans/show", agent_span_id=span["id"], redacted="true"
    ) == span
    assert refused(world, "agent_spans/show", agent_span_id=span["id"], redacted="perhaps") == {
        "redacted": "invalid_value"
    }
    stranger = account_caller(world.gov, other)
    with pytest.raises(NotFound):
        stranger.call("agent_spans/show", agent_span_id=span["id"])


def test_list_filters_and_sorting(world: SpanWorld) -> None:
    first = world.span(started_at="2026-01-01T00:00:01Z")
    second = world.span(schema_name="tool", status="complete", started_at="2026-01-01T00:00:02Z")
    third = world.span(status="failed", started_at="2026-01-01T00:00:03Z")
    world.caller.call("agent_instances/record_quality", agent_instance_id=world.instance_id,
                      name="accuracy", payload={"score": 1})
    other_run = world.new_run()
    world.span(other_run["id"])

    def ids(**members: Any) -> list[str]:
        listed = world.caller.call("agent_spans/list", members)
        return [row["id"] for row in listed["summaries"]]

    mine = {"agent_instance_id": world.instance_id}
    assert ids(**mine, sorting="-started_at", purpose="activity") == [
        third["id"], second["id"], first["id"]
    ]
    assert ids(**mine, status="failed") == [third["id"]]
    assert ids(**mine, schema_name="tool") == [second["id"]]
    assert len(ids(**mine, purpose="quality")) == 1
    assert ids(**mine, start_time="2026-01-01T00:00:02Z", end_time="2026-01-01T00:00:02Z",
               purpose="activity") == [second["id"]]
    assert len(ids(agent_id=world.agent["id"], purpose="activity")) == 4
    assert len(ids(agent_id=world.gov.ids.new(1, world.gov.clock()))) == 0
    assert refused(world, "agent_spans/list", sorting="payload", status="done") == {
        "sorting": "invalid_value", "status": "invalid_value"
    }


def test_list_shows_summaries_only_when_asked(world: SpanWorld) -> None:
    world.span(payload={"prompt": "p"})
    plain = world.caller.call("agent_spans/list", agent_instance_id=world.instance_id)
    assert plain["summaries"][0]["summary"] is None
    asked = world.caller.call(
        "agent_spans/list", agent_instance_id=world.instance_id, include_summaries="true",
        include_risk_level="true",
    )
    assert asked["summaries"][0]["summary"] == "p -> pending"


def test_list_stays_in_the_account(world: SpanWorld, other: Bootstrap) -> None:
    world.span()
    stranger = account_caller(world.gov, other)
    assert stranger.call("agent_spans/list")["pagination"]["item_count"] == 0
    listed = stranger.call("agent_spans/list", agent_instance_id=world.instance_id)
    assert listed["summaries"] == []


# -- ingestion tokens ------------------------------------------------------------------------
def test_an_ingestion_token_reaches_its_own_runs_only(world: SpanWorld) -> None:
    mine = world.ingestion()
    span = mine.details("agent_spans/create", agent_instance_id=world.instance_id,
                        schema_name="llm", status="active", payload={"prompt": "x"})
    assert mine.details("agent_spans/finish", agent_span_id=span["id"])["status"] == "complete"
    assert mine.details("agent_spans/show", agent_span_id=span["id"])["id"] == span["id"]
    listed = mine.call("agent_spans/list", agent_instance_id=world.instance_id)
    assert [row["id"] for row in listed["summaries"]] == [span["id"]]

    other_agent = make_agent(world.caller, "Other agent")
    foreign_run = register_run(world.caller, other_agent["id"])
    foreign_span = world.span(foreign_run["id"])
    with pytest.raises(NotFound):
        mine.call("agent_spans/create", agent_instance_id=foreign_run["id"], schema_name="llm",
                  status="active")
    with pytest.raises(NotFound):
        mine.call("agent_spans/show", agent_span_id=foreign_span["id"])
    with pytest.raises(NotFound):
        mine.call("agent_spans/finish", agent_span_id=foreign_span["id"])
    with pytest.raises(NotFound):
        mine.call("agent_spans/list", agent_instance_id=foreign_run["id"])
    with pytest.raises(ValidationErrors):
        mine.call("agent_spans/list")


def test_an_ingestion_token_of_another_environment_does_not_reach_the_run(
    world: SpanWorld,
) -> None:
    elsewhere = world.caller.details("environments/create", name="Staging", purpose="staging")
    stranger = world.caller.ingestion(world.agent["id"], elsewhere["id"])
    with pytest.raises(NotFound):
        stranger.call("agent_spans/create", agent_instance_id=world.instance_id,
                      schema_name="llm", status="active")


def test_ingestion_scope_does_not_open_account_operations(world: SpanWorld) -> None:
    with pytest.raises(NotPermitted):
        world.ingestion().call("teams/list")


def test_last_activity_follows_the_latest_span_time(world: SpanWorld) -> None:
    early = world.span(started_at="2026-01-01T00:00:05Z")
    world.span(started_at="2026-01-01T00:00:01Z")
    assert world.show_instance()["last_activity_span_at"] == early["started_at"]
    world.caller.call("agent_spans/finish", agent_span_id=early["id"],
                      timestamp="2026-01-01T00:00:09Z")
    assert world.show_instance()["last_activity_span_at"] == "2026-01-01T00:00:09.000000Z"
