"""Agent deployments: create, update (endpoint 11), show, list, errors and isolation."""

from __future__ import annotations

import pytest

from governance_core.errors import Conflict, NotFound, NotPermitted, ValidationErrors
from governance_core.service import Bootstrap, Governance
from tests.core.runs import Caller, account_caller, make_agent, register


@pytest.fixture
def caller(gov: Governance, boot: Bootstrap) -> Caller:
    return account_caller(gov, boot)


def test_create_and_show(caller: Caller, boot: Bootstrap) -> None:
    agent = make_agent(caller)
    deployment = caller.details(
        "agent_deployments/create", details={"agent_id": agent["id"],
                                             "environment_id": boot.environment_id},
    )
    assert deployment == {
        "id": deployment["id"],
        "account_id": boot.account_id,
        "agent_id": agent["id"],
        "environment_id": boot.environment_id,
        "current_version_id": None,
        "inserted_at": deployment["inserted_at"],
        "updated_at": deployment["inserted_at"],
        "type": "agent_deployment",
    }
    shown = caller.details("agent_deployments/show", agent_deployment_id=deployment["id"])
    assert shown == deployment
    with pytest.raises(Conflict):
        caller.call("agent_deployments/create", agent_id=agent["id"],
                    environment_id=boot.environment_id)
    # Registration uses the deployment that exists.
    instance = register(caller, agent["id"])
    assert instance["agent_deployment_id"] == deployment["id"]


def test_create_errors(caller: Caller, boot: Bootstrap) -> None:
    agent = make_agent(caller)
    other = make_agent(caller, name="Other")
    foreign_version = register(caller, other["id"])["agent_version_id"]
    with pytest.raises(ValidationErrors) as excinfo:
        caller.call("agent_deployments/create", {})
    errors = excinfo.value.to_payload()["errors"]
    assert errors["agent_id"]["code"] == errors["environment_id"]["code"] == "required_value"
    with pytest.raises(ValidationErrors) as excinfo:
        caller.call("agent_deployments/create", agent_id=boot.environment_id,
                    environment_id=agent["id"], id="bad")
    errors = excinfo.value.to_payload()["errors"]
    assert errors["agent_id"]["code"] == errors["environment_id"]["code"] == (
        "unexpected_ref_type"
    )
    assert errors["id"]["code"] == "invalid_value"
    with pytest.raises(ValidationErrors) as excinfo:
        caller.call("agent_deployments/create", agent_id=agent["id"],
                    environment_id=boot.environment_id, current_version_id=foreign_version)
    assert excinfo.value.to_payload()["errors"]["current_version_id"]["code"] == "invalid_value"


def test_update_sets_and_clears_the_current_version(caller: Caller) -> None:
    agent = make_agent(caller)
    first = register(caller, agent["id"])
    second = register(caller, agent["id"], version="2.0.0")
    deployment_id = first["agent_deployment_id"]
    updated = caller.details(
        "agent_deployments/update", agent_deployment_id=deployment_id,
        details={"current_version_id": first["agent_version_id"]},
    )
    assert updated["current_version_id"] == first["agent_version_id"]
    assert updated["updated_at"] > updated["inserted_at"]
    unchanged = caller.details("agent_deployments/update", agent_deployment_id=deployment_id)
    assert unchanged == updated
    cleared = caller.details(
        "agent_deployments/update", agent_deployment_id=deployment_id, current_version_id=None
    )
    assert cleared["current_version_id"] is None
    other = make_agent(caller, name="Other")
    foreign = register(caller, other["id"])["agent_version_id"]
    for bad, code in ((foreign, "invalid_value"), (agent["id"], "unexpected_ref_type"),
                      ("not-an-id", "invalid_value")):
        with pytest.raises(ValidationErrors) as excinfo:
            caller.call("agent_deployments/update", agent_deployment_id=deployment_id,
                        current_version_id=bad)
        assert excinfo.value.to_payload()["errors"]["current_version_id"]["code"] == code
    assert second["agent_deployment_id"] == deployment_id


def test_list_filters(caller: Caller, boot: Bootstrap) -> None:
    staging = caller.details("environments/create", name="Staging", purpose="staging")
    agent = make_agent(caller)
    other = make_agent(caller, name="Other")
    a = register(caller, agent["id"])["agent_deployment_id"]
    b = register(caller, agent["id"], environment_id=staging["id"])["agent_deployment_id"]
    c = register(caller, other["id"])["agent_deployment_id"]

    def ids(**query: str) -> list[str]:
        return [d["id"] for d in caller.call("agent_deployments/list", query)["summaries"]]

    assert ids() == [a, b, c]
    assert ids(agent_id=agent["id"]) == [a, b]
    assert ids(environment_id=boot.environment_id) == [a, c]
    assert ids(sorting="-inserted_at") == [c, b, a]


def test_isolation_and_scope(caller: Caller, gov: Governance, other: Bootstrap,
                             boot: Bootstrap) -> None:
    agent = make_agent(caller)
    deployment_id = register(caller, agent["id"])["agent_deployment_id"]
    stranger = account_caller(gov, other)
    for operation in ("agent_deployments/show", "agent_deployments/update"):
        with pytest.raises(NotFound):
            stranger.call(operation, agent_deployment_id=deployment_id, current_version_id=None)
    assert stranger.call("agent_deployments/list")["summaries"] == []
    with pytest.raises(ValidationErrors) as excinfo:
        stranger.call("agent_deployments/create", agent_id=agent["id"],
                      environment_id=other.environment_id)
    assert excinfo.value.to_payload()["errors"]["agent_id"]["code"] == "invalid_value"
    with pytest.raises(NotPermitted):
        caller.ingestion(agent["id"], boot.environment_id).call(
            "agent_deployments/update", agent_deployment_id=deployment_id
        )
