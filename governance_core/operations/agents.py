"""Agents: list, show, create, update, retire, reinstate, delete."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record
from governance_core.domain.insights import rescore_runs, run_insights
from governance_core.domain.risk import Rulesets
from governance_core.domain.supplied_ids import claim_id, read_supplied_id
from governance_core.envelopes import details_envelope, list_envelope
from governance_core.errors import Conflict, InvalidAction, NotFound
from governance_core.fields import Fields
from governance_core.models.accounts import ApiToken
from governance_core.models.agents import Agent, empty_instance_counts
from governance_core.operations.common import (
    equality_filters,
    list_response,
    load,
    resolve_ref,
    save,
    tenant,
)
from governance_core.pagination import parse_page_request, parse_sorting
from governance_core.registry import operation
from governance_core.repository import Filter, Record
from governance_core.rules.actions import AGENT_STATUSES, agent_status, available_actions
from governance_core.rules.risk import RISK_LEVELS
from governance_core.rules.states import AGENT, TOKEN, advance, initial, reinstated_state
from governance_core.views import view_of

__all__ = [
    "SORTABLE",
    "agent_details",
    "check_external_identifier",
    "instance_counts_output",
    "last_activity_at",
    "risk_rollup",
    "shown_status",
]

SORTABLE = ("id", "name", "status", "inserted_at", "last_activity_span_at", "external_identifier")
NAME_MAX = 200
IDENTIFIER_MAX = 200
DESCRIPTION_MAX = 10_000
REFERENCES = (
    ("owner_person_id", "person"),
    ("team_id", "team"),
    ("risk_profile_id", "risk_profile"),
)


def last_activity_at(agent: Agent) -> datetime | None:
    """Return the agent's latest sign of life: its latest activity span or registration."""
    times = [t for t in (agent.last_activity_span_at, agent.last_instance_at) if t is not None]
    return max(times, default=None)


def shown_status(ctx: Context, agent: Agent) -> str:
    """Return the status the agent shows now (``dormant`` after ``config.dormant_after``)."""
    return agent_status(agent.status, last_activity_at(agent), ctx.now, ctx.config.dormant_after)


def instance_counts_output(counts: dict[str, int]) -> dict[str, int]:
    """Return stored instance counts with every key, plus ``finished``."""
    full = {**empty_instance_counts(), **counts}
    full["finished"] = full["complete"] + full["failed"] + full["cancelled"] + full["terminated"]
    return full


def agent_details(ctx: Context, agent: Agent) -> dict[str, Any]:
    """Return the interface's Agent_Details (also each row of the list)."""
    status = shown_status(ctx, agent)
    counts = instance_counts_output(agent.instance_counts)
    return view_of(
        agent, status=status, instance_counts=counts,
        available_actions=available_actions(status, counts),
    )


def check_external_identifier(
    ctx: Context, external_identifier: str | None, own_id: str | None = None
) -> None:
    """Raise ``conflict`` when another agent of the account uses ``external_identifier``."""
    if external_identifier is None:
        return
    same = ctx.tables.agents.query(
        [tenant(ctx), Filter("external_identifier", "eq", external_identifier)]
    )
    if any(record["id"] != own_id for record in same):
        raise Conflict(f"another agent already has external_identifier {external_identifier!r}")


def _read_references(ctx: Context, fields: Fields) -> dict[str, str | None]:
    """Read the reference members that were sent (null clears), resolved in the account."""
    references: dict[str, str | None] = {}
    for name, kind in REFERENCES:
        if fields.has(name):
            value = fields.id(name)
            if value is not None:
                resolve_ref(ctx, fields, name, kind, value)
            references[name] = value
    return references


def _read_text(fields: Fields, name: str, max_length: int) -> str | None:
    """Read an optional text member; blank is stored as null."""
    return fields.str(name, max_length=max_length) or None


@operation("agents/list", write=False)
def list_agents(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List agents; filters ``team_id``, ``owner_person_id``, ``risk_profile_id``, ``status``.

    Also ``external_identifier``.
    """
    filters = equality_filters(fields, ids=[name for name, _ in REFERENCES])
    external_identifier = fields.str("external_identifier", max_length=IDENTIFIER_MAX)
    if external_identifier:
        filters.append(Filter("external_identifier", "eq", external_identifier))
    status = fields.str("status", choices=AGENT_STATUSES)
    if status in ("active", "dormant"):
        filters.append(Filter("status", "eq", "active"))
        return _list_shown(ctx, fields, filters, lambda agent: shown_status(ctx, agent) == status)
    if status is not None:
        filters.append(Filter("status", "eq", status))
    return list_response(
        ctx, fields, ctx.tables.agents, sortable=SORTABLE, filters=filters,
        summarize=lambda record: agent_details(ctx, from_record(Agent, record)),
    )


def _list_shown(
    ctx: Context, fields: Fields, filters: list[Filter], keep: Callable[[Agent], bool]
) -> dict[str, Any]:
    # Dormancy depends on the clock, so it cannot be a stored, filterable field: the account's
    # active agents are read in the asked order and filtered here, then paginated.
    page = parse_page_request(fields.data, fields.errors)
    sorting = parse_sorting(fields.data, SORTABLE, fields.errors)
    fields.done()
    records = ctx.tables.agents.query(
        [tenant(ctx), *filters], sort=[] if sorting is None else sorting.sort_keys()
    )
    agents = [agent for agent in (from_record(Agent, r) for r in records) if keep(agent)]
    window = agents[page.offset : page.offset + page.page_size]
    return list_envelope([agent_details(ctx, a) for a in window], page, len(agents), sorting)


@operation("agents/show", write=False)
def show_agent(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch an agent by ``agent_id`` or by ``external_identifier``.

    ``environment_id`` scopes ``instance_counts`` (and the roll-up) to that environment's
    runs; ``include_risk_rollup`` adds ``risk_rollup`` over the agent's runs.
    ``include_counts`` is accepted: the counts are always included.
    """
    agent = _agent_to_show(ctx, fields)
    environment_id = fields.id("environment_id")
    if environment_id is not None:
        resolve_ref(ctx, fields, "environment_id", "environment", environment_id)
    fields.bool("include_counts")
    rollup = fields.bool("include_risk_rollup")
    fields.done()
    details = agent_details(ctx, agent)
    if environment_id is None and not rollup:
        return details_envelope(details)
    filters = [tenant(ctx), Filter("agent_id", "eq", agent.id)]
    if environment_id is not None:
        filters.append(Filter("environment_id", "eq", environment_id))
    runs = ctx.tables.agent_instances.query(filters)
    if environment_id is not None:
        counts = Counter(run["status"] for run in runs)
        details["instance_counts"] = instance_counts_output({**counts, "total": len(runs)})
    if rollup:
        rulesets = Rulesets(ctx)
        details["risk_rollup"] = risk_rollup(
            [run_insights(ctx, run, rulesets)["risk_score"] for run in runs]
        )
    return details_envelope(details)


def _agent_to_show(ctx: Context, fields: Fields) -> Agent:
    """The agent named by ``agent_id`` or ``external_identifier`` (exactly one is required)."""
    if fields.has("agent_id") == fields.has("external_identifier"):
        fields.errors.required("agent_id", "give agent_id or external_identifier, not both")
        fields.done()
    if fields.has("agent_id"):
        return load(ctx, Agent, ctx.tables.agents, fields.raw("agent_id"))
    identifier = fields.str("external_identifier", required=True, max_length=IDENTIFIER_MAX)
    fields.done()
    found = ctx.tables.agents.query(
        [tenant(ctx), Filter("external_identifier", "eq", identifier)], limit=1
    )
    if not found:
        raise NotFound("agent not found")
    return from_record(Agent, found[0])


def risk_rollup(scores: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """Roll the ``risk_score`` objects of an agent's runs up into one view.

    ``instance_count`` counts the runs, ``assessed_instance_count`` those with a risk level;
    ``risk_level`` is the highest level of any run (null when none was assessed),
    ``max_total_score`` the highest run total, ``level_counts`` runs per level.
    """
    levels = dict.fromkeys(RISK_LEVELS, 0)
    count = 0
    highest: Decimal | None = None
    for score in scores:
        count += 1
        if score is None:
            continue
        total = Decimal(score["total_score"])
        highest = total if highest is None else max(highest, total)
        if score["risk_level"] is not None:
            levels[score["risk_level"]] += 1
    assessed = sum(levels.values())
    top = next((level for level in reversed(RISK_LEVELS) if levels[level]), None)
    return {
        "instance_count": count,
        "assessed_instance_count": assessed,
        "risk_level": top,
        "max_total_score": highest,
        "level_counts": levels,
    }


@operation("agents/create", write=True)
def create_agent(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create an agent (status pending until its first instance)."""
    requested = read_supplied_id(ctx, fields)
    name = fields.str("name", required=True, max_length=NAME_MAX)
    description = _read_text(fields, "description", DESCRIPTION_MAX)
    external_identifier = _read_text(fields, "external_identifier", IDENTIFIER_MAX)
    references = _read_references(ctx, fields)
    fields.done()
    assert name is not None
    check_external_identifier(ctx, external_identifier)
    agent = Agent(
        id=claim_id(ctx, requested), account_id=ctx.account_id, name=name, status=initial(AGENT),
        inserted_at=ctx.now, updated_at=ctx.now, description=description,
        external_identifier=external_identifier,
        owner_person_id=references.get("owner_person_id"),
        risk_profile_id=references.get("risk_profile_id"),
        team_id=references.get("team_id"),
    )
    save(ctx, ctx.tables.agents, agent)
    return details_envelope(agent_details(ctx, agent))


@operation("agents/update", write=True)
def update_agent(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Update an agent's name, description, external identifier and references."""
    agent = load(ctx, Agent, ctx.tables.agents, fields.raw("agent_id"))
    if not available_actions(agent.status, agent.instance_counts)["update"]:
        raise InvalidAction("a retired agent cannot be updated; reinstate it first")
    changes: dict[str, Any] = {}
    if fields.has("name"):
        changes["name"] = fields.str("name", required=True, max_length=NAME_MAX)
    if fields.has("description"):
        changes["description"] = _read_text(fields, "description", DESCRIPTION_MAX)
    if fields.has("external_identifier"):
        changes["external_identifier"] = _read_text(fields, "external_identifier", IDENTIFIER_MAX)
    changes.update(_read_references(ctx, fields))
    fields.done()
    updated = attrs.evolve(agent, **changes)
    if updated != agent:
        check_external_identifier(ctx, updated.external_identifier, own_id=agent.id)
        updated = attrs.evolve(updated, updated_at=ctx.now)
        save(ctx, ctx.tables.agents, updated)
    if updated.risk_profile_id != agent.risk_profile_id:
        rescore_runs(ctx, [agent.id])
    return details_envelope(agent_details(ctx, updated))


@operation("agents/retire", write=True)
def retire_agent(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Retire an agent: it keeps its runs, and new registrations are refused."""
    agent = load(ctx, Agent, ctx.tables.agents, fields.raw("agent_id"))
    status = advance(AGENT, agent.status, "retire", what="agent")
    agent = attrs.evolve(agent, status=status, updated_at=ctx.now)
    save(ctx, ctx.tables.agents, agent)
    return details_envelope(agent_details(ctx, agent))


@operation("agents/reinstate", write=True)
def reinstate_agent(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Reinstate a retired agent: active again, or pending when it has no instances."""
    agent = load(ctx, Agent, ctx.tables.agents, fields.raw("agent_id"))
    # The table decides whether reinstate may fire; where it lands depends on the counts.
    advance(AGENT, agent.status, "reinstate", what="agent")
    status = reinstated_state(agent.instance_counts.get("total", 0))
    agent = attrs.evolve(agent, status=status, updated_at=ctx.now)
    save(ctx, ctx.tables.agents, agent)
    return details_envelope(agent_details(ctx, agent))


@operation("agents/delete", write=True)
def delete_agent(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Delete an agent that never ran, with its deployments; its ingestion tokens are revoked.

    An agent with instances is ``invalid_action`` (retire it instead).
    """
    agent = load(ctx, Agent, ctx.tables.agents, fields.raw("agent_id"))
    if not available_actions(agent.status, agent.instance_counts)["delete"]:
        raise InvalidAction("an agent with instances cannot be deleted; retire it instead")
    of_agent = [tenant(ctx), Filter("agent_id", "eq", agent.id)]
    for deployment in ctx.tables.agent_deployments.query(of_agent):
        ctx.tables.agent_deployments.delete(deployment["id"])
    # A caller may create a new agent with the deleted one's id: its tokens must not come back.
    for record in ctx.tables.api_tokens.query([*of_agent, Filter("status", "ne", "revoked")]):
        _revoke(ctx, record)
    ctx.tables.agents.delete(agent.id)
    return details_envelope(agent_details(ctx, agent))


def _revoke(ctx: Context, record: Record) -> None:
    token = from_record(ApiToken, record)
    status = advance(TOKEN, token.status, "revoke", what="token")
    save(ctx, ctx.tables.api_tokens, attrs.evolve(token, status=status, updated_at=ctx.now))
