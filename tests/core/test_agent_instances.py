"""Agent instances: register, start, finish, terminate, show, list; scoping and aggregates."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.converter import to_record
from governance_core.errors import (
    Conflict,
    IdempotencyKeyAlreadyUsed,
    InvalidAction,
    NotFound,
    NotPermitted,
    ValidationErrors,
)
from governance_core.models.agents import AgentSpan
from governance_core.service import Bootstrap, Governance
from tests.core.runs import (
    SPAN_TYPES,
    Caller,
    account_caller,
    fresh_caller,
    make_agent,
    register,
    register_body,
)
from tests.stores import STORE_KINDS

INSTANCE_KEYS = {
    "id", "account_id", "agent_id", "agent_version_id", "agent_deployment_id",
    "agent_schema_version_id", "environment_id", "external_identifier", "purpose", "status",
    "termination_reason", "started_at", "finished_at", "last_activity_span_at", "inserted_at",
    "updated_at", "raised_alert_count", "quality_payloads", "quality_summaries", "span_counts",
    "span_schema_counts", "cost_breakdown", "risk_score", "type",
}


@pytest.fixture
def caller(gov: Governance, boot: Bootstrap) -> Caller:
    return account_caller(gov, boot)


@pytest.fixture
def agent(caller: Caller) -> dict[str, Any]:
    return make_agent(caller)


def errors_of(error: ValidationErrors) -> dict[str, Any]:
    payload: dict[str, Any] = error.to_payload()["errors"]
    return payload


# -- register --------------------------------------------------------------------------


def test_register_answers_instance_details(
    caller: Caller, agent: dict[str, Any], boot: Bootstrap
) -> None:
    instance = register(caller, agent["id"])
    assert set(instance) == INSTANCE_KEYS
    assert instance["type"] == "agent_instance"
    assert instance["status"] == "pending"
    assert instance["purpose"] == "live"
    assert instance["environment_id"] == boot.environment_id
    assert instance["span_counts"] == {
        "active": 0, "cancelled": 0, "complete": 0, "failed": 0, "finished": 0, "pending": 0,
        "total": 0,
    }
    assert instance["span_schema_counts"] == {"by_name": {}}
    assert instance["quality_payloads"] == {} and instance["quality_summaries"] == {}
    assert instance["raised_alert_count"] == 0
    assert instance["termination_reason"] is None
    assert instance["cost_breakdown"] is None and instance["risk_score"] is None
    assert caller.details("agent_instances/show", agent_instance_id=instance["id"]) == instance
    deployment = caller.details(
        "agent_deployments/show", agent_deployment_id=instance["agent_deployment_id"]
    )
    assert deployment["current_version_id"] == instance["agent_version_id"]
    assert deployment["environment_id"] == boot.environment_id


def test_register_reuses_versions_schemas_and_deployments(
    caller: Caller, agent: dict[str, Any]
) -> None:
    first = register(caller, agent["id"])
    # The same content as a map by name, in another order and without defaults spelt out.
    as_map = {entry["name"]: entry for entry in reversed(SPAN_TYPES)}
    second = register(caller, agent["id"], schema="other-label", span_type_schemas=as_map)
    for key in ("agent_version_id", "agent_schema_version_id", "agent_deployment_id"):
        assert second[key] == first[key]
    assert caller.call("agent_schema_versions/list")["pagination"]["item_count"] == 1
    only = [{"name": "only", "params_schema": {}}]
    changed = register(caller, agent["id"], span_type_schemas=only)
    assert changed["agent_version_id"] == first["agent_version_id"]
    assert changed["agent_schema_version_id"] != first["agent_schema_version_id"]
    version = caller.details("agent_versions/show", agent_version_id=first["agent_version_id"])
    assert version["agent_schema_version_id"] == changed["agent_schema_version_id"]
    newer = register(caller, agent["id"], version="2.0.0")
    assert newer["agent_version_id"] != first["agent_version_id"]
    assert newer["agent_schema_version_id"] == first["agent_schema_version_id"]
    assert newer["agent_deployment_id"] == first["agent_deployment_id"]


def test_register_without_schemas_keeps_the_versions_own(
    caller: Caller, agent: dict[str, Any]
) -> None:
    first = register(caller, agent["id"])
    body = register_body(agent["id"])
    del body["agent_schema_version"]
    again = caller.details("agent_instances/register", body)
    assert again["agent_schema_version_id"] == first["agent_schema_version_id"]
    body = register_body(agent["id"], version="bare")
    del body["agent_schema_version"]
    bare = caller.details("agent_instances/register", body)
    schema = caller.details(
        "agent_schema_versions/show", agent_schema_version_id=bare["agent_schema_version_id"]
    )
    assert schema["span_type_schemas"] == {} and schema["external_identifier"] == "bare"


def test_update_current_version_false_leaves_the_deployment(
    caller: Caller, agent: dict[str, Any], boot: Bootstrap
) -> None:
    env = caller.details("environments/create", name="Staging", purpose="staging")
    fresh = register(caller, agent["id"], environment_id=env["id"], update_current_version=False)
    deployment = caller.details(
        "agent_deployments/show", agent_deployment_id=fresh["agent_deployment_id"]
    )
    assert deployment["environment_id"] == env["id"]
    assert deployment["current_version_id"] is None
    first = register(caller, agent["id"])
    register(caller, agent["id"], version="2.0.0", update_current_version=False)
    deployment = caller.details(
        "agent_deployments/show", agent_deployment_id=first["agent_deployment_id"]
    )
    assert deployment["current_version_id"] == first["agent_version_id"]
    register(caller, agent["id"], version="3.0.0")
    deployment = caller.details(
        "agent_deployments/show", agent_deployment_id=first["agent_deployment_id"]
    )
    assert deployment["current_version_id"] != first["agent_version_id"]


def test_register_field_errors(caller: Caller, agent: dict[str, Any], boot: Bootstrap) -> None:
    with pytest.raises(ValidationErrors) as excinfo:
        caller.call("agent_instances/register", {"agent_schema_version": []})
    errors = errors_of(excinfo.value)
    assert errors["agent_id"]["code"] == "required_value"
    assert errors["agent_version"]["code"] == "required_value"
    assert errors["agent_schema_version"]["code"] == "invalid_value"
    bad_risk = [{"name": "t", "params_schema": {},
                 "data_risk": {"action_profile": {"read_data": "sometimes"}}}]
    with pytest.raises(ValidationErrors) as excinfo:
        caller.call("agent_instances/register", register_body(
            boot.environment_id, purpose="chaos", environment_id=agent["id"], id="x",
            agent_version={"name": "no identifier"}, span_type_schemas=bad_risk,
        ))
    errors = errors_of(excinfo.value)
    assert errors["agent_id"]["code"] == "unexpected_ref_type"
    assert errors["environment_id"]["code"] == "unexpected_ref_type"
    assert errors["purpose"]["code"] == "invalid_value"
    assert errors["id"]["code"] == "invalid_value"
    assert errors["agent_version"]["errors"]["external_identifier"]["code"] == "required_value"
    risk = errors["agent_schema_version"]["errors"]["span_type_schemas"]["errors"]["0"]
    assert risk["errors"]["data_risk"]["errors"]["action_profile"]["errors"]["read_data"][
        "code"
    ] == "invalid_value"


def test_schema_entries_are_checked_and_stored(caller: Caller, agent: dict[str, Any]) -> None:
    body = register_body(agent["id"], span_type_schemas=[
        {"name": "broken", "params_schema": {"type": "nope"}, "result_schema": None},
    ])
    body["agent_schema_version"]["span_schemas"] = {"legacy": {"type": "object"}}
    body["agent_schema_version"]["span_result_schemas"] = {"legacy": {"type": "string"}}
    body["agent_schema_version"]["quality_schemas"] = {"accuracy": {"schema": {"type": 1}}}
    body["agent_schema_version"]["alert_schemas"] = [{"name": "slow", "title": "Too slow"}]
    instance = caller.details("agent_instances/register", body)
    schema = caller.details(
        "agent_schema_versions/show", agent_schema_version_id=instance["agent_schema_version_id"]
    )
    broken = schema["span_type_schemas"]["broken"]
    assert broken["params_schema_validation"]["status"] == "invalid"
    assert broken["params_schema_validation"]["message"]
    assert broken["result_schema"] == {}
    assert broken["result_schema_validation"] == {"status": "valid", "message": None}
    assert broken["title"] == "broken"
    legacy = schema["span_type_schemas"]["legacy"]
    assert legacy["params_schema"] == {"type": "object"}
    assert legacy["result_schema"] == {"type": "string"}
    assert schema["quality_schemas"]["accuracy"]["schema_validation"]["status"] == "invalid"
    assert schema["alert_schemas"]["slow"]["title"] == "Too slow"
    assert schema["alert_schemas"]["slow"]["schema"] == {}


def test_register_conflicts(caller: Caller, agent: dict[str, Any]) -> None:
    first = register(caller, agent["id"], external_identifier="run-1")
    with pytest.raises(Conflict):
        register(caller, agent["id"], external_identifier="run-1")
    with pytest.raises(Conflict):
        register(caller, agent["id"], id=first["id"])
    other = make_agent(caller, name="Other")
    assert register(caller, other["id"], external_identifier="run-1")["external_identifier"] == (
        "run-1"
    )
    wanted = caller.gov.ids.new(caller.principal.partition, caller.gov.clock())
    assert register(caller, agent["id"], id=wanted)["id"] == wanted


def test_register_refuses_retired_agents(caller: Caller, agent: dict[str, Any]) -> None:
    caller.call("agents/retire", agent_id=agent["id"])
    with pytest.raises(InvalidAction):
        register(caller, agent["id"])
    assert caller.call("agent_instances/list")["summaries"] == []


def test_register_replays_with_its_key(caller: Caller, agent: dict[str, Any]) -> None:
    body = {**register_body(agent["id"]), "idempotency_key": "register-0001"}
    first = caller.call("agent_instances/register", body)
    assert caller.call("agent_instances/register", body) == first
    assert caller.call("agent_instances/list")["pagination"]["item_count"] == 1
    with pytest.raises(IdempotencyKeyAlreadyUsed):
        caller.call("agent_instances/register", {**body, "purpose": "eval"})
    shown = caller.details("agents/show", agent_id=agent["id"])
    assert shown["instance_counts"]["total"] == 1


# -- lifecycle -------------------------------------------------------------------------


def test_start_finish_and_their_timestamps(caller: Caller, agent: dict[str, Any]) -> None:
    instance = register(caller, agent["id"])
    started = caller.details(
        "agent_instances/start", agent_instance_id=instance["id"],
        timestamp="2025-12-31T23:00:00+01:00",
    )
    assert started["status"] == "active"
    assert started["started_at"] == "2025-12-31T22:00:00.000000Z"
    again = caller.details("agent_instances/start", agent_instance_id=instance["id"])
    assert again == started
    finished = caller.details("agent_instances/finish", agent_instance_id=instance["id"],
                              timestamp=None)
    assert finished["status"] == "complete"
    assert finished["finished_at"] is not None
    with pytest.raises(InvalidAction):
        caller.call("agent_instances/finish", agent_instance_id=instance["id"], status="failed")
    late_start = caller.details("agent_instances/start", agent_instance_id=instance["id"])
    assert late_start == finished
    with pytest.raises(ValidationErrors) as excinfo:
        caller.call("agent_instances/finish", agent_instance_id=instance["id"],
                    status="exploded", timestamp="yesterday")
    assert set(errors_of(excinfo.value)) == {"status", "timestamp"}


def test_finish_from_pending_and_statuses(caller: Caller, agent: dict[str, Any]) -> None:
    for status in ("failed", "cancelled", "complete"):
        instance = register(caller, agent["id"])
        done = caller.details(
            "agent_instances/finish", agent_instance_id=instance["id"], status=status
        )
        assert done["status"] == status
        assert done["started_at"] is None
    counts = caller.details("agents/show", agent_id=agent["id"])["instance_counts"]
    assert counts["failed"] == counts["cancelled"] == counts["complete"] == 1
    assert counts["finished"] == 3 and counts["pending"] == 0


def test_start_and_finish_replay_with_their_keys(caller: Caller, agent: dict[str, Any]) -> None:
    instance = register(caller, agent["id"])
    start = {"agent_instance_id": instance["id"], "idempotency_key": "start-0001"}
    started = caller.call("agent_instances/start", start)
    assert caller.call("agent_instances/start", start) == started
    finish = {"agent_instance_id": instance["id"], "idempotency_key": "finish-001"}
    finished = caller.call("agent_instances/finish", finish)
    # A replay answers the stored response; the same finish without the key is refused.
    assert caller.call("agent_instances/finish", finish) == finished
    with pytest.raises(InvalidAction):
        caller.call("agent_instances/finish", agent_instance_id=instance["id"])
    counts = caller.details("agents/show", agent_id=agent["id"])["instance_counts"]
    assert counts["complete"] == 1 and counts["active"] == 0 and counts["total"] == 1


def add_span(gov: Governance, instance: dict[str, Any], status: str, purpose: str = "activity",
             name: str = "langchain:llm") -> str:
    """Store a span and move the instance's aggregates, as span ingestion does."""
    from governance_core.rules.aggregates import apply_span

    now = gov.clock()
    span = AgentSpan(
        id=gov.ids.new(0, now), account_id=instance["account_id"], agent_id=instance["agent_id"],
        agent_instance_id=instance["id"], schema_name=name, schema_title=name, status=status,
        purpose=purpose, started_at=now, inserted_at=now, updated_at=now,
    )
    record = to_record(span)
    with gov.store.transaction():
        gov.store.put("agent_spans", record)
        stored = gov.store.get("agent_instances", instance["id"])
        assert stored is not None
        gov.store.put("agent_instances", apply_span(stored, None, record))
    return span.id


def test_terminate_cancels_active_spans(
    caller: Caller, agent: dict[str, Any], gov: Governance
) -> None:
    instance = register(caller, agent["id"])
    caller.call("agent_instances/start", agent_instance_id=instance["id"])
    running = [add_span(gov, instance, "active") for _ in range(2)]
    done = add_span(gov, instance, "complete")
    system = add_span(gov, instance, "active", purpose="quality")
    other = register(caller, agent["id"])
    elsewhere = add_span(gov, other, "active")
    with pytest.raises(ValidationErrors) as excinfo:
        caller.call("agent_instances/terminate", agent_instance_id=instance["id"], reason=" ")
    assert errors_of(excinfo.value)["reason"]["code"] == "required_value"
    terminated = caller.details(
        "agent_instances/terminate", agent_instance_id=instance["id"], reason="runaway costs"
    )
    assert terminated["status"] == "terminated"
    assert terminated["termination_reason"] == "runaway costs"
    assert terminated["finished_at"] is not None
    assert terminated["span_counts"] == {
        "active": 0, "cancelled": 2, "complete": 1, "failed": 0, "finished": 3, "pending": 0,
        "total": 3,
    }
    assert terminated["span_schema_counts"] == {"by_name": {"langchain:llm": 3}}
    statuses = {
        span_id: (gov.store.get("agent_spans", span_id) or {})["status"]
        for span_id in [*running, done, system, elsewhere]
    }
    assert statuses == {running[0]: "cancelled", running[1]: "cancelled", done: "complete",
                        system: "cancelled", elsewhere: "active"}
    with pytest.raises(InvalidAction):
        caller.call("agent_instances/terminate", agent_instance_id=instance["id"], reason="again")
    with pytest.raises(InvalidAction):
        caller.call("agent_instances/finish", agent_instance_id=instance["id"])
    counts = caller.details("agents/show", agent_id=agent["id"])["instance_counts"]
    assert counts["terminated"] == 1 and counts["pending"] == 1 and counts["finished"] == 1


# -- reading, scoping, isolation ---------------------------------------------------------


def test_list_filters_and_sorting(caller: Caller, agent: dict[str, Any]) -> None:
    other_agent = make_agent(caller, name="Other")
    env = caller.details("environments/create", name="Staging", purpose="staging")
    a = register(caller, agent["id"], purpose="eval")
    b = register(caller, agent["id"], environment_id=env["id"])
    c = register(caller, other_agent["id"], purpose="smoke_test")
    caller.call("agent_instances/start", agent_instance_id=b["id"])
    caller.call("agent_instances/finish", agent_instance_id=c["id"], status="failed")

    def ids(**query: Any) -> list[str]:
        return [i["id"] for i in caller.call("agent_instances/list", query)["summaries"]]

    assert ids() == [a["id"], b["id"], c["id"]]
    assert ids(agent_id=agent["id"]) == [a["id"], b["id"]]
    assert ids(environment_id=env["id"]) == [b["id"]]
    assert ids(agent_deployment_id=a["agent_deployment_id"]) == [a["id"]]
    assert ids(status="failed") == [c["id"]]
    assert ids(purpose="eval") == [a["id"]]
    assert ids(sorting="-status") == [a["id"], c["id"], b["id"]]
    assert ids(sorting="-started_at") == [b["id"], a["id"], c["id"]]
    assert ids(**{"sorting[field]": "started_at", "sorting[nulls]": "first"}) == [
        a["id"], c["id"], b["id"],
    ]
    assert ids(sorting="-finished_at")[0] == c["id"]
    for field in ("id", "started_at", "finished_at", "inserted_at"):
        assert sorted(ids(sorting=field)) == sorted(ids())
    with pytest.raises(ValidationErrors) as excinfo:
        caller.call("agent_instances/list", status="sleeping", purpose="fun", sorting="name",
                    agent_id="zzz")
    assert set(errors_of(excinfo.value)) == {"status", "purpose", "sorting", "agent_id"}


def test_ingestion_token_reach(
    caller: Caller, agent: dict[str, Any], boot: Bootstrap, gov: Governance
) -> None:
    env = caller.details("environments/create", name="Staging", purpose="staging")
    ingestion = caller.ingestion(agent["id"], boot.environment_id)
    body = register_body()
    own = ingestion.details("agent_instances/register", body)
    assert own["agent_id"] == agent["id"] and own["environment_id"] == boot.environment_id
    named = ingestion.details(
        "agent_instances/register", register_body(agent["id"], environment_id=boot.environment_id)
    )
    assert named["agent_deployment_id"] == own["agent_deployment_id"]
    other_agent = make_agent(caller, name="Other")
    for override in ({"agent_id": other_agent["id"]}, {"environment_id": env["id"]}):
        with pytest.raises(NotPermitted):
            ingestion.call("agent_instances/register", {**body, **override})
    foreign = [
        register(caller, other_agent["id"]),
        register(caller, agent["id"], environment_id=env["id"]),
    ]
    for instance in foreign:
        for operation in ("agent_instances/show", "agent_instances/start",
                          "agent_instances/finish"):
            with pytest.raises(NotFound):
                ingestion.call(operation, agent_instance_id=instance["id"])
    listed = ingestion.call("agent_instances/list", agent_id=other_agent["id"])
    assert listed["summaries"] == []
    assert [i["id"] for i in ingestion.call("agent_instances/list")["summaries"]] == [
        own["id"], named["id"],
    ]
    assert ingestion.details("agent_instances/start", agent_instance_id=own["id"])[
        "status"
    ] == "active"
    assert ingestion.details("agent_instances/finish", agent_instance_id=own["id"])[
        "status"
    ] == "complete"
    with pytest.raises(NotPermitted):
        ingestion.call("agent_instances/terminate", agent_instance_id=named["id"], reason="x")


def test_ingestion_token_issued_by_the_api(
    caller: Caller, agent: dict[str, Any], boot: Bootstrap, gov: Governance
) -> None:
    issued = caller.call(
        "api_tokens/create", token_scope="agent_deployment", agent_id=agent["id"],
        environment_id=boot.environment_id,
    )
    instance = gov.call("agent_instances/register", register_body(), token=issued["token"])
    assert instance["details"]["agent_id"] == agent["id"]


def test_instances_are_isolated_between_accounts(
    caller: Caller, agent: dict[str, Any], gov: Governance, other: Bootstrap
) -> None:
    instance = register(caller, agent["id"])
    stranger = account_caller(gov, other)
    for operation in ("agent_instances/show", "agent_instances/start", "agent_instances/finish",
                      "agent_instances/terminate"):
        with pytest.raises(NotFound):
            stranger.call(operation, agent_instance_id=instance["id"], reason="x")
    assert stranger.call("agent_instances/list")["summaries"] == []
    with pytest.raises(ValidationErrors) as excinfo:
        register(stranger, agent["id"])
    assert errors_of(excinfo.value)["agent_id"]["code"] == "invalid_value"
    with pytest.raises(ValidationErrors):
        register(account_caller(gov, other), make_agent(stranger)["id"],
                 environment_id=instance["environment_id"])


# -- the aggregate invariant -----------------------------------------------------------

STEP = st.one_of(
    st.tuples(st.just("register"), st.integers(0, 2)),
    st.tuples(st.sampled_from(["start", "complete", "failed", "cancelled", "terminate"]),
              st.integers(0, 30)),
)


@pytest.mark.parametrize("store", STORE_KINDS)
@settings(max_examples=25, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=25))
def test_instance_counts_match_a_recount(store: str, steps: list[tuple[str, int]]) -> None:
    caller = fresh_caller(store)
    agents = [make_agent(caller, name=f"A{i}")["id"] for i in range(3)]
    instances: list[str] = []
    for action, number in steps:
        try:
            if action == "register":
                instances.append(register(caller, agents[number])["id"])
            elif instances:
                target = instances[number % len(instances)]
                if action == "start":
                    caller.call("agent_instances/start", agent_instance_id=target)
                elif action == "terminate":
                    caller.call("agent_instances/terminate", agent_instance_id=target, reason="r")
                else:
                    caller.call("agent_instances/finish", agent_instance_id=target, status=action)
        except InvalidAction:
            pass
    for agent_id in agents:
        shown = caller.details("agents/show", agent_id=agent_id)
        rows = caller.gov.store.query("agent_instances")
        recount = Counter(r["status"] for r in rows if r["agent_id"] == agent_id)
        expected = {status: recount.get(status, 0) for status in (
            "pending", "active", "complete", "failed", "cancelled", "terminated")}
        expected["total"] = sum(recount.values())
        expected["finished"] = expected["total"] - expected["pending"] - expected["active"]
        assert shown["instance_counts"] == expected
        assert shown["status"] == ("active" if expected["total"] else "pending")
