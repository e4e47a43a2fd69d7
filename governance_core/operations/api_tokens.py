"""API tokens: issue, list, show, suspend, activate, revoke."""

from __future__ import annotations

from datetime import datetime

from governance_core.converter import to_record
from governance_core.credentials import hash_secret, new_secret
from governance_core.models.accounts import ApiToken
from governance_core.registry import Context

__all__ = ["issue_token"]


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
        token_scope=scope, status="active", inserted_at=ctx.now, updated_at=ctx.now,
        admin_user_id=admin_user_id, agent_id=agent_id, environment_id=environment_id,
        expires_at=expires_at, description=description,
    )
    ctx.store.put("api_tokens", to_record(token))
    return token, secret
