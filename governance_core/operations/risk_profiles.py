"""Risk profiles: the rulesets that turn data-risk declarations into scores."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record
from governance_core.domain.insights import rescore_runs
from governance_core.domain.risk import profile_ruleset
from governance_core.envelopes import details_envelope
from governance_core.errors import Conflict, GovernanceError, InvalidAction
from governance_core.fields import Fields
from governance_core.models.accounts import RiskProfile
from governance_core.operations.common import list_response, load, save, tenant
from governance_core.registry import operation
from governance_core.repository import Filter, Record
from governance_core.rules.risk import DEFAULT_RULESET, Ruleset, parse_ruleset
from governance_core.views import view_of

__all__ = [
    "default_profile",
    "risk_profile_details",
]

SORTABLE = ("id", "name", "inserted_at")


def default_profile(ctx: Context) -> RiskProfile:
    """Make a new default profile for the caller's account, with the default ruleset."""
    return RiskProfile(
        id=ctx.new_id(), account_id=ctx.account_id, name="Default",
        description="The account's default risk profile", ruleset=DEFAULT_RULESET.to_json(),
        is_default=True, inserted_at=ctx.now, updated_at=ctx.now,
    )


def risk_profile_details(profile: RiskProfile) -> dict[str, Any]:
    """Return a risk profile as clients see it (summary and details alike)."""
    return view_of(profile, ruleset=profile_ruleset(profile).to_json())


def _summary(record: Record) -> dict[str, Any]:
    return risk_profile_details(from_record(RiskProfile, record))


def _read_ruleset(fields: Fields) -> Ruleset | None:
    """Read ``ruleset``, reporting its problems nested under ``ruleset``."""
    if fields.raw("ruleset") is None:
        fields.errors.required("ruleset")
        return None
    try:
        return parse_ruleset(fields.raw("ruleset"))
    except GovernanceError as error:
        fields.errors.merge("ruleset", error)
        return None


@operation("risk_profiles/list", write=False)
def list_risk_profiles(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List risk profiles."""
    return list_response(
        ctx, fields, ctx.tables.risk_profiles, sortable=SORTABLE, summarize=_summary
    )


@operation("risk_profiles/show", write=False)
def show_risk_profile(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch a risk profile."""
    profile = load(ctx, RiskProfile, ctx.tables.risk_profiles, fields.raw("risk_profile_id"))
    return details_envelope(risk_profile_details(profile))


@operation("risk_profiles/create", write=True)
def create_risk_profile(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create a risk profile from a name and a ruleset."""
    name = fields.str("name", required=True, max_length=200)
    description = fields.str("description", max_length=10_000) or None
    ruleset = _read_ruleset(fields)
    fields.done()
    assert name is not None and ruleset is not None
    profile = RiskProfile(
        id=ctx.new_id(), account_id=ctx.account_id, name=name, description=description,
        ruleset=ruleset.to_json(), inserted_at=ctx.now, updated_at=ctx.now,
    )
    save(ctx, ctx.tables.risk_profiles, profile)
    return details_envelope(risk_profile_details(profile))


@operation("risk_profiles/update", write=True)
def update_risk_profile(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Update a risk profile's name, description or ruleset (the default profile too)."""
    profile = load(ctx, RiskProfile, ctx.tables.risk_profiles, fields.raw("risk_profile_id"))
    changes: dict[str, Any] = {}
    if fields.has("name"):
        changes["name"] = fields.str("name", required=True, max_length=200) or profile.name
    if fields.has("description"):
        changes["description"] = fields.str("description", max_length=10_000) or None
    if fields.has("ruleset"):
        ruleset = _read_ruleset(fields)
        if ruleset is not None:
            changes["ruleset"] = ruleset
    fields.done()
    if "ruleset" in changes:
        if changes["ruleset"] == profile_ruleset(profile):
            del changes["ruleset"]
        else:
            changes["ruleset"] = changes["ruleset"].to_json()
    updated = attrs.evolve(profile, **changes)
    if updated != profile:
        updated = attrs.evolve(updated, updated_at=ctx.now)
        save(ctx, ctx.tables.risk_profiles, updated)
    if "ruleset" in changes:
        # The default profile scores every agent without a profile of its own.
        rescore_runs(ctx, None if profile.is_default else [
            agent["id"] for agent in ctx.tables.agents.query(
                [tenant(ctx), Filter("risk_profile_id", "eq", profile.id)]
            )
        ])
    return details_envelope(risk_profile_details(updated))


@operation("risk_profiles/delete", write=True)
def delete_risk_profile(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Delete a risk profile that is neither the default nor assigned to an agent."""
    profile = load(ctx, RiskProfile, ctx.tables.risk_profiles, fields.raw("risk_profile_id"))
    if profile.is_default:
        raise InvalidAction("the account's default risk profile cannot be deleted")
    assigned = ctx.tables.agents.count([tenant(ctx), Filter("risk_profile_id", "eq", profile.id)])
    if assigned:
        raise Conflict(f"the risk profile is assigned to {assigned} agent(s)")
    ctx.tables.risk_profiles.delete(profile.id)
    return details_envelope(risk_profile_details(profile))
