"""Agent versions and agent schema versions: list, show, current refs, isolation."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.errors import NotFound, NotPermitted, ValidationErrors
from governance_core.service import Bootstrap, Governance
from tests.core.runs import Caller, account_caller, make_agent, register, register_body


@pytest.fixture
def caller(gov: Governance, boot: Bootstrap) -> Caller:
    return account_caller(gov, boot)


def test_version_details(caller: Caller) -> None:
    agent = make_agent(caller)
    body = register_body(agent["id"])
    body["agent_version"]["runtime_environment"] = {"python": ["langchain==0.3.1"]}
    body["agent_version"]["description"] = "first cut"
    instance = caller.details("agent_instances/register", body)
    version = caller.details("agent_versions/show", agent_version_id=instance["agent_version_id"])
    assert version == {
        "id": instance["agent_version_id"],
        "account_id": instance["account_id"],
        "agent_id": agent["id"],
        "agent_schema_version_id": instance["agent_schema_version_id"],
        "external_identifier": "1.0.0",
        "name": "Reviewer",
        "description": "first cut",
        "current_agent_deployment_refs": [instance["agent_deployment_id"]],
        "runtime_environment": {"python": ["langchain==0.3.1"]},
        "inserted_at": version["inserted_at"],
        "updated_at": version["inserted_at"],
        "type": "agent_version",
    }
    newer = register(caller, agent["id"], version="2.0.0")
    old = caller.details("agent_versions/show", agent_version_id=instance["agent_version_id"])
    assert old["current_agent_deployment_refs"] == []
    assert old["runtime_environment"] == {"python": ["langchain==0.3.1"]}
    listed = caller.call(
        "agent_versions/list", agent_id=agent["id"], sorting="-external_identifier"
    )
    assert [v["id"] for v in listed["summaries"]] == [
        newer["agent_version_id"], instance["agent_version_id"],
    ]


def test_reregistering_a_version_updates_what_was_sent(caller: Caller) -> None:
    agent = make_agent(caller)
    first = register(caller, agent["id"])
    body = register_body(agent["id"])
    body["agent_version"] = {"external_identifier": "1.0.0", "description": "now described"}
    caller.call("agent_instances/register", body)
    version = caller.details("agent_versions/show", agent_version_id=first["agent_version_id"])
    assert version["name"] == "Reviewer"
    assert version["description"] == "now described"
    assert version["updated_at"] > version["inserted_at"]


def test_schema_version_fetch_form(caller: Caller, boot: Bootstrap) -> None:
    agent = make_agent(caller)
    instance = register(caller, agent["id"])
    schema = caller.details(
        "agent_schema_versions/show", agent_schema_version_id=instance["agent_schema_version_id"]
    )
    assert {
        "account_id", "agent_id", "current_version", "environment_id", "external_identifier",
        "id", "inserted_at", "span_type_schemas", "alert_schemas", "quality_schemas",
        "current_agent_deployment_refs", "type", "updated_at",
    } <= set(schema)
    assert schema["type"] == "agent_schema_version"
    assert schema["current_version"] is True
    assert schema["environment_id"] == boot.environment_id
    assert schema["current_agent_deployment_refs"] == [instance["agent_deployment_id"]]
    llm = schema["span_type_schemas"]["langchain:llm"]
    assert llm["params_schema_validation"] == {"status": "valid", "message": None}
    assert llm["template"] == "{{ prompt }}"
    assert llm["template_validation"]["status"] == "valid"
    assert llm["data_risk"]["action_profile"]["read_data"] == "allowed"
    assert llm["data_risk"]["action_profile"]["create_data"] == "unknown"
    register(caller, agent["id"], version="2.0.0", span_type_schemas=[{"name": "new"}])
    schema = caller.details(
        "agent_schema_versions/show", agent_schema_version_id=instance["agent_schema_version_id"]
    )
    assert schema["current_version"] is False
    assert schema["current_agent_deployment_refs"] == []
    listed = caller.call("agent_schema_versions/list", agent_id=agent["id"])
    assert [s["current_version"] for s in listed["summaries"]] == [False, True]
    assert caller.call("agent_schema_versions/list", agent_id=make_agent(caller)["id"])[
        "summaries"
    ] == []


def test_schema_version_full_form_has_the_interface_fields(caller: Caller) -> None:
    from governance_core.operations.agent_schema_versions import schema_version_full

    agent = make_agent(caller)
    instance = register(caller, agent["id"])
    record = caller.gov.store.get("agent_schema_versions", instance["agent_schema_version_id"])
    assert record is not None
    ctx = caller.gov.context(caller.principal)
    full = schema_version_full(ctx, record)
    assert set(full) == {
        "id", "account_id", "agent_id", "external_identifier", "current_agent_deployment_refs",
        "span_type_schemas", "alert_schemas", "quality_schemas", "inserted_at", "updated_at",
        "type",
    }


def test_versions_are_isolated_and_account_only(
    caller: Caller, gov: Governance, other: Bootstrap, boot: Bootstrap
) -> None:
    agent = make_agent(caller)
    instance = register(caller, agent["id"])
    stranger = account_caller(gov, other)
    with pytest.raises(NotFound):
        stranger.call("agent_versions/show", agent_version_id=instance["agent_version_id"])
    with pytest.raises(NotFound):
        stranger.call(
            "agent_schema_versions/show",
            agent_schema_version_id=instance["agent_schema_version_id"],
        )
    with pytest.raises(NotFound):
        caller.call("agent_versions/show", agent_version_id=instance["agent_schema_version_id"])
    assert stranger.call("agent_versions/list")["summaries"] == []
    assert stranger.call("agent_schema_versions/list")["summaries"] == []
    ingestion = caller.ingestion(agent["id"], boot.environment_id)
    for operation in ("agent_versions/list", "agent_schema_versions/list"):
        with pytest.raises(NotPermitted):
            ingestion.call(operation)
    with pytest.raises(ValidationErrors):
        caller.call("agent_versions/list", agent_id="bad", sorting="name")


def test_versions_list_shape(caller: Caller) -> None:
    agent = make_agent(caller)
    register(caller, agent["id"])
    listed: dict[str, Any] = caller.call("agent_versions/list")
    assert listed["status"] == "success"
    assert listed["pagination"]["item_count"] == 1
    assert listed["sorting"] is None
