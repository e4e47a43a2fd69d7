"""Admin user invites: create (token shown once), revoke, accept, and expiry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs
import pytest

from governance_core.clock import FixedClock, parse_timestamp
from governance_core.context import Config
from governance_core.converter import from_record
from governance_core.credentials import hash_secret
from governance_core.errors import Conflict, InvalidAction, NotFound
from governance_core.ids import SeededIds
from governance_core.models.accounts import AdminUserInvite
from governance_core.operations.admin_user_invites import invite_status
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from tests.core.accounts_world import World, canonical, fails, field_codes

DETAILS = {
    "id", "account_id", "email", "invite_url", "token", "status", "expires_at", "inserted_at",
    "updated_at", "type",
}


def _clock(world: World) -> FixedClock:
    clock = world.gov.clock
    assert isinstance(clock, FixedClock)
    return clock


def test_create_answers_every_field_and_the_token_once(world: World) -> None:
    invite = world.a.session.create_admin_user_invite(email="joe@acme.test")
    assert set(invite) == DETAILS
    assert invite["type"] == "admin_user_invite"
    assert invite["status"] == "pending"
    assert invite["account_id"] == world.a.boot.account_id
    assert invite["email"] == "joe@acme.test"
    assert invite["token"].startswith("pfinv_")
    assert len(invite["token"]) >= 6 + 43
    url = urlsplit(invite["invite_url"])
    assert (url.scheme, url.netloc, url.path) == (
        "http", "127.0.0.1:8000", "/api/v1/admin_user_invite/accept"
    )
    assert parse_qs(url.query) == {"token": [invite["token"]]}
    expires = parse_timestamp(invite["expires_at"]) - parse_timestamp(invite["inserted_at"])
    assert expires == Config().invite_ttl
    stored = world.gov.store.get("admin_user_invites", invite["id"])
    assert stored is not None
    assert invite["token"] not in canonical(stored)
    assert stored["token_hash"] == hash_secret(invite["token"])


def test_the_invite_url_follows_the_configured_base_url() -> None:
    gov = Governance(MemoryStore(), clock=FixedClock(), ids=SeededIds(1),
                     config=Config(base_url="https://gov.example.com/", invite_ttl=timedelta(1)))
    boot = gov.bootstrap()
    invite = gov.session(boot.token).create_admin_user_invite(email="joe@example.com")
    assert invite["invite_url"].startswith(
        "https://gov.example.com/api/v1/admin_user_invite/accept?token=pfinv_"
    )
    lifetime = parse_timestamp(invite["expires_at"]) - parse_timestamp(invite["inserted_at"])
    assert lifetime == timedelta(days=1)


def test_create_with_the_own_account_id(world: World) -> None:
    out = world.gov.call("admin_user_invites/create",
                         {"email": "joe@acme.test", "account_id": world.a.boot.account_id},
                         principal=world.a.principal)
    assert out["details"]["account_id"] == world.a.boot.account_id


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"email": "required_value"}),
        ({"email": "joe"}, {"email": "invalid_value"}),
        ({"email": "joe@acme.test", "account_id": "nope"}, {"account_id": "invalid_value"}),
    ],
)
def test_create_names_bad_fields(world: World, params: dict[str, Any], expected: Any) -> None:
    error = fails(world.gov.call, "admin_user_invites/create", params,
                  principal=world.a.principal)
    assert field_codes(error) == expected


def test_inviting_an_existing_admin_is_a_conflict(world: World) -> None:
    error = fails(world.a.session.create_admin_user_invite, email="admin@acme.test")
    assert isinstance(error, Conflict)
    # The same address is welcome in another account.
    assert world.b.session.create_admin_user_invite(email="admin@acme.test")["status"] == "pending"


def test_revoke_makes_it_revoked_and_unusable(world: World) -> None:
    revoked = world.a.session.revoke_admin_user_invite(world.a.invite_id)
    assert set(revoked) == DETAILS
    assert revoked["status"] == "revoked"
    assert revoked["token"] is None
    assert revoked["invite_url"] == "http://127.0.0.1:8000/api/v1/admin_user_invite/accept"
    error = fails(world.a.session.revoke_admin_user_invite, world.a.invite_id)
    assert isinstance(error, InvalidAction)
    assert isinstance(fails(world.gov.accept_invite, world.a.invite_token), InvalidAction)


def test_accept_creates_the_admin_user_and_a_token_of_theirs(world: World) -> None:
    joined = world.gov.accept_invite(world.a.invite_token, name="Neo")
    user = joined.details
    assert user["type"] == "admin_user"
    assert (user["email"], user["name"]) == ("new@acme.test", "Neo")
    assert user["account_id"] == world.a.boot.account_id
    assert joined.token.startswith("pf_")
    newcomer = world.gov.session(joined.token)
    assert newcomer.principal.admin_user_id == user["id"]
    assert newcomer.principal.account_id == world.a.boot.account_id
    assert newcomer.show_admin_user(user["id"])["last_active_at"] is not None
    stored = world.gov.store.get("admin_user_invites", world.a.invite_id)
    assert stored is not None
    assert (stored["status"], stored["accepted_admin_user_id"]) == ("accepted", user["id"])
    assert isinstance(fails(world.gov.accept_invite, world.a.invite_token), InvalidAction)
    error = fails(world.a.session.revoke_admin_user_invite, world.a.invite_id)
    assert isinstance(error, InvalidAction)


def test_accept_needs_no_authorization_and_a_name_is_optional(world: World) -> None:
    out = world.gov.call("admin_user_invites/accept",
                         {"details": {"token": f"  {world.a.invite_token} "}})
    assert set(out) == {"status", "details", "token"}
    assert out["details"]["name"] is None


def test_accept_with_an_unknown_token_is_not_found(world: World) -> None:
    error = fails(world.gov.call, "admin_user_invites/accept", {"token": "pfinv_nothing"})
    assert isinstance(error, NotFound)
    error = fails(world.gov.call, "admin_user_invites/accept", {"token": world.a.api_token})
    assert isinstance(error, NotFound)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"token": "required_value"}),
        ({"token": ""}, {"token": "required_value"}),
        ({"token": 5}, {"token": "invalid_value"}),
        ({"token": "pfinv_x", "name": 5}, {"name": "invalid_value"}),
    ],
)
def test_accept_names_bad_fields(world: World, params: dict[str, Any], expected: Any) -> None:
    error = fails(world.gov.call, "admin_user_invites/accept", params)
    assert field_codes(error) == expected


def test_accepting_when_the_email_joined_meanwhile_is_a_conflict(world: World) -> None:
    second = world.a.session.create_admin_user_invite(email="new@acme.test")
    world.gov.accept_invite(world.a.invite_token)
    assert isinstance(fails(world.gov.accept_invite, second["token"]), Conflict)


def test_a_pending_invite_expires(world: World) -> None:
    clock = _clock(world)
    clock.advance(Config().invite_ttl - timedelta(seconds=1))
    fresh = world.a.session.create_admin_user_invite(email="late@acme.test")
    clock.advance(timedelta(seconds=1))
    expired = world.a.session.revoke_admin_user_invite
    assert isinstance(fails(expired, world.a.invite_id), InvalidAction)
    assert isinstance(fails(world.gov.accept_invite, world.a.invite_token), InvalidAction)
    assert world.gov.accept_invite(fresh["token"]).details["email"] == "late@acme.test"


@pytest.mark.parametrize(
    ("stored", "later", "reads"),
    [
        ("pending", timedelta(0), "pending"),
        ("pending", timedelta(days=7), "expired"),
        ("revoked", timedelta(days=7), "revoked"),
        ("accepted", timedelta(days=7), "accepted"),
    ],
)
def test_only_a_pending_invite_reads_as_expired(
    world: World, stored: str, later: timedelta, reads: str
) -> None:
    record = world.gov.store.get("admin_user_invites", world.a.invite_id)
    assert record is not None
    invite = from_record(AdminUserInvite, {**record, "status": stored})
    ctx = world.gov.context(world.a.principal)
    ctx = attrs.evolve(ctx, now=invite.expires_at - timedelta(microseconds=1) + later)
    assert invite_status(ctx, invite) == reads


@pytest.mark.parametrize("invite_id", ["nope", "0" * 32])
def test_revoking_a_missing_invite_is_not_found(world: World, invite_id: str) -> None:
    error = fails(world.a.session.revoke_admin_user_invite, invite_id)
    assert isinstance(error, NotFound)


def test_an_invite_of_another_account_is_accepted_into_that_account(world: World) -> None:
    # The invite token, not the caller, decides the account: here a bulk item run by `a`.
    out = world.gov.call("bulk", {"items": [{
        "_type": "admin_user_invites/accept", "idempotency_key": "accept-0001",
        "token": world.b.invite_token,
    }]}, principal=world.a.principal)
    assert out["outputs"]["accept-0001"]["details"]["account_id"] == world.b.boot.account_id
