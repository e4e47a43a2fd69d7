"""Agents: the operations, their errors, dormancy, available actions and tenant isolation."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governance_core.clock import FixedClock, format_timestamp
from governance_core.errors import (
    Conflict,
    GovernanceError,
    InvalidAction,
    NotFound,
    NotPermitted,
    ValidationErrors,
)
from governance_core.service import Bootstrap, Governance
from tests.core.runs import Caller, account_caller, make_agent, register


@pytest.fixture
def caller(gov: Governance, boot: Bootstrap) -> Caller:
    return account_caller(gov, boot)


def error_of(excinfo: pytest.ExceptionInfo[GovernanceError]) -> dict[str, object]:
    return excinfo.value.to_payload()


def test_create_answers_agent_details(caller: Caller) -> None:
    agent = make_agent(caller, description="Reviews loans", external_identifier="reviewer")
    assert agent["type"] == "agent"
    assert agent["name"] == "Loan reviewer"
    assert agent["description"] == "Reviews loans"
    assert agent["external_identifier"] == "reviewer"
    assert agent["status"] == "pending"
    assert agent["last_activity_span_at"] is None
    assert agent["instance_counts"] == {
        "pending": 0, "active": 0, "complete": 0, "failed": 0, "cancelled": 0,
        "terminated": 0, "total": 0, "finished": 0,
    }
    assert agent["available_actions"] == {
        "delete": True, "reinstate": False, "retire": True, "update": True,
    }
    for name in ("owner_person_id", "risk_profile_id", "team_id"):
        assert agent[name] is None
    assert agent["inserted_at"] == agent["updated_at"]
    assert caller.details("agents/show", agent_id=agent["id"]) == agent


def test_create_requires_a_name(caller: Caller) -> None:
    with pytest.raises(ValidationErrors) as excinfo:
        caller.call("agents/create", {"details": {"description": "x"}})
    assert excinfo.value.to_payload()["errors"]["name"]["code"] == "required_value"


def test_server_managed_members_are_ignored(caller: Caller, boot: Bootstrap) -> None:
    agent = make_agent(
        caller, status="retired", instance_counts={"total": 5}, account_id="someone-else"
    )
    assert agent["status"] == "pending"
    assert agent["instance_counts"]["total"] == 0
    assert agent["account_id"] == boot.account_id


def test_references_resolve_in_the_account(caller: Caller, boot: Bootstrap) -> None:
    team = caller.details("teams/create", name="Risk")
    agent = make_agent(caller, team_id=team["id"], risk_profile_id=boot.risk_profile_id)
    assert agent["team_id"] == team["id"]
    assert agent["risk_profile_id"] == boot.risk_profile_id
    with pytest.raises(ValidationErrors) as excinfo:
        make_agent(caller, owner_person_id=team["id"], team_id=boot.environment_id)
    errors = excinfo.value.to_payload()["errors"]
    assert errors["owner_person_id"]["code"] == "unexpected_ref_type"
    assert errors["team_id"]["code"] == "unexpected_ref_type"
    with pytest.raises(ValidationErrors) as excinfo:
        make_agent(caller, team_id="not-an-id")
    assert excinfo.value.to_payload()["errors"]["team_id"]["code"] == "invalid_value"


def test_external_identifier_is_unique_in_the_account(
    caller: Caller, gov: Governance, other: Bootstrap
) -> None:
    first = make_agent(caller, external_identifier="ext-1")
    with pytest.raises(Conflict):
        make_agent(caller, external_identifier="ext-1")
    second = make_agent(caller, external_identifier="ext-2")
    with pytest.raises(Conflict):
        caller.call("agents/update", agent_id=second["id"], external_identifier="ext-1")
    # Keeping one's own identifier is no conflict, and another account may use it too.
    caller.call("agents/update", agent_id=first["id"], external_identifier="ext-1", name="Same")
    make_agent(account_caller(gov, other), external_identifier="ext-1")


def test_caller_supplied_id(caller: Caller, gov: Governance, other: Bootstrap) -> None:
    wanted = caller.gov.ids.new(caller.principal.partition, caller.gov.clock())
    agent = make_agent(caller, id=wanted)
    assert agent["id"] == wanted
    with pytest.raises(Conflict):
        make_agent(caller, id=wanted)
    with pytest.raises(ValidationErrors) as excinfo:
        make_agent(caller, id="123")
    assert excinfo.value.to_payload()["errors"]["id"]["code"] == "invalid_value"
    foreign = gov.ids.new(account_caller(gov, other).principal.partition, gov.clock())
    with pytest.raises(ValidationErrors):
        make_agent(caller, id=foreign)


def test_update_changes_only_what_was_sent(caller: Caller, gov: Governance) -> None:
    team = caller.details("teams/create", name="Risk")
    agent = make_agent(caller, description="d", team_id=team["id"])
    updated = caller.details("agents/update", agent_id=agent["id"], details={"name": "Renamed"})
    assert updated["name"] == "Renamed"
    assert updated["description"] == "d"
    assert updated["team_id"] == team["id"]
    assert updated["updated_at"] > agent["updated_at"]
    cleared = caller.details("agents/update", agent_id=agent["id"], team_id=None, description="")
    assert cleared["team_id"] is None and cleared["description"] is None
    with pytest.raises(ValidationErrors):
        caller.call("agents/update", agent_id=agent["id"], name=None)


def test_unknown_malformed_and_foreign_agents_are_not_found(
    caller: Caller, gov: Governance, other: Bootstrap
) -> None:
    agent = make_agent(caller)
    stranger = account_caller(gov, other)
    for operation in ("agents/show", "agents/update", "agents/retire", "agents/reinstate",
                      "agents/delete"):
        for agent_id in (agent["id"], "nope", None):
            with pytest.raises(NotFound):
                stranger.call(operation, agent_id=agent_id)
    assert stranger.call("agents/list")["summaries"] == []
    with pytest.raises(ValidationErrors):
        make_agent(stranger, team_id=caller.details("teams/create", name="T")["id"])


def test_retire_and_reinstate_follow_the_agent_table(caller: Caller) -> None:
    agent = make_agent(caller)
    retired = caller.details("agents/retire", agent_id=agent["id"])
    assert retired["status"] == "retired"
    assert retired["available_actions"] == {
        "delete": True, "reinstate": True, "retire": False, "update": False,
    }
    with pytest.raises(InvalidAction):
        caller.call("agents/retire", agent_id=agent["id"])
    with pytest.raises(InvalidAction):
        caller.call("agents/update", agent_id=agent["id"], name="x")
    with pytest.raises(InvalidAction):
        register(caller, agent["id"])
    # Without instances, reinstate lands in pending.
    assert caller.details("agents/reinstate", agent_id=agent["id"])["status"] == "pending"
    with pytest.raises(InvalidAction):
        caller.call("agents/reinstate", agent_id=agent["id"])
    register(caller, agent["id"])
    caller.call("agents/retire", agent_id=agent["id"])
    assert caller.details("agents/reinstate", agent_id=agent["id"])["status"] == "active"


def test_first_instance_activates_and_counts(caller: Caller) -> None:
    agent = make_agent(caller)
    register(caller, agent["id"])
    shown = caller.details("agents/show", agent_id=agent["id"])
    assert shown["status"] == "active"
    assert shown["instance_counts"]["pending"] == 1
    assert shown["instance_counts"]["total"] == 1
    assert shown["available_actions"]["delete"] is False


def test_delete_only_without_instances(caller: Caller, gov: Governance, boot: Bootstrap) -> None:
    agent = make_agent(caller)
    used = make_agent(caller, name="Used")
    register(caller, used["id"])
    with pytest.raises(InvalidAction):
        caller.call("agents/delete", agent_id=used["id"])
    deployment = caller.details(
        "agent_deployments/create", agent_id=agent["id"], environment_id=boot.environment_id
    )
    token = caller.call(
        "api_tokens/create", token_scope="agent_deployment", agent_id=agent["id"],
        environment_id=deployment["environment_id"],
    )
    deleted = caller.details("agents/delete", agent_id=agent["id"])
    assert deleted["id"] == agent["id"]
    with pytest.raises(NotFound):
        caller.call("agents/show", agent_id=agent["id"])
    with pytest.raises(NotFound):
        caller.call("agent_deployments/show", agent_deployment_id=deployment["id"])
    assert caller.details("api_tokens/show", api_token_id=token["details"]["id"])[
        "status"
    ] == "revoked"
    with pytest.raises(GovernanceError):
        gov.authenticate(token["token"])


def test_dormant_is_derived_from_activity(gov: Governance, boot: Bootstrap) -> None:
    clock = gov.clock
    assert isinstance(clock, FixedClock)
    caller = account_caller(gov, boot)
    quiet = make_agent(caller, name="Quiet")
    register(caller, quiet["id"])
    clock.advance(timedelta(days=20))
    busy = make_agent(caller, name="Busy")
    register(caller, busy["id"])
    never = make_agent(caller, name="Never")
    clock.advance(timedelta(days=11))
    assert caller.details("agents/show", agent_id=quiet["id"])["status"] == "dormant"
    assert caller.details("agents/show", agent_id=busy["id"])["status"] == "active"
    assert caller.details("agents/show", agent_id=never["id"])["status"] == "pending"
    dormant = caller.call("agents/list", status="dormant")
    assert [a["id"] for a in dormant["summaries"]] == [quiet["id"]]
    assert dormant["pagination"]["item_count"] == 1
    active = caller.call("agents/list", status="active")
    assert [a["id"] for a in active["summaries"]] == [busy["id"]]
    assert caller.details("agents/show", agent_id=quiet["id"])["available_actions"] == {
        "delete": False, "reinstate": False, "retire": True, "update": True,
    }
    # A span on the agent (written by span ingestion) wakes it.
    record = gov.store.get("agents", quiet["id"])
    assert record is not None
    gov.store.put("agents", {**record, "last_activity_span_at": format_timestamp(clock.now)})
    assert caller.details("agents/show", agent_id=quiet["id"])["status"] == "active"


def test_dormant_after_is_configurable(boot: Bootstrap, gov: Governance) -> None:
    import attrs

    gov.config = attrs.evolve(gov.config, dormant_after=timedelta(hours=1))
    caller = account_caller(gov, boot)
    agent = make_agent(caller)
    register(caller, agent["id"])
    assert isinstance(gov.clock, FixedClock)
    gov.clock.advance(timedelta(hours=2))
    assert caller.details("agents/show", agent_id=agent["id"])["status"] == "dormant"


def test_list_filters_sorting_and_pagination(caller: Caller, boot: Bootstrap) -> None:
    team = caller.details("teams/create", name="Risk")
    person = caller.details("people/create", name="Pat", email="pat@acme.test")
    names = ["Charlie", "alpha", "Bravo"]
    made = [make_agent(caller, name=n, external_identifier=n.lower()) for n in names]
    caller.call("agents/update", agent_id=made[0]["id"], team_id=team["id"],
                owner_person_id=person["id"], risk_profile_id=boot.risk_profile_id)
    caller.call("agents/retire", agent_id=made[1]["id"])
    listed = caller.call("agents/list")
    assert [a["id"] for a in listed["summaries"]] == [a["id"] for a in made]
    assert listed["sorting"] is None
    for name, value in (("team_id", team["id"]), ("owner_person_id", person["id"]),
                        ("risk_profile_id", boot.risk_profile_id)):
        assert [a["id"] for a in caller.call("agents/list", {name: value})["summaries"]] == [
            made[0]["id"]
        ]
    assert [a["id"] for a in caller.call("agents/list", status="retired")["summaries"]] == [
        made[1]["id"]
    ]
    assert len(caller.call("agents/list", status="pending")["summaries"]) == 2
    by_identifier = caller.call("agents/list", sorting="-external_identifier")
    assert [a["external_identifier"] for a in by_identifier["summaries"]] == [
        "charlie", "bravo", "alpha",
    ]
    page = caller.call("agents/list", {"pagination[page_size]": 2, "pagination[offset]": 2})
    assert page["pagination"]["item_count"] == 3
    assert len(page["summaries"]) == 1
    for sort in ("id", "name", "status", "inserted_at", "last_activity_span_at"):
        caller.call("agents/list", sorting=sort)
    with pytest.raises(ValidationErrors) as excinfo:
        caller.call("agents/list", sorting="description", status="asleep", team_id="x")
    assert set(excinfo.value.to_payload()["errors"]) == {"sorting", "status", "team_id"}


def test_dormant_list_paginates(gov: Governance, boot: Bootstrap) -> None:
    caller = account_caller(gov, boot)
    made = [make_agent(caller, name=f"A{i}") for i in range(5)]
    for agent in made:
        register(caller, agent["id"])
    assert isinstance(gov.clock, FixedClock)
    gov.clock.advance(timedelta(days=31))
    page = caller.call("agents/list", {"status": "dormant", "sorting": "-name",
                                      "pagination": {"offset": 1, "page_size": 2}})
    assert [a["name"] for a in page["summaries"]] == ["A3", "A2"]
    assert page["pagination"]["item_count"] == 5
    assert page["sorting"] == {"field": "name", "direction": "desc", "nulls": "auto"}


def test_ingestion_tokens_cannot_manage_agents(caller: Caller, boot: Bootstrap) -> None:
    agent = make_agent(caller)
    ingestion = caller.ingestion(agent["id"], boot.environment_id)
    for operation in ("agents/list", "agents/show", "agents/create", "agents/update",
                      "agents/retire", "agents/reinstate", "agents/delete"):
        with pytest.raises(NotPermitted):
            ingestion.call(operation, agent_id=agent["id"], name="x")


def test_bulk_items_and_idempotent_create(caller: Caller) -> None:
    outputs = caller.call("bulk", items=[
        {"_type": "agents/create", "idempotency_key": "create-one",
         "details": {"name": "Bulk", "description": None}},
        {"_type": "agents/list", "idempotency_key": "list-all-1"},
    ])["outputs"]
    created = outputs["create-one"]["details"]
    assert outputs["list-all-1"]["summaries"][0]["id"] == created["id"]
    again = caller.call("agents/create", {"details": {"name": "Once"}, "idempotency_key": "k" * 8})
    replay = caller.call("agents/create", {"details": {"name": "Once"}, "idempotency_key": "k" * 8})
    assert again == replay
    assert len(caller.call("agents/list")["summaries"]) == 2
