"""API tokens: create (secret shown once), list, show, suspend, activate, revoke."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from governance_core.clock import FixedClock, format_timestamp
from governance_core.credentials import hash_secret
from governance_core.errors import BadAuthToken, InvalidAction, NotFound, NotPermitted
from tests.core.accounts_world import World, add_agent, canonical, fails, field_codes

DETAILS = {
    "id", "account_id", "token_scope", "status", "admin_user_id", "agent_id", "environment_id",
    "description", "expires_at", "last_used_at", "inserted_at", "updated_at", "type",
}


def _clock(world: World) -> FixedClock:
    clock = world.gov.clock
    assert isinstance(clock, FixedClock)
    return clock


def test_create_answers_details_and_the_secret_beside_them(world: World) -> None:
    out = world.gov.call("api_tokens/create", {"details": {"description": "ci"}},
                         principal=world.a.principal)
    assert set(out) == {"status", "details", "token"}
    token = out["details"]
    assert set(token) == DETAILS
    assert token["type"] == "api_token"
    assert (token["token_scope"], token["status"]) == ("account", "active")
    assert token["admin_user_id"] == world.a.boot.admin_user_id
    assert token["agent_id"] is token["environment_id"] is token["expires_at"] is None
    assert token["last_used_at"] is None
    assert out["token"].startswith("pf_")
    assert len(out["token"]) >= 3 + 43
    stored = world.gov.store.get("api_tokens", token["id"])
    assert stored is not None
    assert stored["token_hash"] == hash_secret(out["token"])
    assert out["token"] not in canonical(stored)
    assert world.a.session.show_api_token(token["id"]) == token
    assert world.gov.session(out["token"]).principal.token_id == token["id"]
    assert world.a.session.show_api_token(token["id"])["last_used_at"] is not None


def test_details_and_summaries_never_carry_the_hash(world: World) -> None:
    listed = world.a.session.list_api_tokens()["summaries"]
    assert listed
    assert all(set(summary) == DETAILS for summary in listed)
    hashes = {r["token_hash"] for r in world.gov.store.query("api_tokens")}
    assert not any(h in canonical(listed) for h in hashes)


def test_a_token_made_without_an_admin_user_belongs_to_none(world: World) -> None:
    session = world.gov.as_account(world.a.boot.account_id)
    assert session.create_api_token().details["admin_user_id"] is None


def test_an_agent_deployment_token_is_bound_to_its_agent_and_environment(world: World) -> None:
    agent_id = add_agent(world.a)
    issued = world.a.session.create_api_token(
        token_scope="agent_deployment", agent_id=agent_id, environment_id=world.a.environment_id,
    )
    assert issued.details["token_scope"] == "agent_deployment"
    assert issued.details["admin_user_id"] is None
    assert (issued.details["agent_id"], issued.details["environment_id"]) == (
        agent_id, world.a.environment_id,
    )
    principal = world.gov.authenticate(issued.token)
    assert principal.is_ingestion
    assert (principal.agent_id, principal.environment_id) == (agent_id, world.a.environment_id)
    assert isinstance(fails(world.gov.call, "teams/list", token=issued.token), NotPermitted)


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        ({"token_scope": "agent_deployment"},
         {"agent_id": "required_value", "environment_id": "required_value"}),
        ({"token_scope": "agent_deployment", "agent_id": "0" * 32, "environment_id": "bad"},
         {"agent_id": "invalid_value", "environment_id": "invalid_value"}),
        ({"token_scope": "root"}, {"token_scope": "invalid_value"}),
        ({"token_scope": None}, {"token_scope": "invalid_value"}),
        ({"expires_at": "soon"}, {"expires_at": "invalid_value"}),
        ({"expires_at": "2025-01-01T00:00:00Z"}, {"expires_at": "invalid_value"}),
        ({"description": 3}, {"description": "invalid_value"}),
    ],
)
def test_create_names_bad_fields(world: World, members: dict[str, Any], expected: Any) -> None:
    error = fails(world.gov.call, "api_tokens/create", members, principal=world.a.principal)
    assert field_codes(error) == expected


def test_references_of_the_wrong_kind_or_account(world: World) -> None:
    error = fails(world.a.session.create_api_token, token_scope="agent_deployment",
                  agent_id=world.a.environment_id, environment_id=world.b.environment_id)
    assert field_codes(error) == {
        "agent_id": "unexpected_ref_type", "environment_id": "invalid_value",
    }


def test_an_account_token_takes_no_agent_or_environment(world: World) -> None:
    error = fails(world.a.session.create_api_token, agent_id=add_agent(world.a),
                  environment_id=world.a.environment_id)
    assert field_codes(error) == {"agent_id": "invalid_value", "environment_id": "invalid_value"}


def test_a_token_with_expires_at_works_until_then(world: World) -> None:
    clock = _clock(world)
    expires = clock.now + timedelta(days=1)
    issued = world.a.session.create_api_token(expires_at=expires)
    assert issued.details["expires_at"] == format_timestamp(expires)
    assert world.gov.session(issued.token).principal.token_id == issued.details["id"]
    clock.advance(timedelta(days=1))
    assert isinstance(fails(world.gov.session, issued.token), BadAuthToken)


def test_suspend_activate_and_revoke(world: World) -> None:
    session, token_id, secret = world.a.session, world.a.api_token_id, world.a.api_token
    before = session.show_api_token(token_id)
    suspended = session.suspend_api_token(token_id)
    assert suspended["status"] == "suspended"
    assert suspended["updated_at"] > before["updated_at"]
    assert isinstance(fails(world.gov.session, secret), BadAuthToken)
    assert isinstance(fails(session.suspend_api_token, token_id), InvalidAction)
    assert session.activate_api_token(token_id)["status"] == "active"
    assert world.gov.session(secret).principal.token_id == token_id
    assert isinstance(fails(session.activate_api_token, token_id), InvalidAction)
    assert session.revoke_api_token(token_id)["status"] == "revoked"
    assert isinstance(fails(world.gov.session, secret), BadAuthToken)
    for action in ("activate", "suspend", "revoke"):
        error = fails(getattr(session, f"{action}_api_token"), token_id)
        assert isinstance(error, InvalidAction)


def test_a_suspended_token_may_be_revoked(world: World) -> None:
    world.a.session.suspend_api_token(world.a.api_token_id)
    assert world.a.session.revoke_api_token(world.a.api_token_id)["status"] == "revoked"


@pytest.mark.parametrize("action", ["suspend", "revoke"])
def test_a_token_may_not_suspend_or_revoke_itself(world: World, action: str) -> None:
    spare = world.gov.session(world.a.api_token)
    error = fails(getattr(spare, f"{action}_api_token"), world.a.api_token_id)
    assert isinstance(error, InvalidAction)
    assert world.a.session.show_api_token(world.a.api_token_id)["status"] == "active"
    # Another token of the account may.
    assert getattr(spare, f"{action}_api_token")(world.a.boot.token_id)["status"] != "active"


@pytest.mark.parametrize("name", ["show", "suspend", "activate", "revoke"])
@pytest.mark.parametrize("token_id", ["nope", "0" * 32])
def test_a_missing_token_is_not_found(world: World, name: str, token_id: str) -> None:
    error = fails(world.gov.call, f"api_tokens/{name}", {"api_token_id": token_id},
                  principal=world.a.principal)
    assert isinstance(error, NotFound)


def test_list_filters_by_scope_and_status(world: World) -> None:
    session = world.a.session
    agent_id = add_agent(world.a)
    ingest = session.create_api_token(token_scope="agent_deployment", agent_id=agent_id,
                                      environment_id=world.a.environment_id)
    session.suspend_api_token(world.a.api_token_id)
    by_scope = session.list_api_tokens(token_scope="agent_deployment")["summaries"]
    assert [t["id"] for t in by_scope] == [ingest.details["id"]]
    suspended = session.list_api_tokens(status="suspended")["summaries"]
    assert [t["id"] for t in suspended] == [world.a.api_token_id]
    active_accounts = session.list_api_tokens(token_scope="account", status="active")
    assert [t["id"] for t in active_accounts["summaries"]] == [world.a.boot.token_id]
    assert session.list_api_tokens(status="revoked")["summaries"] == []
    error = fails(session.list_api_tokens, token_scope="admin", status="gone")
    assert field_codes(error) == {"token_scope": "invalid_value", "status": "invalid_value"}


@pytest.mark.parametrize(
    "field", ["id", "status", "token_scope", "last_used_at", "expires_at", "inserted_at"]
)
def test_list_sorts_by_its_fields(world: World, field: str) -> None:
    session = world.a.session
    session.create_api_token(expires_at=_clock(world).now + timedelta(days=3))
    session.create_api_token(token_scope="agent_deployment", agent_id=add_agent(world.a),
                             environment_id=world.a.environment_id)
    out = world.gov.call("api_tokens/list", {
        "sorting[field]": field, "sorting[direction]": "desc", "sorting[nulls]": "last",
    }, principal=world.a.principal)
    values = [t[field] for t in out["summaries"]]
    present = [v for v in values if v is not None]
    assert values == sorted(present, reverse=True) + [None] * (len(values) - len(present))
    assert fails(session.list_api_tokens, sorting="token_hash").code == "validation_errors"
