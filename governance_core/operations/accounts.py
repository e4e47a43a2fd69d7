"""Accounts: bootstrap, list, show, update."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.context import Context, Principal
from governance_core.converter import from_record, to_record
from governance_core.envelopes import details_envelope
from governance_core.errors import NotFound
from governance_core.fields import Fields
from governance_core.models.accounts import (
    ACCOUNT_PURPOSES,
    Account,
    AdminUser,
    Environment,
    RiskProfile,
)
from governance_core.operations.api_tokens import issue_token
from governance_core.operations.common import list_response, load
from governance_core.registry import operation
from governance_core.repository import Filter, Record
from governance_core.views import view_of

__all__ = [
    "PURPOSES",
    "account_details",
    "account_summary",
    "create_account",
    "require_own_account",
]

PURPOSES = ACCOUNT_PURPOSES
SORTABLE = ("id", "name", "inserted_at", "purpose", "promo_code", "website")


def account_summary(record: Record) -> dict[str, Any]:
    """The interface's Account summary."""
    return {"id": record["id"], "name": record["name"], "type": "account"}


def account_details(account: Account) -> dict[str, Any]:
    """The interface's Account details."""
    return view_of(account)


def require_own_account(ctx: Context, fields: Fields) -> None:
    """Raise ``not_found`` when a sent ``account_id`` member is not the caller's account."""
    account_id = fields.raw("account_id")
    if account_id is not None and account_id != ctx.account_id:
        raise NotFound("account not found")


def switchable_account_ids(ctx: Context, admin_user_id: str | None) -> list[str]:
    """Accounts an admin user may switch to: its own, and where its email links it.

    An email links accounts only when it is vouched for in both (given by the operator at
    bootstrap, who holds every account's first credential). An invite vouches for nothing:
    its creator sees its token and can accept it, so an invited admin user sees only its own
    account, and no other account sees it (docs/decisions.md, accounts).
    """
    record = ctx.tables.admin_users.get(admin_user_id) if admin_user_id else None
    if record is None:
        return [ctx.account_id]
    own = record["account_id"]
    if not record.get("email_vouched"):
        return [own]
    users = ctx.tables.admin_users.query([Filter("email", "eq", record["email"])])
    return sorted({own, *(u["account_id"] for u in users if u.get("email_vouched"))})


def create_account(
    ctx: Context, *, account_name: str, admin_email: str, admin_name: str | None
) -> dict[str, Any]:
    """Make a new account with its admin user, defaults and first token (no transaction)."""
    from governance_core.operations.risk_profiles import default_profile

    partition = ctx.ids.new_partition()
    account_id = ctx.ids.new(partition, ctx.now)
    principal = Principal(account_id, partition, "account")
    ctx = attrs.evolve(ctx, principal=principal)
    now = ctx.now
    account = Account(
        id=account_id, account_id=account_id, name=account_name, partition=partition,
        purpose="business", organisation_name=account_name, inserted_at=now, updated_at=now,
    )
    ctx.tables.accounts.put(to_record(account))
    admin = AdminUser(
        id=ctx.new_id(), account_id=account_id, email=admin_email, name=admin_name,
        inserted_at=now, updated_at=now, email_vouched=True,
    )
    ctx.tables.admin_users.put(to_record(admin))
    environment = Environment(
        id=ctx.new_id(), account_id=account_id, name="Default", purpose="production",
        description="The account's default environment", is_default=True,
        inserted_at=now, updated_at=now,
    )
    ctx.tables.environments.put(to_record(environment))
    profile: RiskProfile = default_profile(ctx)
    ctx.tables.risk_profiles.put(to_record(profile))
    token, secret = issue_token(ctx, scope="account", admin_user_id=admin.id,
                                description="created at bootstrap")
    return {
        "account_id": account_id,
        "admin_user_id": admin.id,
        "environment_id": environment.id,
        "risk_profile_id": profile.id,
        "token": secret,
        "token_id": token.id,
    }


@operation("accounts/list", write=False)
def list_accounts(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List accounts: the caller's own and its admin user's switchable accounts."""
    assert ctx.principal is not None
    ids = switchable_account_ids(ctx, ctx.principal.admin_user_id)
    return list_response(
        ctx, fields, ctx.tables.accounts, sortable=SORTABLE, summarize=account_summary,
        filters=[Filter("id", "in", ids)], scoped=False,
    )


@operation("accounts/show", write=False)
def show_account(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch the caller's account."""
    account_id = fields.raw("account_id") or ctx.account_id
    fields.done()
    return details_envelope(account_details(load(ctx, Account, ctx.tables.accounts, account_id)))


@operation("accounts/update", write=True)
def update_account(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Update the caller's account (name, purpose, organisation name, website)."""
    account = load(ctx, Account, ctx.tables.accounts, fields.raw("account_id") or ctx.account_id)
    changes: dict[str, Any] = {}
    if fields.has("name"):
        name = fields.str("name", required=True, max_length=200)
        if name is not None:
            changes["name"] = name
    if fields.has("purpose"):
        purpose = fields.str("purpose", nullable=False, choices=PURPOSES)
        if purpose is not None:
            changes["purpose"] = purpose
    if fields.has("organisation_name"):
        changes["organisation_name"] = fields.str("organisation_name", max_length=200) or None
    if fields.has("website"):
        changes["website"] = fields.str("website", max_length=2000) or None
    if fields.has("promo_code"):
        changes["promo_code"] = fields.str("promo_code", max_length=100) or None
    fields.done()
    updated = attrs.evolve(account, **changes)
    if updated.purpose != "personal" and not updated.organisation_name:
        fields.errors.required(
            "organisation_name", "organisation_name is required when purpose is not personal"
        )
        fields.done()
    if updated != account:
        updated = attrs.evolve(updated, updated_at=ctx.now)
        ctx.tables.accounts.put(to_record(updated))
    return details_envelope(account_details(updated))


@operation("operator/list_accounts", write=False, scopes=(), authenticated=False)
def list_all_accounts(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List every account in the store, for its operator.

    It is for code holding the store itself (``Governance.call``, the ``governance``
    command): no route serves it and bulk refuses it to every token (no scope may call it).
    """
    return list_response(
        ctx, fields, ctx.tables.accounts, sortable=SORTABLE, scoped=False,
        summarize=lambda record: account_details(from_record(Account, record)),
    )
