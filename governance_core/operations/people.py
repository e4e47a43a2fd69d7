"""People: list, show, create, update; team assignments are team memberships."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import to_record
from governance_core.domain.supplied_ids import claim_id, read_supplied_id
from governance_core.envelopes import details_envelope
from governance_core.fields import Fields
from governance_core.ids import is_pfid
from governance_core.models.accounts import Person, TeamMembership
from governance_core.operations.common import list_response, load, resolve_ref, save, tenant
from governance_core.registry import operation
from governance_core.repository import Filter, Record
from governance_core.rules.emails import MAX_EMAIL_LENGTH, is_email
from governance_core.views import view_of

__all__ = ["person_details", "person_summary", "person_team_ids"]

SORTABLE = ("id", "name", "email", "inserted_at")


def person_team_ids(ctx: Context, person_id: str) -> list[str]:
    """Return the teams the person is on, in team creation order."""
    memberships = ctx.tables.team_memberships.query(
        [tenant(ctx), Filter("person_id", "eq", person_id)]
    )
    return sorted(m["team_id"] for m in memberships)


def person_summary(ctx: Context, record: Record) -> dict[str, Any]:
    """Return the interface's Person_Summary."""
    return {
        "id": record["id"],
        "name": record["name"],
        "email": record["email"],
        "title": record.get("title"),
        "team_ids": person_team_ids(ctx, record["id"]),
        "type": "person",
    }


def person_details(ctx: Context, person: Person) -> dict[str, Any]:
    """Return the interface's Person_Details."""
    return view_of(
        person, team_ids=person_team_ids(ctx, person.id)
    )


def _read_email(fields: Fields, *, required: bool) -> str | None:
    email = fields.str("email", required=required, nullable=False, max_length=MAX_EMAIL_LENGTH)
    if email is not None and not is_email(email):
        fields.errors.invalid("email", "email must be an email address")
        return None
    return email


def _read_team_ids(ctx: Context, fields: Fields) -> list[str] | None:
    """Read ``team_ids``: each item must be a team of the account (errors named by index)."""
    team_ids = fields.ids("team_ids")
    if team_ids is None:
        return None
    items = Fields({})
    indexes: dict[str, int] = {}
    for index, item in enumerate(fields.raw("team_ids")):
        if is_pfid(item):
            label = f"team_ids[{index}]"
            indexes[label] = index
            resolve_ref(ctx, items, label, "team", item)
    if items.errors:
        for label, error in items.errors.to_error().errors.items():
            fields.errors.add(("team_ids", indexes[label]), error)
    return team_ids


def _assign_teams(ctx: Context, person_id: str, team_ids: list[str]) -> None:
    """Make the person's memberships exactly ``team_ids``."""
    current = ctx.tables.team_memberships.query(
        [tenant(ctx), Filter("person_id", "eq", person_id)]
    )
    wanted = set(team_ids)
    for membership in current:
        if membership["team_id"] not in wanted:
            ctx.tables.team_memberships.delete(membership["id"])
    have = {m["team_id"] for m in current}
    for team_id in team_ids:
        if team_id not in have:
            joined = TeamMembership(
                id=ctx.new_id(), account_id=ctx.account_id, team_id=team_id,
                person_id=person_id, inserted_at=ctx.now,
            )
            ctx.tables.team_memberships.put(to_record(joined))


@operation("people/list", write=False)
def list_people(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List people; ``team_id`` keeps the people on that team."""
    filters: list[Filter] = []
    team_id = fields.id("team_id")
    if team_id is not None:
        memberships = ctx.tables.team_memberships.query(
            [tenant(ctx), Filter("team_id", "eq", team_id)]
        )
        filters.append(Filter("id", "in", [m["person_id"] for m in memberships]))
    return list_response(
        ctx, fields, ctx.tables.people, sortable=SORTABLE,
        summarize=lambda r: person_summary(ctx, r),
        filters=filters,
    )


@operation("people/show", write=False)
def show_person(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch a person."""
    person = load(ctx, Person, ctx.tables.people, fields.raw("person_id"))
    return details_envelope(person_details(ctx, person))


@operation("people/create", write=True)
def create_person(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create a person, optionally with a caller-chosen ``id`` and team assignments."""
    person_id = read_supplied_id(ctx, fields)
    name = fields.str("name", required=True, max_length=200)
    email = _read_email(fields, required=True)
    title = fields.str("title", max_length=200) or None
    team_ids = _read_team_ids(ctx, fields)
    fields.done()
    assert name is not None and email is not None
    person = Person(
        id=claim_id(ctx, person_id), account_id=ctx.account_id, name=name, email=email,
        title=title, inserted_at=ctx.now, updated_at=ctx.now,
    )
    save(ctx, ctx.tables.people, person)
    _assign_teams(ctx, person.id, team_ids or [])
    return details_envelope(person_details(ctx, person))


@operation("people/update", write=True)
def update_person(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Update a person; ``team_ids``, when sent, replaces the person's teams."""
    person = load(ctx, Person, ctx.tables.people, fields.raw("person_id"))
    changes: dict[str, Any] = {}
    if fields.has("name"):
        changes["name"] = fields.str("name", required=True, max_length=200) or person.name
    if fields.has("email"):
        changes["email"] = _read_email(fields, required=True) or person.email
    if fields.has("title"):
        changes["title"] = fields.str("title", max_length=200) or None
    team_ids = _read_team_ids(ctx, fields)
    fields.done()
    updated = attrs.evolve(person, **changes)
    teams_change = team_ids is not None and set(team_ids) != set(person_team_ids(ctx, person.id))
    if updated != person or teams_change:
        updated = attrs.evolve(updated, updated_at=ctx.now)
        save(ctx, ctx.tables.people, updated)
    if team_ids is not None:
        _assign_teams(ctx, person.id, team_ids)
    return details_envelope(person_details(ctx, updated))
