"""API tokens: issue, list, show, create, suspend, activate, revoke."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record, to_record
from governance_core.credentials import ShownOnce, hash_secret, new_secret
from governance_core.envelopes import details_envelope
from governance_core.errors import InvalidAction
from governance_core.fields import Fields
from governance_core.models.accounts import TOKEN_SCOPES, ApiToken
from governance_core.operations.common import list_response, load, resolve_ref, save
from governance_core.registry import operation
from governance_core.repository import Filter, Record
from governance_core.rules.states import TOKEN, advance, initial, states
from governance_core.views import view_of

__all__ = ["SCOPES", "STATUSES", "api_token_details", "issue_token"]

SCOPES = TOKEN_SCOPES
STATUSES = states(TOKEN)
SORTABLE = ("id", "status", "token_scope", "last_used_at", "expires_at", "inserted_at")


def issue_token(
    ctx: Context,
    *,
    scope: str,
    admin_user_id: str | None = None,
    agent_id: str | None = None,
    environment_id: str | None = None,
    expires_at: datetime | None = None,
    description: str | None = None,
) -> tuple[ApiToken, str]:
    """Store a new active token; returns it with its secret, which is never stored."""
    secret = new_secret()
    token = ApiToken(
        id=ctx.new_id(), account_id=ctx.account_id, token_hash=hash_secret(secret),
        token_scope=scope, status=initial(TOKEN), inserted_at=ctx.now, updated_at=ctx.now,
        admin_user_id=admin_user_id, agent_id=agent_id, environment_id=environment_id,
        expires_at=expires_at, description=description,
    )
    ctx.tables.api_tokens.put(to_record(token))
    return token, secret


def api_token_details(token: ApiToken) -> dict[str, Any]:
    """Return a token as clients see it (summary and details alike), never its hash."""
    return view_of(token)


def _summary(record: Record) -> dict[str, Any]:
    return api_token_details(from_record(ApiToken, record))


@operation("api_tokens/list", write=False)
def list_tokens(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List the account's tokens; filters ``token_scope`` and ``status``."""
    filters: list[Filter] = []
    scope = fields.str("token_scope", choices=SCOPES)
    if scope is not None:
        filters.append(Filter("token_scope", "eq", scope))
    status = fields.str("status", choices=STATUSES)
    if status is not None:
        filters.append(Filter("status", "eq", status))
    return list_response(
        ctx, fields, ctx.tables.api_tokens, sortable=SORTABLE, summarize=_summary, filters=filters
    )


@operation("api_tokens/show", write=False)
def show_token(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch a token (never its secret)."""
    token = load(ctx, ApiToken, ctx.tables.api_tokens, fields.raw("api_token_id"))
    return details_envelope(api_token_details(token))


@operation("api_tokens/create", write=True)
def create_token(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create a token; its secret is answered beside ``details`` as ``token``, this once.

    An ``account`` token made by an admin user's token belongs to that admin user. An
    ``agent_deployment`` token needs ``agent_id`` and ``environment_id`` of the account.
    """
    assert ctx.principal is not None
    scope = (
        fields.str("token_scope", nullable=False, choices=SCOPES)
        if fields.has("token_scope") else "account"
    )
    agent_id = fields.id("agent_id")
    environment_id = fields.id("environment_id")
    expires_at = fields.timestamp("expires_at")
    description = fields.str("description", max_length=1000) or None
    if expires_at is not None and expires_at <= ctx.now:
        fields.errors.invalid("expires_at", "expires_at must be in the future")
    if scope == "agent_deployment":
        for name, value in (("agent_id", agent_id), ("environment_id", environment_id)):
            if value is None:
                fields.errors.required(name, f"{name} is required for an agent_deployment token")
        resolve_ref(ctx, fields, "agent_id", "agent", agent_id)
        resolve_ref(ctx, fields, "environment_id", "environment", environment_id)
    elif scope == "account":
        for name, value in (("agent_id", agent_id), ("environment_id", environment_id)):
            if value is not None:
                fields.errors.invalid(name, f"{name} is only for agent_deployment tokens")
    fields.done()
    assert scope is not None
    token, secret = issue_token(
        ctx, scope=scope,
        admin_user_id=ctx.principal.admin_user_id if scope == "account" else None,
        agent_id=agent_id, environment_id=environment_id, expires_at=expires_at,
        description=description,
    )
    return details_envelope(api_token_details(token), token=ShownOnce(secret))


def _transition(ctx: Context, fields: Fields, trigger: str) -> dict[str, Any]:
    token = load(ctx, ApiToken, ctx.tables.api_tokens, fields.raw("api_token_id"))
    assert ctx.principal is not None
    if token.id == ctx.principal.token_id and trigger != "activate":
        # A token that suspended itself could never activate itself again, and the last token
        # of an account that revoked itself would lock everyone out.
        raise InvalidAction(f"a token cannot {trigger} itself; use another token")
    status = advance(TOKEN, token.status, trigger, what="token")
    token = attrs.evolve(token, status=status, updated_at=ctx.now)
    save(ctx, ctx.tables.api_tokens, token)
    if status != "active":
        # Console sessions end with their token: kept, they would come back on activation.
        for session in ctx.tables.console_sessions.query([Filter("token_id", "eq", token.id)]):
            ctx.tables.console_sessions.delete(session["id"])
    return details_envelope(api_token_details(token))


@operation("api_tokens/suspend", write=True)
def suspend_token(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Suspend an active token (it stops authenticating until activated)."""
    return _transition(ctx, fields, "suspend")


@operation("api_tokens/activate", write=True)
def activate_token(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Activate a suspended token."""
    return _transition(ctx, fields, "activate")


@operation("api_tokens/revoke", write=True)
def revoke_token(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Revoke a token, for good."""
    return _transition(ctx, fields, "revoke")
