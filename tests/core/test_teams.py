"""Teams: create, update, show, list, and their agent and people counts."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.errors import NotFound
from tests.core.accounts_world import World, add_agent, fails, field_codes

DETAILS = {"id", "name", "agent_count", "people_count", "inserted_at", "updated_at", "type"}
SUMMARY = {"id", "name", "agent_count", "people_count", "type"}


def test_create_answers_every_field(world: World) -> None:
    team = world.a.session.create_team(name="  Platform  ")
    assert set(team) == DETAILS
    assert team["name"] == "Platform"
    assert team["type"] == "team"
    assert team["agent_count"] == team["people_count"] == 0
    assert team["inserted_at"] == team["updated_at"]
    assert world.a.session.show_team(team["id"]) == team


def test_counts_follow_people_and_agents(world: World) -> None:
    session = world.a.session
    assert session.show_team(world.a.team_id)["people_count"] == 1
    session.create_person(name="Kim", email="kim@acme.test", team_ids=[world.a.team_id])
    add_agent(world.a, team_id=world.a.team_id)
    add_agent(world.a)
    team = session.show_team(world.a.team_id)
    assert (team["people_count"], team["agent_count"]) == (2, 1)
    session.update_person(world.a.person_id, team_ids=[])
    assert session.show_team(world.a.team_id)["people_count"] == 1
    summary = next(s for s in session.list_teams()["summaries"] if s["id"] == world.a.team_id)
    assert set(summary) == SUMMARY
    assert (summary["people_count"], summary["agent_count"]) == (1, 1)


def test_update_renames_and_stamps(world: World) -> None:
    before = world.a.session.show_team(world.a.team_id)
    after = world.a.session.update_team(world.a.team_id, name="Kernel")
    assert after["name"] == "Kernel"
    assert after["updated_at"] > before["updated_at"]
    assert world.a.session.update_team(world.a.team_id, name="Kernel") == after


def test_update_without_a_name_changes_nothing(world: World) -> None:
    before = world.a.session.show_team(world.a.team_id)
    out = world.gov.call("teams/update", {"team_id": world.a.team_id},
                         principal=world.a.principal)
    assert out["details"] == before


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"name": "required_value"}),
        ({"name": "   "}, {"name": "required_value"}),
        ({"name": 3}, {"name": "invalid_value"}),
        ({"name": "x" * 201}, {"name": "invalid_value"}),
    ],
)
def test_create_names_bad_fields(world: World, params: dict[str, Any], expected: Any) -> None:
    error = fails(world.gov.call, "teams/create", params, principal=world.a.principal)
    assert field_codes(error) == expected


def test_update_names_a_blank_name(world: World) -> None:
    error = fails(world.gov.call, "teams/update", {"team_id": world.a.team_id, "name": ""},
                  principal=world.a.principal)
    assert field_codes(error) == {"name": "required_value"}


@pytest.mark.parametrize("team_id", [None, "nope", "0" * 32])
def test_a_missing_or_malformed_team_is_not_found(world: World, team_id: Any) -> None:
    for name in ("teams/show", "teams/update"):
        error = fails(world.gov.call, name, {"team_id": team_id, "name": "x"},
                      principal=world.a.principal)
        assert isinstance(error, NotFound)


def test_an_id_of_another_kind_is_not_found(world: World) -> None:
    assert isinstance(fails(world.a.session.show_team, world.a.person_id), NotFound)


def test_list_sorts_by_name_and_id(world: World) -> None:
    for name in ("Zeta", "Alpha"):
        world.a.session.create_team(name=name)
    names = [s["name"] for s in world.a.session.list_teams(sorting="name")["summaries"]]
    assert names == ["Alpha", "Core", "Zeta"]
    ids = [s["id"] for s in world.a.session.list_teams(sorting="-id")["summaries"]]
    assert ids == sorted(ids, reverse=True)
