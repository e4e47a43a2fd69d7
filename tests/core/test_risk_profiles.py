"""Risk profiles: create, update, show, list, delete, and the ruleset an agent is scored by."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from governance_core.domain.risk import Rulesets, ruleset_for
from governance_core.errors import Conflict, InvalidAction, NotFound
from governance_core.rules.risk import ACTIONS, DATA_CATEGORIES, DEFAULT_RULESET, parse_ruleset
from tests.core.accounts_world import RULESET, World, add_agent, fails, field_codes

DETAILS = {
    "id", "account_id", "name", "description", "ruleset", "is_default", "inserted_at",
    "updated_at", "type",
}


def test_the_bootstrap_profile_is_the_default_with_the_default_ruleset(world: World) -> None:
    default = world.a.session.show_risk_profile(world.a.boot.risk_profile_id)
    assert set(default) == DETAILS
    assert default["is_default"] is True
    assert default["ruleset"]["thresholds"] == {"medium": 20, "high": 100, "critical": 500}
    assert parse_ruleset(default["ruleset"]) == DEFAULT_RULESET


def test_create_answers_every_field_with_the_ruleset_in_full(world: World) -> None:
    out = world.gov.call("risk_profiles/create", {"details": {
        "name": "Payments", "description": "Money movers", "ruleset": RULESET,
    }}, principal=world.a.principal)["details"]
    assert set(out) == DETAILS
    assert out["type"] == "risk_profile"
    assert out["account_id"] == world.a.boot.account_id
    assert (out["name"], out["description"], out["is_default"]) == (
        "Payments", "Money movers", False,
    )
    ruleset = out["ruleset"]
    assert list(ruleset["category_weights"]) == list(DATA_CATEGORIES)
    assert list(ruleset["action_multipliers"]) == list(ACTIONS)
    assert ruleset["category_weights"]["personal_identifiers"] == 8
    assert ruleset["category_weights"]["health_and_medical"] is None
    assert ruleset["action_multipliers"]["destroy_data"] == 2.5
    assert ruleset["thresholds"] == {"medium": 10, "high": 50, "critical": 200}
    assert world.a.session.show_risk_profile(out["id"]) == out


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"name": "required_value", "ruleset": "required_value"}),
        ({"name": "P", "ruleset": "strict"}, {"ruleset": "invalid_value"}),
        ({"name": "P", "ruleset": {**RULESET, "thresholds": {"medium": 5, "high": 5,
                                                            "critical": 9}}},
         {"ruleset": {"thresholds": {"high": "invalid_value"}}}),
        ({"name": "P", "ruleset": {**RULESET, "category_weights": {"pii": 1,
                                                                  "minors_data": -1}}},
         {"ruleset": {"category_weights": {"pii": "invalid_value",
                                           "minors_data": "invalid_value"}}}),
        ({"name": "P", "ruleset": {"category_weights": {}, "action_multipliers": {}}},
         {"ruleset": {"thresholds": "required_value"}}),
        ({"name": "", "description": 1, "ruleset": RULESET},
         {"name": "required_value", "description": "invalid_value"}),
    ],
)
def test_create_names_bad_fields_with_ruleset_errors_nested(
    world: World, params: dict[str, Any], expected: Any
) -> None:
    error = fails(world.gov.call, "risk_profiles/create", params, principal=world.a.principal)
    assert field_codes(error) == expected


def test_update_changes_name_description_and_ruleset(world: World) -> None:
    session, profile_id = world.a.session, world.a.risk_profile_id
    before = session.show_risk_profile(profile_id)
    tighter = {**RULESET, "thresholds": {"medium": 1, "high": 2, "critical": 3}}
    after = session.update_risk_profile(profile_id, name="Tighter", ruleset=tighter,
                                        description="d")
    assert (after["name"], after["description"]) == ("Tighter", "d")
    assert after["ruleset"]["thresholds"] == {"medium": 1, "high": 2, "critical": 3}
    assert after["updated_at"] > before["updated_at"]
    assert session.update_risk_profile(profile_id, ruleset=tighter) == after


def test_an_unchanged_ruleset_in_another_form_changes_nothing(world: World) -> None:
    session, profile_id = world.a.session, world.a.risk_profile_id
    before = session.show_risk_profile(profile_id)
    assert session.update_risk_profile(profile_id, ruleset=before["ruleset"]) == before


def test_the_default_profile_may_be_tuned(world: World) -> None:
    out = world.a.session.update_risk_profile(world.a.boot.risk_profile_id, ruleset=RULESET)
    assert out["is_default"] is True
    assert out["ruleset"]["thresholds"]["critical"] == 200


def test_update_names_ruleset_errors_and_keeps_the_profile(world: World) -> None:
    session, profile_id = world.a.session, world.a.risk_profile_id
    before = session.show_risk_profile(profile_id)
    error = fails(session.update_risk_profile, profile_id, name="",
                  ruleset={**RULESET, "extra": 1})
    assert field_codes(error) == {
        "name": "required_value", "ruleset": {"extra": "invalid_value"},
    }
    error = fails(world.gov.call, "risk_profiles/update",
                  {"risk_profile_id": profile_id, "ruleset": None}, principal=world.a.principal)
    assert field_codes(error) == {"ruleset": "required_value"}
    assert session.show_risk_profile(profile_id) == before


def test_delete_answers_the_profile_and_removes_it(world: World) -> None:
    session = world.a.session
    shown = session.show_risk_profile(world.a.risk_profile_id)
    assert session.delete_risk_profile(world.a.risk_profile_id) == shown
    assert isinstance(fails(session.show_risk_profile, world.a.risk_profile_id), NotFound)
    assert isinstance(fails(session.delete_risk_profile, world.a.risk_profile_id), NotFound)


def test_the_default_profile_cannot_be_deleted(world: World) -> None:
    error = fails(world.a.session.delete_risk_profile, world.a.boot.risk_profile_id)
    assert isinstance(error, InvalidAction)


def test_a_profile_assigned_to_an_agent_cannot_be_deleted(world: World) -> None:
    add_agent(world.a, risk_profile_id=world.a.risk_profile_id)
    error = fails(world.a.session.delete_risk_profile, world.a.risk_profile_id)
    assert isinstance(error, Conflict)
    assert world.a.session.show_risk_profile(world.a.risk_profile_id)["name"] == "Strict"


@pytest.mark.parametrize("name", ["show", "update", "delete"])
def test_a_missing_profile_is_not_found(world: World, name: str) -> None:
    error = fails(world.gov.call, f"risk_profiles/{name}",
                  {"risk_profile_id": world.a.team_id, "name": "x"},
                  principal=world.a.principal)
    assert isinstance(error, NotFound)


def test_list_includes_the_default_and_sorts_by_name(world: World) -> None:
    out = world.a.session.list_risk_profiles(sorting="-name")
    assert [(s["name"], s["is_default"]) for s in out["summaries"]] == [
        ("Strict", False), ("Default", True),
    ]
    assert all(set(s) == DETAILS for s in out["summaries"])


def test_ruleset_for_an_agent(world: World) -> None:
    ctx = world.gov.context(world.a.principal)
    strict = ruleset_for(ctx, world.a.risk_profile_id)
    assert strict.critical_threshold == Decimal(200)
    assert strict.action_multipliers["destroy_data"] == Decimal("2.5")
    assert ruleset_for(ctx, None) == DEFAULT_RULESET
    assert ruleset_for(ctx, world.b.risk_profile_id) == DEFAULT_RULESET
    world.a.session.update_risk_profile(world.a.boot.risk_profile_id, ruleset=RULESET)
    assert ruleset_for(ctx, None) == strict


def test_an_agent_made_after_its_ruleset_was_asked_for_is_scored_by_its_own_profile(
    world: World,
) -> None:
    # A batch keeps its rulesets across an agent's creation: the ruleset asked for under an
    # id no agent had yet is not kept for the agent later made under it.
    ctx = world.gov.context(world.a.principal)
    rulesets = Rulesets(ctx)
    unmade = ctx.new_id()
    assert rulesets.for_agent(unmade) == DEFAULT_RULESET
    profiled = add_agent(world.a, risk_profile_id=world.a.risk_profile_id)
    made = world.gov.store.get("agents", profiled)
    assert made is not None
    world.gov.store.put("agents", {**made, "id": unmade})
    assert rulesets.for_agent(unmade) == ruleset_for(ctx, world.a.risk_profile_id)
    assert rulesets.for_agent(unmade) != DEFAULT_RULESET
