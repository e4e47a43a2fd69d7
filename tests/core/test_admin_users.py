"""Admin users: show (with switchable accounts) and update of the caller's own profile."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.errors import NotFound, NotPermitted
from governance_core.service import Governance
from tests.core.accounts_world import World, fails, field_codes

DETAILS = {
    "id", "account_id", "email", "name", "job_title", "last_active_at", "profile_completed_at",
    "switchable_account_summaries", "inserted_at", "updated_at", "type",
}


def test_show_answers_every_field(world: World) -> None:
    user = world.a.session.show_admin_user(world.a.boot.admin_user_id)
    assert set(user) == DETAILS
    assert user["type"] == "admin_user"
    assert user["account_id"] == world.a.boot.account_id
    assert (user["email"], user["name"]) == ("admin@acme.test", "Ada")
    assert user["job_title"] is None
    assert user["profile_completed_at"] is None
    assert user["last_active_at"] is not None  # its token was used to populate the account
    assert user["switchable_account_summaries"] == [
        {"id": world.a.boot.account_id, "name": "Acme", "type": "account"}
    ]


def test_switchable_accounts_are_those_where_the_email_is_an_admin(
    gov: Governance, world: World
) -> None:
    sibling = gov.bootstrap(account_name="Acme Labs", admin_email="admin@acme.test")
    user = world.a.session.show_admin_user(world.a.boot.admin_user_id)
    assert {s["id"] for s in user["switchable_account_summaries"]} == {
        world.a.boot.account_id, sibling.account_id,
    }
    assert all(set(s) == {"id", "name", "type"} for s in user["switchable_account_summaries"])


def test_any_admin_user_of_the_account_may_be_shown(world: World) -> None:
    joined = world.gov.accept_invite(world.a.invite_token, name="Neo")
    shown = world.a.session.show_admin_user(joined.details["id"])
    assert shown == joined.details


def test_update_of_the_own_profile(world: World) -> None:
    session = world.a.session
    me = world.a.boot.admin_user_id
    before = session.show_admin_user(me)
    after = session.update_admin_user(
        me, name="Ada L.", job_title="CTO", profile_completed_at=world.gov.clock()
    )
    assert (after["name"], after["job_title"]) == ("Ada L.", "CTO")
    assert after["profile_completed_at"] is not None
    assert after["updated_at"] > before["updated_at"]
    assert after["email"] == before["email"]
    cleared = session.update_admin_user(me, job_title=None, profile_completed_at=None)
    assert cleared["job_title"] is None
    assert cleared["profile_completed_at"] is None
    assert cleared["name"] == "Ada L."


def test_profile_completed_at_accepts_any_offset_and_answers_utc(world: World) -> None:
    out = world.gov.call("admin_users/update", {
        "admin_user_id": world.a.boot.admin_user_id,
        "profile_completed_at": "2026-03-01T12:00:00+02:00",
    }, principal=world.a.principal)
    assert out["details"]["profile_completed_at"] == "2026-03-01T10:00:00.000000Z"


def test_updating_another_admin_user_is_not_permitted(world: World) -> None:
    joined = world.gov.accept_invite(world.a.invite_token, name="Neo")
    error = fails(world.a.session.update_admin_user, joined.details["id"], name="Mallory")
    assert isinstance(error, NotPermitted)
    newcomer = world.gov.session(joined.token)
    assert newcomer.update_admin_user(joined.details["id"], job_title="Dev")["job_title"] == "Dev"
    error = fails(newcomer.update_admin_user, world.a.boot.admin_user_id, name="Mallory")
    assert isinstance(error, NotPermitted)
    assert world.a.session.show_admin_user(world.a.boot.admin_user_id)["name"] == "Ada"


def test_a_caller_without_an_admin_user_may_update_no_profile(world: World) -> None:
    session = world.gov.as_account(world.a.boot.account_id)
    error = fails(session.update_admin_user, world.a.boot.admin_user_id, name="X")
    assert isinstance(error, NotPermitted)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"name": ""}, {"name": "required_value"}),
        ({"name": None}, {"name": "required_value"}),
        ({"job_title": 1}, {"job_title": "invalid_value"}),
        ({"profile_completed_at": "yesterday"}, {"profile_completed_at": "invalid_value"}),
    ],
)
def test_update_names_bad_fields(world: World, params: dict[str, Any], expected: Any) -> None:
    error = fails(world.gov.call, "admin_users/update",
                  {"admin_user_id": world.a.boot.admin_user_id, **params},
                  principal=world.a.principal)
    assert field_codes(error) == expected


def test_email_and_server_fields_are_not_updatable(world: World) -> None:
    me = world.a.boot.admin_user_id
    before = world.a.session.show_admin_user(me)
    out = world.gov.call("admin_users/update", {
        "admin_user_id": me, "email": "evil@x.test", "account_id": world.b.boot.account_id,
        "last_active_at": "2000-01-01T00:00:00Z",
    }, principal=world.a.principal)
    assert out["details"] == before


@pytest.mark.parametrize("admin_user_id", ["nope", "0" * 32])
def test_a_missing_admin_user_is_not_found(world: World, admin_user_id: str) -> None:
    for name in ("admin_users/show", "admin_users/update"):
        error = fails(world.gov.call, name, {"admin_user_id": admin_user_id},
                      principal=world.a.principal)
        assert isinstance(error, NotFound)
