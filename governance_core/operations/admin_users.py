"""Admin users: show, and update of the caller's own profile."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.context import Context
from governance_core.envelopes import details_envelope
from governance_core.errors import NotPermitted
from governance_core.fields import Fields
from governance_core.models.accounts import AdminUser
from governance_core.operations.accounts import account_summary, switchable_account_ids
from governance_core.operations.common import load, save
from governance_core.registry import operation
from governance_core.views import view_of

__all__ = ["admin_user_details"]


def admin_user_details(ctx: Context, user: AdminUser) -> dict[str, Any]:
    """Return the interface's AdminUser_Details, with the accounts the user can switch to."""
    switchable = []
    for account_id in switchable_account_ids(ctx, user.id):
        record = ctx.tables.accounts.get(account_id)
        if record is not None:
            switchable.append(account_summary(record))
    return view_of(
        user, switchable_account_summaries=switchable
    )


@operation("admin_users/show", write=False)
def show_admin_user(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch admin user details."""
    user = load(ctx, AdminUser, ctx.tables.admin_users, fields.raw("admin_user_id"))
    return details_envelope(admin_user_details(ctx, user))


@operation("admin_users/update", write=True)
def update_admin_user(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Update an admin user (own profile only)."""
    assert ctx.principal is not None
    user = load(ctx, AdminUser, ctx.tables.admin_users, fields.raw("admin_user_id"))
    if ctx.principal.admin_user_id != user.id:
        raise NotPermitted("an admin user may update only their own profile")
    changes: dict[str, Any] = {}
    if fields.has("name"):
        name = fields.str("name", required=True, max_length=200)
        if name is not None:
            changes["name"] = name
    if fields.has("job_title"):
        changes["job_title"] = fields.str("job_title", max_length=200) or None
    if fields.has("profile_completed_at"):
        changes["profile_completed_at"] = fields.timestamp("profile_completed_at")
    fields.done()
    updated = attrs.evolve(user, **changes)
    if updated != user:
        updated = attrs.evolve(updated, updated_at=ctx.now)
        save(ctx, ctx.tables.admin_users, updated)
    return details_envelope(admin_user_details(ctx, updated))
