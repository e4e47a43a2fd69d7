"""People: create (caller ids, team assignment), update, show, list (team filter, sorting)."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.errors import Conflict, NotFound
from tests.core.accounts_world import World, fails, field_codes

DETAILS = {"id", "name", "email", "title", "team_ids", "inserted_at", "updated_at", "type"}
SUMMARY = {"id", "name", "email", "title", "team_ids", "type"}


def test_create_answers_every_field(world: World) -> None:
    session = world.a.session
    other_team = session.create_team(name="Ops")["id"]
    person = session.create_person(
        name="Kim", email="kim@acme.test", title="Engineer",
        team_ids=[other_team, world.a.team_id, other_team],
    )
    assert set(person) == DETAILS
    assert person["type"] == "person"
    assert (person["name"], person["email"], person["title"]) == ("Kim", "kim@acme.test",
                                                                  "Engineer")
    assert person["team_ids"] == sorted([other_team, world.a.team_id])
    assert session.show_person(person["id"]) == person


def test_create_without_title_or_teams(world: World) -> None:
    person = world.a.session.create_person(name="Lee", email="lee@acme.test")
    assert person["title"] is None
    assert person["team_ids"] == []


def test_create_with_a_caller_supplied_id(world: World) -> None:
    session = world.a.session
    chosen = world.gov.ids.new(world.a.principal.partition, world.gov.clock())
    person = session.create_person(name="Max", email="max@acme.test", id=chosen)
    assert person["id"] == chosen
    error = fails(session.create_person, name="Max", email="max@acme.test", id=chosen)
    assert isinstance(error, Conflict)


def test_an_id_held_by_another_kind_of_record_is_a_conflict(world: World) -> None:
    error = fails(world.a.session.create_person, name="Max", email="max@acme.test",
                  id=world.a.team_id)
    assert isinstance(error, Conflict)


@pytest.mark.parametrize("bad_id", ["nope", "0" * 31, 42])
def test_a_malformed_id_is_invalid(world: World, bad_id: Any) -> None:
    error = fails(world.gov.call, "people/create",
                  {"name": "Max", "email": "max@acme.test", "id": bad_id},
                  principal=world.a.principal)
    assert field_codes(error) == {"id": "invalid_value"}


def test_an_id_outside_the_accounts_partition_is_invalid(world: World) -> None:
    foreign = world.gov.ids.new(world.b.principal.partition, world.gov.clock())
    error = fails(world.a.session.create_person, name="Max", email="max@acme.test", id=foreign)
    assert field_codes(error) == {"id": "invalid_value"}


def test_team_ids_must_name_teams_of_the_account(world: World) -> None:
    error = fails(world.gov.call, "people/create", {
        "name": "Max", "email": "max@acme.test",
        "team_ids": [world.a.team_id, "0" * 32, world.b.team_id, world.a.environment_id, "x"],
    }, principal=world.a.principal)
    assert field_codes(error) == {"team_ids": {
        "1": "invalid_value", "2": "invalid_value", "3": "unexpected_ref_type",
        "4": "invalid_value",
    }}
    assert world.a.session.list_people()["pagination"]["item_count"] == 1


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"name": "required_value", "email": "required_value"}),
        ({"name": "A", "email": "no-at-sign"}, {"email": "invalid_value"}),
        ({"name": "A", "email": "a@b"}, {"email": "invalid_value"}),
        ({"name": "A", "email": "a@b.c", "team_ids": "t"}, {"team_ids": "invalid_value"}),
        ({"name": "A", "email": "a@b.c", "title": 5}, {"title": "invalid_value"}),
        ({"name": "", "email": None}, {"name": "required_value", "email": "required_value"}),
    ],
)
def test_create_names_bad_fields(world: World, params: dict[str, Any], expected: Any) -> None:
    error = fails(world.gov.call, "people/create", params, principal=world.a.principal)
    assert field_codes(error) == expected


def test_a_wrapped_body_is_read_like_a_bare_one(world: World) -> None:
    out = world.gov.call("people/create", {"details": {"name": "Ida", "email": "ida@acme.test"}},
                         principal=world.a.principal)
    assert out["details"]["name"] == "Ida"


def test_update_changes_fields_and_replaces_teams(world: World) -> None:
    session = world.a.session
    ops = session.create_team(name="Ops")["id"]
    before = session.show_person(world.a.person_id)
    after = session.update_person(world.a.person_id, name="Pat Doe", team_ids=[ops])
    assert after["name"] == "Pat Doe"
    assert after["email"] == before["email"]
    assert after["team_ids"] == [ops]
    assert after["updated_at"] > before["updated_at"]
    assert session.show_team(world.a.team_id)["people_count"] == 0
    moved = session.update_person(world.a.person_id, team_ids=[world.a.team_id, ops])
    assert moved["team_ids"] == sorted([world.a.team_id, ops])
    assert session.update_person(world.a.person_id, team_ids=[ops, world.a.team_id]) == moved


def test_update_names_bad_fields(world: World) -> None:
    error = fails(world.gov.call, "people/update", {
        "person_id": world.a.person_id, "name": "", "email": "bad", "team_ids": [world.b.team_id],
    }, principal=world.a.principal)
    assert field_codes(error) == {
        "name": "required_value", "email": "invalid_value", "team_ids": {"0": "invalid_value"},
    }
    assert world.a.session.show_person(world.a.person_id)["name"] == "Pat"


@pytest.mark.parametrize("name", ["people/show", "people/update"])
def test_a_missing_person_is_not_found(world: World, name: str) -> None:
    error = fails(world.gov.call, name, {"person_id": world.a.team_id},
                  principal=world.a.principal)
    assert isinstance(error, NotFound)


def test_list_summaries_and_the_team_filter(world: World) -> None:
    session = world.a.session
    ops = session.create_team(name="Ops")["id"]
    kim = session.create_person(name="Kim", email="kim@acme.test", team_ids=[ops])
    session.create_person(name="Lee", email="lee@acme.test")
    everyone = session.list_people()["summaries"]
    assert len(everyone) == 3
    assert all(set(s) == SUMMARY for s in everyone)
    on_ops = session.list_people(team_id=ops)
    assert [s["id"] for s in on_ops["summaries"]] == [kim["id"]]
    assert on_ops["pagination"]["item_count"] == 1
    assert session.list_people(team_id=world.b.team_id)["summaries"] == []
    error = fails(session.list_people, team_id="nope")
    assert field_codes(error) == {"team_id": "invalid_value"}


@pytest.mark.parametrize("field", ["name", "email", "id"])
def test_list_sorts_by_name_email_and_id(world: World, field: str) -> None:
    session = world.a.session
    session.create_person(name="Abe", email="zed@acme.test")
    session.create_person(name="Zoe", email="abe@acme.test")
    values = [s[field] for s in session.list_people(sorting=f"-{field}")["summaries"]]
    assert values == sorted(values, reverse=True)
    error = fails(session.list_people, sorting="title")
    assert field_codes(error) == {"sorting": "invalid_value"}
