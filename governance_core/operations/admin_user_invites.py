"""Admin user invites: create, revoke, and accept (the invite token is the credential).

An invite token that is not known counts as a failed attempt (see
:mod:`governance_core.rate_limits`): under the token, and under the caller when a bulk
request of an authenticated caller accepts it; the HTTP layer counts it under the address.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import attrs

from governance_core.context import Context, Principal
from governance_core.converter import from_record
from governance_core.credentials import ShownOnce, hash_secret, new_secret
from governance_core.envelopes import details_envelope
from governance_core.errors import Conflict, NotFound
from governance_core.fields import Fields
from governance_core.models.accounts import AdminUser, AdminUserInvite
from governance_core.operations.admin_users import admin_user_details
from governance_core.operations.api_tokens import issue_token
from governance_core.operations.common import load, save, tenant
from governance_core.registry import operation
from governance_core.repository import Filter
from governance_core.rules.emails import MAX_EMAIL_LENGTH, is_email
from governance_core.rules.states import INVITE, advance, initial
from governance_core.views import view_of

__all__ = ["INVITE_TOKEN_PREFIX", "invite_details", "invite_status"]

INVITE_TOKEN_PREFIX = "pfinv_"
"""Invite tokens look unlike access tokens, so neither is mistaken for the other."""

ACCEPT_PATH = "/api/v1/admin_user_invite/accept"


def invite_status(ctx: Context, invite: AdminUserInvite) -> str:
    """Return the invite's status now: a pending invite past its ``expires_at`` reads as expired."""
    if invite.status == "pending" and ctx.now >= invite.expires_at:
        return advance(INVITE, invite.status, "expire", what="invite")
    return invite.status


def _accept_url(ctx: Context, secret: str | None) -> str:
    url = ctx.config.base_url.rstrip("/") + ACCEPT_PATH
    return url if secret is None else f"{url}?token={quote(secret, safe='')}"


def invite_details(
    ctx: Context, invite: AdminUserInvite, secret: str | None = None
) -> dict[str, Any]:
    """Return the interface's AdminUserInvite_Details.

    Only the create response knows the token (``secret``); every later read answers ``token``
    null and an ``invite_url`` without it, since only the token's hash is stored.
    """
    token: str | None = None
    invite_url = _accept_url(ctx, None)
    if secret is not None:
        token = ShownOnce(secret)
        invite_url = ShownOnce(_accept_url(ctx, secret), later=invite_url)
    return view_of(
        invite,
        invite_url=invite_url, token=token, status=invite_status(ctx, invite),
    )


def _is_admin_email(ctx: Context, email: str) -> bool:
    return bool(ctx.tables.admin_users.count([tenant(ctx), Filter("email", "eq", email)]))


@operation("admin_user_invites/create", write=True)
def create_invite(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create an admin user invite; its token is shown in this response only."""
    assert ctx.principal is not None
    email = fields.str("email", required=True, max_length=MAX_EMAIL_LENGTH)
    if email is not None and not is_email(email):
        fields.errors.invalid("email", "email must be an email address")
    account_id = fields.id("account_id")
    fields.done()
    assert email is not None
    if account_id is not None and account_id != ctx.account_id:
        raise NotFound("account not found")
    if _is_admin_email(ctx, email):
        raise Conflict(f"{email} is already an admin user of this account")
    secret = new_secret(INVITE_TOKEN_PREFIX)
    invite = AdminUserInvite(
        id=ctx.new_id(), account_id=ctx.account_id, email=email, status=initial(INVITE),
        token_hash=hash_secret(secret), expires_at=ctx.now + ctx.config.invite_ttl,
        invited_by_admin_user_id=ctx.principal.admin_user_id,
        inserted_at=ctx.now, updated_at=ctx.now,
    )
    save(ctx, ctx.tables.admin_user_invites, invite)
    return details_envelope(invite_details(ctx, invite, secret))


@operation("admin_user_invites/revoke", write=True)
def revoke_invite(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Revoke a pending invite."""
    invite = load(
        ctx, AdminUserInvite, ctx.tables.admin_user_invites, fields.raw("admin_user_invite_id")
    )
    status = advance(INVITE, invite_status(ctx, invite), "revoke", what="invite")
    invite = attrs.evolve(invite, status=status, updated_at=ctx.now)
    save(ctx, ctx.tables.admin_user_invites, invite)
    return details_envelope(invite_details(ctx, invite))


@operation("admin_user_invites/accept", write=True, authenticated=False)
def accept_invite(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Accept an invite: create its admin user and answer a new account token for them."""
    secret = fields.str("token", required=True, max_length=1000)
    name = fields.str("name", max_length=200) or None
    fields.done()
    assert secret is not None
    token_hash = hash_secret(secret)
    # A bulk request accepts as an authenticated caller, whose guesses count against it.
    keys = [("invite", token_hash)]
    if ctx.principal is not None and ctx.principal.token_id is not None:
        keys.append(("caller", ctx.principal.token_id))
    ctx.caches.failed_attempts.check(lambda: ctx.now, *keys)
    found = ctx.tables.admin_user_invites.query([Filter("token_hash", "eq", token_hash)])
    if not found:
        for key in keys:
            ctx.caches.failed_attempts.fail(lambda: ctx.now, key)
        raise NotFound("no invite has this token")
    invite = from_record(AdminUserInvite, found[0])
    account = ctx.tables.accounts.get(invite.account_id)
    if account is None:
        raise NotFound("no invite has this token")
    ctx = attrs.evolve(ctx, principal=Principal(invite.account_id, account["partition"], "account"))
    status = advance(INVITE, invite_status(ctx, invite), "accept", what="invite")
    if _is_admin_email(ctx, invite.email):
        raise Conflict(f"{invite.email} is already an admin user of this account")
    user = AdminUser(
        id=ctx.new_id(), account_id=invite.account_id, email=invite.email, name=name,
        inserted_at=ctx.now, updated_at=ctx.now,
    )
    save(ctx, ctx.tables.admin_users, user)
    save(ctx, ctx.tables.admin_user_invites, attrs.evolve(
        invite, status=status, accepted_admin_user_id=user.id, updated_at=ctx.now,
    ))
    _, token = issue_token(ctx, scope="account", admin_user_id=user.id,
                           description="issued on accepting an invite")
    return details_envelope(admin_user_details(ctx, user), token=ShownOnce(token))
