"""Accounts: show, update (the purpose/organisation rule), list (own and switchable)."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.service import Governance
from tests.core.accounts_world import World, fails, field_codes

DETAILS = {
    "id", "name", "type", "inserted_at", "updated_at", "organisation_name", "promo_code",
    "purpose", "website",
}


def test_show_answers_every_field(world: World) -> None:
    account = world.a.session.show_account()
    assert set(account) == DETAILS
    assert account["id"] == world.a.boot.account_id
    assert account["type"] == "account"
    assert account["name"] == "Acme"
    assert account["purpose"] == "business"
    assert account["organisation_name"] == "Acme"
    assert account["promo_code"] is None
    assert account["website"] is None


def test_show_by_own_id(world: World) -> None:
    out = world.gov.call("accounts/show", {"account_id": world.a.boot.account_id},
                         principal=world.a.principal)
    assert out["details"]["id"] == world.a.boot.account_id


def test_update_changes_what_is_sent_and_stamps_updated_at(world: World) -> None:
    session = world.a.session
    before = session.show_account()
    after = session.update_account(name="Acme Ltd", website="https://acme.test")
    assert after["name"] == "Acme Ltd"
    assert after["website"] == "https://acme.test"
    assert after["purpose"] == before["purpose"]
    assert after["updated_at"] > before["updated_at"]
    assert session.show_account() == after
    assert session.update_account(website=None)["website"] is None


def test_an_update_that_changes_nothing_keeps_updated_at(world: World) -> None:
    before = world.a.session.show_account()
    assert world.a.session.update_account(name="Acme") == before


def test_a_personal_account_needs_no_organisation(world: World) -> None:
    out = world.a.session.update_account(purpose="personal", organisation_name=None)
    assert out["purpose"] == "personal"
    assert out["organisation_name"] is None


@pytest.mark.parametrize("purpose", ["business", "nonprofit", "education", "government"])
def test_other_purposes_need_an_organisation_name(world: World, purpose: str) -> None:
    session = world.a.session
    session.update_account(purpose="personal", organisation_name=None)
    error = fails(session.update_account, purpose=purpose)
    assert field_codes(error) == {"organisation_name": "required_value"}
    assert session.update_account(purpose=purpose, organisation_name="Org")["purpose"] == purpose
    for blank in ("", None):
        error = fails(session.update_account, organisation_name=blank)
        assert field_codes(error) == {"organisation_name": "required_value"}
    assert session.show_account()["organisation_name"] == "Org"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"purpose": "hobby"}, {"purpose": "invalid_value"}),
        ({"purpose": None}, {"purpose": "invalid_value"}),
        ({"name": ""}, {"name": "required_value"}),
        ({"name": None}, {"name": "required_value"}),
        ({"name": 7, "website": ["x"]}, {"name": "invalid_value", "website": "invalid_value"}),
    ],
)
def test_update_names_bad_fields(world: World, params: dict[str, Any], expected: Any) -> None:
    error = fails(world.gov.call, "accounts/update", params, principal=world.a.principal)
    assert field_codes(error) == expected


def test_server_managed_fields_are_ignored(world: World) -> None:
    before = world.a.session.show_account()
    out = world.gov.call("accounts/update", {"details": {
        "id": "x", "inserted_at": "2000-01-01T00:00:00Z", "type": "team", "partition": 1,
    }}, principal=world.a.principal)["details"]
    assert out == before


def test_list_shows_the_own_account_and_those_of_the_same_admin_email(
    gov: Governance, world: World
) -> None:
    sibling = gov.bootstrap(account_name="Acme Labs", admin_email="admin@acme.test")
    listed = world.a.session.list_accounts(sorting="name")
    assert [s["name"] for s in listed["summaries"]] == ["Acme", "Acme Labs"]
    assert {s["id"] for s in listed["summaries"]} == {world.a.boot.account_id, sibling.account_id}
    assert all(set(s) == {"id", "name", "type"} for s in listed["summaries"])
    assert [s["name"] for s in world.b.session.list_accounts()["summaries"]] == ["Globex"]


def test_list_without_an_admin_user_shows_only_the_own_account(world: World) -> None:
    session = world.gov.as_account(world.a.boot.account_id)
    assert [s["id"] for s in session.list_accounts()["summaries"]] == [world.a.boot.account_id]


def test_list_sorting_is_checked(world: World) -> None:
    error = fails(world.a.session.list_accounts, sorting="email")
    assert field_codes(error) == {"sorting": "invalid_value"}
