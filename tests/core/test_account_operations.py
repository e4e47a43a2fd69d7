"""What every operation of the account families owes: scope, tenant isolation, idempotency,
and bulk outputs byte-identical to the single call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from governance_core.credentials import withhold_secrets
from governance_core.errors import IdempotencyKeyAlreadyUsed, NotFound, NotPermitted
from governance_core.operations import default_registry
from governance_core.service import Governance
from governance_core.storage.schema import TABLES
from tests.core.accounts_world import (
    RULESET,
    Tenant,
    World,
    build_world,
    canonical,
    fails,
    ingestion,
    strip_secrets,
    twin,
)

REGISTRY = default_registry()

FAMILIES = (
    "accounts", "teams", "people", "admin_users", "admin_user_invites", "api_tokens",
    "environments", "risk_profiles",
)
OPERATIONS = sorted(name for name in REGISTRY if name.split("/")[0] in FAMILIES)

Params = Callable[[Tenant], dict[str, Any]]


def _suspended(tenant: Tenant) -> dict[str, Any]:
    tenant.session.suspend_api_token(tenant.api_token_id)
    return {"api_token_id": tenant.api_token_id}


WRITES: dict[str, Params] = {
    "accounts/update": lambda t: {"name": "Renamed", "website": "https://example.com"},
    "teams/create": lambda t: {"name": "Platform"},
    "teams/update": lambda t: {"team_id": t.team_id, "name": "Renamed"},
    "people/create": lambda t: {"name": "Sam", "email": "sam@x.test", "team_ids": [t.team_id]},
    "people/update": lambda t: {"person_id": t.person_id, "title": "Lead", "team_ids": []},
    "admin_users/update": lambda t: {"admin_user_id": t.boot.admin_user_id, "job_title": "CTO"},
    "admin_user_invites/create": lambda t: {"email": "someone@x.test"},
    "admin_user_invites/revoke": lambda t: {"admin_user_invite_id": t.invite_id},
    "admin_user_invites/accept": lambda t: {"token": t.invite_token, "name": "Neo"},
    "api_tokens/create": lambda t: {"token_scope": "account", "description": "ci"},
    "api_tokens/suspend": lambda t: {"api_token_id": t.api_token_id},
    "api_tokens/activate": _suspended,
    "api_tokens/revoke": lambda t: {"api_token_id": t.api_token_id},
    "environments/create": lambda t: {"name": "QA", "purpose": "testing"},
    "environments/update": lambda t: {"environment_id": t.environment_id, "description": "d"},
    "risk_profiles/create": lambda t: {"name": "Loose", "ruleset": RULESET},
    "risk_profiles/update": lambda t: {"risk_profile_id": t.risk_profile_id, "name": "Tight"},
    "risk_profiles/delete": lambda t: {"risk_profile_id": t.risk_profile_id},
}

READS: dict[str, Params] = {
    "accounts/list": lambda t: {},
    "accounts/show": lambda t: {},
    "teams/list": lambda t: {"sorting": "-name"},
    "teams/show": lambda t: {"team_id": t.team_id},
    "people/list": lambda t: {"team_id": t.team_id},
    "people/show": lambda t: {"person_id": t.person_id},
    "admin_users/show": lambda t: {"admin_user_id": t.boot.admin_user_id},
    "api_tokens/list": lambda t: {"token_scope": "account"},
    "api_tokens/show": lambda t: {"api_token_id": t.api_token_id},
    "environments/list": lambda t: {"account_id": t.boot.account_id},
    "environments/show": lambda t: {"environment_id": t.environment_id},
    "risk_profiles/list": lambda t: {"pagination[page_size]": 1},
    "risk_profiles/show": lambda t: {"risk_profile_id": t.risk_profile_id},
}

# The other tenant's resources (or account) named by the caller: always not_found.
FOREIGN: dict[str, Params] = {
    "accounts/show": lambda t: {"account_id": t.boot.account_id},
    "accounts/update": lambda t: {"account_id": t.boot.account_id, "name": "Mine now"},
    "teams/show": READS["teams/show"],
    "teams/update": WRITES["teams/update"],
    "people/show": READS["people/show"],
    "people/update": WRITES["people/update"],
    "admin_users/show": READS["admin_users/show"],
    "admin_users/update": WRITES["admin_users/update"],
    "admin_user_invites/create": lambda t: {"email": "x@x.test", "account_id": t.boot.account_id},
    "admin_user_invites/revoke": WRITES["admin_user_invites/revoke"],
    "api_tokens/show": READS["api_tokens/show"],
    "api_tokens/suspend": WRITES["api_tokens/suspend"],
    "api_tokens/activate": lambda t: {"api_token_id": t.api_token_id},
    "api_tokens/revoke": WRITES["api_tokens/revoke"],
    "environments/list": READS["environments/list"],
    "environments/show": READS["environments/show"],
    "environments/create": lambda t: {"account_id": t.boot.account_id, "name": "QA"},
    "environments/update": WRITES["environments/update"],
    "risk_profiles/show": READS["risk_profiles/show"],
    "risk_profiles/update": WRITES["risk_profiles/update"],
    "risk_profiles/delete": WRITES["risk_profiles/delete"],
}

LISTS = sorted(name for name in OPERATIONS if name.endswith("/list"))


def test_the_tables_cover_every_operation_of_the_families() -> None:
    assert sorted({*WRITES, *READS}) == OPERATIONS


@pytest.mark.parametrize("name", OPERATIONS)
def test_an_ingestion_token_may_not_call_it(world: World, name: str) -> None:
    params = (WRITES.get(name) or READS[name])(world.a)
    error = fails(world.gov.call, name, params, principal=ingestion(world.a))
    assert isinstance(error, NotPermitted)


@pytest.mark.parametrize("name", sorted(FOREIGN))
def test_another_accounts_resource_is_not_found(world: World, name: str) -> None:
    before = _snapshot(world.gov)
    error = fails(world.gov.call, name, FOREIGN[name](world.b), principal=world.a.principal)
    assert isinstance(error, NotFound)
    assert _snapshot(world.gov) == before


@pytest.mark.parametrize("name", LISTS)
def test_a_list_never_shows_another_accounts_records(world: World, name: str) -> None:
    out = world.gov.call(name, {"pagination[page_size]": 100}, principal=world.a.principal)
    listed = {summary["id"] for summary in out["summaries"]}
    assert listed
    assert not listed & world.b.ids()
    assert listed <= world.a.ids() | _ids_of_account(world.gov, world.a)


def _ids_of_account(gov: Governance, tenant: Tenant) -> set[str]:
    return {
        record["id"]
        for table in TABLES
        for record in gov.store.query(table)
        if record.get("account_id") == tenant.boot.account_id
    }


def _snapshot(gov: Governance) -> dict[str, list[dict[str, Any]]]:
    return {
        table: gov.store.query(table) for table in TABLES if table != "idempotency_keys"
    }


@pytest.mark.parametrize("name", sorted(set(WRITES) - {"admin_user_invites/accept"}))
def test_a_replayed_write_answers_its_stored_response_and_changes_nothing(
    world: World, name: str
) -> None:
    gov, principal = world.gov, world.a.principal
    params = {**WRITES[name](world.a), "idempotency_key": "key-00000001"}
    first = gov.call(name, params, principal=principal)
    before = _snapshot(gov)
    again = gov.call(name, params, principal=principal)
    assert canonical(again) == canonical(withhold_secrets(first))
    assert _snapshot(gov) == before
    error = fails(gov.call, name, {**params, "note": "another request"}, principal=principal)
    assert isinstance(error, IdempotencyKeyAlreadyUsed)


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_bulk_write_outputs_what_the_single_call_answers(gov: Governance, name: str) -> None:
    single_world, bulk_world = build_world(gov), build_world(twin(gov))
    single = gov.call(name, WRITES[name](single_world.a), principal=single_world.a.principal)
    item = {"_type": name, "idempotency_key": "item-0001", **WRITES[name](bulk_world.a)}
    bulk = bulk_world.gov.call("bulk", {"items": [item]}, principal=bulk_world.a.principal)
    assert bulk["status"] == "success"
    # Secrets are random by design; everything else is the same byte for byte.
    assert canonical(strip_secrets(bulk["outputs"]["item-0001"])) == canonical(
        strip_secrets(single)
    )
    assert set(bulk["outputs"]["item-0001"]) == set(single)


@pytest.mark.parametrize("name", sorted(READS))
def test_a_bulk_read_outputs_what_the_single_call_answers(world: World, name: str) -> None:
    params = READS[name](world.a)
    single = world.gov.call(name, params, principal=world.a.principal)
    item = {"_type": name, "idempotency_key": "read-0001", **params}
    bulk = world.gov.call("bulk", {"items": [item]}, principal=world.a.principal)
    assert canonical(bulk["outputs"]["read-0001"]) == canonical(single)
