"""Environments: list, show, create, update."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record
from governance_core.envelopes import details_envelope
from governance_core.errors import Conflict
from governance_core.fields import Fields
from governance_core.models.accounts import ENVIRONMENT_PURPOSES, Environment
from governance_core.operations.accounts import require_own_account
from governance_core.operations.common import list_response, load, save, tenant
from governance_core.registry import operation
from governance_core.repository import Filter, Record
from governance_core.views import view_of

__all__ = ["DEFAULT_PURPOSE", "PURPOSES", "environment_details"]

PURPOSES = ENVIRONMENT_PURPOSES
DEFAULT_PURPOSE = "other"
SORTABLE = ("id", "name", "purpose", "external_identifier", "inserted_at")


def environment_details(environment: Environment) -> dict[str, Any]:
    """Return the interface's Environment_Details (also the list summary)."""
    return view_of(environment)


def _summary(record: Record) -> dict[str, Any]:
    return environment_details(from_record(Environment, record))


def _check_external_identifier(ctx: Context, value: str | None, own_id: str | None) -> None:
    if value is None:
        return
    taken = ctx.tables.environments.query(
        [tenant(ctx), Filter("external_identifier", "eq", value)], limit=2
    )
    if any(record["id"] != own_id for record in taken):
        raise Conflict(f"an environment with external_identifier {value!r} already exists")


@operation("environments/list", write=False)
def list_environments(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List environments (an ``account_id`` member must name the caller's account)."""
    require_own_account(ctx, fields)
    return list_response(
        ctx, fields, ctx.tables.environments, sortable=SORTABLE, summarize=_summary
    )


@operation("environments/show", write=False)
def show_environment(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch an environment."""
    environment = load(ctx, Environment, ctx.tables.environments, fields.raw("environment_id"))
    return details_envelope(environment_details(environment))


@operation("environments/create", write=True)
def create_environment(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create an environment; ``external_identifier`` is unique in the account."""
    require_own_account(ctx, fields)
    name = fields.str("name", required=True, max_length=200)
    purpose = fields.str("purpose", choices=PURPOSES) or DEFAULT_PURPOSE
    external_identifier = fields.str("external_identifier", max_length=500) or None
    description = fields.str("description", max_length=10_000) or None
    fields.done()
    assert name is not None
    _check_external_identifier(ctx, external_identifier, None)
    environment = Environment(
        id=ctx.new_id(), account_id=ctx.account_id, name=name, purpose=purpose,
        external_identifier=external_identifier, description=description,
        inserted_at=ctx.now, updated_at=ctx.now,
    )
    save(ctx, ctx.tables.environments, environment)
    return details_envelope(environment_details(environment))


@operation("environments/update", write=True)
def update_environment(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Update an environment's name, purpose, external identifier or description."""
    environment = load(ctx, Environment, ctx.tables.environments, fields.raw("environment_id"))
    require_own_account(ctx, fields)
    changes: dict[str, Any] = {}
    if fields.has("name"):
        changes["name"] = fields.str("name", required=True, max_length=200) or environment.name
    if fields.has("purpose"):
        purpose = fields.str("purpose", nullable=False, choices=PURPOSES)
        changes["purpose"] = purpose or environment.purpose
    if fields.has("external_identifier"):
        changes["external_identifier"] = fields.str("external_identifier", max_length=500) or None
    if fields.has("description"):
        changes["description"] = fields.str("description", max_length=10_000) or None
    fields.done()
    updated = attrs.evolve(environment, **changes)
    if updated != environment:
        _check_external_identifier(ctx, updated.external_identifier, environment.id)
        updated = attrs.evolve(updated, updated_at=ctx.now)
        save(ctx, ctx.tables.environments, updated)
    return details_envelope(environment_details(updated))
