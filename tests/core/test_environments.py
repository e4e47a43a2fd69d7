"""Environments: create, update, show, list."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.errors import Conflict, NotFound
from governance_core.operations.environments import DEFAULT_PURPOSE, PURPOSES
from tests.core.accounts_world import World, fails, field_codes

DETAILS = {
    "id", "account_id", "name", "purpose", "external_identifier", "description", "is_default",
    "inserted_at", "updated_at", "type",
}


def test_the_bootstrap_environment_is_the_default(world: World) -> None:
    default = world.a.session.show_environment(world.a.boot.environment_id)
    assert set(default) == DETAILS
    assert default["is_default"] is True
    assert default["purpose"] == "production"


def test_create_answers_every_field(world: World) -> None:
    out = world.gov.call("environments/create", {"details": {
        "account_id": world.a.boot.account_id, "name": "Prod EU", "purpose": "production",
        "external_identifier": "prod-eu", "description": "Frankfurt",
    }}, principal=world.a.principal)["details"]
    assert set(out) == DETAILS
    assert out["type"] == "environment"
    assert out["account_id"] == world.a.boot.account_id
    assert (out["name"], out["purpose"], out["external_identifier"], out["description"]) == (
        "Prod EU", "production", "prod-eu", "Frankfurt",
    )
    assert out["is_default"] is False
    assert world.a.session.show_environment(out["id"]) == out


def test_create_with_only_a_name(world: World) -> None:
    out = world.a.session.create_environment(name="Scratch")
    assert out["purpose"] == DEFAULT_PURPOSE
    assert out["external_identifier"] is out["description"] is None


@pytest.mark.parametrize("purpose", PURPOSES)
def test_every_purpose_is_accepted(world: World, purpose: str) -> None:
    assert world.a.session.create_environment(name="E", purpose=purpose)["purpose"] == purpose


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"name": "required_value"}),
        ({"name": "E", "purpose": "prod"}, {"purpose": "invalid_value"}),
        ({"name": "E", "external_identifier": 9}, {"external_identifier": "invalid_value"}),
        ({"name": ["E"], "description": {}},
         {"name": "invalid_value", "description": "invalid_value"}),
    ],
)
def test_create_names_bad_fields(world: World, params: dict[str, Any], expected: Any) -> None:
    error = fails(world.gov.call, "environments/create", params, principal=world.a.principal)
    assert field_codes(error) == expected


def test_external_identifier_is_unique_in_the_account(world: World) -> None:
    session = world.a.session
    first = session.create_environment(name="A", external_identifier="ext-1")
    assert isinstance(fails(session.create_environment, name="B", external_identifier="ext-1"),
                      Conflict)
    other = session.create_environment(name="B", external_identifier="ext-2")
    error = fails(session.update_environment, other["id"], external_identifier="ext-1")
    assert isinstance(error, Conflict)
    # Keeping one's own identifier, or reusing it in another account, is fine.
    assert session.update_environment(first["id"], external_identifier="ext-1") == first
    assert world.b.session.create_environment(name="A", external_identifier="ext-1")


def test_update_changes_what_is_sent(world: World) -> None:
    session = world.a.session
    before = session.show_environment(world.a.environment_id)
    after = session.update_environment(world.a.environment_id, name="Stage", purpose="testing",
                                       external_identifier="stg", description="QA")
    assert (after["name"], after["purpose"], after["external_identifier"],
            after["description"]) == ("Stage", "testing", "stg", "QA")
    assert after["updated_at"] > before["updated_at"]
    cleared = session.update_environment(world.a.environment_id, external_identifier=None,
                                         description=None)
    assert cleared["external_identifier"] is cleared["description"] is None
    assert cleared["name"] == "Stage"


def test_update_names_bad_fields_and_ignores_server_fields(world: World) -> None:
    error = fails(world.gov.call, "environments/update", {
        "environment_id": world.a.environment_id, "name": "", "purpose": None,
    }, principal=world.a.principal)
    assert field_codes(error) == {"name": "required_value", "purpose": "invalid_value"}
    before = world.a.session.show_environment(world.a.environment_id)
    out = world.gov.call("environments/update", {
        "environment_id": world.a.environment_id, "is_default": True, "type": "team",
    }, principal=world.a.principal)
    assert out["details"] == before


@pytest.mark.parametrize("name", ["environments/show", "environments/update"])
def test_a_missing_environment_is_not_found(world: World, name: str) -> None:
    error = fails(world.gov.call, name, {"environment_id": world.a.team_id},
                  principal=world.a.principal)
    assert isinstance(error, NotFound)


def test_list_takes_the_own_account_id_and_sorts(world: World) -> None:
    session = world.a.session
    session.create_environment(name="Alpha", purpose="development")
    out = world.gov.call("environments/list",
                         {"account_id": world.a.boot.account_id, "sorting": "name"},
                         principal=world.a.principal)
    assert [s["name"] for s in out["summaries"]] == ["Alpha", "Default", "Staging"]
    assert all(set(s) == DETAILS for s in out["summaries"])
    purposes = [s["purpose"] for s in session.list_environments(sorting="-purpose")["summaries"]]
    assert purposes == ["staging", "production", "development"]
    error = fails(session.list_environments, sorting="description")
    assert field_codes(error) == {"sorting": "invalid_value"}
