"""Teams: list, show, create, update."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.context import Context
from governance_core.envelopes import details_envelope
from governance_core.fields import Fields
from governance_core.models.accounts import Team
from governance_core.operations.common import list_response, load, save, tenant
from governance_core.registry import operation
from governance_core.repository import Filter, Record
from governance_core.views import view_of

__all__ = ["team_details", "team_summary"]

SORTABLE = ("id", "name", "inserted_at")


def _counts(ctx: Context, team_id: str) -> dict[str, int]:
    by_team = [tenant(ctx), Filter("team_id", "eq", team_id)]
    return {
        "agent_count": ctx.tables.agents.count(by_team),
        "people_count": ctx.tables.team_memberships.count(by_team),
    }


def team_summary(ctx: Context, record: Record) -> dict[str, Any]:
    """The interface's Team summary."""
    counts = _counts(ctx, record["id"])
    return {"id": record["id"], "name": record["name"], **counts, "type": "team"}


def team_details(ctx: Context, team: Team) -> dict[str, Any]:
    """The interface's Team details."""
    return view_of(team, **_counts(ctx, team.id))


@operation("teams/list", write=False)
def list_teams(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List teams."""
    return list_response(
        ctx, fields, ctx.tables.teams, sortable=SORTABLE, summarize=lambda r: team_summary(ctx, r)
    )


@operation("teams/show", write=False)
def show_team(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Get team details."""
    team = load(ctx, Team, ctx.tables.teams, fields.raw("team_id"))
    return details_envelope(team_details(ctx, team))


@operation("teams/create", write=True)
def create_team(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create a team."""
    name = fields.str("name", required=True, max_length=200)
    fields.done()
    assert name is not None
    team = Team(id=ctx.new_id(), account_id=ctx.account_id, name=name,
                inserted_at=ctx.now, updated_at=ctx.now)
    save(ctx, ctx.tables.teams, team)
    return details_envelope(team_details(ctx, team))


@operation("teams/update", write=True)
def update_team(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Rename a team."""
    team = load(ctx, Team, ctx.tables.teams, fields.raw("team_id"))
    name = fields.str("name", required=fields.has("name"), max_length=200)
    fields.done()
    if name is not None and name != team.name:
        team = attrs.evolve(team, name=name, updated_at=ctx.now)
        save(ctx, ctx.tables.teams, team)
    return details_envelope(team_details(ctx, team))
